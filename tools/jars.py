"""Where `tools/fetch-jars.sh` (`make jars`) puts the fetched jars, and their lists for a classpath."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JARS_DIR = ROOT / ".jars"
SPARK_CONNECTORS = "spark-connectors"
KAFKA_BROKER = "kafka-broker"


class JarsMissing(RuntimeError):
    """The fetched jars are not there: `make jars` (which `make test` runs) fetches them."""


def jars(kind: str, root: Path = JARS_DIR) -> list[Path]:
    """The jars of `kind` (SPARK_CONNECTORS or KAFKA_BROKER), sorted; JarsMissing when none were fetched."""
    found = sorted((root / kind).glob("*.jar"))
    if not found:
        raise JarsMissing(f"no {kind} jars in {root / kind}: run `make jars` (tools/fetch-jars.sh) first")
    return found


def spark_jars_setting(root: Path = JARS_DIR) -> str | None:
    """The `spark.jars` value that puts the fetched Spark connectors on Spark's classpath, or None
    when they were not fetched (Spark then runs without them)."""
    try:
        return ",".join(str(jar) for jar in jars(SPARK_CONNECTORS, root))
    except JarsMissing:
        return None
