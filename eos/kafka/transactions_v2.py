"""Transaction version 2 (KIP-890) requests, which aiokafka does not have.

With the cluster feature ``transaction.version`` at 2 or more (the default of a Kafka 4
cluster), a producer may skip AddPartitionsToTxn: a Produce request of version 12 adds
its partitions to the transaction itself, and EndTxn version 5 answers with a new
producer epoch (the coordinator bumps it at the end of every transaction; the next
transaction's batches carry it and start their sequence numbers at 0). A transaction of
a few records then costs two requests instead of three.

:func:`transaction_v2` asks a broker whether the cluster and the broker both support it
(ApiVersions version 3 carries the finalized features). The wire formats follow Kafka's
message definitions (``ProduceRequest.json``, ``EndTxnRequest.json``,
``ApiVersionsResponse.json``, and their responses). Produce and EndTxn, sent with every
transaction, are encoded and decoded by hand (:func:`_encode_produce`,
:func:`_decode_produce_response`): aiokafka's generic schema walk costs more than the rest
of the request; the schemas stay as the definition the unit tests check the codecs
against.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any, Self

from aiokafka.protocol.api import Request, RequestStruct, Response, ResponseHeader_v0
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactBytes,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

PRODUCE, END_TXN, API_VERSIONS = 0, 26, 18
PRODUCE_VERSION, END_TXN_VERSION = 12, 5
"""The request versions that mean "transaction version 2"."""

_NO_TAGS: dict[int, bytes] = {}


# ------------------------------------------------------------------ hand-written codecs


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes((n,)) for n in range(0x80)]


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return _uvarint(len(raw) + 1) + raw


class _Reader:
    """Reads a response body from a position (no copy per field)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, layout: struct.Struct) -> tuple[Any, ...]:
        values = layout.unpack_from(self.data, self.pos)
        self.pos += layout.size
        return values

    def uvarint(self) -> int:
        data, pos = self.data, self.pos
        byte = data[pos]
        pos += 1
        value, shift = byte & 0x7F, 7
        while byte & 0x80:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
        self.pos = pos
        return value

    def string(self) -> str | None:
        length = self.uvarint() - 1
        if length < 0:
            return None
        start = self.pos
        self.pos += length
        return self.data[start : self.pos].decode()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            size = self.uvarint()  # (not ``self.pos += self.uvarint()``: that reads pos first)
            self.pos += size


def _body(data: BytesIO | bytes) -> _Reader:
    return _Reader(data if isinstance(data, bytes) else data.read())


_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION_RESULT = struct.Struct(">ihqqq")
_END_TXN = struct.Struct(">qhB")
_END_TXN_RESULT = struct.Struct(">ihqh")


class _FlexibleHeader:
    """Request header version 2 (what aiokafka's ``RequestHeader_v2`` writes)."""

    __slots__ = ("raw",)

    def __init__(self, request: RequestStruct, correlation_id: int, client_id: str) -> None:
        client = client_id.encode()
        self.raw = (
            _HEADER.pack(request.API_KEY, request.API_VERSION, correlation_id)
            + _INT16.pack(len(client))
            + client
            + b"\x00"
        )

    def encode(self) -> bytes:
        return self.raw


class _ResponseHeader:
    __slots__ = ("correlation_id",)

    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id


class _HandCodedHeader:
    """A flexible request whose header is written and read without the schema walk."""

    FLEXIBLE_VERSION = True

    def build_request_header(self, correlation_id: int, client_id: str) -> Any:
        assert isinstance(self, RequestStruct)
        return _FlexibleHeader(self, correlation_id, client_id)

    def parse_response_header(self, read_buffer: BytesIO | bytes) -> Any:
        assert isinstance(read_buffer, BytesIO)
        raw = read_buffer.read(4)
        (correlation_id,) = _INT32.unpack(raw)
        tags = read_buffer.read(1)
        if tags != b"\x00":  # tagged header fields: none are defined for responses yet
            read_buffer.seek(-1, 1)
            TaggedFields.decode(read_buffer)
        return _ResponseHeader(correlation_id)


# ------------------------------------------------------------------ ApiVersions v3


