"""FileSource hands its lines over in record blocks: through the task runner, the record
path and the scripted producer (tests/unit/task_fakes.py), what a reader of the topic sees
— topics, keys, values, headers, dead letters, committed offsets, transactions, failures —
is what FileSource wrote when it handed over one SourceRecord per line (:class:`PerLine`,
the code it had before blocks), for every converter a user may set and for Connect's
transforms on its lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from eos.api import RecordBlock, SourceRecord
from eos.api.schema import STRING_SCHEMA
from eos.config.error_handling import ErrorHandling
from eos.converters import make_converter
from eos.converters.schema_registry import RegistrySchema
from eos.runtime.task.exactly_once_task import ExactlyOnceTask
from eos.runtime.task.task_deps import TaskSpec
from eos.state import State
from eos.transforms import TransformChain
from services.connectors.file import TASK_COUNT, TASK_ID, FileSourceTask
from tests.unit.task_fakes import Harness

LINES = ["plain", "", "é ü", 'quote " back \\ slash', "ctrl \x01\x1f", "emoji 😀", "tab\t"]
DLQ = "dead"


class Once(FileSourceTask):
    """FileSourceTask that stops its runner once it has nothing more to hand over."""

    stop_runner: Any = None

    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        got = await super().poll()
        if not got:
            self.stop_runner()
        return got


class PerLine(Once):
    """FileSource as it was before blocks: a SourceRecord per line, each with its offset
    (the hand-over bench/line_records.py times)."""

    def _hand_over(
        self, path: str, texts: list[str], ends: list[int], topic: str
    ) -> list[SourceRecord | RecordBlock]:
        partition = {"file": path}
        return [
            SourceRecord(partition, {"position": end}, topic, text, value_schema=STRING_SCHEMA)
            for text, end in zip(texts, ends, strict=True)
        ]


class FakeRegistry:
    """A schema registry's answers: an id per (subject, schema text)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], int] = {}

    def register(self, subject: str, schema: RegistrySchema) -> int:
        return self.ids.setdefault((subject, schema.text), len(self.ids) + 1)

    lookup = register

    def probe(self) -> None:
        pass

    def close(self) -> None:
        pass


def converters(name: str, props: Mapping[str, str]) -> dict[str, Any]:
    """``key_converter`` and ``value_converter`` called ``name`` (a registry's faked)."""
    made = {}
    for role, is_key in (("key_converter", True), ("value_converter", False)):
        converter: Any = make_converter(name, props, is_key)
        if hasattr(converter, "client"):
            converter.client = FakeRegistry()
        made[role] = converter
    return {
        **made,
        "converter_names": (name, name, "org.apache.kafka.connect.storage.SimpleHeaderConverter"),
    }


def config(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"topic": "lines", "path": str(tmp_path / "*.log"), TASK_ID: "0", TASK_COUNT: "1",
            **more}  # fmt: skip


async def run(task: Once, settings: dict[str, str], h: Harness, **deps: Any) -> Harness:
    runner = ExactlyOnceTask(TaskSpec("files", 0, 1, settings), h.deps(**deps), task)
    task.stop_runner = runner.request_stop
    with anyio.fail_after(10):
        await runner.run()
    return h


async def both(
    settings: dict[str, str],
    converter: str = "json",
    props: Mapping[str, str] | None = None,
    **deps: Any,
) -> tuple[Harness, Harness]:
    """The same files through FileSource (blocks) and through :class:`PerLine`, each with
    its own converters (they keep state: schema ids)."""
    props = {"schema.registry.url": "http://registry:8081", **(props or {})}
    blocks = await run(Once(), settings, Harness(), **converters(converter, props), **deps)
    per_line = await run(PerLine(), settings, Harness(), **converters(converter, props), **deps)
    return blocks, per_line


def seen(h: Harness) -> list[tuple[str, bytes | None, bytes | None, list[Any]]]:
    return [(w.topic, w.key, w.value, w.headers) for w in h.broker.written]


