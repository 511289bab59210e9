"""A single-node Apache Kafka broker on loopback (KRaft: broker and controller in one JVM).

The tests' `kafka_broker` fixture and `make demo-kafka` run it from the jars `make jars` fetches
(tools/maven/kafka-broker/pom.xml). It listens on two free 127.0.0.1 ports, keeps its log
directory, configuration and log file in `workdir`, formats the storage once (KRaft needs a
cluster id before the first start), and counts as started only once it answers a metadata request
naming itself. `stop` and `kill` end its whole process group; `start` again brings the same broker
back on the same ports with the data it had.

As a command, it runs another command next to a fresh broker and stops the broker afterwards:

    python tools/kafka_broker.py -- python examples/orders_kafka.py

with KAFKA_BOOTSTRAP_SERVERS set for that command.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType

if __package__ in (None, ""):  # run as a script: make `tools` importable from the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka.admin import AdminClient

from tools.jars import JARS_DIR, KAFKA_BROKER, JarsMissing, jars

NODE_ID = 1
# Fast start and a small footprint on a shared two-core machine: client-compiler JIT only, serial GC.
JVM_OPTIONS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)
LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def _cluster_id() -> str:
    """A random KRaft cluster id, never one starting with "-" (the storage tool reads it as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class BrokerError(RuntimeError):
    """The broker could not be formatted, started or stopped; the message quotes its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def java_executable() -> str:
    """`$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` from the PATH."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


class KafkaBroker:
    """One KRaft broker+controller process on 127.0.0.1, its state kept in `workdir`."""

    def __init__(self, workdir: Path, jars_dir: Path = JARS_DIR) -> None:
        self.workdir = Path(workdir)
        self.classpath = os.pathsep.join(str(jar) for jar in jars(KAFKA_BROKER, jars_dir))
        self.port = free_port()
        self.controller_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.startups: list[float] = []
        """Seconds each start took until the broker served: the first (with the format), then restarts."""

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout_s: float = 120.0) -> float:
        """Start the broker (formatting its storage the first time) and wait until it serves;
        returns the seconds that took (also kept in `startups`)."""
        if self.running:
            raise BrokerError(f"the broker on {self.bootstrap_servers} is already running")
        started = time.monotonic()
        properties = self._configure()
        if not (self.workdir / "data" / "meta.properties").exists():
            self._format(properties, timeout_s)
        with (self.workdir / "broker.out").open("ab") as out:
            self.process = subprocess.Popen(
                [*self._java(), "kafka.Kafka", str(properties)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends the JVM and anything it forks
            )
        try:
            self._wait_until_serving(started + timeout_s)
        except BaseException:
            self.kill()
            raise
        self.startups.append(time.monotonic() - started)
        return self.startups[-1]

    def stop(self, timeout_s: float = 30.0) -> None:
        """Shut the broker down cleanly (SIGTERM to its process group); SIGKILL if it lingers."""
        self._signal(signal.SIGTERM)
        if self.process is not None:
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def kill(self) -> None:
        """End the broker at once (SIGKILL to its process group), as a crash would."""
        self._signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()
        self.process = None

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _signal(self, which: signal.Signals) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):  # exited between the poll and the signal
            os.killpg(self.process.pid, which)  # the group id is the JVM's pid (start_new_session)

    def _configure(self) -> Path:
        """Write server.properties and the log4j2 configuration; return the former's path."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        listener, controller = f"127.0.0.1:{self.port}", f"127.0.0.1:{self.controller_port}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": NODE_ID,
            "controller.quorum.voters": f"{NODE_ID}@{controller}",
            "listeners": f"PLAINTEXT://{listener},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{listener}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": self.workdir / "data",
            # One node: every internal topic has one replica, and few partitions (fast to create).
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "true",
            "num.partitions": 1,
        }
        properties = self.workdir / "server.properties"
        properties.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        (self.workdir / "log4j2.properties").write_text(LOG4J2.format(log=self.log_file))
        return properties

    def _java(self) -> list[str]:
        """The JVM command line up to the main class: options, logging to the log file, classpath."""
        return [
            java_executable(),
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            self.classpath,
        ]

    def _format(self, properties: Path, timeout_s: float) -> None:
        """KRaft's storage format: a cluster id and the bootstrap metadata in the log directory."""
        cluster_id = _cluster_id()
        command = [
            *self._java(),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(properties),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as e:
            raise BrokerError(f"formatting the broker storage took over {timeout_s:.0f}s") from e
        if done.returncode != 0:
            raise BrokerError(f"formatting the broker storage failed:\n{done.stdout}{done.stderr}")

    def _wait_until_serving(self, deadline: float) -> None:
        """Poll until the broker accepts connections and its metadata names it, or fail with its log."""
        admin = None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise BrokerError(f"the broker exited with status {code} while starting:\n{self._log_tail()}")
            if admin is None:
                # A plain connect first: librdkafka logs every refused connection.
                with socket.socket() as probe:
                    probe.settimeout(1.0)
                    if probe.connect_ex(("127.0.0.1", self.port)) != 0:
                        time.sleep(0.2)
                        continue
                admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
            try:
                metadata = admin.list_topics(timeout=2)
            except Exception:  # KafkaException while the broker is still joining its own quorum
                time.sleep(0.2)
                continue
            if NODE_ID in metadata.brokers:
                return
            time.sleep(0.2)
        raise BrokerError(f"the broker did not serve {self.bootstrap_servers} in time:\n{self._log_tail()}")

    def _log_tail(self, lines: int = 30) -> str:
        parts = []
        for path in (self.workdir / "broker.out", self.log_file):
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append("\n".join([f"--- {path} ---", *tail]))
        return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Run a command next to a fresh broker (KAFKA_BOOTSTRAP_SERVERS set); return its exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jars", type=Path, default=JARS_DIR, help="the folder `make jars` filled")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    workdir = Path(tempfile.mkdtemp(prefix="kafka-broker-"))
    try:
        broker = KafkaBroker(workdir, args.jars)
        seconds = broker.start()
    except (JarsMissing, BrokerError) as e:
        shutil.rmtree(workdir, ignore_errors=True)
        print(f"kafka_broker: {e}", file=sys.stderr)
        return 1
    try:
        print(f"Kafka broker on {broker.bootstrap_servers}, serving after {seconds:.1f}s", flush=True)
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
        return subprocess.run(command, env=env, check=False).returncode
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        print("Kafka broker stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
