"""A real Apache Kafka (KRaft) on 127.0.0.1, assembled from Maven Central jars.

``eos dev-kafka start`` resolves the broker jars named in
``deploy/kafka/pom.xml`` with Maven into ``$EOS_CACHE_DIR/kafka/<version>/libs``
(the local Maven repository lives in ``$EOS_CACHE_DIR/m2``; both are kept, so
later starts are offline), formats KRaft storage, starts N combined
broker/controller processes, waits until a transactional producer can commit,
and returns. The cluster's layout (pids, ports, logs) is kept in
``<data-dir>/cluster.json``; ``status`` and ``stop`` read it.

The data directory must be new, empty, or one that ``eos dev-kafka`` made (it
holds a ``.eos-dev-kafka`` marker, or a ``cluster.json`` of an older eos): any
other directory is refused, and in its own directories it removes only what it
made (``cluster.json`` and ``broker-<n>``), never a user's files.

The tests start their brokers with the same code (:class:`DevKafka`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import string
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path

import anyio

from eos.errors import DevKafkaError
from eos.kafka.clients import ClientConfig, make_admin, make_producer
from services.dev_kafka_security import (
    ADMIN,
    SECURITY_DIR,
    Security,
    check_mode,
    properties_text,
)
from services.file_lock import file_lock

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TOPIC = "eos-dev-kafka-ready"
# Broker processes started by this process, kept so they are reaped (not leaked) on stop.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
STATE_FILE = "cluster.json"
MARKER = ".eos-dev-kafka"
"""Marks a directory that ``eos dev-kafka`` made: only there does it remove anything,
and only what it made itself (the state file and the broker directories)."""


def home_cache_dir() -> Path:
    """Where downloads live without ``$EOS_CACHE_DIR``."""
    return Path.home() / ".cache" / "eos"


def cache_dir() -> Path:
    """Where downloads live: ``$EOS_CACHE_DIR`` (the Makefile sets ``.cache/``)."""
    return Path(os.environ.get("EOS_CACHE_DIR") or home_cache_dir())


def stop_command(tool: str, data_dir: str | Path) -> str:
    """The command that stops the ``eos <tool>`` (``dev-kafka``, ``dev-registry``) whose
    data is in ``data_dir``, as typed in any shell: with ``--data-dir`` unless that is the
    directory found without ``$EOS_CACHE_DIR`` (the Makefile sets the variable for its own
    commands, not in the user's shell)."""
    command = f"eos {tool} stop"
    if Path(data_dir).resolve() != (home_cache_dir() / tool).resolve():
        command += f" --data-dir {shlex.quote(str(data_dir))}"
    return command


def deploy_dir() -> Path:
    return Path(os.environ.get("EOS_KAFKA_DEPLOY_DIR") or REPO_ROOT / "deploy" / "kafka")


def default_data_dir() -> Path:
    return cache_dir() / "dev-kafka"


def kafka_version(pom: Path | None = None) -> str:
    text = (pom or deploy_dir() / "pom.xml").read_text()
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", text)
    if not found:
        raise DevKafkaError(f"no <kafka.version> in {pom}")
    return found.group(1).strip()


def _require(tool: str, install_hint: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise DevKafkaError(f"{tool!r} not found on PATH: {install_hint}")
    return path


def java() -> str:
    return _require(
        "java", "install Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)"
    )


def assemble(*, quiet: bool = True) -> Path:
    """The directory of broker jars, resolved with Maven on first use."""
    version = kafka_version()
    libs = cache_dir() / "kafka" / version / "libs"
    if (libs / ".complete").exists():
        return libs
    with file_lock(libs.with_name(".lock")):  # another process may be assembling them
        return libs if (libs / ".complete").exists() else _assemble(libs, version, quiet)


def _assemble(libs: Path, version: str, quiet: bool) -> Path:
    mvn = _require("mvn", "install Apache Maven (Debian: apt-get install maven)")
    java()
    staging = libs.with_name("libs.partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn,
        *(["-q"] if quiet else []),
        "-B",
        "-f",
        str(deploy_dir() / "pom.xml"),
        f"-Dmaven.repo.local={cache_dir() / 'm2'}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    print(f"assembling Apache Kafka {version} from Maven Central into {libs} ...", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DevKafkaError(
            f"Maven could not resolve Kafka {version} (exit {done.returncode}):\n"
            f"  {' '.join(cmd)}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (libs / ".complete").touch()
    return libs


@dataclass
class BrokerNode:
    node_id: int
    port: int
    controller_port: int
    directory: str
    pid: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return Path(self.directory) / "server.log"

    def alive(self) -> bool:
        return _is_broker_process(self.pid)


@dataclass
class ClusterState:
    version: str
    cluster_id: str
    data_dir: str
    nodes: list[BrokerNode] = field(default_factory=list)
    security: str = "none"
    """``--security`` mode (:mod:`services.dev_kafka_security`)."""

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def save(self) -> None:
        Path(self.data_dir, STATE_FILE).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, data_dir: Path) -> ClusterState | None:
        path = data_dir / STATE_FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        raw["nodes"] = [BrokerNode(**n) for n in raw["nodes"]]
        return cls(**raw)


def _is_broker_process(pid: int) -> bool:
    if pid in _CHILDREN:  # our own child: ask it (right after exec, /proc may lag)
        return _CHILDREN[pid].poll() is None
    if pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
    return b"kafka.Kafka" in cmdline and not zombie


def free_ports(count: int) -> list[int]:
    """Ports the OS considers free right now (bound and released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class DevKafka:
    """Start, inspect and stop a local KRaft cluster kept in ``data_dir``."""

    def __init__(self, data_dir: Path | None = None, *, heap: str = "512m") -> None:
        self.data_dir = (data_dir or default_data_dir()).resolve()
        self.heap = heap

    def state(self) -> ClusterState | None:
        return ClusterState.load(self.data_dir)

    def running(self) -> ClusterState | None:
        state = self.state()
        if state and any(n.alive() for n in state.nodes):
            return state
        return None

    def start(
        self,
        brokers: int = 1,
        port: int = 9092,
        *,
        security: str = "none",
        users: Sequence[str] = (),
        timeout: float = 180.0,
    ) -> ClusterState:
        """Start ``brokers`` nodes, or raise if this data dir already runs a cluster.
        ``security``: one of :data:`~services.dev_kafka_security.MODES`; ``users``: users
        to have from the start (PLAIN users too)."""
        if brokers < 1:
            raise DevKafkaError(f"--brokers must be at least 1, not {brokers}")
        check_mode(security)
        self._check_data_dir()
        live = self.running()
        if live:
            raise AlreadyRunning(live)
        libs = assemble()
        state = self.state()
        if (
            state is None
            or len(state.nodes) != brokers
            or port not in (0, state.nodes[0].port)
            or state.security != security
        ):
            state = self._layout(brokers, port, security)
        self._check_ports_free(state)
        secured = self.security(state)
        secured.prepare()
        for user in users:
            secured.register(user)
        for node in state.nodes:
            self._render(state, node)
            self._format(state, node, libs)
        for node in state.nodes:
            node.pid = self._launch(node, libs)
        state.save()
        try:
            anyio.run(_wait_ready, state, timeout)
            if users and secured.sasl:  # storage formatted before: SCRAM users added now
                from services.dev_kafka_users import add_scram_users

                anyio.run(add_scram_users, secured, state.bootstrap, users)
        except BaseException:
            self.stop()
            raise
        return state

    def _check_data_dir(self) -> None:
        """Refuse a data directory that holds anything but what dev-kafka made."""
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise DevKafkaError(f"--data-dir {self.data_dir} is a file, not a directory")
        ours = (self.data_dir / MARKER).exists() or (self.data_dir / STATE_FILE).exists()
        if self.data_dir.is_dir() and not ours and any(self.data_dir.iterdir()):
            raise DevKafkaError(
                f"--data-dir {self.data_dir} is not empty and is not a dev-kafka data "
                f"directory (it has no {MARKER} marker): dev-kafka would have to remove what "
                "is in it, so it leaves it alone; pass a new or empty directory"
            )

    def security(self, state: ClusterState | None = None) -> Security:
        """The cluster's security material and settings."""
        state = state or self.state()
        return Security(self.data_dir, state.security if state else "none")

    def client_config(self, user: str = ADMIN) -> ClientConfig:
        """Client settings of ``user`` (the super user by default) for this cluster."""
        state = self._require_state()
        return self.security(state).client_config(state.bootstrap, user)

    def _layout(self, brokers: int, port: int, security: str = "none") -> ClusterState:
        self._check_data_dir()
        self._remove_own_files()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / MARKER).write_text(
            "This directory was made by `eos dev-kafka`; it removes only cluster.json, the "
            "broker-<n> directories and security/ in it.\n"
        )
        if port == 0:
            ports = free_ports(2 * brokers)
            pairs = list(zip(ports[:brokers], ports[brokers:], strict=True))
        else:
            pairs = [(port + i, port + 1000 + i) for i in range(brokers)]
        nodes = [
            BrokerNode(i + 1, p, c, str(self.data_dir / f"broker-{i + 1}"))
            for i, (p, c) in enumerate(pairs)
        ]
        return ClusterState(kafka_version(), uuid_for_kafka(), str(self.data_dir), nodes, security)

    def _remove_own_files(self) -> None:
        """What an earlier layout left here: the state file and the broker directories."""
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)
        if self.data_dir.is_dir():
            shutil.rmtree(self.data_dir / SECURITY_DIR, ignore_errors=True)
        for broker in self.data_dir.glob("broker-*") if self.data_dir.is_dir() else []:
            if broker.is_dir() and broker.name.removeprefix("broker-").isdigit():
                shutil.rmtree(broker)

    def _check_ports_free(self, state: ClusterState) -> None:
        for node in state.nodes:
            for p in (node.port, node.controller_port):
                if port_open(p):
                    raise DevKafkaError(
                        f"port {p} on 127.0.0.1 is already in use: stop what listens there "
                        "or pass --port with another base port (0 picks free ports)"
                    )

    def _render(self, state: ClusterState, node: BrokerNode) -> None:
        directory = Path(node.directory)
        directory.mkdir(parents=True, exist_ok=True)
        n = len(state.nodes)
        template = string.Template((deploy_dir() / "server.properties.template").read_text())
        security = self.security(state)
        listeners = security.listeners().lines(node.port, node.controller_port)
        text = template.substitute(
            node_id=node.node_id,
            voters=",".join(f"{m.node_id}@127.0.0.1:{m.controller_port}" for m in state.nodes),
            listeners="\n".join(f"{k}={v}" for k, v in listeners.items()),
            security=properties_text(security.broker_settings()),
            port=node.port,
            controller_port=node.controller_port,
            log_dir=directory / "data",
            replication=min(n, 3),
            min_isr=1 if n < 3 else 2,
        )
        path = directory / "server.properties"
        path.write_text(text)
        path.chmod(0o600)  # a secured cluster's holds the admin's password

    def _format(self, state: ClusterState, node: BrokerNode, libs: Path) -> None:
        directory = Path(node.directory)
        if (directory / "data" / "meta.properties").exists():
            return
        cmd = [
            java(),
            "-cp",
            f"{libs}/*",
            "kafka.tools.StorageTool",
            "format",
            # One argument: a random id may start with "-", which would read as an option.
            f"--cluster-id={state.cluster_id}",
            "-c",
            str(directory / "server.properties"),
            *self.security(state).format_arguments(),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise DevKafkaError(f"formatting KRaft storage failed:\n{done.stdout}{done.stderr}")

    def _launch(self, node: BrokerNode, libs: Path) -> int:
        directory = Path(node.directory)
        cmd = [
            java(),
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            "-XX:+UseG1GC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={deploy_dir() / 'log4j2.yaml'}",
            f"-Dkafka.logs.dir={directory / 'logs'}",
            "-cp",
            f"{libs}/*",
            "kafka.Kafka",
            str(directory / "server.properties"),
        ]
        with open(node.log_file, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        _CHILDREN[proc.pid] = proc
        return proc.pid

    def stop(self, *, timeout: float = 60.0) -> list[int]:
        """Stop every node (SIGTERM: controlled shutdown; SIGKILL after ``timeout``).

        Every node gets its SIGTERM at once: stopped one by one, the last controllers of a
        three-node quorum lose their majority and wait out the whole ``timeout``.
        """
        state = self.state()
        if state is None:
            return []
        alive = [n for n in state.nodes if n.alive()]
        for node in alive:
            os.kill(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in alive:
            self._wait_or_kill(node, deadline)
        return [n.node_id for n in alive]

    def stop_node(self, node_id: int, *, kill: bool = False, timeout: float = 60.0) -> None:
        """Stop one node; ``kill`` sends SIGKILL at once (a crash)."""
        state = self._require_state()
        node = next(n for n in state.nodes if n.node_id == node_id)
        if not node.alive():
            return
        os.kill(node.pid, signal.SIGKILL if kill else signal.SIGTERM)
        self._wait_or_kill(node, time.monotonic() + timeout)

    @staticmethod
    def _wait_or_kill(node: BrokerNode, deadline: float) -> None:
        while node.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if node.alive():
            os.kill(node.pid, signal.SIGKILL)
            while node.alive():
                time.sleep(0.05)
        _reap(node.pid)

    def start_node(self, node_id: int) -> None:
        """Start a stopped node again on its old storage and ports."""
        state = self._require_state()
        node = next(n for n in state.nodes if n.node_id == node_id)
        if node.alive():
            return
        node.pid = self._launch(node, assemble())
        state.save()

    def _require_state(self) -> ClusterState:
        state = self.state()
        if state is None:
            raise DevKafkaError(f"no dev-kafka cluster in {self.data_dir}")
        return state

    def logs(self, lines: int = 80) -> Iterator[tuple[int, str]]:
        """The tail of each node's log (for test failure reports)."""
        state = self.state()
        for node in state.nodes if state else []:
            if node.log_file.exists():
                tail = node.log_file.read_text(errors="replace").splitlines()[-lines:]
                yield node.node_id, "\n".join(tail)


class AlreadyRunning(DevKafkaError):
    """``start`` found a cluster running in the same data directory."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        pids = ", ".join(str(n.pid) for n in state.nodes if n.alive())
        super().__init__(
            f"Kafka already runs at {state.bootstrap} (pids {pids}, data {state.data_dir}); "
            f"use it, or stop it first with: {stop_command('dev-kafka', state.data_dir)}"
        )


def _reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.wait()


def uuid_for_kafka() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


async def _wait_ready(state: ClusterState, timeout: float) -> None:
    """Wait until all brokers registered and a transactional producer can commit."""
    deadline = time.monotonic() + timeout
    # Connection refusals are expected while the broker boots; keep them out of the output.
    aiokafka_log = logging.getLogger("aiokafka")
    level = aiokafka_log.level
    aiokafka_log.setLevel(logging.CRITICAL)
    try:
        await _wait_until_ready(state, deadline)
    finally:
        aiokafka_log.setLevel(level)


async def _wait_until_ready(state: ClusterState, deadline: float) -> None:
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        for node in state.nodes:
            if not node.alive():
                tail = node.log_file.read_text(errors="replace").splitlines()[-40:]
                raise DevKafkaError(
                    f"broker {node.node_id} exited during start-up; its log ends:\n"
                    + "\n".join(tail)
                )
        try:
            with anyio.fail_after(30):
                await _probe(state)
            return
        except Exception as exc:  # any failure means "not ready yet"
            last_error = exc
            await anyio.sleep(0.5)
    raise DevKafkaError(f"Kafka did not become ready in time: {last_error!r}")


async def _probe(state: ClusterState) -> None:
    config = Security(Path(state.data_dir), state.security).client_config(state.bootstrap)
    config = config.with_overrides(admin={"request.timeout.ms": "5000"})
    admin = make_admin(config)
    await admin.start()
    try:
        brokers = (await admin.describe_cluster())["brokers"]
        if len(brokers) < len(state.nodes):
            raise DevKafkaError(f"{len(brokers)} of {len(state.nodes)} brokers registered")
    finally:
        await admin.close()
    producer = make_producer(
        config, transactional_id="eos-dev-kafka-ready", request_timeout_ms=5000
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(READY_TOPIC, b"ready")
    finally:
        await producer.stop()
