"""What a principal may do, as the brokers answer it (KIP-430's authorized operations).

Metadata version 8 returns, for each topic asked for, the operations the asking principal
is allowed (``topic_authorized_operations``); DescribeCluster version 0 does it for the
Cluster (KRaft brokers leave Metadata's cluster field empty), DescribeGroups version 3 for a
group. aiokafka has none of them with those fields (its DescribeGroups v3 request reads the
answer as v2), so they are declared here, after Kafka's ``MetadataRequest.json``,
``DescribeClusterRequest.json``, ``DescribeGroupsRequest.json`` and their responses.

:func:`authorized_operations` answers with the operation names of
:data:`eos.kafka.acls.OPERATIONS`, implied ones included (the brokers include them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiokafka import errors as kerrors
from aiokafka.client import CoordinationType
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Array,
    Boolean,
    Bytes,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    String,
    TaggedFields,
)

from eos.kafka.acls import OPERATIONS
from eos.kafka.clients import ClientConfig, make_client

UNKNOWN_TOPIC: Final = 3
NOT_REQUESTED: Final = -(2**31)
"""The value of an authorized-operations field that was not asked for (or is unknown)."""


class MetadataResponse_v8(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 8
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("brokers", Array(("node_id", Int32), ("host", String("utf-8")), ("port", Int32),
                          ("rack", String("utf-8")))),
        ("cluster_id", String("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            Array(
                ("error_code", Int16),
                ("name", String("utf-8")),
                ("is_internal", Boolean),
                ("partitions", Array(("error_code", Int16), ("partition_index", Int32),
                                     ("leader_id", Int32), ("leader_epoch", Int32),
                                     ("replica_nodes", Array(Int32)),
                                     ("isr_nodes", Array(Int32)),
                                     ("offline_replicas", Array(Int32)))),
                ("topic_authorized_operations", Int32),
            ),
        ),
        ("cluster_authorized_operations", Int32),
    )  # fmt: skip


class MetadataRequest_v8(RequestStruct):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 8
    RESPONSE_TYPE = MetadataResponse_v8
    SCHEMA = Schema(
        ("topics", Array(String("utf-8"))),
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
    )


class AuthorizedMetadata(Request[MetadataRequest_v8]):  # type: ignore[misc]
    """Metadata of ``topics`` with the asking principal's operations on them and on the
    Cluster; never creates a topic."""

    API_KEY = 3

    def __init__(self, topics: Sequence[str] | None) -> None:
        self.topics = None if topics is None else list(topics)
        """None: every topic."""

    def build(self, request_struct_class: type[MetadataRequest_v8]) -> MetadataRequest_v8:
        return request_struct_class(self.topics, False, False, True)


class DescribeGroupsResponse_v3(Response):  # type: ignore[misc]
    API_KEY = 15
    API_VERSION = 3
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            Array(
                ("error_code", Int16),
                ("group", String("utf-8")),
                ("state", String("utf-8")),
                ("protocol_type", String("utf-8")),
                ("protocol", String("utf-8")),
                ("members", Array(("member_id", String("utf-8")),
                                  ("client_id", String("utf-8")),
                                  ("client_host", String("utf-8")),
                                  ("member_metadata", Bytes),
                                  ("member_assignment", Bytes))),
                ("authorized_operations", Int32),
            ),
        ),
    )  # fmt: skip


class DescribeGroupsRequest_v3(RequestStruct):  # type: ignore[misc]
    API_KEY = 15
    API_VERSION = 3
    RESPONSE_TYPE = DescribeGroupsResponse_v3
    SCHEMA = Schema(("groups", Array(String("utf-8"))), ("include_authorized_operations", Boolean))


class AuthorizedGroup(Request[DescribeGroupsRequest_v3]):  # type: ignore[misc]
    API_KEY = 15

    def __init__(self, group: str) -> None:
        self.group = group

    def build(
        self, request_struct_class: type[DescribeGroupsRequest_v3]
    ) -> DescribeGroupsRequest_v3:
        return request_struct_class([self.group], True)


class DescribeClusterResponse_v0(Response):  # type: ignore[misc]
    API_KEY = 60
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", CompactString("utf-8")),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        ("brokers", CompactArray(("broker_id", Int32), ("host", CompactString("utf-8")),
                                 ("port", Int32), ("rack", CompactString("utf-8")),
                                 ("tags", TaggedFields))),
        ("cluster_authorized_operations", Int32),
        ("tags", TaggedFields),
    )  # fmt: skip


class DescribeClusterRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 60
    API_VERSION = 0
    RESPONSE_TYPE = DescribeClusterResponse_v0
    SCHEMA = Schema(("include_cluster_authorized_operations", Boolean), ("tags", TaggedFields))


class AuthorizedCluster(Request[DescribeClusterRequest_v0]):  # type: ignore[misc]
    API_KEY = 60

    def build(
        self, request_struct_class: type[DescribeClusterRequest_v0]
    ) -> DescribeClusterRequest_v0:
        return request_struct_class(True, {})


def operations(bits: int) -> frozenset[str]:
    """The operation names set in an authorized-operations bit field."""
    if bits == NOT_REQUESTED:
        return frozenset()
    return frozenset(name for name, code in OPERATIONS.items() if bits & (1 << code))


@dataclass
class Authorized:
    """Operations per (resource type, name); topics that do not exist are in ``missing``."""

    operations: dict[tuple[str, str], frozenset[str] | None] = field(default_factory=dict)
    """None: the brokers could not say (e.g. the group's coordinator is not ready yet)."""
    missing: set[str] = field(default_factory=set)

    def allowed(self, resource: str, name: str) -> frozenset[str] | None:
        return self.operations.get((resource, name), frozenset())


async def authorized_operations(
    config: ClientConfig, topics: Iterable[str] = (), group: str | None = None
) -> Authorized:
    """What the principal of ``config`` may do on ``topics``, ``group`` and the Cluster."""
    found = Authorized()
    client = make_client(config, client_id="eos-access-check")
    try:  # closed also when bootstrapping fails half-way
        await client.bootstrap()
        node = client.get_random_node()
        metadata: Any = await client.send(node, AuthorizedMetadata(sorted(set(topics))))
        cluster: Any = await client.send(node, AuthorizedCluster())
        found.operations[("Cluster", "kafka-cluster")] = operations(
            cluster.cluster_authorized_operations
        )
        for error, name, _, _, bits in metadata.topics:
            if error == UNKNOWN_TOPIC:
                found.missing.add(name)
            found.operations[("Topic", name)] = operations(bits)
        if group is not None:
            found.operations[("Group", group)] = await _group_operations(client, group)
    finally:
        await client.close()
    return found


async def _group_operations(client: Any, group: str) -> frozenset[str] | None:
    try:
        node = await client.coordinator_lookup(CoordinationType.GROUP, group)
    except kerrors.GroupAuthorizationFailedError:
        return frozenset()  # not even Describe
    except kerrors.KafkaError:
        return None  # no coordinator yet (a new cluster): the group is not checked
    described: Any = await client.send(node, AuthorizedGroup(group))
    for error, _, _, _, _, _, bits in described.groups:
        if error == kerrors.GroupAuthorizationFailedError.errno:
            return frozenset()
        return operations(bits) if bits != NOT_REQUESTED else None
    return None
