"""Topic administration: create topics, and check that existing ones fit.

``replication_factor=-1`` means "the broker's ``default.replication.factor``";
aiokafka cannot send -1 in CreateTopics, so it is read from a broker first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import structlog
from aiokafka import errors as kerrors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from eos.errors import TopicError
from eos.kafka.clients import ClientConfig, make_admin, started

log = structlog.get_logger(__name__)

SETTLE_TIMEOUT = 10.0
"""Seconds to wait for the metadata of a topic another client just created."""


async def ensure_topic(
    config: ClientConfig,
    name: str,
    *,
    partitions: int,
    replication_factor: int = -1,
    topic_configs: Mapping[str, str] | None = None,
    compacted: bool = False,
    check: bool = False,
) -> bool:
    """Create ``name`` unless it exists; True if this call created it.

    With ``check``, an existing topic must have ``partitions`` partitions and,
    when ``compacted``, ``cleanup.policy=compact``; otherwise :class:`TopicError`.
    Workers of a new cluster may start together: "already exists" from a concurrent
    creator is success, and a topic it has just created is looked at again until its
    metadata has settled.
    """
    settings = dict(topic_configs or {})
    if compacted:
        settings["cleanup.policy"] = "compact"
    admin = await started(make_admin(config))
    try:
        rf = replication_factor
        if rf == -1:
            rf = await _default_replication_factor(admin)
        response = await admin.create_topics([NewTopic(name, partitions, rf, None, settings)])
        code = response.topic_errors[0][1]
        error = kerrors.for_code(code)
        if error is kerrors.NoError:
            log.info("topic created", topic=name, partitions=partitions, replication_factor=rf)
            await _leaders_elected(admin, name)
            return True
        if error is kerrors.TopicAuthorizationFailedError:
            raise error(name)  # named, for the explanation of the missing ACL
        if error is not kerrors.TopicAlreadyExistsError:
            message = response.topic_errors[0][2] if len(response.topic_errors[0]) > 2 else ""
            raise TopicError(f"cannot create topic {name!r}: {error.__name__} {message or ''}")
        if check:
            await _check_layout(admin, name, partitions, compacted)
        return False
    finally:
        await admin.close()


async def kafka_cluster_id(config: ClientConfig) -> str | None:
    """The id of the Kafka cluster (None if the broker does not say)."""
    admin = await started(make_admin(config))
    try:
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    value = cluster.get("cluster_id")
    return str(value) if value else None


async def transaction_max_timeout_ms(config: ClientConfig) -> int | None:
    """A broker's ``transaction.max.timeout.ms`` (the most a transactional producer's
    ``transaction.timeout.ms`` may be), or None, said once in a warning, if the principal
    may not describe the brokers' configs."""
    admin = await started(make_admin(config))
    try:
        cluster = await admin.describe_cluster()
        broker_id = cluster["brokers"][0]["node_id"]
        value = await _config_value(
            admin, ConfigResourceType.BROKER, str(broker_id), "transaction.max.timeout.ms"
        )
    except kerrors.ClusterAuthorizationFailedError as exc:
        log.warning(
            "the brokers' transaction.max.timeout.ms cannot be read (DescribeConfigs on the "
            "cluster is not granted): a task transaction.timeout.ms above it is refused only "
            "when the task's producer starts",
            error=type(exc).__name__,
        )
        return None
    finally:
        await admin.close()
    return int(value) if value else None


async def _default_replication_factor(admin: AIOKafkaAdminClient) -> int:
    cluster = await admin.describe_cluster()
    broker_id = cluster["brokers"][0]["node_id"]
    value = await _config_value(
        admin, ConfigResourceType.BROKER, str(broker_id), "default.replication.factor"
    )
    return int(value) if value else 1


async def _config_value(admin: AIOKafkaAdminClient, kind: Any, name: str, key: str) -> str | None:
    responses = await admin.describe_configs([ConfigResource(kind, name, {key: None})])
    for response in responses:
        for resource in response.resources:
            if resource[0]:  # refused (e.g. no DescribeConfigs ACL): say so, never guess
                raise kerrors.for_code(resource[0])(f"DescribeConfigs of {name}: {resource[1]}")
            for entry in resource[4]:
                if entry[0] == key:
                    return str(entry[1])
    return None


async def _leaders_elected(admin: AIOKafkaAdminClient, name: str) -> None:
    """Wait, at most :data:`SETTLE_TIMEOUT`, until every partition of a topic this call
    has just created has a leader. A client that reads the topic at once (the worker's
    status and offsets logs do) would otherwise be told NotLeaderForPartition, which
    aiokafka retries but logs as an error first."""
    with anyio.move_on_after(SETTLE_TIMEOUT):
        while True:
            described = (await admin.describe_topics([name]))[0]
            partitions = described.get("partitions") or ()
            led = all(p.get("error_code", 0) == 0 and p.get("leader", -1) >= 0 for p in partitions)
            if described.get("error_code", 0) == 0 and partitions and led:
                return
            log.debug("partition leaders not elected yet", topic=name)
            await anyio.sleep(0.05)


async def _settled_layout(
    admin: AIOKafkaAdminClient, name: str, compacted: bool
) -> tuple[int, str | None]:
    """The topic's partition count and (if ``compacted`` matters) its ``cleanup.policy``
    once both are visible. Right after another worker created it, a topic may be
    described with an error or no partitions for a moment, and the broker asked may not
    know its configuration yet (an unknown topic, no ``cleanup.policy``): "wait and look
    again", both within one bound, :data:`SETTLE_TIMEOUT`. What was seen last is returned
    when the bound has passed."""
    actual, policy = 0, None
    with anyio.move_on_after(SETTLE_TIMEOUT):
        while True:
            described = (await admin.describe_topics([name]))[0]
            actual = len(described.get("partitions") or ())
            settled = described.get("error_code", 0) == 0 and actual > 0
            if settled and compacted:
                try:
                    policy = await _config_value(
                        admin, ConfigResourceType.TOPIC, name, "cleanup.policy"
                    )
                except kerrors.UnknownTopicOrPartitionError:
                    policy = None  # the broker asked has not seen the new topic yet
                settled = policy is not None
            if settled:
                return actual, policy
            log.debug("topic not settled yet", topic=name, partitions=actual, policy=policy)
            await anyio.sleep(0.2)
    return actual, policy


async def _check_layout(
    admin: AIOKafkaAdminClient, name: str, partitions: int, compacted: bool
) -> None:
    actual, policy = await _settled_layout(admin, name, compacted)
    if actual != partitions:
        raise TopicError(
            f"topic {name!r} exists with {actual} partition(s) but eos needs {partitions}: "
            "delete it or point the setting at another topic"
        )
    if compacted and (policy is None or "compact" not in policy):
        raise TopicError(
            f"topic {name!r} exists with cleanup.policy={policy} but eos needs compact: "
            f"run kafka-configs --alter --entity-type topics --entity-name {name} "
            "--add-config cleanup.policy=compact, or use another topic"
        )
