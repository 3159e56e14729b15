"""GpuHost's settings: where the cluster comes from (`host`), its GPU stack (`gpuOperator`) and the gate (`gpuGate`)."""
