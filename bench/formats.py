"""Converters: what a record costs per format, and SparkSource writing Avro against its
own JSON rate on the same rows.

Part 1, converters alone (no Kafka), µs per record, every round printed:
  json-stdlib      the JSON converter's encoder before this change (json.JSONEncoder)
  json-orjson      today's ``json`` converter (orjson), schemaless, as connectors use it
  json-schemas     Connect's JsonConverter with schemas.enable=true (envelope)
  avro-fastavro    the Avro converter, one record at a time (fastavro)
  avro-arrow       the Avro converter on a whole Arrow column (no Python object per row
                   but the final bytes, all alive at once as a block's are)
  protobuf-rows    the Protobuf converter, one record at a time (a message per record)
  protobuf-arrow   the Protobuf converter on a whole Arrow column (protobuf_arrow.py)
  json-rows        Connect's JsonConverter (schemas.enable=true, the envelope), one record
                   at a time (SparkSource's rows under JSON with schemas before json_arrow.py)
  json-arrow       the same converter on the whole Arrow column (json_arrow.py: no Python
                   object per row but the final bytes, the same bytes as json-rows)
  jsonschema-rows  the JSON Schema converter, one record at a time
  jsonschema-block the JSON Schema converter on the Arrow column (written whole by
                   json_arrow.py as the JSON converter's, behind the writer's header)
on VerifiableSource-like records (Part 1a) and on SparkSource's sample rows (Part 1b, the
rows and blocks of each format; json-rows and json-arrow in Part 1b only).

Part 2, SparkSource in a worker, exactly-once, the same Parquet rows, rounds alternating:
  json    the default converters (Spark writes the JSON)
  avro    key and value ``io.confluent.connect.avro.AvroConverter`` through a local
          Apicurio Registry (``eos dev-registry``); rows as Arrow blocks the task loop
          encodes whole with the converter (``RecordBlock(encoded=False)``).
Target: avro >= 0.8 x json.

Part 3, the same with Avro, rounds alternating, with and without a chain of three
transforms (issue 22's ``three``): ``InsertField$Value`` (a static field),
``RegexRouter`` (the topic renamed to another existing topic) and ``ValueToKey``
(``id``). On SparkSource's typed blocks all three run on the Arrow columns. Target: the
chain costs <= 15 % of the rate (three >= 0.85 x none).

Usage (through /work/bin/heavy on shared machines):

    python bench/formats.py [--rows 1000000] [--rounds 3] [--part 1,2,3]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from spark_to_kafka import SPARK, sample_data
from worker_run import (
    Progress,
    bench_broker,
    bench_process,
    bench_settings,
    run_until_committed,
    spark_connector,
)

from eos.converters import make_converter
from eos.converters.json_values import COMPACT
from eos.kafka.admin import ensure_topic
from services.connectors.verifiable import PADDED_SCHEMA, record_value
from services.dev_registry import DevRegistry

AVRO = "io.confluent.connect.avro.AvroConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
JSON_SCHEMAS = "org.apache.kafka.connect.json.JsonConverter"


# ------------------------------------------------------------------ part 1: converters alone


def _time(fn: Callable[[], Any], count: int) -> float:
    """µs per record of ``fn`` (the garbage collector off: the list of inputs alive
    would make its full collections, not the converter, the cost measured)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) / count * 1e6
    finally:
        gc.enable()


def _each(convert: Callable[[Any], Any], values: Sequence[Any]) -> None:
    """``convert`` every value, dropping each result at once, as a producer does after
    copying it into its batch (keeping 100 000 results alive costs ~2 µs a record in
    fresh memory pages, whatever wrote them)."""
    for value in values:
        convert(value)


