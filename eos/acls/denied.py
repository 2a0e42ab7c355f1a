"""An authorization error, said in the terms of docs/security.md's ACL table.

When the brokers refuse eos something (``TopicAuthorizationFailed``,
``TransactionalIdAuthorizationFailed``, ``GroupAuthorizationFailed``,
``ClusterAuthorizationFailed``, from aiokafka or librdkafka, or a fencing round refused),
:func:`explain` finds the ACLs that are missing: it takes the ACLs of the plan
(:mod:`eos.acls.rules`) on the kind of resource that was refused and asks the brokers which of
them each principal really has (topics and groups: KIP-430's authorized operations;
transactional ids and the cluster cannot be asked, so the refused one is named). The
answer is an :class:`~eos.errors.AccessDenied` with one line per missing ACL: the principal,
the operation, the resource (type, name, pattern), why eos needs it, and the command that
grants it. :func:`check_worker_access` asks the same at a worker's start-up.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

import structlog
from aiokafka import errors as kerrors

from eos.acls.rules import OutputTopics, Planned, client_config_of, plan
from eos.config.connector import ConnectorConfig
from eos.config.worker import WorkerConfig
from eos.errors import (
    AccessDenied,
    ConfigError,
    ConflictError,
    FencingError,
    NotFoundError,
    PluginError,
    RequestTooLargeError,
    ValidationError,
)
from eos.kafka.acls import Acl, denied, without_implied
from eos.kafka.authorized import Authorized, authorized_operations
from eos.kafka.login import check_login

log = structlog.get_logger(__name__)

_ERRORS: Final = {
    kerrors.TopicAuthorizationFailedError: "Topic",
    kerrors.GroupAuthorizationFailedError: "Group",
    kerrors.ClusterAuthorizationFailedError: "Cluster",
    kerrors.TransactionalIdAuthorizationFailed: "TransactionalId",
}
_CODES: Final = {29: "Topic", 30: "Group", 31: "Cluster", 53: "TransactionalId"}
_NAMES: Final = {
    "TopicAuthorization": "Topic",
    "TOPIC_AUTHORIZATION_FAILED": "Topic",
    "GroupAuthorization": "Group",
    "GROUP_AUTHORIZATION_FAILED": "Group",
    "ClusterAuthorization": "Cluster",
    "CLUSTER_AUTHORIZATION_FAILED": "Cluster",
    "TransactionalIdAuthorization": "TransactionalId",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "TransactionalId",
}
_ABOUT_A_REQUEST: Final = (
    NotFoundError,
    ConflictError,
    ConfigError,
    ValidationError,
    RequestTooLargeError,
    PluginError,
)
"""Errors about what a user asked for: their text quotes the user's names (a connector
called ``ClusterAuthorization`` that does not exist is a 404, not a missing ACL)."""
FENCING: Final = "fencing"
"""A key of :func:`refused`'s answer: the refused transactional ids were being fenced."""


def refused(exc: BaseException) -> dict[str, set[str]]:
    """The kinds of resource the brokers refused in ``exc`` (its causes and groups
    included), each with the names the errors mention."""
    found: dict[str, set[str]] = {}
    for error in _chain(exc):
        kind = _kind(error)
        if kind is None:
            continue
        names = found.setdefault(kind, set())
        if isinstance(error, FencingError):
            found[FENCING] = set()
            names.update(tid for tid, why in error.failures.items() if "authoriz" in why.lower())
        elif isinstance(error, kerrors.KafkaError) and error.args:
            names.update(str(a) for a in error.args if isinstance(a, str) and " " not in a)
    return found


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        pending.extend(a for a in current.args if isinstance(a, BaseException))


def _kind(error: BaseException) -> str | None:
    for cls, kind in _ERRORS.items():
        if isinstance(error, cls):
            return kind
    if isinstance(error, FencingError):
        refused_ids = any("authoriz" in why.lower() for why in error.failures.values())
        return "TransactionalId" if refused_ids else None
    code = getattr(error, "code", None)
    if callable(code):  # librdkafka's KafkaError
        try:
            return _CODES.get(int(code()))
        except (TypeError, ValueError):
            return None
    if isinstance(error, _ABOUT_A_REQUEST):
        return None
    text = str(error)  # a client's error re-raised as text (e.g. a delivery report's)
    return next((kind for name, kind in _NAMES.items() if name in text), None)


async def explain(
    worker: WorkerConfig,
    connectors: Mapping[str, Mapping[str, str]],
    output_topics: OutputTopics,
    exc: BaseException,
) -> BaseException:
    """``exc`` as an :class:`AccessDenied` naming the missing ACLs, if it is an
    authorization error and the brokers confirm what is missing; else ``exc``."""
    kinds = refused(exc)
    if not kinds:
        return await _login_refused(exc, worker, connectors) or exc
    try:
        found = plan(worker, connectors, output_topics)
        candidates = [p for p in found.acls if p.acl.resource in kinds]
        candidates = [p for p in candidates if _named(p.acl, kinds[p.acl.resource])]
        candidates = [p for p in candidates if _who(p, kinds, bool(connectors))]
        missing = await _missing(candidates, kinds)
    except Exception as error:  # the explanation must never hide the failure
        log.warning("authorization error not explained", error=repr(error))
        return exc
    if not missing:
        return exc
    explained = _denied(missing)
    explained.__cause__ = exc
    return explained


