"""The real Kafka broker: one KRaft node on loopback for the whole session, started only when a
test asks for it (tools/kafka_broker.py; `make jars` fetches it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline import Scenario, produce_scenario

from tools.jars import SPARK_CONNECTORS, jars
from tools.kafka_broker import KafkaBroker

BROKER_STARTUPS = pytest.StashKey[list[float]]()


@pytest.fixture(scope="session")
def kafka_broker(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[KafkaBroker]:
    """A broker on free 127.0.0.1 ports with a temporary log directory, serving when handed out.

    Tests that stop it (the fault tests) start it again before they end, so later tests find it
    serving on the same address.
    """
    jars(SPARK_CONNECTORS)  # Spark reads and writes the broker's topics through them: fail clearly
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    broker.start()
    pytestconfig.stash[BROKER_STARTUPS] = broker.startups
    yield broker
    broker.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """How long the broker took to serve, next to the slowest tests."""
    startups = config.stash.get(BROKER_STARTUPS, [])
    if startups:
        restarts = ", ".join(f"{s:.1f}s" for s in startups[1:]) or "none"
        terminalreporter.write_line(
            f"Kafka broker: serving {startups[0]:.1f}s after the fixture started it (restarts: {restarts})"
        )


@pytest.fixture
def scenario(kafka_broker: KafkaBroker, tmp_path: Path) -> Scenario:
    """A fresh topic of three partitions the reference producer filled with 240 payments."""
    return produce_scenario(kafka_broker.bootstrap_servers, tmp_path, 240)
