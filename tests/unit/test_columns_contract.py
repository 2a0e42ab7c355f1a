"""The columns' one rule, through every converter that can refuse a value (``string``
writes any value as its text): a typed block that cannot stay columnar (here a row
whose value its schema does not allow) becomes records that join the record
pipeline, so the good rows are written with the bytes they would have one by one and the
bad row alone is skipped (``errors.tolerance=all``) or named (``none``). And the record
path's result is a frozen value per segment: preparing the next segment leaves what the
last one found alone."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest
import structlog

from eos.api import RecordBlock, SourceRecord
from eos.api.schema import STRING_SCHEMA, SchemaBuilder
from eos.config.error_handling import ErrorHandling
from eos.converters import Converter, make_converter
from eos.converters.wire_format import RegistryConverter, Writer
from eos.runtime.task.exactly_once_task import ExactlyOnceTask
from eos.runtime.task.record_path import RecordPath
from eos.runtime.task.source_task import TaskSpec
from eos.state import State
from tests.unit.task_fakes import PARTITION, TOPIC, Batches, Harness

SPEC = TaskSpec("c", 0, 1, {})
ROW = SchemaBuilder.struct().name("Row").field("s", STRING_SCHEMA).build()
HEADER = b"\x00\x00\x00\x00\x07"
CONVERTERS = [
    "json",
    "org.apache.kafka.connect.json.JsonConverter",
    "io.confluent.connect.avro.AvroConverter",
    "io.confluent.connect.protobuf.ProtobufConverter",
    "io.confluent.connect.json.JsonSchemaConverter",
]


def converter(name: str) -> Converter:
    """The converter called ``name``; a registry one writes behind a fixed header, its
    schemas known (the registry's part is tested against a real one elsewhere)."""
    made = make_converter(name, {"schema.registry.url": "http://127.0.0.1:1"})
    if isinstance(made, RegistryConverter):
        registry: Any = made

        def writer(topic: str, schema: Any) -> Writer:
            translated = registry.translate(schema)
            return Writer(HEADER, registry.encoder(translated, None), translated)

        registry.writer = writer
        registry.known = lambda topic, schema: True
        registry.probe = lambda: None
    return made


def block(values: list[Any]) -> RecordBlock:
    return RecordBlock(PARTITION, {"n": 1}, TOPIC, values, value_schema=ROW, encoded=False)


def errors(tolerance: str) -> ErrorHandling:
    return ErrorHandling.of({"errors.tolerance": tolerance})


async def write(h: Harness, values: Converter, batch: list[Any], tolerance: str) -> None:
    source = Batches(batch)
    deps = h.deps(value_converter=values, errors=errors(tolerance))
    runner = ExactlyOnceTask(SPEC, deps, source.task_class()())
    source.stop = runner.request_stop
    with anyio.fail_after(5):
        await runner.run()


@pytest.mark.parametrize("name", CONVERTERS)
async def test_a_block_with_a_bad_row_becomes_records_and_only_that_row_is_skipped(
    name: str,
) -> None:
    h, values = Harness(), converter(name)
    await write(h, values, [block([{"s": "a"}, {"s": 5}, {"s": "c"}])], "all")
    one_by_one: Any = values
    expected = [one_by_one.from_connect_data(TOPIC, ROW, {"s": s}) for s in ("a", "c")]
    assert [value for _, value in h.broker.records] == expected
    assert [stage for stage, _ in h.observer.failures] == ["VALUE_CONVERTER"]
    assert h.broker.offset(PARTITION) == {"n": 1}


@pytest.mark.parametrize("name", CONVERTERS)
async def test_a_bad_row_of_a_block_fails_the_task_by_its_row(name: str) -> None:
    h = Harness()
    await write(h, converter(name), [block([{"s": "a"}, {"s": 5}, {"s": "c"}])], "none")
    state, trace = h.statuses[-1]
    assert state is State.FAILED
    assert trace is not None
    assert trace.startswith("row 1 of the record block for topic 'out'"), trace
    assert h.broker.records == []


def path(h: Harness, tolerance: str) -> RecordPath:
    deps = h.deps(errors=errors(tolerance))
    return RecordPath(SPEC, deps, lambda topic: None, False, structlog.get_logger())


async def test_each_segment_keeps_what_it_found() -> None:
    record_path = path(Harness(), "all")
    bad = SourceRecord(PARTITION, {"n": 0}, TOPIC, object())  # JSON cannot write it
    first = await record_path.prepare([bad])
    assert first.convert(bad) is None  # skipped
    good = SourceRecord(PARTITION, {"n": 1}, TOPIC, "ok")
    second = await record_path.prepare([good])
    assert second.convert(good) is not None
    assert (first.written(), second.written()) == (0, 1)
    assert (first.found.skipped, second.found.skipped) == (1, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.dropped = 3  # type: ignore[misc]