class ApiVersionsResponse_v3(Response):  # type: ignore[misc]
    API_KEY = API_VERSIONS
    API_VERSION = 3
    SCHEMA = Schema(
        ("error_code", Int16),
        (
            "api_versions",
            CompactArray(
                ("api_key", Int16),
                ("min_version", Int16),
                ("max_version", Int16),
                ("tags", TaggedFields),
            ),
        ),
        ("throttle_time_ms", Int32),
        ("tags", TaggedFields),
    )


class ApiVersionsRequest_v3(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = API_VERSIONS
    API_VERSION = 3
    RESPONSE_TYPE = ApiVersionsResponse_v3
    SCHEMA = Schema(
        ("client_software_name", CompactString("utf-8")),
        ("client_software_version", CompactString("utf-8")),
        ("tags", TaggedFields),
    )

    def parse_response_header(self, read_buffer: BytesIO | bytes) -> Any:
        # ApiVersions answers with header version 0 whatever the request's version.
        return ResponseHeader_v0.decode(read_buffer)


class ApiVersionsV3(Request[ApiVersionsRequest_v3]):  # type: ignore[misc]
    API_KEY = API_VERSIONS
    ALLOW_UNKNOWN_API_VERSION = True

    def build(self, request_struct_class: type[ApiVersionsRequest_v3]) -> ApiVersionsRequest_v3:
        return ApiVersionsRequest_v3("eos", "1", _NO_TAGS)


_FINALIZED_FEATURES_TAG = 2
_FINALIZED_FEATURES = CompactArray(
    ("name", CompactString("utf-8")),
    ("max_version_level", Int16),
    ("min_version_level", Int16),
    ("tags", TaggedFields),
)


def finalized_features(response: ApiVersionsResponse_v3) -> dict[str, int]:
    """Feature name → finalized (maximum) level, from an ApiVersions v3 response."""
    raw = response.tags.get(_FINALIZED_FEATURES_TAG)
    if raw is None:
        return {}
    return {name: level for name, level, _, _ in _FINALIZED_FEATURES.decode(BytesIO(raw)) or []}


def supports_transaction_v2(response: ApiVersionsResponse_v3) -> bool:
    """Whether the cluster finalized ``transaction.version`` ≥ 2 and this broker takes
    Produce v12 and EndTxn v5."""
    if response.error_code != 0:
        return False
    versions = {key: (low, high) for key, low, high, _ in response.api_versions}
    return (
        finalized_features(response).get("transaction.version", 0) >= 2
        and _speaks(versions, PRODUCE, PRODUCE_VERSION)
        and _speaks(versions, END_TXN, END_TXN_VERSION)
    )


def _speaks(versions: dict[int, tuple[int, int]], key: int, version: int) -> bool:
    low, high = versions.get(key, (1, 0))
    return low <= version <= high


# ------------------------------------------------------------------ Produce v12


class ProduceResponse_v12(Response):  # type: ignore[misc]
    API_KEY = PRODUCE
    API_VERSION = PRODUCE_VERSION
    SCHEMA = Schema(
        (
            "topics",
            CompactArray(
                ("topic", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition", Int32),
                        ("error_code", Int16),
                        ("offset", Int64),
                        ("timestamp", Int64),
                        ("log_start_offset", Int64),
                        (
                            "record_errors",
                            CompactArray(
                                ("batch_index", Int32),
                                ("batch_index_error_message", CompactString("utf-8")),
                                ("tags", TaggedFields),
                            ),
                        ),
                        ("error_message", CompactString("utf-8")),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("throttle_time_ms", Int32),
        ("tags", TaggedFields),
    )

    @classmethod
    def decode(cls, data: BytesIO | bytes) -> Self:
        """As the schema reads it, partition tags left out of each partition's tuple
        (the topic's and the response's tags come back empty)."""
        body = _body(data)
        topics = []
        for _ in range(body.uvarint() - 1):
            topic = body.string()
            partitions = []
            for _ in range(body.uvarint() - 1):
                partition, error, offset, timestamp, log_start = body.unpack(_PARTITION_RESULT)
                errors = []
                for _ in range(body.uvarint() - 1):
                    (index,) = body.unpack(_INT32)
                    errors.append((index, body.string(), _NO_TAGS))
                    body.skip_tags()
                message = body.string()
                body.skip_tags()
                partitions.append(
                    (partition, error, offset, timestamp, log_start, errors, message, _NO_TAGS)
                )
            body.skip_tags()
            topics.append((topic, partitions, _NO_TAGS))
        (throttle,) = body.unpack(_INT32)
        return cls(topics, throttle, _NO_TAGS)


class ProduceRequest_v12(_HandCodedHeader, RequestStruct):  # type: ignore[misc]
    API_KEY = PRODUCE
    API_VERSION = PRODUCE_VERSION
    RESPONSE_TYPE = ProduceResponse_v12
    SCHEMA = Schema(
        ("transactional_id", CompactString("utf-8")),
        ("required_acks", Int16),
        ("timeout", Int32),
        (
            "topics",
            CompactArray(
                ("topic", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition", Int32),
                        ("messages", CompactBytes),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )

    def encode(self) -> bytes:
        parts = [
            _compact_string(self.transactional_id),
            _ACKS_TIMEOUT.pack(self.required_acks, self.timeout),
            _uvarint(len(self.topics) + 1),
        ]
        for topic, partitions, _ in self.topics:
            parts += (_compact_string(topic), _uvarint(len(partitions) + 1))
            for partition, records, _ in partitions:
                parts += (_INT32.pack(partition), _uvarint(len(records) + 1), records, b"\x00")
            parts.append(b"\x00")
        parts.append(b"\x00")
        return b"".join(parts)


class ProduceV12(Request[ProduceRequest_v12]):  # type: ignore[misc]
    """A transactional Produce that adds its partitions to the transaction."""

    API_KEY = PRODUCE

    def __init__(
        self,
        transactional_id: str,
        required_acks: int,
        timeout: int,
        topics: list[tuple[str, list[tuple[int, bytes]]]],
    ) -> None:
        self.required_acks = required_acks
        self._args = (transactional_id, required_acks, timeout, topics)

    def build(self, request_struct_class: type[ProduceRequest_v12]) -> ProduceRequest_v12:
        transactional_id, acks, timeout, topics = self._args
        return request_struct_class(
            transactional_id,
            acks,
            timeout,
            [
                (topic, [(p, data, _NO_TAGS) for p, data in partitions], _NO_TAGS)
                for topic, partitions in topics
            ],
            _NO_TAGS,
        )


def partition_results(response: ProduceResponse_v12) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The response's partitions shaped as aiokafka reads a version 8 response:
    (partition, error code, offset, timestamp, log start offset, record errors, message)."""
    return [(topic, [p[:7] for p in partitions]) for topic, partitions, _ in response.topics]


# ------------------------------------------------------------------ EndTxn v5


class EndTxnResponse_v5(Response):  # type: ignore[misc]
    API_KEY = END_TXN
    API_VERSION = END_TXN_VERSION
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
        ("tags", TaggedFields),
    )

    @classmethod
    def decode(cls, data: BytesIO | bytes) -> Self:
        body = _body(data)
        throttle, error, producer_id, epoch = body.unpack(_END_TXN_RESULT)
        return cls(throttle, error, producer_id, epoch, _NO_TAGS)


class EndTxnRequest_v5(_HandCodedHeader, RequestStruct):  # type: ignore[misc]
    API_KEY = END_TXN
    API_VERSION = END_TXN_VERSION
    RESPONSE_TYPE = EndTxnResponse_v5
    SCHEMA = Schema(
        ("transactional_id", CompactString("utf-8")),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
        ("transaction_result", Boolean),
        ("tags", TaggedFields),
    )

    def encode(self) -> bytes:
        return (
            _compact_string(self.transactional_id)
            + _END_TXN.pack(self.producer_id, self.producer_epoch, bool(self.transaction_result))
            + b"\x00"
        )


class EndTxnV5(Request[EndTxnRequest_v5]):  # type: ignore[misc]
    """EndTxn that bumps the producer epoch (the response carries the new one)."""

    API_KEY = END_TXN

    def __init__(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        self._args = (transactional_id, producer_id, epoch, commit)

    def build(self, request_struct_class: type[EndTxnRequest_v5]) -> EndTxnRequest_v5:
        return request_struct_class(*self._args, _NO_TAGS)
