"""What Connect's transforms cost in eos, per record, next to the record path they run in.

Pure Python, no broker. Two kinds of records of ~100 bytes of JSON (six fields):
  dicts    schemaless: the value is a dict
  structs  the value is a Struct with its schema
and five chains:
  none     no transforms at all (the record path has no chain; here the chain's own
           cost of nothing)
  insert   InsertField$Value, a static field
  route    RegexRouter, (.*) to eu.$1
  v2k      ValueToKey, one field
  three    insert + route + v2k, the chain of the issue's target

For each it times, in the same round, 1) the chain alone as the record path runs it:
``TransformChain.apply_all`` on the records of a poll (batches of 1000), each step over
the whole batch, 2) the chain alone one record at a time (``apply``: where a user's own
step is in the chain, or a record of the batch fails), 3) the Python record path
without it: building the SourceRecords of a poll and converting key and value with the
JSON converter (a Struct as a dict: the schema-aware converters are not part of this),
4) the same with the chain (on the batch) between the two. ``rate`` is (3)/(4): the
share of the path's rate that is left with the chain; the target is >= 0.85 for
``three``. ``at 5 us`` is the same ratio for (1) on a path of 5 us per record (the
issue's measure of the typical path, producer included). Record blocks:
``route+header`` renames the topic and adds a header on a block of 1000 encoded rows,
``filter`` drops rows by a topic predicate;
``insert``, ``v2k`` and ``three`` run those chains column by column on a typed block of
1000 rows (``encoded=False``, the six fields as one pyarrow struct array, as SparkSource
hands them over). Their ``at 5 us`` is the same ratio with the cost per row.

The ``each`` table times every bundled transform alone on the same batches (typical
settings in ``EACH``), on dicts and on structs.

Every round is printed; the summary takes the median of the rounds of each (each
ratio from the medians). The garbage collector is tuned as in the worker. Usage:

    python bench/transforms.py [--records 50000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from eos.api import RecordBlock, SourceRecord
from eos.api.schema import (
    BOOLEAN_SCHEMA,
    FLOAT64_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    Struct,
)
from eos.runtime.converters import JsonConverter
from eos.transforms import TransformChain
from services.worker_service import tune_gc, tune_malloc

PARTITION = {"table": "orders"}
SCHEMA = (
    SchemaBuilder.struct()
    .name("Order")
    .field("id", INT64_SCHEMA)
    .field("name", STRING_SCHEMA)
    .field("amount", FLOAT64_SCHEMA)
    .field("ok", BOOLEAN_SCHEMA)
    .field("city", STRING_SCHEMA)
    .field("state", STRING_SCHEMA)
    .build()
)
INSERT = {"i.type": "InsertField$Value", "i.static.field": "src", "i.static.value": "db"}
ROUTE = {"r.type": "RegexRouter", "r.regex": "(.*)", "r.replacement": "eu.$1"}
V2K = {"k.type": "ValueToKey", "k.fields": "id"}
CHAINS: dict[str, tuple[str, dict[str, str]]] = {
    "none": ("", {}),
    "insert": ("i", INSERT),
    "route": ("r", ROUTE),
    "v2k": ("k", V2K),
    "three": ("i,r,k", {**INSERT, **ROUTE, **V2K}),
}
EACH: dict[str, dict[str, str]] = {
    "Cast$Value": {"spec": "id:string"},
    "DropHeaders": {"headers": "trace"},
    "ExtractField$Value": {"field": "name"},
    "Filter": {"predicate": "p"},
    "Flatten$Value": {},
    "HeaderFrom$Value": {"fields": "city", "headers": "city", "operation": "copy"},
    "HoistField$Value": {"field": "order"},
    "InsertField$Value": {"static.field": "src", "static.value": "db"},
    "InsertHeader": {"header": "src", "value.literal": "db"},
    "MaskField$Value": {"fields": "name"},
    "RegexRouter": {"regex": "(.*)", "replacement": "eu.$1"},
    "ReplaceField$Value": {"exclude": "ok", "renames": "city:town"},
    "SetSchemaMetadata$Value": {"schema.name": "Renamed", "schema.version": "2"},
    "TimestampConverter$Value": {"field": "id", "target.type": "Timestamp"},
    "TimestampRouter": {},
    "ValueToKey": {"fields": "id"},
}
"""Every bundled transform with typical settings (Filter behind a TopicNameMatches
predicate that matches one record in ten): the ``each`` table, one step alone on a
batch. SetSchemaMetadata needs a schema: structs only."""
STAMP = 1_700_000_000_000
"""The records' timestamp (for TimestampRouter)."""
PATH_US = 5.0
"""The issue's typical record path, in µs of Python per record."""
BATCH = 1000
"""Records a poll hands over (FileSource's and VerifiableSource's ``batch.size``): the
record path transforms them as one batch (``TransformChain.apply_all``)."""
"""The issue's typical record path, in µs of Python per record."""


