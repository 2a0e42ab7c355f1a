"""The hand-written codecs of transaction version 2's requests read and write what the
request schemas (Kafka's message definitions) define; EndTxn's answers as the task reads
them."""

from __future__ import annotations

from io import BytesIO
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import errors as kerrors
from aiokafka.producer.transaction_manager import TransactionResult
from aiokafka.protocol.api import RequestHeader_v2
from aiokafka.protocol.types import CompactArray, CompactString, Int16, Int32, UnsignedVarInt32

from eos.kafka import aiokafka_private as private
from eos.kafka import transactions_v2 as v2
from eos.kafka.aiokafka_private import _ProduceV2Handler

RECORDS = bytes(range(256)) * 3  # longer than 127 bytes: a two-byte length


def _tags(fields: dict[int, bytes]) -> bytes:
    """Tagged fields as Kafka writes them (aiokafka's encoder leaves out the sizes)."""
    out = UnsignedVarInt32.encode(len(fields))
    for tag, raw in sorted(fields.items()):
        out += UnsignedVarInt32.encode(tag) + UnsignedVarInt32.encode(len(raw)) + raw
    return bytes(out)


def test_produce_request_as_the_schema_writes_it() -> None:
    topics = [("out", [(0, RECORDS), (7, b"x")]), ("é-topic", [(300, b"")])]
    request = v2.ProduceV12("txn-é", -1, 30000, topics).build(v2.ProduceRequest_v12)
    schema_values = [request.__dict__[name] for name in request.SCHEMA.names]
    assert request.encode() == request.SCHEMA.encode(schema_values)


def test_end_txn_request_as_the_schema_writes_it() -> None:
    for commit in (True, False):
        request = v2.EndTxnV5("txn", 2**40 + 3, 32766, commit).build(v2.EndTxnRequest_v5)
        schema_values = [request.__dict__[name] for name in request.SCHEMA.names]
        assert request.encode() == request.SCHEMA.encode(schema_values)


def test_flexible_header_as_aiokafka_writes_it() -> None:
    request = v2.EndTxnV5("txn", 1, 2, True).build(v2.EndTxnRequest_v5)
    header = request.build_request_header(correlation_id=123456, client_id="eos-worker")
    assert header.encode() == RequestHeader_v2(request, 123456, "eos-worker").encode()


def test_produce_response_read_with_tags_skipped() -> None:
    leader = Int32.encode(2) + Int32.encode(9) + b"\x00"  # CurrentLeader (tag 0)
    partition_ok = (
        Int32.encode(0) + Int16.encode(0)
        + (41).to_bytes(8, "big") + (-1).to_bytes(8, "big", signed=True)
        + (5).to_bytes(8, "big") + UnsignedVarInt32.encode(1) + b"\x00" + b"\x00"
    )  # fmt: skip
    partition_failed = (
        Int32.encode(3) + Int16.encode(10)
        + (-1).to_bytes(8, "big", signed=True) + (-1).to_bytes(8, "big", signed=True)
        + (-1).to_bytes(8, "big", signed=True)
        + UnsignedVarInt32.encode(2) + Int32.encode(4) + CompactString().encode("too big")
        + b"\x00" + CompactString().encode("batch too large") + _tags({0: leader})
    )  # fmt: skip
    body = (
        UnsignedVarInt32.encode(2)
        + CompactString().encode("out") + UnsignedVarInt32.encode(3)
        + partition_ok + partition_failed + _tags({})
        + Int32.encode(17) + _tags({0: b"\x01"})
    )  # fmt: skip
    response = v2.ProduceResponse_v12.decode(BytesIO(body))
    assert v2.partition_results(response) == [
        (
            "out",
            [
                (0, 0, 41, -1, 5, [], None),
                (3, 10, -1, -1, -1, [(4, "too big", {})], "batch too large"),
            ],
        )
    ]
    assert response.throttle_time_ms == 17


def test_end_txn_response_read() -> None:
    body = Int32.encode(0) + Int16.encode(0) + (77).to_bytes(8, "big") + Int16.encode(5) + b"\x00"
    response = v2.EndTxnResponse_v5.decode(BytesIO(body))
    assert (response.error_code, response.producer_id, response.producer_epoch) == (0, 77, 5)


def _api_versions(keys: list[tuple[int, int, int]], features: dict[str, int]) -> BytesIO:
    finalized = CompactArray(
        ("name", CompactString()), ("max", Int16), ("min", Int16), ("tags", _Tags)
    ).encode([(name, level, level, b"") for name, level in features.items()])
    body = (
        Int16.encode(0)
        + UnsignedVarInt32.encode(len(keys) + 1)
        + b"".join(Int16.encode(k) + Int16.encode(a) + Int16.encode(b) + b"\0" for k, a, b in keys)
        + Int32.encode(0)
        + _tags({1: (3).to_bytes(8, "big"), 2: finalized})
    )  # fmt: skip
    return BytesIO(body)


