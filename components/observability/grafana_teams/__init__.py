"""The team views' Grafana reconciler: one organisation, Viewer login, data source and dashboard per team.

It runs beside the team Grafana in the same pod, on the Python standard library alone (the
image is the official python one), and ships to the cluster as a ConfigMap. Grafana keeps its
database on an emptyDir, so each pod starts empty: the reconciler builds every team's
organisation from the desired state the stack renders, and a changed team list rolls the pod,
which is how a removed team's login stops working. Open-source Grafana provisions neither
organisations nor users from files, only through its HTTP API.
"""
