"""What every component uses: readiness gates, Helm releases, value merging, labels, kubeconfigs.

- `gate`: the Gate component, a Job of kubectl steps Pulumi awaits, with just the access they need.
- `helm`: every Helm release, with the options a release always needs.
- `merge`: Helm values merged the same way everywhere.
- `labels`: what marks an object as this project's, and reading back a managed object's name.
- `kubeconfigs`: reading and adjusting kubeconfig documents.
- `queue_manifest`: how a KAI Queue is written (QueueHierarchy's queues, KaiScheduler's probe).
"""
