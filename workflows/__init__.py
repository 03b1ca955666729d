"""batchd workflows: pure decisions and durable timers (deterministic; no I/O)."""
