"""The admin requests about transactions (KIP-664), which aiokafka does not have.

- DescribeProducers v0 (API key 61, to a partition's leader): the active producers of a
  partition, with the start offset of each one's open transaction;
- ListTransactions v1 (66, to every broker): the transactional ids each coordinator holds,
  filtered by state, producer id and duration;
- DescribeTransactions v0 (65, to the id's coordinator): a transaction's state, timeout,
  start time and partitions;
- WriteTxnMarkers v1 (27, to a partition's leader): writes a commit or abort marker; what
  ``kafka-transactions.sh abort`` sends to end a hanging transaction (cluster-admin rights:
  ClusterAction on the Cluster).

The schemas follow Kafka's message definitions (``DescribeProducersRequest.json``,
``ListTransactionsRequest.json``, ``DescribeTransactionsRequest.json``,
``WriteTxnMarkersRequest.json`` and their responses); all four are flexible versions.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

DESCRIBE_PRODUCERS, LIST_TRANSACTIONS, DESCRIBE_TRANSACTIONS, WRITE_TXN_MARKERS = 61, 66, 65, 27
_TAGS = ("tags", TaggedFields)
_NO_TAGS: dict[int, bytes] = {}
_STRING = CompactString("utf-8")


class _Flexible(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = -1
    API_VERSION = -1
    RESPONSE_TYPE = Response
    SCHEMA = Schema()


# ------------------------------------------------------------------ DescribeProducers v0


class DescribeProducersResponse_v0(Response):  # type: ignore[misc]
    API_KEY = DESCRIBE_PRODUCERS
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("topics", CompactArray(
            ("name", _STRING),
            ("partitions", CompactArray(
                ("partition_index", Int32),
                ("error_code", Int16),
                ("error_message", _STRING),
                ("active_producers", CompactArray(
                    ("producer_id", Int64),
                    ("producer_epoch", Int32),
                    ("last_sequence", Int32),
                    ("last_timestamp", Int64),
                    ("coordinator_epoch", Int32),
                    ("current_txn_start_offset", Int64),
                    _TAGS,
                )),
                _TAGS,
            )),
            _TAGS,
        )),
        _TAGS,
    )  # fmt: skip


class DescribeProducersRequest_v0(_Flexible):
    API_KEY = DESCRIBE_PRODUCERS
    API_VERSION = 0
    RESPONSE_TYPE = DescribeProducersResponse_v0
    SCHEMA = Schema(
        ("topics", CompactArray(("name", _STRING), ("partition_indexes", CompactArray(Int32)),
                                _TAGS)),
        _TAGS,
    )  # fmt: skip


class DescribeProducers(Request[DescribeProducersRequest_v0]):  # type: ignore[misc]
    API_KEY = DESCRIBE_PRODUCERS

    def __init__(self, partitions: dict[str, list[int]]) -> None:
        self.partitions = partitions

    def build(
        self, request_struct_class: type[DescribeProducersRequest_v0]
    ) -> DescribeProducersRequest_v0:
        return request_struct_class(
            [(topic, sorted(ids), _NO_TAGS) for topic, ids in sorted(self.partitions.items())],
            _NO_TAGS,
        )


# ------------------------------------------------------------------ ListTransactions v1


class ListTransactionsResponse_v1(Response):  # type: ignore[misc]
    API_KEY = LIST_TRANSACTIONS
    API_VERSION = 1
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("unknown_state_filters", CompactArray(_STRING)),
        ("transaction_states", CompactArray(
            ("transactional_id", _STRING),
            ("producer_id", Int64),
            ("transaction_state", _STRING),
            _TAGS,
        )),
        _TAGS,
    )  # fmt: skip


class ListTransactionsRequest_v1(_Flexible):
    API_KEY = LIST_TRANSACTIONS
    API_VERSION = 1
    RESPONSE_TYPE = ListTransactionsResponse_v1
    SCHEMA = Schema(
        ("state_filters", CompactArray(_STRING)),
        ("producer_id_filters", CompactArray(Int64)),
        ("duration_filter", Int64),
        _TAGS,
    )


class ListTransactions(Request[ListTransactionsRequest_v1]):  # type: ignore[misc]
    API_KEY = LIST_TRANSACTIONS

    def __init__(
        self, states: Sequence[str] = (), producer_ids: Sequence[int] = (), duration_ms: int = -1
    ) -> None:
        self.args = (list(states), list(producer_ids), duration_ms)

    def build(
        self, request_struct_class: type[ListTransactionsRequest_v1]
    ) -> ListTransactionsRequest_v1:
        return request_struct_class(*self.args, _NO_TAGS)


# ------------------------------------------------------------------ DescribeTransactions v0


class DescribeTransactionsResponse_v0(Response):  # type: ignore[misc]
    API_KEY = DESCRIBE_TRANSACTIONS
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("transaction_states", CompactArray(
            ("error_code", Int16),
            ("transactional_id", _STRING),
            ("transaction_state", _STRING),
            ("transaction_timeout_ms", Int32),
            ("transaction_start_time_ms", Int64),
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("topics", CompactArray(("topic", _STRING), ("partitions", CompactArray(Int32)),
                                    _TAGS)),
            _TAGS,
        )),
        _TAGS,
    )  # fmt: skip


class DescribeTransactionsRequest_v0(_Flexible):
    API_KEY = DESCRIBE_TRANSACTIONS
    API_VERSION = 0
    RESPONSE_TYPE = DescribeTransactionsResponse_v0
    SCHEMA = Schema(("transactional_ids", CompactArray(_STRING)), _TAGS)


class DescribeTransactions(Request[DescribeTransactionsRequest_v0]):  # type: ignore[misc]
    API_KEY = DESCRIBE_TRANSACTIONS

    def __init__(self, transactional_ids: list[str]) -> None:
        self.ids = list(transactional_ids)

    def build(
        self, request_struct_class: type[DescribeTransactionsRequest_v0]
    ) -> DescribeTransactionsRequest_v0:
        return request_struct_class(self.ids, _NO_TAGS)


# ------------------------------------------------------------------ WriteTxnMarkers v1


class WriteTxnMarkersResponse_v1(Response):  # type: ignore[misc]
    API_KEY = WRITE_TXN_MARKERS
    API_VERSION = 1
    SCHEMA = Schema(
        ("markers", CompactArray(
            ("producer_id", Int64),
            ("topics", CompactArray(
                ("name", _STRING),
                ("partitions", CompactArray(("partition_index", Int32), ("error_code", Int16),
                                            _TAGS)),
                _TAGS,
            )),
            _TAGS,
        )),
        _TAGS,
    )  # fmt: skip


class WriteTxnMarkersRequest_v1(_Flexible):
    API_KEY = WRITE_TXN_MARKERS
    API_VERSION = 1
    RESPONSE_TYPE = WriteTxnMarkersResponse_v1
    SCHEMA = Schema(
        ("markers", CompactArray(
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("transaction_result", Boolean),
            ("topics", CompactArray(("name", _STRING), ("partition_indexes", CompactArray(Int32)),
                                    _TAGS)),
            ("coordinator_epoch", Int32),
            _TAGS,
        )),
        _TAGS,
    )  # fmt: skip


class WriteTxnMarkers(Request[WriteTxnMarkersRequest_v1]):  # type: ignore[misc]
    """One marker: ``commit`` False aborts the producer's transaction on ``partitions``."""

    API_KEY = WRITE_TXN_MARKERS

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        partitions: dict[str, list[int]],
        *,
        commit: bool = False,
    ) -> None:
        self.args = (producer_id, producer_epoch, commit, partitions, coordinator_epoch)

    def build(
        self, request_struct_class: type[WriteTxnMarkersRequest_v1]
    ) -> WriteTxnMarkersRequest_v1:
        producer_id, epoch, commit, partitions, coordinator_epoch = self.args
        topics = [(t, sorted(p), _NO_TAGS) for t, p in sorted(partitions.items())]
        return request_struct_class(
            [(producer_id, epoch, commit, topics, coordinator_epoch, _NO_TAGS)], _NO_TAGS
        )
