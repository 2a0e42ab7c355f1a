"""A real schema registry on 127.0.0.1: Apicurio Registry from Maven Central.

``eos dev-registry start`` fetches ``io.apicurio:apicurio-registry-app:<version>:tar.gz:all``
with Maven into ``$EOS_CACHE_DIR/m2`` and unpacks it into
``$EOS_CACHE_DIR/apicurio/<version>`` (both kept: later starts are offline), finds a Java
of at least :data:`MIN_JAVA` among the installed JVMs, starts the registry on loopback
and waits until its Confluent-compatible API answers. Storage is in memory by default
(schemas last as long as the process), or ``kafkasql``: a journal topic on a Kafka
cluster (the dev broker by default), so schemas survive a restart.

The registry's layout (pid, ports, storage, log) is kept in ``<data-dir>/registry.json``;
``status`` and ``stop`` read it. As with ``eos dev-kafka``, the data directory must be
new, empty, or one that ``eos dev-registry`` made (it holds a ``.eos-dev-registry``
marker); only the state file and the log are ever removed from it.

Clients use :attr:`RegistryState.url` — ``http://127.0.0.1:<port>/apis/ccompat/v7`` —
as ``schema.registry.url``. The tests start their registry with the same code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from eos.errors import DevKafkaError
from services.dev_kafka import DevKafka, cache_dir, free_ports, port_open, stop_command
from services.file_lock import file_lock

VERSION = "3.3.3"
"""The Apicurio Registry release run (Maven Central: io.apicurio:apicurio-registry-app)."""
MIN_JAVA = 21
"""Apicurio Registry 3.x is built for Java 21 (class file version 65)."""
CCOMPAT_PATH = "/apis/ccompat/v7"
STATE_FILE = "registry.json"
LOG_FILE = "registry.log"
MARKER = ".eos-dev-registry"
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class DevRegistryError(DevKafkaError):
    """The local development schema registry cannot be fetched, started or stopped."""


def default_data_dir() -> Path:
    return cache_dir() / "dev-registry"


# ------------------------------------------------------------------ Java


def java_version(java: Path) -> int | None:
    """The feature version (17, 21, 25 …) of the JVM at ``java``, or None."""
    release = java.resolve().parent.parent / "release"
    text = release.read_text(errors="replace") if release.exists() else ""
    found = re.search(r'JAVA_VERSION="(\d+)', text)
    if found is None:
        try:
            done = subprocess.run(
                [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
            )
        except OSError:
            return None
        found = re.search(r'version "(?:1\.)?(\d+)', done.stderr)
    return int(found.group(1)) if found else None


def _candidates() -> list[Path]:
    found = []
    if os.environ.get("JAVA_HOME"):
        found.append(Path(os.environ["JAVA_HOME"], "bin", "java"))
    found += sorted(Path("/usr/lib/jvm").glob("*/bin/java"))
    on_path = shutil.which("java")
    if on_path:
        found.append(Path(on_path))
    return [p for p in dict.fromkeys(p.resolve() for p in found) if p.exists()]


def find_java(minimum: int = MIN_JAVA) -> Path:
    """The newest installed Java of at least ``minimum``; one clear line if none."""
    versions = {path: java_version(path) for path in _candidates()}
    fitting = [(v, p) for p, v in versions.items() if v is not None and v >= minimum]
    if fitting:
        return max(fitting)[1]
    seen = ", ".join(f"{v} ({p})" for p, v in versions.items() if v is not None) or "none"
    raise DevRegistryError(
        f"Apicurio Registry {VERSION} needs Java {minimum} or newer; installed: {seen}. "
        f"Install one (Debian: apt-get install openjdk-{minimum}-jre-headless) or set "
        "JAVA_HOME to it"
    )


# ------------------------------------------------------------------ the download


def assemble(version: str = VERSION) -> Path:
    """The unpacked registry (holding ``quarkus-run.jar``), fetched on first use."""
    home = cache_dir() / "apicurio" / version
    if (home / ".complete").exists():
        return home
    with file_lock(home.with_name(f".{version}.lock")):  # another process may be fetching it
        return home if (home / ".complete").exists() else _fetch(home, version)


def _fetch(home: Path, version: str) -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevRegistryError(
            "'mvn' not found on PATH: install Apache Maven (Debian: apt-get install maven)"
        )
    staging = home.with_name(f"{version}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    artifact = f"io.apicurio:apicurio-registry-app:{version}:tar.gz:all"
    cmd = [
        mvn, "-q", "-B", f"-Dmaven.repo.local={cache_dir() / 'm2'}",
        "dependency:copy",
        f"-Dartifact={artifact}", f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    print(f"fetching Apicurio Registry {version} from Maven Central into {home} ...", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    archives = list(staging.glob("*.tar.gz"))
    if done.returncode != 0 or not archives:
        raise DevRegistryError(
            f"Maven could not fetch {artifact} (exit {done.returncode}):\n  {' '.join(cmd)}\n"
            f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    with tarfile.open(archives[0]) as archive:
        archive.extractall(staging, filter="data")
    archives[0].unlink()
    jar = next(staging.rglob("quarkus-run.jar"), None)
    if jar is None:
        raise DevRegistryError(f"{artifact} holds no quarkus-run.jar")
    shutil.rmtree(home, ignore_errors=True)
    jar.parent.rename(home)
    shutil.rmtree(staging, ignore_errors=True)
    (home / ".complete").touch()
    return home


# ------------------------------------------------------------------ the process


@dataclass
class RegistryState:
    version: str
    data_dir: str
    port: int
    management_port: int
    storage: str
    """``memory`` or ``kafkasql``."""
    bootstrap_servers: str | None = None
    pid: int = 0
    tls_port: int | None = None
    """The HTTPS port, when started with a certificate (the HTTP port stays open too)."""

    @property
    def url(self) -> str:
        """The Confluent-compatible API: what converters take as ``schema.registry.url``."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    @property
    def https_url(self) -> str | None:
        return f"https://localhost:{self.tls_port}{CCOMPAT_PATH}" if self.tls_port else None

    @property
    def log_file(self) -> Path:
        return Path(self.data_dir) / LOG_FILE

    def alive(self) -> bool:
        if self.pid in _CHILDREN:
            return _CHILDREN[self.pid].poll() is None
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
        return self.pid > 0 and b"quarkus-run.jar" in cmdline and not zombie

    def save(self) -> None:
        Path(self.data_dir, STATE_FILE).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, data_dir: Path) -> RegistryState | None:
        path = data_dir / STATE_FILE
        return cls(**json.loads(path.read_text())) if path.exists() else None


