"""Runs of records folded into typed blocks (eos/columns/folding.py): through the task
runner, the record path and the scripted producer (tests/unit/task_fakes.py), a reader of
the topics sees what the same records gave one by one — topics, keys, values, headers,
dead letters, committed offsets, failures naming the record — with and without
Connect's transforms; and the runs do go through as blocks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from eos.api import RecordBlock, SourceRecord, SourceTask
from eos.api.schema import INT32_SCHEMA, STRING_SCHEMA, SchemaBuilder, Struct
from eos.columns import folding
from eos.config.error_handling import ErrorHandling
from eos.runtime.task.exactly_once_task import ExactlyOnceTask
from eos.runtime.task.task_deps import TaskSpec
from eos.state import State
from eos.transforms import TransformChain
from tests.unit.task_fakes import PARTITION, TOPIC, Batches, Harness

SMT = "org.apache.kafka.connect.transforms."
DLQ = "dead"
ROW = SchemaBuilder.struct().field("id", INT32_SCHEMA).field("name", STRING_SCHEMA).build()
OTHER = {"p": 1}


def line(n: int, value: Any = None, **more: Any) -> SourceRecord:
    partition = more.pop("partition_of", PARTITION)
    text = f"line {n}" if value is None else value
    return SourceRecord(partition, {"n": n}, TOPIC, text, value_schema=STRING_SCHEMA, **more)


def row(n: int) -> SourceRecord:
    value = Struct(ROW).put("id", n).put("name", f"n{n}")
    return SourceRecord(PARTITION, {"n": n}, TOPIC, value, n % 7, key_schema=INT32_SCHEMA,
                        value_schema=ROW)  # fmt: skip


def polls() -> list[list[SourceRecord]]:
    """Runs long enough to fold, broken by records that do not fold (headers, a partition
    of their own, no schema), another topic, another schema, and short runs that stay
    records."""
    first = [line(n) for n in range(40)]
    first[20] = line(20, headers=(("h", b"1"),))
    first[30] = line(30, partition=0)
    second = [row(n) for n in range(40, 80)] + [line(n) for n in range(80, 85)]
    third = [line(n, partition_of=OTHER) for n in range(85, 120)]
    third[10] = SourceRecord(PARTITION, {"n": 95}, "elsewhere", "no schema")
    return [first, second, third]


async def run(batches: list[list[SourceRecord]], **deps: Any) -> Harness:
    h = Harness()
    source = Batches(*batches)
    runner = ExactlyOnceTask(TaskSpec("c", 0, 1, {}), h.deps(**deps), source.task_class()())
    source.stop = runner.request_stop
    with anyio.fail_after(5):
        await runner.run()
    return h


def seen(h: Harness) -> list[tuple[Any, ...]]:
    """What a reader sees: every committed record, and the latest offset of each source
    partition."""
    written = [(w.topic, w.key, w.value, w.headers) for w in h.broker.written]
    return [*written, ("offsets", h.broker.offset(PARTITION), h.broker.offset(OTHER))]


def chain(props: Mapping[str, str]) -> TransformChain | None:
    return TransformChain.from_config(props) if props else None


CHAINS: dict[str, dict[str, str]] = {
    "none": {},
    "file-source example": {
        "transforms": "hoist,stamp,route",
        "transforms.hoist.type": SMT + "HoistField$Value", "transforms.hoist.field": "line",
        "transforms.stamp.type": SMT + "InsertField$Value",
        "transforms.stamp.static.field": "src", "transforms.stamp.static.value": "file",
        "transforms.route.type": SMT + "RegexRouter", "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "$1-t",
    },
    "a predicate and a header": {
        "transforms": "drop,mark",
        "transforms.drop.type": "Filter", "transforms.drop.predicate": "other",
        "transforms.mark.type": "InsertHeader", "transforms.mark.header": "via",
        "transforms.mark.value.literal": "eos",
        "predicates": "other", "predicates.other.type": "TopicNameMatches",
        "predicates.other.pattern": "elsewhere",
    },
    "a step that needs rows": {
        "transforms": "mask", "transforms.mask.type": SMT + "MaskField$Value",
        "transforms.mask.fields": "name",
    },
}  # fmt: skip


@pytest.mark.parametrize("name", list(CHAINS))
async def test_folded_runs_write_what_the_records_wrote_one_by_one(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = CHAINS[name]
    # MaskField on a STRING value fails: Structs for it
    rows = name == "a step that needs rows"
    batches = [[row(n) for n in range(40)]] if rows else polls()
    folded = await run(batches, transforms=chain(props))
    monkeypatch.setattr(folding, "FOLD_MIN", 10**9)
    alone = await run(batches, transforms=chain(props))
    assert seen(folded) == seen(alone)
    assert folded.observer.dropped == alone.observer.dropped
    assert len(folded.broker.written) >= 40
    # the producer took fewer items where the runs went over as blocks; MaskField has no
    # block method: the run went back to its records (and the path stops folding)
    assert (folded.producer.calls != alone.producer.calls) is not rows


async def test_a_value_that_does_not_fit_is_named_as_its_record_or_dead_lettered_alone() -> None:
    batch = [line(n) for n in range(40)]
    batch[17] = line(17, value=17)  # not a STRING
    strict = await run([batch])
    state, text = strict.statuses[-1]
    assert state is State.FAILED
    assert text is not None
    assert text.startswith(
        "the record for topic 'out' from source partition {'p': 0} at offset {'n': 17} "
        "could not be converted"
    ), text
    settings = ErrorHandling.of({"errors.tolerance": "all",
                                 "errors.deadletterqueue.topic.name": DLQ})  # fmt: skip
    tolerant = await run([batch], errors=settings)
    topics = [(w.topic, w.value) for w in tolerant.broker.written]
    assert topics[:39] == [(TOPIC, b'"line %d"' % n) for n in range(40) if n != 17]
    assert topics[39:] == [(DLQ, b"17")]
    assert tolerant.broker.offset(PARTITION) == {"n": 39}


async def test_a_step_that_fails_on_one_record_of_a_run_names_that_record() -> None:
    cast = chain({"transforms": "c", "transforms.c.type": SMT + "Cast$Value",
                  "transforms.c.spec": "int32"})  # fmt: skip
    batch = [line(n, value=str(n)) for n in range(40)]
    batch[23] = line(23, value="twenty-three")
    h = await run([batch], transforms=cast)
    _, text = h.statuses[-1]
    assert text is not None
    assert text.startswith(
        f"transforms.c ({SMT}Cast$Value) failed on the record for topic 'out' from source "
        "partition {'p': 0} at offset {'n': 23}"
    ), text


async def test_a_connector_that_takes_commit_record_gets_its_records_unfolded() -> None:
    got: list[SourceRecord] = []

    class Committing(Batches):
        def task_class(self) -> type[SourceTask]:
            base = super().task_class()

            class Task(base):  # type: ignore[valid-type,misc]
                async def commit_record(self, record: SourceRecord, metadata: Any) -> None:
                    got.append(record)

            return Task

    h = Harness()
    batch = [line(n) for n in range(40)]
    source = Committing(batch)
    runner = ExactlyOnceTask(TaskSpec("c", 0, 1, {}), h.deps(), source.task_class()())
    source.stop = runner.request_stop
    with anyio.fail_after(5):
        await runner.run()
    assert got == batch
    assert h.producer.calls.count("send 40") == 1


def test_a_run_folds_with_its_timestamps_and_keys_and_breaks_where_a_record_differs() -> None:
    stamped = [line(n, timestamp=1_700_000_000_000 + n) for n in range(20)]
    keyed = [row(n) for n in range(20, 40)]
    short = [line(n) for n in range(40, 40 + folding.FOLD_MIN - 1)]
    folded = folding.Folded()
    out = folded.fold([*stamped, *keyed, *short])
    first, second, *rest = out
    assert isinstance(first, RecordBlock)
    assert isinstance(second, RecordBlock)
    assert first.timestamps == [r.timestamp for r in stamped]
    assert first.keys is None
    assert first.values == [r.value for r in stamped]
    assert not first.encoded
    assert first.source_offset == {"n": 19}
    assert first.value_schema is STRING_SCHEMA
    assert second.timestamps is None
    assert second.keys == [r.key for r in keyed]
    assert second.key_schema is INT32_SCHEMA
    assert second.value_schema is ROW
    assert rest == short  # too few to fold
    assert folded.pop(first) == stamped
    assert folded.pop(second) == keyed


def test_records_a_block_could_not_carry_as_they_are_stay_records() -> None:
    odd = line(5, timestamp=1.5)  # not an int: the producer names this record
    built_anew = SourceRecord(PARTITION, {"n": 0}, TOPIC, "x",
                              value_schema=SchemaBuilder.string().build())  # fmt: skip
    schemaless_key = SourceRecord(PARTITION, {"n": 0}, TOPIC, "x", "k",
                                  value_schema=STRING_SCHEMA)  # fmt: skip
    for odd_one in (odd, built_anew, schemaless_key):
        batch = [line(n) for n in range(40)]
        batch[5] = odd_one
        out = folding.Folded().fold(batch)
        if odd_one is odd:
            assert out == batch  # the whole run stays records
        else:  # the odd record splits the run: the 5 records before it are too few
            assert out[:6] == batch[:6]
            assert len(out) == 7
            assert isinstance(out[6], RecordBlock)
            assert len(out[6]) == 34
