"""The modules a record crosses from its poll to its bytes are those docs/architecture.md
lists ("The modules a record crosses"), and there are at most five.

The stack is read where the value converter makes the bytes of a record, of a run of
records folded into a block, and of a block a connector hands over: every module of eos
on it must be in the list. The producer here is the fake of ``tests/unit/task_fakes.py``;
the real ones hand records to the converter the same way (``producers/base.py``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import pytest

from eos.api import RecordBlock, SourceRecord
from eos.api.schema import STRING_SCHEMA, Schema
from eos.converters import JsonConverter
from eos.runtime.task.exactly_once_task import ExactlyOnceTask
from eos.runtime.task.source_task import TaskSpec
from tests.unit.task_fakes import PARTITION, TOPIC, Batches, Harness

REPO = Path(__file__).resolve().parents[2]
SECTION = re.compile(r"### The modules a record crosses\n(.*?)\n###", re.DOTALL)
ENTRY = re.compile(r"^\d+\. `([\w/.]+)`", re.MULTILINE)


def documented() -> list[str]:
    """The list's paths as module names (a package stands for its modules)."""
    found = SECTION.search((REPO / "docs" / "architecture.md").read_text())
    assert found is not None, "docs/architecture.md lost its list"
    return [p.removesuffix(".py").strip("/").replace("/", ".") for p in ENTRY.findall(found[1])]


def eos_modules_on_the_stack() -> list[str]:
    """Modules of eos on the caller's stack, outermost first, each once."""
    names: list[str] = []
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("eos.") and name not in names:
            names.append(name)
        frame = frame.f_back
    return names[::-1]


class Spy(JsonConverter):
    """The JSON converter, noting the stack each time it makes bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.stacks: list[list[str]] = []

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Any = None
    ) -> bytes | None:
        self.stacks.append(eos_modules_on_the_stack())
        return super().from_connect_data(topic, schema, value, headers)

    def convert(self, topic: str, value: Any) -> bytes | None:
        self.stacks.append(eos_modules_on_the_stack())
        return super().convert(topic, value)

    def from_connect_block(self, topic: str, schema: Schema | None, column: Any) -> Any:
        self.stacks.append(eos_modules_on_the_stack())
        return super().from_connect_block(topic, schema, column)


def line(n: int, schema: Schema | None) -> SourceRecord:
    return SourceRecord(PARTITION, {"n": n}, TOPIC, f"line {n}", value_schema=schema)


BATCHES: dict[str, list[SourceRecord | RecordBlock]] = {
    "records": [line(n, None) for n in range(3)],
    "records folded into a block": [line(n, STRING_SCHEMA) for n in range(40)],
    "a block": [
        RecordBlock(
            PARTITION, {"n": 9}, TOPIC, ["a", "b"], value_schema=STRING_SCHEMA, encoded=False
        )
    ],
}


@pytest.mark.parametrize("batch", BATCHES, ids=str)
async def test_a_record_crosses_only_the_documented_modules(batch: str) -> None:
    h, spy = Harness(), Spy()
    source = Batches(BATCHES[batch])
    runner = ExactlyOnceTask(
        TaskSpec("c", 0, 1, {}), h.deps(value_converter=spy), source.task_class()()
    )
    source.stop = runner.request_stop
    with anyio.fail_after(5):
        await runner.run()
    assert spy.stacks, "the converter made no bytes"
    allowed = documented()
    for stack in spy.stacks:
        assert [m for m in stack if not m.startswith(tuple(allowed))] == [], stack


def test_the_list_names_at_most_five_modules_that_exist() -> None:
    modules = documented()
    assert 0 < len(modules) <= 5
    for module in modules:
        path = REPO / module.replace(".", "/")
        assert path.with_suffix(".py").exists() or path.is_dir(), module
