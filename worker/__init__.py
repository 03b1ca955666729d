"""batchd worker: CLI, Temporal worker and bridge, telemetry, dev environment (the only layer importing both sides)."""
