"""The transaction admin requests write and read, byte for byte, what Kafka's message
definitions (DescribeProducers v0, ListTransactions v1, DescribeTransactions v0,
WriteTxnMarkers v1 and their responses) define: each expected body below is built field by
field from those JSON schemas."""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

import pytest
from aiokafka.protocol.api import RequestHeader_v2

from eos.kafka import txn_requests as t
from eos.runtime.lso_monitor import StuckTracker
from services.transactions_cli import print_table

TAGS = b"\x00"


def uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return uv(len(raw) + 1) + raw


def array(items: list[bytes]) -> bytes:
    return uv(len(items) + 1) + b"".join(items)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def encoded(request: Any, struct_class: type) -> bytes:
    return bytes(request.build(struct_class).encode())


def test_describe_producers() -> None:
    body = encoded(t.DescribeProducers({"out": [2, 0]}), t.DescribeProducersRequest_v0)
    assert body == array([string("out") + array([i32(0), i32(2)]) + TAGS]) + TAGS
    producer = i64(7) + i32(3) + i32(41) + i64(1_700_000_000_000) + i32(-1) + i64(120) + TAGS
    partition = i32(0) + i16(0) + string(None) + array([producer]) + TAGS
    response = t.DescribeProducersResponse_v0.decode(
        BytesIO(i32(0) + array([string("out") + array([partition]) + TAGS]) + TAGS)
    )
    (name, partitions, _), = response.topics  # fmt: skip
    assert name == "out"
    assert partitions[0][:4] == (0, 0, None, [(7, 3, 41, 1_700_000_000_000, -1, 120, {})])


def test_list_transactions() -> None:
    body = encoded(t.ListTransactions((), [7, 9], 60_000), t.ListTransactionsRequest_v1)
    assert body == array([]) + array([i64(7), i64(9)]) + i64(60_000) + TAGS
    state = string("G-c-0") + i64(7) + string("Ongoing") + TAGS
    response = t.ListTransactionsResponse_v1.decode(
        BytesIO(i32(0) + i16(0) + array([]) + array([state]) + TAGS)
    )
    assert response.transaction_states == [("G-c-0", 7, "Ongoing", {})]


def test_describe_transactions() -> None:
    body = encoded(t.DescribeTransactions(["G-c-0"]), t.DescribeTransactionsRequest_v0)
    assert body == array([string("G-c-0")]) + TAGS
    topics = array([string("out") + array([i32(0), i32(3)]) + TAGS])
    state = (
        i16(0) + string("G-c-0") + string("Ongoing") + i32(900_000) + i64(1_700_000_000_000)
        + i64(7) + i16(2) + topics + TAGS
    )  # fmt: skip
    response = t.DescribeTransactionsResponse_v0.decode(BytesIO(i32(5) + array([state]) + TAGS))
    error, tid, name, timeout, start, pid, epoch, parts, _ = response.transaction_states[0]
    assert (error, tid, name, timeout, start, pid, epoch) == (
        0, "G-c-0", "Ongoing", 900_000, 1_700_000_000_000, 7, 2
    )  # fmt: skip
    assert parts == [("out", [0, 3], {})]


def test_write_txn_markers() -> None:
    request = t.WriteTxnMarkers(7, 2, 0, {"out": [3]})
    body = encoded(request, t.WriteTxnMarkersRequest_v1)
    marker = i64(7) + i16(2) + b"\x00" + array([string("out") + array([i32(3)]) + TAGS])
    assert body == array([marker + i32(0) + TAGS]) + TAGS
    struct_ = request.build(t.WriteTxnMarkersRequest_v1)
    header = struct_.build_request_header(correlation_id=9, client_id="eos")
    assert header.encode() == RequestHeader_v2(struct_, 9, "eos").encode()  # flexible header
    result = i64(7) + array([string("out") + array([i32(3) + i16(0) + TAGS]) + TAGS]) + TAGS
    response = t.WriteTxnMarkersResponse_v1.decode(BytesIO(array([result]) + TAGS))
    assert response.markers == [(7, [("out", [(3, 0, {})], {})], {})]


def test_stuck_time_grows_only_while_the_lso_stands_still_behind() -> None:
    tracker = StuckTracker()
    key = ("out", 0)
    assert tracker.update(10.0, {key: (5, 5)}) == {key: (0, 0.0)}
    assert tracker.update(11.0, {key: (9, 6)}) == {key: (3, 0.0)}  # behind: it just moved
    assert tracker.update(14.0, {key: (20, 6)}) == {key: (14, 3.0)}  # stuck at 6
    assert tracker.update(15.0, {key: (21, 21)}) == {key: (0, 0.0)}  # the transaction ended
    assert tracker.update(16.0, {}) == {}
    assert tracker.watched == {}


def test_tables_as_kafka_prints_them(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(["ProducerId", "Epoch"], [["7", "12"]])
    out = capsys.readouterr().out
    assert out == "ProducerId\tEpoch\t\n7         \t12   \t\n"
