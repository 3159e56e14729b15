"""KaiScheduler's settings (`kaiScheduler`): the chart, its namespace, values and readiness timeout."""