async def _login_refused(
    exc: BaseException, worker: WorkerConfig, connectors: Mapping[str, Mapping[str, str]]
) -> BaseException | None:
    """A connector's client that could not connect: its refused login named (its own
    ``producer.override.sasl.jaas.config`` …), if that is why."""
    if not any(_unreachable(e) for e in _chain(exc)):
        return None
    for name, props in connectors.items():
        config = ConnectorConfig.from_properties({**props, "name": name}, worker)
        for role in ("producer", "consumer", "admin"):
            try:
                await check_login(config.client_config(worker), role)
            except ConfigError as login:
                key = f"{role}.override.{login.key}"
                refused_login = ConfigError(
                    key if key in props else login.key, login.value, login.allowed
                )
                refused_login.__cause__ = exc
                return refused_login
            except Exception:  # unreachable for another reason: the failure says so itself
                return None
    return None


def _unreachable(error: BaseException) -> bool:
    if isinstance(error, kerrors.KafkaConnectionError | kerrors.NoBrokersAvailable):
        return True
    code = getattr(error, "code", None)
    return callable(code) and code() in (-169, -195)  # librdkafka _AUTHENTICATION, _TRANSPORT


def _who(planned: Planned, kinds: Mapping[str, set[str]], task: bool) -> bool:
    """Transactional ids cannot be asked about: keep the client that was refused — the
    fencing admin client, a task's producer, or (at start-up) the leader's writer."""
    if planned.acl.resource != "TransactionalId" or kinds["TransactionalId"]:
        return True
    if FENCING in kinds:
        return planned.rule.layer == "admin"
    if task:
        return planned.rule.scope == "connector"
    return "{connector}" not in planned.rule.name


def _named(acl: Acl, names: set[str]) -> bool:
    if not names or acl.resource in ("Topic", "Group"):
        return True  # topics and groups are asked about; the others must match the name
    if acl.pattern == "PREFIXED":
        return any(name.startswith(acl.name) for name in names)
    return acl.name in names


async def _missing(candidates: list[Planned], kinds: Mapping[str, set[str]]) -> list[Planned]:
    """The candidates the brokers confirm missing, asked of each principal on its cluster."""
    by_client: dict[tuple[str, str], list[Planned]] = {}
    for planned in candidates:
        by_client.setdefault((planned.acl.principal, planned.cluster), []).append(planned)
    missing: list[Planned] = []
    for planned_acls in by_client.values():
        topics = {p.acl.name for p in planned_acls if p.acl.resource == "Topic"}
        groups = {p.acl.name for p in planned_acls if p.acl.resource == "Group"}
        access = Authorized()
        if topics or groups:
            config = client_config_of(planned_acls[0])
            access = await authorized_operations(config, topics, next(iter(groups), None))
        missing += [p for p in planned_acls if not _granted(p.acl, access, kinds)]
    kept = {acl.key for acl in without_implied(p.acl for p in missing)}  # Write gives Describe
    return [p for p in missing if p.acl.key in kept]


def _denied(missing: list[Planned]) -> AccessDenied:
    """:func:`eos.kafka.acls.denied` for ACLs of the plan, each fix naming its cluster."""
    clusters: dict[str, list[Acl]] = {}
    for planned in missing:
        clusters.setdefault(planned.cluster, []).append(planned.acl)
    parts = [denied(acls, cluster) for cluster, acls in clusters.items()]
    return AccessDenied("\n".join(str(p) for p in parts), [a for p in parts for a in p.acls])


def _granted(acl: Acl, access: Authorized, kinds: Mapping[str, set[str]]) -> bool:
    if acl.resource == "Topic" and acl.name in access.missing:
        # A missing topic needs Create only, which cannot be asked about: missing if
        # creating this topic was refused (or the refused topic is not known).
        names = kinds.get("Topic", set())
        return acl.operation != "Create" or (bool(names) and acl.name not in names)
    if acl.resource in ("Topic", "Group"):
        if acl.operation == "Create":
            return True  # the topic exists: Create is not needed
        allowed = access.allowed(acl.resource, acl.name)
        return allowed is None or acl.operation in allowed
    return acl.resource not in kinds  # cannot be asked: the refused kind is what is missing


async def check_worker_access(worker: WorkerConfig) -> None:
    """At start-up, after the internal topics exist: raise :class:`AccessDenied` naming
    every topic and group ACL the workers' principals lack (docs/security.md)."""
    found = plan(worker, {}, lambda props: None)
    # The internal topics exist (the worker created or found them), so Create is not
    # needed; a topic that a broker's metadata does not list yet is that broker lagging.
    candidates = [
        p
        for p in found.acls
        if p.acl.resource == "Group" or (p.acl.resource == "Topic" and p.acl.operation != "Create")
    ]
    try:
        missing = await _missing(candidates, {})
    except (kerrors.KafkaError, OSError) as exc:  # not an answer: the usual errors follow
        log.info("access check skipped", error=repr(exc))
        return
    if missing:
        raise _denied(missing)
