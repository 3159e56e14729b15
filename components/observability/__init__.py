"""Observability: who uses the GPUs, in Prometheus and Grafana.

Owns kube-prometheus-stack (with mode install) and its values, the ServiceMonitors for
KAI's queues and the GPUs' dcgm-exporter, Grafana's address and admin password, the
fleet and team dashboards, and TeamViews: each team's own Grafana login, held to its
own series by prom-label-proxy.
"""

from components.observability.component import Observability, ObservabilityArgs
from components.observability.team_sign_in import TeamViewsSignIn

__all__ = ["Observability", "ObservabilityArgs", "TeamViewsSignIn"]
