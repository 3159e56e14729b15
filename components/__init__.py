"""One package per component of the design card, in the order they are built, plus what they share.

- `gpu_host`: a Kubernetes cluster whose GPU nodes are proven to offer their GPUs.
- `kai_scheduler`: KAI Scheduler, installed and proven to admit Queues.
- `queue_hierarchy`: the KAI Queues the GPUs are shared through.
- `vcluster_tenant`: one team's own cluster, and the fence every team's pods pass.
- `observability`: who uses the GPUs, in Prometheus and Grafana.
- `shared`: readiness gates, Helm releases, value merging, labels, kubeconfig documents.

A component package's `__init__` is its whole interface; no component reaches into
another (import-linter keeps them independent), and `__main__.py` wires them together.
"""
