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

The ``each-blocks`` table times every bundled transform that has a block path (its class
overrides ``transform_block``) alone on typed blocks (``RecordBlock(encoded=False)``, the
path SparkSource's and FileSource's rows take: ``TransformChain.apply_block``) of
``BATCH`` rows holding the same rows as the structs of ``each`` (the six fields as one
pyarrow struct array, a topic column with one row in ten for ``tmp-orders``, a timestamp
column, the ``trace`` header), and in the same round the same transform on those rows as
batches of records (the structs of ``each``): µs per row on the block, µs per record,
and their ratio. ``path`` says whether every block stayed a block (``block``) or the
chain went on row by row (``rows``: then the block column is the cost of that).

Every round is printed, except ``each``'s; the summary takes the median of the rounds of
each (each ratio from the medians). The garbage collector is tuned as in the worker.
Usage:

    python bench/transforms.py [--records 50000] [--rounds 5]
                               [--tables chains,each,each-blocks]
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
from eos.converters import JsonConverter
from eos.transforms import TransformChain
from eos.transforms.base import RowTransform
from eos.transforms.loader import transform_class
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
BLOCK_PASSES = 5
"""``each-blocks``: passes over the blocks per round (a block step costs little a row)."""
TABLES = ("chains", "each", "each-blocks")


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


def each_chain(name: str) -> TransformChain:
    """The transform ``name`` alone, with its settings in ``EACH``."""
    props = {"transforms": "t", "transforms.t.type": name}
    props.update({f"transforms.t.{k}": v for k, v in EACH[name].items()})
    if name == "Filter":
        props.update(
            {"predicates": "p", "predicates.p.type": "TopicNameMatches",
             "predicates.p.pattern": "tmp-.*"}
        )  # fmt: skip
    return TransformChain.from_config(props)


def each_topic(i: int) -> str:
    """The topic of row ``i`` in ``each``: one in ten for Filter's predicate."""
    return "tmp-orders" if i % 10 == 0 else "orders"


def each_cost(kind: str, name: str, data: list[Any]) -> float | None:
    """µs per record of one transform alone on batches of records (None: the transform
    needs what these records lack)."""
    if name.startswith("SetSchemaMetadata") and kind == "dicts":
        return None
    c = each_chain(name)
    schema = SCHEMA if kind == "structs" else None
    records = [
        SourceRecord(PARTITION, {"i": i}, each_topic(i), v,
                     value_schema=schema, timestamp=STAMP, headers=[("trace", b"1")])
        for i, v in enumerate(data)
    ]  # fmt: skip

    def batch() -> None:
        for start in range(0, len(records), BATCH):
            if c.apply_all(records[start : start + BATCH]) is None:
                raise SystemExit(f"{name} on {kind}: the batch went one by one")

    return timed(batch) / len(records) * 1e6


BLOCK_CHAINS = ("route+header", "filter", "insert", "v2k", "three")