def chain(name: str) -> TransformChain:
    aliases, settings = CHAINS[name]
    props = {"transforms": aliases, **{f"transforms.{k}": v for k, v in settings.items()}}
    return TransformChain.from_config(props)


def values_of(n: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "name": f"name-{i}", "amount": 12.5, "ok": True, "city": "Topeka", "state": "KS"}
        for i in range(n)
    ]


def values(kind: str, n: int) -> list[Any]:
    rows = values_of(n)
    return rows if kind == "dicts" else [Struct(SCHEMA, row) for row in rows]


def plain(value: Any) -> Any:
    """A Struct as a dict (what the JSON converter can write)."""
    if isinstance(value, Struct):
        return {f.name: plain(value.get(f)) for f in value.schema.fields}
    return value


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure(kind: str, name: str, data: list[Any]) -> tuple[float, float, float, float]:
    """µs per record of (the chain alone on a batch, as the record path runs it; the
    chain alone one record at a time; the path; the path with the chain on a batch)."""
    c = chain(name)
    json = JsonConverter()
    schema = SCHEMA if kind == "structs" else None
    records = [
        SourceRecord(PARTITION, {"i": i}, "orders", v, value_schema=schema)
        for i, v in enumerate(data)
    ]

    def batch() -> None:
        for start in range(0, len(records), BATCH):
            c.apply_all(records[start : start + BATCH])

    def one_by_one() -> None:
        for r in records:
            c.apply(r)

    def path(transform: bool) -> Callable[[], None]:
        def run() -> None:
            for start in range(0, len(data), BATCH):
                polled: list[SourceRecord | None] = [
                    SourceRecord(PARTITION, {"i": i}, "orders", v, value_schema=schema)
                    for i, v in enumerate(data[start : start + BATCH], start)
                ]
                if transform:
                    polled = c.apply_all(polled) or []  # type: ignore[arg-type]
                for r in polled:
                    if r is not None:
                        json.convert(r.topic, plain(r.key))
                        json.convert(r.topic, plain(r.value))

        return run

    n = len(data) / 1e6
    return timed(batch) / n, timed(one_by_one) / n, timed(path(False)) / n, timed(path(True)) / n


def each_cost(kind: str, name: str, data: list[Any]) -> float | None:
    """µs per record of one transform alone on batches of records (None: the transform
    needs what these records lack)."""
    if name.startswith("SetSchemaMetadata") and kind == "dicts":
        return None
    props = {"transforms": "t", "transforms.t.type": name}
    props.update({f"transforms.t.{k}": v for k, v in EACH[name].items()})
    if name == "Filter":
        props.update(
            {"predicates": "p", "predicates.p.type": "TopicNameMatches",
             "predicates.p.pattern": "tmp-.*"}
        )  # fmt: skip
    c = TransformChain.from_config(props)
    schema = SCHEMA if kind == "structs" else None
    records = [
        SourceRecord(PARTITION, {"i": i}, "tmp-orders" if i % 10 == 0 else "orders", v,
                     value_schema=schema, timestamp=STAMP, headers=[("trace", b"1")])
        for i, v in enumerate(data)
    ]  # fmt: skip

    def batch() -> None:
        for start in range(0, len(records), BATCH):
            if c.apply_all(records[start : start + BATCH]) is None:
                raise SystemExit(f"{name} on {kind}: the batch went one by one")

    return timed(batch) / len(records) * 1e6


BLOCK_CHAINS = ("route+header", "filter", "insert", "v2k", "three")


def typed_block(rows: int) -> RecordBlock:
    """A typed block of ``rows`` rows: the six fields of SCHEMA as one struct array."""
    pa: Any = importlib.import_module("pyarrow")
    values = pa.array(
        values_of(rows),
        pa.struct(
            [
                ("id", pa.int64()),
                ("name", pa.string()),
                ("amount", pa.float64()),
                ("ok", pa.bool_()),
                ("city", pa.string()),
                ("state", pa.string()),
            ]
        ),
    )
    return RecordBlock(PARTITION, {"i": rows}, "orders", values, value_schema=SCHEMA, encoded=False)


