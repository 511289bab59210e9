"""tools/kafka_broker.py and tools/jars.py without a broker: what happens when the jars are missing
or the broker cannot start."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest

from tools.jars import KAFKA_BROKER, SPARK_CONNECTORS, JarsMissing, spark_jars_setting
from tools.kafka_broker import BrokerError, KafkaBroker, _cluster_id, main


def test_missing_jars_say_how_to_fetch_them(tmp_path: Path) -> None:
    with pytest.raises(JarsMissing, match=r"no kafka-broker jars in .*: run `make jars`"):
        KafkaBroker(tmp_path / "broker", jars_dir=tmp_path / "jars")
    assert spark_jars_setting(tmp_path / "jars") is None
    (tmp_path / "jars" / SPARK_CONNECTORS).mkdir(parents=True)
    for name in ("b.jar", "a.jar", "notes.txt"):
        (tmp_path / "jars" / SPARK_CONNECTORS / name).touch()
    folder = tmp_path / "jars" / SPARK_CONNECTORS
    assert spark_jars_setting(tmp_path / "jars") == f"{folder / 'a.jar'},{folder / 'b.jar'}"


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # One random id in 64 encodes to a leading "-", which the storage tool reads as an option.
    draws = iter([uuid.UUID(bytes=b"\xfb" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    assert _cluster_id() == "AQEBAQEBAQEBAQEBAQEBAQ"


def test_a_broker_that_exits_while_starting_fails_with_its_output(tmp_path: Path) -> None:
    # A jar folder whose only jar is not a jar: the JVM cannot even run the storage format step.
    (tmp_path / "jars" / KAFKA_BROKER).mkdir(parents=True)
    (tmp_path / "jars" / KAFKA_BROKER / "broken.jar").write_text("not a zip")
    broker = KafkaBroker(tmp_path / "broker", jars_dir=tmp_path / "jars")
    with pytest.raises(BrokerError, match="formatting the broker storage failed"):
        broker.start(timeout_s=60)
    assert not broker.running


def test_the_command_line_runs_nothing_without_a_command_or_its_jars(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["--"])
    assert raised.value.code == 2
    assert main(["--jars", str(tmp_path), "--", "true"]) == 1
    assert "kafka_broker: no kafka-broker jars" in capsys.readouterr().err


def test_the_broker_listens_on_free_loopback_ports(tmp_path: Path) -> None:
    (tmp_path / "jars" / KAFKA_BROKER).mkdir(parents=True)
    (tmp_path / "jars" / KAFKA_BROKER / "kafka.jar").touch()
    broker = KafkaBroker(tmp_path / "broker", jars_dir=tmp_path / "jars")
    assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
    assert broker.port != broker.controller_port
    for port in (broker.port, broker.controller_port):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # nothing holds them
