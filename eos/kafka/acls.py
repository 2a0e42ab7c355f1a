"""ACLs as Kafka defines them, read (DescribeAcls) and created (CreateAcls) with aiokafka's
protocol classes.

An :class:`Acl` is a principal allowed an operation on a resource pattern; the codes are
Kafka's (``AclOperation``, ``ResourceType``, ``PatternType``, ``AclPermissionType``), and
:func:`kafka_acls_command` writes the ``kafka-acls.sh`` line that grants one. Kafka's
authorizer lets an operation imply others on the same resource (Read, Write, Delete or
Alter imply Describe; AlterConfigs implies DescribeConfigs), so a least-privilege set never
lists an implied one (:func:`without_implied`). Reading and creating ACLs needs the rights
of a Kafka operator (Describe, resp. Alter, on the Cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import anyio
from aiokafka import errors as kerrors
from aiokafka.protocol.admin import CreateAclsRequest_v1, DescribeAclsRequest
from aiokafka.protocol.api import Request

from eos.errors import AccessDenied
from eos.kafka.clients import ClientConfig, make_client

OPERATIONS: Final = {
    "All": 2, "Read": 3, "Write": 4, "Create": 5, "Delete": 6, "Alter": 7, "Describe": 8,
    "ClusterAction": 9, "DescribeConfigs": 10, "AlterConfigs": 11, "IdempotentWrite": 12,
}  # fmt: skip
"""Kafka's ``AclOperation`` codes by name."""
RESOURCE_TYPES: Final = {"Topic": 2, "Group": 3, "Cluster": 4, "TransactionalId": 5}
PATTERN_TYPES: Final = {"LITERAL": 3, "PREFIXED": 4}
ALLOW: Final = 3
CLUSTER_NAME: Final = "kafka-cluster"
"""The one name of the Cluster resource."""

IMPLIED: Final = {
    "Describe": ("Read", "Write", "Delete", "Alter", "All"),
    "DescribeConfigs": ("AlterConfigs", "All"),
}
"""An operation → the operations that imply it (Kafka's authorizer)."""

_FLAGS: Final = {
    "Topic": "--topic",
    "Group": "--group",
    "TransactionalId": "--transactional-id",
    "Cluster": "--cluster",
}


@dataclass(frozen=True, order=True)
class Acl:
    """``principal`` is allowed ``operation`` on ``resource`` ``name`` (``pattern``)."""

    principal: str
    resource: str
    name: str
    pattern: str
    operation: str
    why: str = field(default="", compare=False)
    """What eos does with it (a row of docs/security.md's table)."""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.principal, self.resource, self.name, self.pattern, self.operation)

    def describe(self) -> str:
        """E.g. ``Write on Topic 'orders' (literal)``."""
        if self.resource == "Cluster":
            return f"{self.operation} on the Cluster"
        return f"{self.operation} on {self.resource} {self.name!r} ({self.pattern.lower()})"

    def covers(self, granted: Acl) -> bool:
        """Whether ``granted`` (an ALLOW ACL of the broker) grants this one."""
        if granted.principal not in (self.principal, "User:*"):
            return False
        if granted.resource != self.resource:
            return False
        if granted.operation != self.operation and granted.operation not in IMPLIED_BY.get(
            self.operation, ()
        ):
            return False
        return _matches(granted, self)


IMPLIED_BY: Final = {op: (*implying, "All") for op, implying in IMPLIED.items()}
for _op in OPERATIONS:
    IMPLIED_BY.setdefault(_op, ("All",))


def _matches(granted: Acl, wanted: Acl) -> bool:
    """Whether ``granted``'s pattern covers every name ``wanted``'s pattern stands for."""
    if granted.name == "*" and granted.pattern == "LITERAL":
        return True
    if granted.pattern == "LITERAL":
        return wanted.pattern == "LITERAL" and granted.name == wanted.name
    return wanted.name.startswith(granted.name)  # PREFIXED


def without_implied(acls: Iterable[Acl]) -> list[Acl]:
    """``acls`` without duplicates and without those another one in it implies, sorted."""
    unique = {acl.key: acl for acl in acls}
    kept = []
    for acl in unique.values():
        implied = any(
            other is not acl and other.key[:4] == acl.key[:4] and other.operation in
            IMPLIED.get(acl.operation, ())
            for other in unique.values()
        )  # fmt: skip
        if not implied:
            kept.append(acl)
    return sorted(kept)


def kafka_acls_command(acl: Acl, bootstrap: str, command_config: str = "admin.properties") -> str:
    """The ``kafka-acls.sh`` line that grants ``acl``."""
    parts = [
        "kafka-acls.sh",
        f"--bootstrap-server {bootstrap}",
        f"--command-config {command_config}",
        f"--add --allow-principal {acl.principal}",
        f"--operation {acl.operation}",
    ]
    flag = _FLAGS[acl.resource]
    parts.append(flag if acl.resource == "Cluster" else f"{flag} {acl.name}")
    if acl.pattern == "PREFIXED":
        parts.append("--resource-pattern-type prefixed")
    return " ".join(parts)