class AlreadyRunning(DevRegistryError):
    def __init__(self, state: RegistryState) -> None:
        self.state = state
        super().__init__(
            f"the registry already runs at {state.url} (pid {state.pid}, data "
            f"{state.data_dir}); use it, or stop it first with: "
            f"{stop_command('dev-registry', state.data_dir)}"
        )


class DevRegistry:
    """Start, inspect and stop a local Apicurio Registry kept in ``data_dir``."""

    def __init__(self, data_dir: Path | None = None, *, heap: str = "384m") -> None:
        self.data_dir = (data_dir or default_data_dir()).resolve()
        self.heap = heap

    def state(self) -> RegistryState | None:
        return RegistryState.load(self.data_dir)

    def running(self) -> RegistryState | None:
        state = self.state()
        return state if state is not None and state.alive() else None

    def start(
        self,
        port: int = 8081,
        *,
        storage: str = "memory",
        bootstrap_servers: str | None = None,
        tls: tuple[Path, Path] | None = None,
        compatibility: str = "BACKWARD",
        timeout: float = 120.0,
    ) -> RegistryState:
        """Start the registry (``storage`` memory or kafkasql; kafkasql without
        ``bootstrap_servers`` uses the running dev broker). ``tls`` = (certificate, key)
        PEM files also opens an HTTPS port (:attr:`RegistryState.https_url`). The global
        ``compatibility`` is set as Confluent Schema Registry's default (Apicurio's own is
        NONE, which refuses nothing)."""
        self._check_data_dir()
        live = self.running()
        if live is not None:
            raise AlreadyRunning(live)
        if storage not in ("memory", "kafkasql"):
            raise DevRegistryError(f"--storage must be memory or kafkasql, not {storage!r}")
        if storage == "kafkasql" and not bootstrap_servers:
            bootstrap_servers = _dev_kafka_bootstrap()
        if port:
            _check_ports_free(port, tls=tls is not None)
        java = find_java()
        home = assemble()
        port, management, tls_port = (port, port + 1, port + 2) if port else free_ports(3)
        state = RegistryState(VERSION, str(self.data_dir), port, management, storage,
                              bootstrap_servers if storage == "kafkasql" else None,
                              tls_port=tls_port if tls else None)  # fmt: skip
        self._prepare_dir()
        state.pid = self._launch(state, java, home, tls)
        state.save()
        try:
            _wait_ready(state, timeout)
            httpx.put(f"{state.url}/config", json={"compatibility": compatibility},
                      timeout=10.0).raise_for_status()  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return state

    def _check_data_dir(self) -> None:
        ours = (self.data_dir / MARKER).exists()
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise DevRegistryError(f"--data-dir {self.data_dir} is a file, not a directory")
        if self.data_dir.is_dir() and not ours and any(self.data_dir.iterdir()):
            raise DevRegistryError(
                f"--data-dir {self.data_dir} is not empty and is not a dev-registry data "
                f"directory (it has no {MARKER} marker): pass a new or empty directory"
            )

    def _prepare_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / MARKER).write_text(
            "This directory was made by `eos dev-registry`; it removes only registry.json "
            "and registry.log in it.\n"
        )
        (self.data_dir / LOG_FILE).unlink(missing_ok=True)

    def _launch(
        self, state: RegistryState, java: Path, home: Path, tls: tuple[Path, Path] | None
    ) -> int:
        props: dict[str, object] = {
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": state.port,
            "quarkus.management.host": "127.0.0.1",
            "quarkus.management.port": state.management_port,
            "quarkus.otel.enabled": "false",
            "quarkus.log.console.json": "false",
        }
        if tls is not None:
            props["quarkus.http.ssl-port"] = state.tls_port
            props["quarkus.http.ssl.certificate.files"] = tls[0].resolve()
            props["quarkus.http.ssl.certificate.key-files"] = tls[1].resolve()
        if state.storage == "kafkasql":
            props["apicurio.storage.kind"] = "kafkasql"
            props["apicurio.kafkasql.bootstrap.servers"] = state.bootstrap_servers
            # its default 5 s poll, waited out twice on an empty snapshot topic, is 10 s of
            # every start
            props["apicurio.kafkasql.consumer.poll.timeout"] = 1000
        cmd = [
            str(java), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            *(f"-D{k}={v}" for k, v in props.items()), "-jar", str(home / "quarkus-run.jar"),
        ]  # fmt: skip
        with open(state.log_file, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.data_dir, start_new_session=True,
            )  # fmt: skip
        _CHILDREN[proc.pid] = proc
        return proc.pid

    def stop(self, *, timeout: float = 30.0) -> bool:
        """Stop the registry (SIGTERM; SIGKILL after ``timeout``); False if none ran."""
        state = self.state()
        if state is None or not state.alive():
            return False
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while state.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if state.alive():
            os.kill(state.pid, signal.SIGKILL)
            while state.alive():
                time.sleep(0.05)
        child = _CHILDREN.pop(state.pid, None)
        if child is not None:
            child.wait()
        return True

    def log_tail(self, lines: int = 60) -> str:
        path = self.data_dir / LOG_FILE
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )


