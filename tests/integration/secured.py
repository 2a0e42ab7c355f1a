"""Secured dev clusters for tests: started with the CLI a user types
(``eos dev-kafka start --security MODE``), once per session and mode (the
``secured_kafka`` fixture of tests/conftest.py), with users, worker settings, ACL grants
and read-backs in the terms the docs use."""

from __future__ import annotations

import itertools
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from aiokafka.protocol.admin import DeleteAclsRequest

from eos.kafka import ClientConfig, make_client, make_consumer
from eos.kafka.acls import (
    ALLOW,
    OPERATIONS,
    PATTERN_TYPES,
    RESOURCE_TYPES,
    Acl,
    create_acls,
    describe_acls,
)
from eos.kafka.admin import ensure_topic
from services.dev_kafka import DevKafka
from services.dev_kafka_security import Security
from services.dev_kafka_users import add_user

REPO = Path(__file__).resolve().parents[2]
PLAIN_USER = "plain-user"
"""A user every SASL test cluster has from the start, so PLAIN knows it too."""
_users = itertools.count()


def eos(
    *args: str, timeout: float = 240, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO, env=env,
    )  # fmt: skip


def start_secured(data: Path, mode: str) -> DevKafka:
    """``eos dev-kafka start --security MODE`` as a user runs it."""
    users = ["--user", PLAIN_USER] if mode != "mtls" else []
    done = eos("dev-kafka", "start", "--security", mode, "--port", "0", "--data-dir", str(data),
               *users)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"admin's client settings: {data / 'security' / 'admin.properties'}" in done.stdout
    return DevKafka(data)


@dataclass
class Secured:
    """A running secured cluster."""

    kafka: DevKafka
    mode: str

    @property
    def security(self) -> Security:
        return self.kafka.security()

    @property
    def bootstrap(self) -> str:
        state = self.kafka.state()
        assert state is not None
        return state.bootstrap

    @property
    def admin(self) -> ClientConfig:
        return self.kafka.client_config()

    @property
    def admin_file(self) -> Path:
        return self.security.admin_file

    async def user(self, prefix: str = "u", password: str | None = None) -> str:
        """A new user (a SCRAM login, or a client certificate under mTLS)."""
        name = f"{prefix}{next(_users)}-{uuid.uuid4().hex[:6]}"
        await add_user(self.security, self.bootstrap, name, password)
        return name

    def client_properties(self, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        return self.security.client_properties(user, mechanism)

    async def topic(self, name: str, partitions: int = 1) -> str:
        await ensure_topic(self.admin, name, partitions=partitions)
        return name

    async def grant(self, acls: Sequence[Acl]) -> None:
        await create_acls(self.admin, acls)

    async def revoke(self, acl: Acl) -> None:
        """Delete exactly ``acl`` (DeleteAcls), and wait until the brokers no longer list it."""
        request = DeleteAclsRequest(
            RESOURCE_TYPES[acl.resource], acl.name, PATTERN_TYPES[acl.pattern], acl.principal,
            "*", OPERATIONS[acl.operation], ALLOW,
        )  # fmt: skip
        client = make_client(self.admin)
        await client.bootstrap()
        try:
            await client.send(client.get_random_node(), request)
        finally:
            await client.close()
        with anyio.fail_after(10):
            while True:
                if acl.key not in {a.key for a in (await describe_acls(self.admin))[0]}:
                    return
                await anyio.sleep(0.1)


async def read_values(
    config: ClientConfig, topic: str, expect: int, timeout: float = 60
) -> list[bytes]:
    """Every committed value of ``topic`` (read_committed), once ``expect`` arrived."""
    consumer = make_consumer(
        config, group_id=None, isolation_level="read_committed",
        auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    values: list[bytes] = []
    await consumer.start()
    try:
        consumer.subscribe([topic])
        with anyio.move_on_after(timeout):
            while len(values) < expect:
                batches = await consumer.getmany(timeout_ms=500)
                values += [r.value for rs in batches.values() for r in rs if r.value is not None]
    finally:
        await consumer.stop()
    return values
