"""A real MariaDB server for tests: installed from Debian (``mariadb-server``) when
missing, initialised with ``mariadb-install-db`` into a temporary directory and run as
the ``mysql`` user on a free loopback port.

Use the session fixture ``mariadb`` (import it into a test module)::

    db = mariadb.database()                    # a fresh database USER may use
    mariadb.sql(db, "CREATE TABLE t (id int PRIMARY KEY)")
    config = {"connection.url": mariadb.url(db), "connection.user": USER, ...}

Statements go through the ``mariadb`` client as root over the server's Unix socket.
The server is tuned for tests (no flush at commit): a crash of the machine loses data.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.debian import ensure_installed
from tests.postgres_server import free_port

SERVER = Path("/usr/sbin/mariadbd")
INSTALL_DB = Path("/usr/bin/mariadb-install-db")
CLIENT = Path("/usr/bin/mariadb")
PACKAGES = ("mariadb-server", "mariadb-client")
USER = "eos"
PASSWORD = "eos-test-password"
_START_TIMEOUT = 60.0


class MariaDBError(RuntimeError):
    """MariaDB could not be installed or started, or a statement failed."""


@dataclass
class MariaDBServer:
    home: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    _names: Iterator[int] = field(default_factory=itertools.count)

    @property
    def socket(self) -> Path:
        return self.home / "mariadb.sock"

    def url(self, database: str) -> str:
        return f"jdbc:mariadb://127.0.0.1:{self.port}/{database}"

    def sql(self, database: str, statements: str) -> str:
        """Run ``statements`` as root; their output (tab-separated, no headers)."""
        done = subprocess.run(
            [str(CLIENT), f"--socket={self.socket}", "-u", "root", "-N", "-B", "-D", database,
             "-e", statements],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if done.returncode != 0:
            raise MariaDBError(f"{statements!r} failed: {done.stderr}")
        return done.stdout

    def database(self, prefix: str = "db") -> str:
        name = f"{prefix}_{next(self._names)}"
        self.sql("mysql", f"CREATE DATABASE `{name}`")
        return name

    def log_tail(self, lines: int = 40) -> str:
        log = self.home / "error.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        shutil.rmtree(self.home, ignore_errors=True)


def start_mariadb() -> MariaDBServer:
    """Initialise and start a server in a new temporary directory; returns once it
    accepts connections and USER exists."""
    ensure_installed([SERVER, INSTALL_DB, CLIENT], PACKAGES)
    home = Path(tempfile.mkdtemp(prefix="eos-mariadb-"))
    shutil.chown(home, "mysql", "mysql")
    server = MariaDBServer(home, free_port())
    try:
        done = subprocess.run(
            [str(INSTALL_DB), "--no-defaults", f"--datadir={home / 'data'}", "--user=mysql",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            raise MariaDBError(f"mariadb-install-db failed:\n{done.stdout}\n{done.stderr}")
        server.process = subprocess.Popen(
            [str(SERVER), "--no-defaults", f"--datadir={home / 'data'}", "--user=mysql",
             f"--socket={server.socket}", f"--port={server.port}", "--bind-address=127.0.0.1",
             f"--pid-file={home / 'mariadb.pid'}", f"--log-error={home / 'error.log'}",
             "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=0",
             "--innodb-buffer-pool-size=64M"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        _wait_ready(server)
        server.sql(
            "mysql",
            f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; "
            f"GRANT ALL ON *.* TO '{USER}'@'%'",
        )
    except BaseException as exc:
        tail = server.log_tail()
        server.stop()
        if isinstance(exc, Exception):
            raise MariaDBError(f"{exc}\nmariadb log:\n{tail}") from exc
        raise
    return server


def _wait_ready(server: MariaDBServer) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        assert server.process is not None
        if server.process.poll() is not None:
            raise MariaDBError("mariadbd exited")
        with contextlib.suppress(MariaDBError, subprocess.TimeoutExpired):
            server.sql("mysql", "SELECT 1")
            return
        time.sleep(0.2)
    raise MariaDBError(f"mariadbd not ready after {_START_TIMEOUT}s")


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDBServer]:
    """One MariaDB for the whole session (started on first use)."""
    server = start_mariadb()
    yield server
    server.stop()
