"""gangcontrol: makes KAI's PodGroup for each gang a team starts in its vCluster, and removes it afterwards.

The host's admission gives every pod of a gang the same `pod-group-name`, derived from
its tenant, its virtual namespace and its job's grouping label. KAI's pod-grouper
leaves such a pod alone and KAI's scheduler waits for a PodGroup of that name; KAI
never makes one. This program does, in the pod's host namespace, with `minMember` the
gang's size, the tenant's queue and the priority the pods chose, so the gang's pods
start together or not at all. It deletes the PodGroup once no pod uses it, after a
grace period, and copies the PodGroup's scheduling conditions onto the pods as Events,
which vCluster syncs into the team's vCluster.

It runs in `python:3.13-slim` with the standard library alone; its files are mounted
from a ConfigMap built from this repository, and it installs nothing.
"""
