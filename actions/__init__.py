"""Actions (NONE, ERROR, DLQ, custom) and dead-letter sinks; public names re-exported by `contracts`."""