def verifiable_rounds(url: str, n: int, rounds: int) -> dict[str, list[float]]:
    values = [record_value(f"p-{i % 8}", i, 0, 100) for i in range(n)]

    orjson = make_converter("json")
    schemas = make_converter(JSON_SCHEMAS)
    avro = make_converter(AVRO, {"schema.registry.url": url})
    out: dict[str, list[float]] = {k: [] for k in ("json-stdlib", "json-orjson", "json-schemas",
                                                   "avro-fastavro")}  # fmt: skip
    encode_avro = partial(avro.from_connect_data, "bench-verifiable", PADDED_SCHEMA)  # type: ignore[attr-defined]
    for _ in range(rounds):
        out["json-stdlib"].append(
            _time(lambda: _each(lambda v: COMPACT.encode(v).encode(), values), n)
        )
        out["json-orjson"].append(_time(lambda: _each(partial(orjson.convert, "t"), values), n))
        out["json-schemas"].append(_time(
            lambda: _each(partial(schemas.from_connect_data, "t", PADDED_SCHEMA), values), n))  # type: ignore[attr-defined]  # fmt: skip
        out["avro-fastavro"].append(_time(partial(_each, encode_avro, values), n))
    avro.close()  # type: ignore[attr-defined]
    return out


def sample_rounds(url: str, data: Path, n: int, rounds: int) -> dict[str, list[float]]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    from eos.api.schema import column_values
    from services.connectors.spark.schemas import value_schema

    table = pq.read_table(next(data.glob("*.parquet"))).slice(0, n)
    n = table.num_rows
    table = table.combine_chunks()
    columns = pa.StructArray.from_arrays(
        [c.chunk(0) for c in table.columns], names=table.column_names
    )
    schema = value_schema(from_arrow_schema(table.schema))
    values = column_values(schema, columns)
    orjson = make_converter("json")
    registry = {"schema.registry.url": url}
    typed = {name: make_converter(cls, registry) for name, cls in (
        ("avro", AVRO), ("protobuf", PROTOBUF), ("jsonschema", JSON_SCHEMA))}  # fmt: skip
    blocks = {"avro": "avro-arrow", "protobuf": "protobuf-arrow", "jsonschema": "jsonschema-block"}
    rows = {"avro": "avro-fastavro", "protobuf": "protobuf-rows", "jsonschema": "jsonschema-rows"}
    connect_json = make_converter(JSON_SCHEMAS)
    out: dict[str, list[float]] = {k: [] for k in ("json-stdlib", "json-schemas", "json-rows",
                                                   "json-arrow")}  # fmt: skip
    for name in typed:
        out[rows[name]], out[blocks[name]] = [], []
    plain = table.to_pylist()
    for _ in range(rounds):
        out["json-stdlib"].append(
            _time(lambda: _each(lambda v: COMPACT.encode(v).encode(), plain), n)
        )
        out["json-schemas"].append(_time(
            lambda: _each(partial(orjson.from_connect_data, "t", schema), values), n))  # type: ignore[attr-defined]  # fmt: skip
        out["json-rows"].append(_time(
            partial(_each, partial(connect_json.from_connect_data, "t", schema), values), n))  # type: ignore[attr-defined]  # fmt: skip
        out["json-arrow"].append(_time(
            partial(connect_json.from_connect_block, "t", schema, columns), n))  # type: ignore[attr-defined]  # fmt: skip
        for name, conv in typed.items():
            topic = f"bench-sample-{name}"
            out[rows[name]].append(_time(
                partial(_each, partial(conv.from_connect_data, topic, schema), values), n))  # type: ignore[attr-defined]  # fmt: skip
            out[blocks[name]].append(_time(
                partial(conv.from_connect_block, topic, schema, columns), n))  # type: ignore[attr-defined]  # fmt: skip
    for conv in typed.values():
        conv.close()  # type: ignore[attr-defined]
    return out