def struct_array(rows: int) -> Any:
    """The rows of :func:`values_of` as one pyarrow struct array of SCHEMA's fields."""
    pa: Any = importlib.import_module("pyarrow")
    return pa.array(
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


def typed_block(rows: int) -> RecordBlock:
    """A typed block of ``rows`` rows: the six fields of SCHEMA as one struct array."""
    values = struct_array(rows)
    return RecordBlock(PARTITION, {"i": rows}, "orders", values, value_schema=SCHEMA, encoded=False)


def has_block_path(name: str) -> bool:
    """Whether the transform ``name`` works on a block's columns (overrides
    ``transform_block``; the others always go row by row)."""
    cls = transform_class(name)
    return issubclass(cls, RowTransform) and cls.transform_block is not RowTransform.transform_block


def each_blocks(rows: int) -> list[RecordBlock]:
    """The rows of ``each``'s structs as typed blocks of ``BATCH`` rows: the same values,
    topics, timestamp and header."""
    values = struct_array(rows)
    blocks = []
    for start in range(0, rows, BATCH):
        end = min(start + BATCH, rows)
        blocks.append(
            RecordBlock(
                PARTITION, {"i": end - 1}, "orders", values.slice(start, end - start),
                topics=[each_topic(i) for i in range(start, end)],
                timestamps=[STAMP] * (end - start), headers=(("trace", b"1"),),
                value_schema=SCHEMA, encoded=False,
            )
        )  # fmt: skip
    return blocks


def each_block_cost(name: str, blocks: list[RecordBlock]) -> tuple[float, str]:
    """µs per row of the transform ``name`` alone on ``blocks`` (``BLOCK_PASSES`` passes),
    and ``block`` if every block stayed one, else ``rows``."""
    c = each_chain(name)
    out = [c.apply_block(b) for b in blocks]
    path = "block" if all(r is None or isinstance(r, RecordBlock) for r in out) else "rows"

    def run() -> None:
        for _ in range(BLOCK_PASSES):
            for block in blocks:
                c.apply_block(block)

    rows = sum(map(len, blocks)) * BLOCK_PASSES
    return timed(run) / rows * 1e6, path


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


def tables_arg(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in TABLES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"one or more of {', '.join(TABLES)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    every = ",".join(TABLES)
    parser.add_argument("--tables", type=tables_arg, default=list(TABLES),
                        help=f"which tables, comma-separated (default: {every})")  # fmt: skip
    args = parser.parse_args()
    tune_gc()
    tune_malloc()
    data = {kind: values(kind, args.records) for kind in ("dicts", "structs")}
    if "chains" in args.tables or "each" in args.tables:
        chains_and_each(data, args.rounds, args.tables)
    if "each-blocks" in args.tables:
        blocks_beside_records(data["structs"], args.rounds)


def chains_and_each(data: dict[str, list[Any]], rounds: int, tables: list[str]) -> None:
    """The chains table (and its block rows) and the ``each`` table, in the same rounds."""
    results: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    blocks: dict[str, list[float]] = {}
    each: dict[tuple[str, str], list[float]] = {}
    head = "| chain µs | one by one µs | path µs | path+chain µs | rate | at 5 µs |"
    if "chains" in tables:
        print(f"| round | record | chain {head}")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for round_no in range(rounds + 1):  # round 0 warms up and is reported as such
        label = "warm-up" if round_no == 0 else str(round_no)
        for kind in data:
            for name in CHAINS if "chains" in tables else ():
                alone, single, path, full = measure(kind, name, data[kind])
                print(
                    f"| {label} | {kind} | {name} | {alone:.2f} | {single:.2f} | {path:.2f} | "
                    f"{full:.2f} | {path / full:.2f} | {PATH_US / (PATH_US + alone):.2f} |"
                )
                if round_no:
                    results.setdefault((kind, name), []).append((alone, single, path, full))
            for name in EACH if "each" in tables else ():
                cost = each_cost(kind, name, data[kind])
                if round_no and cost is not None:
                    each.setdefault((kind, name), []).append(cost)
        for name in BLOCK_CHAINS if "chains" in tables else ():
            cost = block_cost(name)
            print(
                f"| {label} | block | {name} | "
                f"{cost:.3f} per row | | | | | {PATH_US / (PATH_US + cost):.2f} |"
            )
            if round_no:
                blocks.setdefault(name, []).append(cost)
    if "chains" in tables:
        print(
            "\nSummary (median of the rounds; the fastest and slowest chain alone in brackets):\n"
        )
        print(f"| record | chain {head}")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for (kind, name), rows in results.items():
            alone, single, path, full = (statistics.median(r[i] for r in rows) for i in range(4))
            low, high = min(r[0] for r in rows), max(r[0] for r in rows)
            print(
                f"| {kind} | {name} | {alone:.2f} ({low:.2f} to {high:.2f}) | {single:.2f} | "
                f"{path:.2f} | {full:.2f} | {path / full:.2f} | {PATH_US / (PATH_US + alone):.2f} |"
            )
    if "each" in tables:
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
    if "chains" in tables:
        print()
        for name, costs in blocks.items():
            cost = statistics.median(costs)
            cost_row = f"{cost:.3f} per row | | | | |"
            print(f"| block | {name} | {cost_row} {PATH_US / (PATH_US + cost):.2f} |")


def blocks_beside_records(structs: list[Any], rounds: int) -> None:
    """The ``each-blocks`` table: each transform with a block path alone on typed blocks
    and, in the same round, on the same rows as batches of records."""
    names = [name for name in EACH if has_block_path(name)]
    blocks = each_blocks(len(structs))
    costs: dict[str, list[tuple[float, float]]] = {}
    paths: dict[str, set[str]] = {}
    head = "| block µs/row | records µs/record | block ÷ records | path |"
    print(f"\nEach transform with a block path alone on typed blocks of {BATCH} rows "
          f"beside batches of records of the same rows (each-blocks):\n")  # fmt: skip
    print(f"| round | transform {head}")
    print("|---:|---|---:|---:|---:|---|")
    for round_no in range(rounds + 1):  # round 0 warms up and is reported as such
        label = "warm-up" if round_no == 0 else str(round_no)
        for name in names:
            block, path = each_block_cost(name, blocks)
            records = each_cost("structs", name, structs)
            assert records is not None  # every transform takes structs
            print(f"| {label} | {name} | {block:.3f} | {records:.2f} | {block / records:.3f} "
                  f"| {path} |")  # fmt: skip
            paths.setdefault(name, set()).add(path)
            if round_no:
                costs.setdefault(name, []).append((block, records))
    print("\nSummary (median of the rounds; the ratio from the medians):\n")
    print(f"| transform {head}")
    print("|---|---:|---:|---:|---|")
    for name, rows in costs.items():
        block = statistics.median(r[0] for r in rows)
        records = statistics.median(r[1] for r in rows)
        path = "/".join(sorted(paths[name]))
        print(f"| {name} | {block:.3f} | {records:.2f} | {block / records:.3f} | {path} |")
    others = [name for name in EACH if name not in names]
    print(f"\nRow by row on any block (no block path): {', '.join(others)}")


if __name__ == "__main__":
    main()
