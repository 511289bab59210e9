"""CEL rules: compiled to native Spark Columns where possible, else evaluated with cel-python in batches."""