def write_lines(tmp_path: Path, lines: Sequence[str], name: str = "a.log") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(line.encode() + b"\r\n" for line in lines) + b"partial")
    return path


CONVERTERS = [
    ("json", {}),
    ("json", {"schemas.enable": "true"}),
    ("org.apache.kafka.connect.json.JsonConverter", {}),
    ("string", {}),
    ("org.apache.kafka.connect.storage.StringConverter", {"converter.encoding": "utf-16"}),
    ("io.confluent.connect.avro.AvroConverter", {}),
    ("io.confluent.connect.json.JsonSchemaConverter", {}),
]


@pytest.mark.parametrize(("name", "props"), CONVERTERS)
async def test_every_converter_writes_the_bytes_a_record_per_line_wrote(
    tmp_path: Path, name: str, props: dict[str, str]
) -> None:
    path = write_lines(tmp_path, LINES * 3)
    blocks, per_line = await both(config(tmp_path, **{"batch.size": "5"}), name, props)
    assert seen(blocks) == seen(per_line)
    assert len(seen(blocks)) == len(LINES) * 3
    assert {w.key for w in blocks.broker.written} == {None}
    offset = {"position": path.stat().st_size - len(b"partial")}
    assert blocks.broker.offset({"file": str(path)}) == offset
    assert per_line.broker.offset({"file": str(path)}) == offset
    assert blocks.observer.committed == per_line.observer.committed == [5, 5, 5, 5, 1]
    if name == "json" and not props.get("schemas.enable"):
        assert blocks.broker.values() == LINES * 3  # the default: a JSON string per line
    if name == "string":
        assert [w.value for w in blocks.broker.written] == [t.encode() for t in LINES * 3]


def failure(h: Harness) -> str:
    state, text = h.statuses[-1]
    assert state is State.FAILED, h.statuses
    assert text is not None
    return text.splitlines()[0]


@pytest.mark.parametrize(
    "name", ["io.confluent.connect.protobuf.ProtobufConverter", "bytes"]
)  # Protobuf writes messages (STRUCTs) only; ByteArrayConverter takes bytes only
async def test_a_converter_that_cannot_write_lines_fails_as_before_naming_the_row(
    tmp_path: Path, name: str
) -> None:
    path = write_lines(tmp_path, ["first", "second"])
    blocks, per_line = await both(config(tmp_path), name)
    assert blocks.broker.written == per_line.broker.written == []
    where = f"from source partition {{'file': '{path}'}} at offset"
    row, cause = failure(blocks).split(" could not be converted: ")
    assert row == f"row 0 of the record block for topic 'lines' {where} {{'position': 15}}"
    assert failure(per_line) == (
        f"the record for topic 'lines' {where} {{'position': 7}} could not be converted: {cause}"
    )


def transforms(**props: str) -> TransformChain:
    return TransformChain.from_config({k.replace("_", "."): v for k, v in props.items()})


ROUTE_STAMP_KEEP = dict(
    transforms="route,stamp,drop",
    transforms_route_type="org.apache.kafka.connect.transforms.RegexRouter",
    transforms_route_regex="(.*)", transforms_route_replacement="$1-copy",
    transforms_stamp_type="InsertHeader", transforms_stamp_header="source",
    transforms_stamp_value_literal="files",
    transforms_drop_type="Filter", transforms_drop_predicate="other",
    predicates="other", predicates_other_type="TopicNameMatches",
    predicates_other_pattern="other-.*",
)  # fmt: skip


async def test_connect_transforms_on_lines_do_what_they_did(tmp_path: Path) -> None:
    path = write_lines(tmp_path, LINES)
    blocks, per_line = await both(config(tmp_path), transforms=transforms(**ROUTE_STAMP_KEEP))
    assert seen(blocks) == seen(per_line)
    assert seen(blocks)[0] == ("lines-copy", None, b'"plain"', [("source", b"files")])
    everything = {**ROUTE_STAMP_KEEP, "predicates_other_pattern": "lines-.*"}
    blocks, per_line = await both(config(tmp_path), transforms=transforms(**everything))
    assert seen(blocks) == seen(per_line) == []  # all dropped: their offsets still commit
    offset = {"position": path.stat().st_size - len(b"partial")}
    assert blocks.broker.offset({"file": str(path)}) == offset
    assert per_line.broker.offset({"file": str(path)}) == offset


