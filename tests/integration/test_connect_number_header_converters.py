"""Connect's number converters and its SimpleHeaderConverter, byte for byte against
Kafka's own classes (4.3.1, from Maven Central): each number converter writes what Kafka's
serializer of its type writes; header text is read back to the schema Connect's
``Values.parseString`` gives it and written again as Connect writes it."""

from __future__ import annotations

import base64
import math
import struct
from typing import Any

import pytest

from eos.api.schema import Schema
from eos.converters import make_converter, make_header_converter
from tests.connect_java import connect_classpath, run_java

pytestmark = pytest.mark.integration

NUMBERS: list[tuple[str, Any]] = [
    ("Short", 0), ("Short", -32768), ("Short", 32767), ("Short", -2),
    ("Integer", 1), ("Integer", -(2**31)), ("Integer", 2**31 - 1), ("Integer", 70000),
    ("Long", 0), ("Long", -(2**63)), ("Long", 2**63 - 1), ("Long", -(2**40)),
    ("Float", 0.1), ("Float", -3.5), ("Float", 3.4028234663852886e38), ("Float", 1e-45),
    ("Float", math.inf), ("Float", -0.0),
    ("Double", 12345.678), ("Double", 5e-324), ("Double", -math.inf), ("Double", 1.5e300),
    ("Boolean", True), ("Boolean", False),
]  # fmt: skip

HEADER_TEXTS = [
    "true", "False", "42", "-129", "40000", "3000000000", "99999999999999999999", "1.5",
    "0.1", "1e3", "3.4e39", "1.0", "abc", "", " 12 ", "[1,2,3]", '[1,"a"]', '{"a":1}',
    '{"a":1,"b":"x"}', "2020-01-02", "12:34:56.789Z", "2020-01-02T03:04:05.678Z",
    '"quoted"', "[]", "{}", "NaN", "1.00", "-0", "+5", "0x10", "[1, 2.5]", "hello world",
    "[true,false]", "1e20", "12345678901234567890.5", "1e39", "99999999999999999999.0",
    "3.5e38", "1e-50", "1e400", "0.5e1", "2.50", '["a b", "c"]', "[[1,2],[3]]",
    '{"k":[1,2]}', "é ✓",
]  # fmt: skip


def _java_text(java: str, value: Any) -> str:
    if java == "Boolean":
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _describe(schema: Schema) -> str:
    out = schema.type.name + (f"/{schema.name}" if schema.name else "")
    if schema.type.name == "ARRAY":
        inner = schema.value_schema
        out += f"<{_describe(inner) if inner else ''}>"
    elif schema.type.name == "MAP":
        keys, values = schema.key_schema, schema.value_schema
        out += f"<{_describe(keys) if keys else ''},{_describe(values) if values else ''}>"
    return out


@pytest.fixture(scope="session")
def classpath() -> str:
    return connect_classpath()


def test_number_converters_write_what_kafkas_serializers_write(classpath: str) -> None:
    lines = "".join(f"number {java} {_java_text(java, v)}\n" for java, v in NUMBERS)
    theirs = [base64.b64decode(line) for line in run_java(
        classpath, "ConnectHeaders.java", lines).splitlines()]  # fmt: skip
    for (java, value), expected in zip(NUMBERS, theirs, strict=True):
        converter: Any = make_converter(f"org.apache.kafka.connect.converters.{java}Converter")
        assert converter.convert("t", value) == expected, (java, value)
        if java == "Float":
            value = struct.unpack(">f", struct.pack(">f", value))[0]
        assert converter.reader()(expected) == value


def test_simple_header_converter_reads_and_writes_header_text_as_connect_does(
    classpath: str,
) -> None:
    texts = [t.encode() for t in HEADER_TEXTS]
    lines = "".join(f"header {base64.b64encode(t).decode()}\n" for t in texts)
    theirs = run_java(classpath, "ConnectHeaders.java", lines).splitlines()
    converter = make_header_converter("org.apache.kafka.connect.storage.SimpleHeaderConverter")
    for text, line in zip(texts, theirs, strict=True):
        described, written = line.split(" ")
        schema, value = converter.to_connect_header("t", "h", text)
        assert _describe(schema) == described, text
        again = converter.from_connect_header("t", "h", schema, value)
        assert again == base64.b64decode(written), text