class _Tags:
    @staticmethod
    def encode(_: bytes) -> bytes:
        return b"\x00"


def test_transaction_version_2_needs_the_feature_and_both_request_versions() -> None:
    both = [(0, 3, 13), (26, 0, 5), (18, 0, 4)]

    def supports(keys: list[tuple[int, int, int]], features: dict[str, int]) -> bool:
        response = v2.ApiVersionsResponse_v3.decode(_api_versions(keys, features))
        return v2.supports_transaction_v2(response)

    assert supports(both, {"transaction.version": 2, "metadata.version": 27})
    assert not supports(both, {"transaction.version": 1})
    assert not supports(both, {})
    assert not supports([(0, 3, 11), (26, 0, 5)], {"transaction.version": 2})
    assert not supports([(0, 3, 13), (26, 0, 4)], {"transaction.version": 2})


def test_concurrent_transactions_on_a_produce_is_retried_other_errors_as_aiokafka_says() -> None:
    """CONCURRENT_TRANSACTIONS answers a version 12 Produce while the previous transaction's
    markers are being written (seen after a broker restart): retried, like the Java client.
    What aiokafka retries stays retried; what it calls fatal stays fatal."""

    class _Sender:  # what the handler reads of aiokafka's sender
        _retry_backoff = 0.1
        client = None
        _txn_manager = object()

    handler = _ProduceV2Handler(_Sender(), {})
    assert handler._can_retry(kerrors.ConcurrentTransactions(), batch=None)
    assert handler._can_retry(kerrors.NotLeaderForPartitionError(), batch=None)
    assert not handler._can_retry(kerrors.MessageSizeTooLargeError(), batch=None)
    assert not handler._can_retry(kerrors.InvalidProducerEpoch(), batch=None)


class _EndTxnTxn:
    """What the EndTxn handlers read and call of aiokafka's transaction manager."""

    transactional_id, producer_id, producer_epoch = "txn", 7, 3

    def __init__(self) -> None:
        self.completed = 0
        self._pid_and_epoch: Any = None
        self._sequence_numbers: dict[Any, int] = {}

    def complete_transaction(self) -> None:
        self.completed += 1


class _EndTxnSender:
    """A transaction coordinator answering EndTxn with the scripted error codes."""

    _retry_backoff = 0.0

    def __init__(self, answers: list[int]) -> None:
        self._txn_manager = _EndTxnTxn()
        self.answers = answers
        self.asked = 0
        self.client = self

    async def _find_coordinator(self, kind: Any, txn_id: str) -> int:
        return 1

    async def send(self, node: int, request: Any, group: Any = None) -> Any:
        self.asked += 1
        code = self.answers.pop(0)
        return SimpleNamespace(error_code=code, producer_id=7, producer_epoch=4)

    def _coordinator_dead(self, kind: Any) -> None:
        pass


@pytest.mark.parametrize("version2", [False, True])
async def test_an_end_txn_answered_unclearly_during_a_fence_is_asked_again(version2: bool) -> None:
    """The coordinator answers UNKNOWN_SERVER_ERROR to an EndTxn that meets an outside
    fence (InitProducerId) midway, INVALID_TXN_STATE once the fence aborted the
    transaction; asked again it says fenced, and the task is fenced (not failed). Asked
    again and done, the commit is done; always unknown, it fails."""
    fenced = private.PRODUCER_FENCED if version2 else kerrors.InvalidProducerEpoch.errno
    unknown = kerrors.UnknownError.errno
    commit: Any = TransactionResult.COMMIT

    sender = _EndTxnSender([unknown, fenced])
    with pytest.raises(kerrors.ProducerFenced):
        await private.send_end_txn(sender, commit, version2=version2)
    assert sender.asked == 2

    # the fence aborted the transaction but the id has no new epoch yet
    invalid_state = kerrors.InvalidTxnState.errno
    sender = _EndTxnSender([invalid_state, invalid_state, fenced])
    with pytest.raises(kerrors.ProducerFenced):
        await private.send_end_txn(sender, commit, version2=version2)
    assert sender.asked == 3

    sender = _EndTxnSender([unknown, unknown, 0])
    await private.send_end_txn(sender, commit, version2=version2)
    assert (sender.asked, sender._txn_manager.completed) == (3, 1)

    sender = _EndTxnSender([unknown] * (private.UNCLEAR_END_TXN_RETRIES + 1))
    with pytest.raises(kerrors.UnknownError):
        await private.send_end_txn(sender, commit, version2=version2)
    assert (sender.asked, sender._txn_manager.completed) == (6, 0)