def _check_ports_free(port: int, *, tls: bool) -> None:
    """One line naming a port the registry needs that something already listens on. A
    registry started on a taken port does not fail: Quarkus logs that it listens, and
    whatever holds the port answers in its place."""
    ports = [(port, "HTTP port"), (port + 1, "management port (--port + 1)")]
    if tls:
        ports.append((port + 2, "HTTPS port (--port + 2)"))
    for taken, role in ports:
        if port_open(taken):
            raise DevRegistryError(
                f"port {taken} on 127.0.0.1, the registry's {role}, is already in use: stop "
                "what listens there or pass another --port (0 picks free ports)"
            )


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on ``port`` (Linux /proc; True
    where it cannot tell)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        tables = [Path(f"/proc/{pid}/net/{t}").read_text() for t in ("tcp", "tcp6")]
    except OSError:
        return True
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    for row in (line.split() for table in tables for line in table.splitlines()[1:]):
        # sl local_address rem_address st …: st 0A is LISTEN; the 10th field is the inode
        if row[3] == "0A" and int(row[1].rsplit(":", 1)[1], 16) == port and row[9] in inodes:
            return True
    return False


def _dev_kafka_bootstrap() -> str:
    state = DevKafka().running()
    if state is None:
        raise DevRegistryError(
            "--storage kafkasql needs a Kafka: start one with `eos dev-kafka start`, or pass "
            "--bootstrap-servers"
        )
    return state.bootstrap


def _wait_ready(state: RegistryState, timeout: float) -> None:
    """Until the Confluent-compatible API lists subjects (health alone comes earlier)."""
    deadline = time.monotonic() + timeout
    last: object = None
    with httpx.Client(timeout=5.0) as client:
        while time.monotonic() < deadline:
            if not state.alive():
                tail = state.log_file.read_text(errors="replace").splitlines()[-40:]
                raise DevRegistryError(
                    "the registry exited during start-up; its log ends:\n" + "\n".join(tail)
                )
            try:
                answer = client.get(f"{state.url}/subjects")
                if answer.status_code == 200 and _listens(state.pid, state.port):
                    return
                if answer.status_code == 200:  # not ours: it cannot listen there too
                    raise DevRegistryError(
                        f"port {state.port} on 127.0.0.1 is already in use by another "
                        "process: stop it or pass another --port (0 picks free ports)"
                    )
                last = f"HTTP {answer.status_code}"
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(0.3)
    raise DevRegistryError(f"the registry did not become ready in {timeout:.0f} s: {last!r}")
