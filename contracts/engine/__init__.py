"""The Spark engine: runs a plan on a DataFrame (native runs, Python passes), decodes and encodes
wire bytes, migrates records and routes rejected rows to dead-letter sinks (docs/architecture.md)."""
