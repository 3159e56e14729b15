"""Observability's settings (`observability`): install kube-prometheus-stack, use an existing one, or neither."""
