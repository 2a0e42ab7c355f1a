"""A real PostgreSQL server for tests: installed from Debian (``postgresql-15``) when
missing, initialised with ``initdb`` into a temporary directory and started with
``pg_ctl`` on a free loopback port, both as the ``postgres`` user (``initdb`` refuses
to run as root).

Use the session fixture ``postgres`` (import it into a test module)::

    db = postgres.database()                  # a fresh database owned by USER
    with postgres.connect(db) as conn:        # psycopg, autocommit
        conn.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
    config = {"connection.url": postgres.url(db), "connection.user": USER,
              "connection.password": PASSWORD, ...}

TCP connections authenticate with SCRAM passwords (so a wrong password is refused);
the superuser ``postgres`` logs in without one over the server's Unix socket. The
server is tuned for tests (``fsync=off``): a crash of the machine loses its data.

``python -m tests.postgres_server`` installs PostgreSQL (if needed) and prints ``initdb``'s path.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.debian import ensure_installed

BIN = Path("/usr/lib/postgresql/15/bin")
PACKAGES = ("postgresql-15",)
USER = "eos"
PASSWORD = "eos-test-password"
_START_TIMEOUT = 60


class PostgresError(RuntimeError):
    """PostgreSQL could not be installed or started."""


def ensure_postgres() -> Path:
    """``initdb``'s path; installs the Debian package when it is missing."""
    ensure_installed([BIN / "initdb", BIN / "pg_ctl"], PACKAGES)
    return BIN / "initdb"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _as_postgres(*args: str | Path, timeout: float = _START_TIMEOUT) -> str:
    done = subprocess.run(
        ["runuser", "-u", "postgres", "--", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise PostgresError(f"{' '.join(map(str, args))} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@dataclass
class PostgresServer:
    """One running PostgreSQL; ``port`` on 127.0.0.1, Unix socket in ``home``."""

    home: Path
    port: int
    _names: Iterator[int] = field(default_factory=itertools.count)

    @property
    def data(self) -> Path:
        return self.home / "data"

    def url(self, database: str) -> str:
        """The JDBC URL of ``database``."""
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{database}"

    def connect(
        self, database: str = "postgres", *, admin: bool = False
    ) -> psycopg.Connection[Any]:
        """An autocommit connection: as USER over TCP, or as ``postgres`` over the socket."""
        if admin:
            return psycopg.connect(
                host=str(self.home), port=self.port, user="postgres", dbname=database,
                autocommit=True,
            )  # fmt: skip
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, dbname=database,
            autocommit=True,
        )  # fmt: skip

    def database(self, prefix: str = "db") -> str:
        """A new, empty database owned by USER."""
        name = f"{prefix}_{next(self._names)}"
        with self.connect(admin=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" OWNER "{USER}"')
        return name

    def log_tail(self, lines: int = 40) -> str:
        log = self.home / "postgres.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        with contextlib.suppress(PostgresError, subprocess.TimeoutExpired):
            _as_postgres(BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.home, ignore_errors=True)


def start_postgres(*, logical: bool = True) -> PostgresServer:
    """Initialise and start a server in a new temporary directory (owned by ``postgres``,
    outside pytest's root-only temporary tree); returns once it accepts connections.
    ``logical``: with ``wal_level=logical`` (else the default, ``replica``)."""
    ensure_postgres()
    home = Path(tempfile.mkdtemp(prefix="eos-postgres-"))
    shutil.chown(home, "postgres", "postgres")
    password = home / "superuser-password"
    password.write_text(PASSWORD + "\n")
    shutil.chown(password, "postgres", "postgres")
    server = PostgresServer(home, free_port())
    try:
        _as_postgres(
            BIN / "initdb", "-D", server.data, "-U", "postgres", f"--pwfile={password}",
            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
            "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        options = (
            f"-p {server.port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
            # logical replication, for PostgresCdcSource (a slot per test connector)
            + ("-c wal_level=logical -c max_replication_slots=40 -c max_wal_senders=40"
               if logical else "")
        )  # fmt: skip
        _as_postgres(
            BIN / "pg_ctl", "-D", server.data, "-l", home / "postgres.log", "-o", options,
            "-w", "-t", str(_START_TIMEOUT), "start",
        )  # fmt: skip
        with server.connect(admin=True) as conn:
            conn.execute(f"CREATE ROLE \"{USER}\" LOGIN CREATEDB REPLICATION PASSWORD '{PASSWORD}'")
    except BaseException as exc:
        tail = server.log_tail()
        server.stop()
        if isinstance(exc, Exception):
            raise PostgresError(f"{exc}\npostgres log:\n{tail}") from exc
        raise
    return server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL for the whole session (started on first use)."""
    server = start_postgres()
    yield server
    server.stop()


def main() -> None:
    print(ensure_postgres())


if __name__ == "__main__":
    main()