async def test_insert_field_on_a_line_fails_as_in_connect_naming_the_row(tmp_path: Path) -> None:
    path = write_lines(tmp_path, ["first", "second"])
    insert = transforms(
        transforms="add", transforms_add_type="InsertField$Value",
        transforms_add_static_field="src", transforms_add_static_value="files",
    )  # fmt: skip
    blocks, per_line = await both(config(tmp_path), transforms=insert)
    where = f"from source partition {{'file': '{path}'}} at offset"
    step = "transforms.add (InsertField$Value) failed on"
    row, cause = failure(blocks).split("}: ", 1)
    assert row == f"{step} row 0 of the record block for topic 'lines' {where} {{'position': 15"
    assert failure(per_line) == (
        f"{step} the record for topic 'lines' {where} {{'position': 7}}: {cause}"
    )
    assert "Struct" in cause  # Connect: "Only Struct objects supported for [field insertion]"
    assert blocks.broker.written == per_line.broker.written == []


async def test_tolerated_bad_lines_and_only_they_are_dead_letters(tmp_path: Path) -> None:
    path = write_lines(tmp_path, ["1", "2", "x", "4", "y"])
    cast = transforms(transforms="n", transforms_n_type="Cast$Value", transforms_n_spec="int32")
    tolerate = ErrorHandling.of({
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": DLQ,
        "errors.deadletterqueue.context.headers.enable": "true",
    })  # fmt: skip
    blocks, per_line = await both(config(tmp_path), transforms=cast, errors=tolerate)
    envelope = b'{"schema":{"type":"string","optional":false},"payload":"%s"}'
    assert [(w.topic, w.value) for w in blocks.broker.written] == [
        ("lines", b"1"), ("lines", b"2"), ("lines", b"4"), (DLQ, envelope % b"x"),
        (DLQ, envelope % b"y"),
    ]  # fmt: skip
    assert _letters(blocks) == _letters(per_line)
    assert seen(blocks)[:3] == seen(per_line)[:3]
    offset = {"position": path.stat().st_size - len(b"partial")}
    assert blocks.broker.offset({"file": str(path)}) == offset
    assert blocks.observer.failures == [("TRANSFORMATION", "dead_lettered")] * 2


def _letters(h: Harness) -> list[tuple[bytes | None, dict[str, Any]]]:
    """The dead letters, their headers but eos's source offset (a block's rows before the
    last carry none; a record per line carried its own)."""
    skip = {"__eos.errors.source.offset", "__connect.errors.exception.stacktrace"}
    return [
        (w.value, {k: v for k, v in w.headers if k not in skip})
        for w in h.broker.written
        if w.topic == DLQ
    ]


@pytest.mark.parametrize("boundary", ["poll", "interval"])
async def test_a_block_commits_with_its_offset_and_a_restart_resumes_after_it(
    tmp_path: Path, boundary: Any
) -> None:
    path = write_lines(tmp_path, [f"line {n}" for n in range(7)])
    settings = config(tmp_path, **{"batch.size": "3"})
    blocks, per_line = await both(settings, boundary=boundary)
    assert blocks.broker.offsets == per_line.broker.offsets  # the same offsets, same order
    assert blocks.observer.committed == per_line.observer.committed
    assert blocks.observer.committed == ([3, 3, 1] if boundary == "poll" else [7])
    with path.open("ab") as f:
        f.write(b" done\nline 8\nline")  # the partial line finished, one more, a new partial
    await run(Once(), settings, blocks, boundary=boundary)  # resumes from committed offsets
    assert blocks.broker.values() == [f"line {n}" for n in range(7)] + ["partial done", "line 8"]
    assert blocks.broker.offset({"file": str(path)}) == {"position": path.stat().st_size - 4}
