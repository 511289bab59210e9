"""Spark settings every test session shares (the local[2] and Connect passes, the cluster tests)."""

from __future__ import annotations

LOAD_TOLERANT_CONFS = {
    # The handshake of every Python process that connects back to the JVM (UDF and Arrow workers,
    # a Connect server's foreachBatch runner, the driver's data sockets): 15 s by default, which a
    # busy 2-core machine running several suites can exceed. Workers read it as
    # SPARK_AUTH_SOCKET_TIMEOUT. Static: set before the JVM (or the local Connect server) starts.
    "spark.python.authenticate.socketTimeout": "120s",
    # Executor heartbeats, RPC asks and shuffle fetches wait on this (120 s by default); stalls of a
    # loaded machine stay below it, but the heartbeat must stay well inside it.
    "spark.network.timeout": "300s",
    "spark.executor.heartbeatInterval": "20s",
}
"""Spark settings that keep a loaded machine from failing a test by luck (the foreachBatch runner's
fixed 10 s connect-back on Spark Connect is retried instead: tests/support/query_start.py)."""