def block_cost(name: str, rows: int = 1000, repeat: int = 50) -> float:
    """µs per row of a block step."""
    if name in CHAINS:
        c = chain(name)
        block = typed_block(rows)
        if not isinstance(c.apply_block(block), RecordBlock):
            raise SystemExit(f"{name}: the typed block went row by row")

        def columns() -> None:
            for _ in range(repeat):
                c.apply_block(block)

        return timed(columns) / (rows * repeat) * 1e6
    if name == "route+header":
        props = {
            "transforms": "r,h",
            **{f"transforms.{k}": v for k, v in ROUTE.items()},
            "transforms.h.type": "InsertHeader",
            "transforms.h.header": "src",
            "transforms.h.value.literal": "db",
        }
        block = RecordBlock(PARTITION, {"i": rows}, "orders", [b'{"id":1}'] * rows)
    else:
        props = {
            "transforms": "f",
            "transforms.f.type": "Filter",
            "transforms.f.predicate": "p",
            "predicates": "p",
            "predicates.p.type": "TopicNameMatches",
            "predicates.p.pattern": "tmp-.*",
        }
        topics = ["tmp-a" if i % 10 == 0 else "orders" for i in range(rows)]
        block = RecordBlock(PARTITION, {"i": rows}, "orders", [b"{}"] * rows, topics=topics)
    c = TransformChain.from_config(props)

    def run() -> None:
        for _ in range(repeat):
            c.apply_block(block)

    return timed(run) / (rows * repeat) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tune_gc()
    tune_malloc()
    data = {kind: values(kind, args.records) for kind in ("dicts", "structs")}
    results: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    blocks: dict[str, list[float]] = {}
    each: dict[tuple[str, str], list[float]] = {}
    head = "| chain µs | one by one µs | path µs | path+chain µs | rate | at 5 µs |"
    print(f"| round | record | chain {head}")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for round_no in range(args.rounds + 1):  # round 0 warms up and is reported as such
        for kind in data:
            for name in CHAINS:
                alone, single, path, full = measure(kind, name, data[kind])
                label = "warm-up" if round_no == 0 else str(round_no)
                print(
                    f"| {label} | {kind} | {name} | {alone:.2f} | {single:.2f} | {path:.2f} | "
                    f"{full:.2f} | {path / full:.2f} | {PATH_US / (PATH_US + alone):.2f} |"
                )
                if round_no:
                    results.setdefault((kind, name), []).append((alone, single, path, full))
            for name in EACH:
                cost = each_cost(kind, name, data[kind])
                if round_no and cost is not None:
                    each.setdefault((kind, name), []).append(cost)
        for name in BLOCK_CHAINS:
            cost = block_cost(name)
            print(
                f"| {'warm-up' if round_no == 0 else round_no} | block | {name} | "
                f"{cost:.3f} per row | | | | | {PATH_US / (PATH_US + cost):.2f} |"
            )
            if round_no:
                blocks.setdefault(name, []).append(cost)
    print("\nSummary (median of the rounds; the fastest and slowest chain alone in brackets):\n")
    print(f"| record | chain {head}")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (kind, name), rows in results.items():
        alone, single, path, full = (statistics.median(r[i] for r in rows) for i in range(4))
        low, high = min(r[0] for r in rows), max(r[0] for r in rows)
        print(
            f"| {kind} | {name} | {alone:.2f} ({low:.2f} to {high:.2f}) | {single:.2f} | "
            f"{path:.2f} | {full:.2f} | {path / full:.2f} | {PATH_US / (PATH_US + alone):.2f} |"
        )
    print("\nEach transform alone on a batch, µs per record (median of the rounds):\n")
    print("| transform | dicts | structs | at 5 µs (structs) |")
    print("|---|---:|---:|---:|")
    for name in EACH:
        medians = [statistics.median(each[(kind, name)]) if each.get((kind, name)) else None
                   for kind in ("dicts", "structs")]  # fmt: skip
        shown = " | ".join("" if m is None else f"{m:.2f}" for m in medians)
        last = medians[-1]
        at_5 = "" if last is None else f"{PATH_US / (PATH_US + last):.2f}"
        print(f"| {name} | {shown} | {at_5} |")
    print()
    for name, costs in blocks.items():
        cost = statistics.median(costs)
        cost_row = f"{cost:.3f} per row | | | | |"
        print(f"| block | {name} | {cost_row} {PATH_US / (PATH_US + cost):.2f} |")


if __name__ == "__main__":
    main()
