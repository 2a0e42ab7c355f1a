"""The record path of a task (eos/runtime/task/record_path.py) with the scripted producer and a
manual clock: transforms before the producer (dropped records commit their offsets,
commit_record sees the records as polled), errors.tolerance and dead letters in the
transaction of the output, typed blocks encoded before the producer, a schema registry
that is down (retried within errors.retry.timeout, waited for at start-up)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anyio

from eos.api import RecordBlock, SourceRecord, SourceTask, Transformation
from eos.api.schema import INT32_SCHEMA, STRING_SCHEMA, Schema
from eos.config.error_handling import ErrorHandling
from eos.converters import make_header_converter
from eos.converters.schema_registry import RegistrySchema
from eos.converters.wire_format import Encode, RegistryConverter, Translated
from eos.errors import SchemaRegistryUnavailable
from eos.runtime.task.at_least_once_task import AtLeastOnceTask
from eos.runtime.task.exactly_once_task import ExactlyOnceTask
from eos.runtime.task.source_task import SourceTaskRunner, TaskDeps, TaskSpec
from eos.state import State
from eos.transforms import TransformChain
from tests.unit.task_fakes import PARTITION, TOPIC, Batches, Harness, Source

SPEC = TaskSpec("c", 0, 1, {})
DLQ = "dead"


class EvenTimesTen(Transformation):
    """Drops odd values, multiplies even ones; value 4 is poison."""

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        if record.value == 4:
            raise ValueError("four is poison")
        if record.value % 2:
            return None
        return SourceRecord(
            record.source_partition, record.source_offset, record.topic, record.value * 10
        )


def chain(**more: str) -> TransformChain:
    return TransformChain.from_config(
        {"transforms": "even", "transforms.even.type": f"{__name__}:EvenTimesTen", **more}
    )


def errors(**settings: str) -> ErrorHandling:
    return ErrorHandling.of({f"errors.{k.replace('_', '.')}": v for k, v in settings.items()})


async def run(
    source: Any, deps: TaskDeps, runner_class: type[SourceTaskRunner] = ExactlyOnceTask
) -> SourceTaskRunner:
    runner = runner_class(SPEC, deps, source.task_class()())
    source.stop = runner.request_stop
    with anyio.fail_after(5):
        await runner.run()
    return runner


def trace(h: Harness) -> str:
    state, text = h.statuses[-1]
    assert state is State.FAILED, h.statuses
    assert text is not None
    return text


async def test_a_dropped_record_commits_its_offset_and_commit_record_gets_records_as_polled() -> (
    None
):
    h, source = Harness(), Source(4)  # 0..3: 4 (poison) is never polled
    await run(source, h.deps(transforms=chain()))
    assert h.broker.values() == [0, 20]
    assert h.broker.offset(PARTITION) == {"n": 3}
    assert sorted(source.committed) == [0, 1, 2, 3]  # before the transforms, dropped too
    assert h.observer.dropped == 2


async def test_every_record_of_an_at_least_once_flush_dropped_still_commits_the_offsets() -> None:
    h, source = Harness(), Source(2, batch=1)
    everything = TransformChain.from_config({"transforms": "f", "transforms.f.type": "Filter"})
    await run(source, h.deps(transforms=everything), AtLeastOnceTask)
    assert h.broker.values() == []
    assert h.broker.offset(PARTITION) == {"n": 1}


async def test_a_poison_record_fails_the_task_naming_the_step_and_the_record() -> None:
    h, source = Harness(), Source(6)
    await run(source, h.deps(transforms=chain()))
    text = trace(h)
    assert text.startswith(
        f"transforms.even ({__name__}:EvenTimesTen) failed on the record for topic 'out' "
        "from source partition {'p': 0} at offset {'n': 4}: four is poison"
    ), text
    assert h.broker.values() == [0, 20]  # the first transaction; the second aborted
    assert h.observer.failures == [("TRANSFORMATION", "failed")]


async def test_tolerated_poison_is_a_dead_letter_in_the_transaction_of_the_output() -> None:
    h, source = Harness(), Source(6, batch=5)
    settings = errors(tolerance="all", deadletterqueue_topic_name=DLQ,
                      deadletterqueue_context_headers_enable="true")  # fmt: skip
    await run(source, h.deps(transforms=chain(), errors=settings))
    assert [w.value for w in h.broker.written if w.topic == TOPIC] == [b"0", b"20"]
    (letter,) = [w for w in h.broker.written if w.topic == DLQ]
    assert letter.value == b"4"
    headers = dict(letter.headers)
    assert headers["__connect.errors.topic"] == b"out"
    assert headers["__connect.errors.partition"] == b"-1"
    assert headers["__connect.errors.offset"] == b"-1"
    assert headers["__connect.errors.connector.name"] == b"c"
    assert headers["__connect.errors.task.id"] == b"0"
    assert headers["__connect.errors.stage"] == b"TRANSFORMATION"
    assert headers["__connect.errors.class.name"] == f"{__name__}:EvenTimesTen".encode()
    assert headers["__connect.errors.exception.class.name"] == b"ValueError"
    assert headers["__connect.errors.exception.message"] == b"four is poison"
    assert b"four is poison" in (headers["__connect.errors.exception.stacktrace"] or b"")
    assert json.loads(headers["__eos.errors.source.offset"] or b"") == {"n": 4}
    assert json.loads(headers["__eos.errors.source.partition"] or b"") == PARTITION
    assert h.broker.offset(PARTITION) == {"n": 5}
    assert h.broker.transactions == 2
    first = h.producer.calls[: h.producer.calls.index("end_txn commit") + 1]
    assert first == [  # the dead letter goes with the output and the offsets
        "start", "begin", "send 2", "send 1", "send_offsets", "flush", "end_txn commit"
    ]  # fmt: skip
    assert h.observer.failures == [("TRANSFORMATION", "dead_lettered")]
    assert h.states()[-1] is State.UNASSIGNED


class Typed(Source):
    """Records with a STRING value schema; value 1 is an int (does not fit)."""

    def task_class(self) -> type[SourceTask]:
        base = super().task_class()

        class Task(base):  # type: ignore[misc, valid-type]
            async def poll(self) -> list[SourceRecord] | None:
                records = await super().poll()
                return [
                    SourceRecord(
                        r.source_partition,
                        r.source_offset,
                        r.topic,
                        r.value if r.value == 1 else str(r.value),
                        value_schema=STRING_SCHEMA,
                    )
                    for r in records or []
                ] or None

        return Task


async def test_a_value_that_does_not_fit_its_schema_is_skipped_or_fails_the_task() -> None:
    h, source = Harness(), Typed(3)
    await run(source, h.deps(errors=errors(tolerance="all")))
    assert h.broker.values() == ["0", "2"]
    assert h.observer.failures == [("VALUE_CONVERTER", "skipped")]
    assert source.committed == ["0", "2", 1]  # commit_record: the skipped one too
    strict, source = Harness(), Typed(3)
    await run(source, strict.deps())
    assert "offset {'n': 1} could not be converted: Invalid type for STRING: int" in trace(strict)


def typed_block(values: list[Any], offset: int) -> RecordBlock:
    return RecordBlock(PARTITION, {"n": offset}, TOPIC, values, value_schema=INT32_SCHEMA,
                       encoded=False)  # fmt: skip


async def test_typed_blocks_are_encoded_and_transformed_by_columns_before_the_producer() -> None:
    h = Harness()
    header = TransformChain.from_config({
        "transforms": "h", "transforms.h.type": "InsertHeader",
        "transforms.h.header": "src", "transforms.h.value.literal": "files",
    })  # fmt: skip
    await run(Batches([typed_block([1, 2, 3], 2)]), h.deps(transforms=header))
    assert [(w.value, w.headers) for w in h.broker.written] == [
        (b"1", [("src", b"files")]), (b"2", [("src", b"files")]), (b"3", [("src", b"files")])
    ]  # fmt: skip
    assert h.broker.offset(PARTITION) == {"n": 2}


async def test_a_bad_row_of_a_typed_block_is_named_or_dead_lettered_alone() -> None:
    strict = Harness()
    await run(Batches([typed_block([1, "x", 3], 2)]), strict.deps())
    assert trace(strict).startswith(
        "row 1 of the record block for topic 'out' from source partition {'p': 0} at offset "
        "{'n': 2} could not be converted: Invalid type for INT32: str"
    ), trace(strict)
    h = Harness()
    settings = errors(tolerance="all", deadletterqueue_topic_name=DLQ)
    await run(Batches([typed_block([1, "x", 3], 2)]), h.deps(errors=settings))
    assert [(w.topic, w.value) for w in h.broker.written] == [
        (TOPIC, b"1"), (TOPIC, b"3"), (DLQ, b'"x"')  # "x" does not fit: plain JSON
    ]  # fmt: skip
    assert h.broker.offset(PARTITION) == {"n": 2}


class FlakyRegistry(RegistryConverter):
    """A registry converter whose registry cannot be reached ``down`` times."""

    FORMAT = "AVRO"

    def __init__(self, down: int, probe_down: int = 0) -> None:
        super().__init__()
        self.down, self.probe_down = down, probe_down
        self.requests = 0

    def probe(self) -> None:
        if self.probe_down:
            self.probe_down -= 1
            raise SchemaRegistryUnavailable("schema registry http://registry:8081 cannot be "
                                            "reached (ConnectError: refused)")  # fmt: skip

    def translate(self, schema: Schema) -> Translated:
        return Translated(RegistrySchema("AVRO", '"string"'), None, schema)

    def encoder(self, translated: Translated, latest: RegistrySchema | None) -> Encode:
        return lambda value: str(value).encode()

    def _new_writer(self, topic: str, schema: Schema) -> Any:
        self.requests += 1
        if self.requests <= self.down:
            raise SchemaRegistryUnavailable("schema registry http://registry:8081 cannot be "
                                            "reached (ConnectError: refused)")  # fmt: skip
        return super()._new_writer(topic, schema) if self.client else _Writer()


class _Writer:
    header = b"\x00\x00\x00\x00\x01"

    @staticmethod
    def encode(value: Any) -> bytes:
        return str(value).encode()


async def test_a_registry_that_is_down_is_retried_within_the_retry_timeout() -> None:
    h, source = Harness(), Typed(3)
    registry = FlakyRegistry(down=2)
    await run(source, h.deps(value_converter=registry, errors=errors(retry_timeout="2000")))
    assert h.states()[-1] is State.UNASSIGNED, h.statuses
    assert len(h.broker.records) == 3
    assert registry.requests == 3


async def test_a_registry_down_for_longer_fails_the_task_with_its_url() -> None:
    h, source = Harness(), Typed(3)
    registry = FlakyRegistry(down=100)
    await run(source, h.deps(value_converter=registry, errors=errors(retry_timeout="1000")))
    text = trace(h)
    assert "schema registry http://registry:8081 cannot be reached" in text
    assert "errors.retry.timeout=1000" in text
    assert h.broker.values() == []


async def test_start_up_waits_for_the_registry_and_says_so() -> None:
    h, source = Harness(), Typed(1)
    registry = FlakyRegistry(down=0, probe_down=3)
    await run(source, h.deps(value_converter=registry))
    state, why = h.statuses[0]
    assert state is State.UNASSIGNED
    assert why is not None
    assert why.startswith(
        "waiting for the schema registry: schema registry http://registry:8081 cannot be reached"
    )
    assert h.states()[1:] == [State.RUNNING, State.UNASSIGNED]
    assert h.clock.now > 1000 + 3  # waited 1 + 2 + 4 s (the manual clock)


class TypedHeaders(Transformation):
    """Gives each record headers as Connect values (an int, a text, bytes, a list)."""

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        headers = [("n", record.value), ("s", f"v{record.value}"), ("raw", b"\x00"),
                   ("list", [1, 2.5])]  # fmt: skip
        return dataclasses.replace(record, headers=headers)


def typed_headers() -> TransformChain:
    return TransformChain.from_config(
        {"transforms": "h", "transforms.h.type": f"{__name__}:TypedHeaders"}
    )


async def test_header_values_given_as_connect_values_are_written_by_the_header_converter() -> None:
    h, source = Harness(), Source(2)
    await run(source, h.deps(transforms=typed_headers()))  # SimpleHeaderConverter: text
    assert [w.headers for w in h.broker.written if w.topic == TOPIC] == [
        [("n", b"0"), ("s", b"v0"), ("raw", b"\x00"), ("list", b"[1,2.5]")],
        [("n", b"1"), ("s", b"v1"), ("raw", b"\x00"), ("list", b"[1,2.5]")],
    ]


async def test_a_header_the_header_converter_cannot_write_is_a_header_converter_failure() -> None:
    h, source = Harness(), Source(2)
    numbers = make_header_converter("org.apache.kafka.connect.converters.IntegerConverter")
    settings = errors(tolerance="all", deadletterqueue_topic_name=DLQ,
                      deadletterqueue_context_headers_enable="true")  # fmt: skip
    names = ("json", "json", "org.apache.kafka.connect.converters.IntegerConverter")
    deps = h.deps(transforms=typed_headers(), header_converter=numbers, errors=settings,
                  converter_names=names)  # fmt: skip
    await run(source, deps)
    assert [w for w in h.broker.written if w.topic == TOPIC] == []  # "s" is no Integer
    letters = [w for w in h.broker.written if w.topic == DLQ]
    assert len(letters) == 2
    headers = dict(letters[0].headers)
    assert headers["__connect.errors.stage"] == b"HEADER_CONVERTER"
    assert headers["__connect.errors.class.name"] == names[2].encode()
    message = headers["__connect.errors.exception.message"] or b""
    assert b"Failed to serialize to Integer (was str)" in message
    assert headers["s"] == b"v0"  # the record's own headers, as text
    assert h.observer.failures == [("HEADER_CONVERTER", "dead_lettered")] * 2