_ANY = 1
_MATCH = 2
_NAMES = {
    "operation": {code: name for name, code in OPERATIONS.items()},
    "resource": {code: name for name, code in RESOURCE_TYPES.items()},
    "pattern": {code: name for name, code in PATTERN_TYPES.items()},
}


class _CreateAcls(Request[CreateAclsRequest_v1]):  # type: ignore[misc]
    """CreateAcls version 1 with any number of creations (aiokafka's takes one)."""

    API_KEY = 30

    def __init__(self, acls: Sequence[Acl]) -> None:
        self.acls = acls

    def build(self, request_struct_class: type[CreateAclsRequest_v1]) -> CreateAclsRequest_v1:
        return request_struct_class(
            [
                (RESOURCE_TYPES[a.resource], a.name, PATTERN_TYPES[a.pattern], a.principal, "*",
                 OPERATIONS[a.operation], ALLOW)
                for a in self.acls
            ]
        )  # fmt: skip


def _check(code: int, message: str | None, what: str) -> None:
    if code:
        error = kerrors.for_code(code)
        raise error(f"{what}: {message or error.__name__}")


async def describe_acls(config: ClientConfig) -> tuple[list[Acl], list[Acl]]:
    """Every (ALLOW, DENY) ACL of the cluster, for any host."""
    client = make_client(config)
    try:  # closed also when bootstrapping fails half-way
        await client.bootstrap()
        request = DescribeAclsRequest(_ANY, None, _MATCH, None, None, _ANY, _ANY)
        response: Any = await client.send(client.get_random_node(), request)
    finally:
        await client.close()
    _check(response.error_code, response.error_message, "DescribeAcls")
    allowed: list[Acl] = []
    denied: list[Acl] = []
    for resource_type, name, pattern, entries in response.resources:
        for principal, host, operation, permission in entries:
            if host != "*" or resource_type not in _NAMES["resource"]:
                continue  # an ACL for one host does not grant eos's clients everywhere
            acl = Acl(
                principal,
                _NAMES["resource"][resource_type],
                name,
                _NAMES["pattern"].get(pattern, "LITERAL"),
                _NAMES["operation"].get(operation, "Unknown"),
            )
            (allowed if permission == ALLOW else denied).append(acl)
    return allowed, denied


async def create_acls(config: ClientConfig, acls: Sequence[Acl], wait: float = 10.0) -> None:
    """Create ALLOW ``acls`` (for any host) and wait (up to ``wait`` seconds) until the
    brokers apply them; an error names the first refused one."""
    if not acls:
        return
    client = make_client(config)
    try:  # closed also when bootstrapping fails half-way
        await client.bootstrap()
        response: Any = await client.send(client.get_random_node(), _CreateAcls(acls))
    finally:
        await client.close()
    for acl, (code, message) in zip(acls, response.creation_responses, strict=True):
        _check(code, message, f"CreateAcls {acl.principal} {acl.describe()}")
    await _until_visible(config, acls, wait)


async def _until_visible(config: ClientConfig, acls: Sequence[Acl], wait: float) -> None:
    """Until a broker lists every ACL: the controller answers CreateAcls when the ACLs are
    committed; a broker authorizes with them once it has applied them (a moment later)."""
    with anyio.move_on_after(wait):
        while True:
            allowed = (await describe_acls(config))[0]
            if all(any(acl.covers(a) for a in allowed) for acl in acls):
                return
            await anyio.sleep(0.1)


GRANT: Final = "eos acls grant <worker file> --command-config <an operator's client settings>"


def line(acl: Acl, bootstrap: str) -> str:
    """One actionable line for a missing ACL."""
    return (
        f"not authorized: {acl.principal} needs {acl.describe()} ({acl.why}); grant it with "
        f"`{GRANT}` or `{kafka_acls_command(acl, bootstrap)}`"
    )


def denied(acls: Iterable[Acl], bootstrap: str) -> AccessDenied:
    """One line per missing ACL (one ACL needed for several reasons: one line with all)."""
    whys: dict[tuple[str, ...], list[str]] = {}
    unique: dict[tuple[str, ...], Acl] = {}
    for acl in acls:
        unique.setdefault(acl.key, acl)
        reasons = whys.setdefault(acl.key, [])
        if acl.why not in reasons:
            reasons.append(acl.why)
    merged = sorted(replace(acl, why="; ".join(whys[key])) for key, acl in unique.items())
    return AccessDenied("\n".join(line(acl, bootstrap) for acl in merged), merged)


def refused_transactional_id(config: ClientConfig, transactional_id: str, why: str) -> AccessDenied:
    """The one line of a producer refused its transactional id (Write on it is missing)."""
    from eos.kafka.principals import principal_of

    principal = principal_of({**config.common, **config.producer})
    acl = Acl(principal, "TransactionalId", transactional_id, "LITERAL", "Write", why)
    return denied([acl], config.bootstrap_servers)
