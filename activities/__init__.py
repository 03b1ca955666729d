"""batchd activities: the only code that talks to the Kubernetes API (idempotent, classified errors)."""
