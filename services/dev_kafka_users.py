"""``eos dev-kafka user add NAME``: a user of a secured dev cluster.

SASL modes: SCRAM-SHA-256 and SCRAM-SHA-512 credentials, made here (RFC 5802's salted
password) and sent with AlterUserScramCredentials (API key 51, ``AlterUserScramCredentials
Request.json``; aiokafka has no such request) as the cluster's admin, so the user can log in
at once; the PLAIN mechanism learns of the user at the cluster's next start. mTLS: a client
certificate signed by the cluster's CA, common name NAME.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from aiokafka import errors as kerrors
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    CompactArray,
    CompactBytes,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from eos.errors import DevKafkaError
from eos.kafka.clients import ClientConfig, make_client
from services.dev_kafka_security import SCRAM, Security

ITERATIONS: Final = 8192
_MECHANISM_IDS: Final = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class AlterUserScramCredentialsResponse_v0(Response):  # type: ignore[misc]
    API_KEY = 51
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "results",
            CompactArray(
                ("user", CompactString("utf-8")),
                ("error_code", Int16),
                ("error_message", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class AlterUserScramCredentialsRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 51
    API_VERSION = 0
    RESPONSE_TYPE = AlterUserScramCredentialsResponse_v0
    SCHEMA = Schema(
        (
            "deletions",
            CompactArray(
                ("name", CompactString("utf-8")), ("mechanism", Int8), ("tags", TaggedFields)
            ),
        ),
        (
            "upsertions",
            CompactArray(
                ("name", CompactString("utf-8")),
                ("mechanism", Int8),
                ("iterations", Int32),
                ("salt", CompactBytes),
                ("salted_password", CompactBytes),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class AlterUserScramCredentials(Request[AlterUserScramCredentialsRequest_v0]):  # type: ignore[misc]
    API_KEY = 51

    def __init__(self, upsertions: list[tuple[str, int, int, bytes, bytes]]) -> None:
        self.upsertions = upsertions

    def build(
        self, request_struct_class: type[AlterUserScramCredentialsRequest_v0]
    ) -> AlterUserScramCredentialsRequest_v0:
        return request_struct_class([], [(*u, {}) for u in self.upsertions], {})


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's ``Hi(Normalize(password), salt, i)``: PBKDF2 with the mechanism's hash."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


async def add_scram_user(admin: ClientConfig, user: str, password: str) -> None:
    """Give ``user`` SCRAM-SHA-256 and SCRAM-SHA-512 credentials, as ``admin``."""
    upsertions = []
    for mechanism in SCRAM:
        salt = os.urandom(32)
        upsertions.append(
            (user, _MECHANISM_IDS[mechanism], ITERATIONS, salt,
             salted_password(mechanism, password, salt, ITERATIONS))
        )  # fmt: skip
    client = make_client(admin)
    try:  # closed also when bootstrapping fails half-way
        await client.bootstrap()
        for upsertion in upsertions:  # one credential of a user per request (Kafka's rule)
            node = client.get_random_node()
            response = await client.send(node, AlterUserScramCredentials([upsertion]))
            for name, code, message, _ in response.results:
                if code:
                    error = kerrors.for_code(code).__name__
                    detail = f"{error} {message or ''}".strip()
                    raise DevKafkaError(f"could not add user {name}: {detail}")
    finally:
        await client.close()


async def add_scram_users(security: Security, bootstrap: str, users: Sequence[str]) -> None:
    for user in users:
        await add_scram_user(security.client_config(bootstrap), user, security.users()[user])


async def add_user(
    security: Security, bootstrap: str | None, user: str, password: str | None
) -> Path:
    """Add ``user`` (to a running cluster at ``bootstrap`` if given); its settings file."""
    path = security.register(user, password)
    if security.sasl and bootstrap is not None:
        await add_scram_user(security.client_config(bootstrap), user, security.users()[user])
    return path
