"""Pulumi ComponentResources, one per file, plus the pure renderers they use."""