def converter_table(title: str, results: Mapping[str, Sequence[float]]) -> str:
    rounds = max(len(v) for v in results.values())
    head = " | ".join(f"round {i + 1}" for i in range(rounds))
    lines = [f"{title}", f"| converter | {head} | median µs/record |",
             "|---|" + "---:|" * (rounds + 1)]  # fmt: skip
    for name, values in results.items():
        cells = " | ".join(f"{v:.2f}" for v in values)
        lines.append(f"| {name} | {cells} | {statistics.median(values):.2f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ part 2: SparkSource


async def spark_round(data: Path, bootstrap: str, rows: int, extra: Mapping[str, str]) -> float:
    settings = bench_settings(bootstrap, "bench-formats", {"spark.master": "local[2]", **SPARK})
    connector = await spark_connector(settings, "bench", data, **extra)
    if "transforms" in extra:  # RegexRouter's topic: renamed from the connector's
        routed = connector["topic"].replace("-out", "-routed")
        await ensure_topic(settings.client_config, routed, partitions=2)
    progress = await run_until_committed(settings, connector, rows, max(180, rows / 2000),
                                         progress=Progress(rows))  # fmt: skip
    if not progress.done.is_set():
        raise RuntimeError("the commits did not cover every row in time")
    return rows / progress.seconds


THREE = {
    "transforms": "insert,route,key",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.static.field": "src",
    "transforms.insert.static.value": "db",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "(.*)-out",
    "transforms.route.replacement": "$1-routed",
    "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
    "transforms.key.fields": "id",
}
"""Part 3's chain (Connect's class names, as a Connect config has them)."""


def spark_rounds(
    bootstrap: str, url: str, rows: int, files: int, rounds: int, three: bool = False
) -> list[tuple[str, float]]:
    data = sample_data(rows, files)
    avro = {"key.converter": AVRO,
            "value.converter": AVRO, "key.converter.schema.registry.url": url,
            "value.converter.schema.registry.url": url}  # fmt: skip
    variants = (("avro", avro), ("three", {**avro, **THREE})) if three else (
        ("json", {}), ("avro", avro))  # fmt: skip
    results: list[tuple[str, float]] = []
    for n in range(rounds):
        for name, extra in variants:
            rate = anyio.run(spark_round, data, bootstrap, rows, extra)
            results.append((name, rate))
            print(f"  round {n + 1} {name}: {rate:,.0f} rows/s", flush=True)
    return results


def spark_table(results: Sequence[tuple[str, float]], rows: int) -> str:
    base, other = results[0][0], results[1][0]
    target = 0.85 if other == "three" else 0.8
    lines = [
        f"SparkSource, {rows:,} rows, 1 task, exactly-once, local[2], same Parquet rows",
        f"| round | {base} rows/s | {other} rows/s | {other} ÷ {base} |",
        "|---:|---:|---:|---:|",
    ]
    pairs = [(results[i][1], results[i + 1][1]) for i in range(0, len(results) - 1, 2)]
    for n, (j, a) in enumerate(pairs, start=1):
        lines.append(f"| {n} | {j:,.0f} | {a:,.0f} | {a / j:.2f} |")
    ratio = statistics.median(a / j for j, a in pairs)
    lines.append(f"target {other} >= {target} x {base}: median {ratio:.2f}, "
                 f"{'met' if ratio >= target else 'NOT met'}")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=100_000, help="records per part-1 round")
    parser.add_argument("--part", default="1,2,3")
    args = parser.parse_args()
    bench_process()
    parts = args.part.split(",")
    registry = DevRegistry(Path(tempfile.mkdtemp(prefix="eos-bench-registry-")))
    url = registry.start(0).url
    try:
        if "1" in parts:
            print(converter_table("Part 1a: VerifiableSource records (about 100 B of JSON)",
                                  verifiable_rounds(url, args.records, args.rounds)))  # fmt: skip
            data = sample_data(args.rows, args.files)
            print(converter_table("Part 1b: SparkSource sample rows (9 columns)",
                                  sample_rounds(url, data, args.records, args.rounds)))  # fmt: skip
        for part in ("2", "3"):
            if part in parts:
                with bench_broker(None) as (bootstrap, _pids):
                    results = spark_rounds(bootstrap, url, args.rows, args.files, args.rounds,
                                           three=part == "3")  # fmt: skip
                print(spark_table(results, args.rows))
    finally:
        registry.stop()
    print(json.dumps({"when": datetime.datetime.now(datetime.UTC).isoformat()}))


if __name__ == "__main__":
    main()
