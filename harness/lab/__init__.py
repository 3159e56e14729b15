"""The lab: a real Kubernetes 1.36 on this machine, with fake GPU nodes, for the tests and for users.

`python -m harness.lab up|apply|status|down --state DIR` (docs/lab.md). The control plane,
etcd, KWOK, kubectl and prom-label-proxy are built from their Go modules at the versions
`go/go.mod` pins (build.py); nodes and most pods are faked by KWOK (stages.py); the pods
whose images the lab can stand in for run as local processes (kubelet.py, images.py).
"""
