"""Formats, schema evolution and dead letters end to end, through SIGKILLs: one ``eos
worker`` process (its own local Spark) runs four SparkSource connectors on Parquet files
that keep arriving, and is SIGKILLed five times while they write:

- ``avro``, ``protobuf``, ``jsonschema``: rows of every Spark type SparkSource maps, to
  Kafka as Avro, Protobuf and JSON Schema through the session's schema registry; from the
  fourth round on, the ``avro`` files have an added optional column (a new schema version);
- ``poison``: JSON rows (Spark writes them) through ``Cast$Value`` (``amount`` to float64),
  every tenth row's amount not a number, ``errors.tolerance=all`` and a dead-letter topic.

Then, on the same worker, ``breaking`` (Avro) gets a file whose ``note`` column changed
from a string to a number, which the registry refuses under ``BACKWARD``: its task FAILED
with the registry's message, and nothing of that file in its topic.

Judged with readers eos does not own: confluent-kafka's ``AvroDeserializer``,
``ProtobufDeserializer`` (a ``protoc``-compiled class) and ``JSONDeserializer`` through
``SchemaRegistryClient``, on read_committed consumers: every row exactly once, equal to the
row written to the file; old and new Avro records decode; every poison row exactly once in
the dead-letter topic with Connect's headers, every good row once in the output."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import os
import random
import re
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from eos.kafka import ClientConfig, read_to_end
from eos.kafka.read_to_end import TopicReader
from services.dev_registry import RegistryState
from tests.conftest import TopicFactory
from tests.integration.registry_readers import protobuf_class, read_avro, read_json, schema_id
from tests.integration.test_spark_worker import SPARK
from tests.integration.worker_harness import QUICK_REJOIN, WorkerProcess, worker_props

pytestmark = [pytest.mark.system, pytest.mark.integration, pytest.mark.timeout(600)]

UTC = datetime.UTC
KILLS = 5
FILES, ROWS = 1, 1200
"""Files a connector gets each round, rows a file (a Spark job a file: few, large ones;
100 rows a transaction)."""
FORMATS = {
    "avro": "io.confluent.connect.avro.AvroConverter",
    "protobuf": "io.confluent.connect.protobuf.ProtobufConverter",
    "jsonschema": "io.confluent.connect.json.JsonSchemaConverter",
}
EVOLVES_FROM = 3
"""The round from which the avro files have the added column ``extra``."""
EPOCH = datetime.datetime(2024, 1, 1, tzinfo=UTC)


def row(i: int, evolved: bool = False) -> dict[str, Any]:
    """Row ``i`` of the typed files: every type, nulls where a column may have them."""
    stamp = EPOCH + datetime.timedelta(milliseconds=i * 1001)
    values: dict[str, Any] = {
        "id": i,
        "tiny": i % 256 - 128,
        "small": None if i % 7 == 0 else i % 30000,
        "whole": i * 1000 - 2**31 + 1,
        "half": i / 4 - 100,
        "flag": i % 2 == 0,
        "ratio": i / 4,
        "price": decimal.Decimal(i).scaleb(-3) - 5,
        "day": None if i % 11 == 0 else (EPOCH + datetime.timedelta(days=i % 400)).date(),
        "ts": stamp,
        "local_ts": None if i % 9 == 0 else stamp.replace(tzinfo=None),
        "raw": None if i % 13 == 0 else i.to_bytes(4, "big"),
        "note": None if i % 5 == 0 else f"ñote {i}",
        "tags": [f"t{i % 3}", "x"][: i % 3],
        "point": None if i % 6 == 0 else {"x": i % 100, "y": i / 8},
        "attrs": {} if i % 4 == 0 else {"k": i % 10, "j": -i},
        "codes": {i % 50: (EPOCH + datetime.timedelta(days=i % 30)).date()},
        "empty": None,
    }
    if evolved:
        values["extra"] = None if i % 2 else f"e{i}"
    return values


def write_typed(directory: Path, first: int, evolved: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = [
        ("id", pa.int64()), ("tiny", pa.int8()), ("small", pa.int16()),
        ("whole", pa.int32()), ("half", pa.float32()), ("flag", pa.bool_()),
        ("ratio", pa.float64()), ("price", pa.decimal128(12, 3)), ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")), ("local_ts", pa.timestamp("us")),
        ("raw", pa.binary()), ("note", pa.string()), ("tags", pa.list_(pa.string())),
        ("point", pa.struct([("x", pa.int32()), ("y", pa.float64())])),
        ("attrs", pa.map_(pa.string(), pa.int32())), ("codes", pa.map_(pa.int32(), pa.date32())),
        ("empty", pa.string()),
    ]  # fmt: skip
    if evolved:
        fields.append(("extra", pa.string()))
    schema = pa.schema(fields)
    rows = [row(i, evolved) for i in range(first, first + ROWS)]
    for name, kind in fields:
        if isinstance(kind, pa.MapType):
            for r in rows:
                r[name] = list(r[name].items())
    table = pa.Table.from_pylist(rows, schema=schema)
    _publish(directory, first, lambda path: pq.write_table(table, path))


def write_notes(directory: Path, first: int, notes: list[Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": range(first, first + len(notes)), "note": notes})
    _publish(directory, first, lambda path: pq.write_table(table, path))


def write_poison(directory: Path, first: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = list(range(first, first + ROWS))
    table = pa.table({"id": ids, "amount": [amount(i) for i in ids]})
    _publish(directory, first, lambda path: pq.write_table(table, path))


def amount(i: int) -> str:
    return "n/a" if i % 10 == 3 else f"{i}.5"


def _publish(directory: Path, first: int, write: Callable[[Path], None]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"part-{first:09d}.parquet"
    hidden = directory / f".{target.name}.tmp"
    write(hidden)
    os.replace(hidden, target)


# ---------------------------------------------------------------- canonical rows


def canonical(values: dict[str, Any]) -> dict[str, Any]:
    """A row in one form whatever the format: timestamps as epoch ms (zone-less ones as
    UTC), structs as tuples, maps as dicts."""

    def millis(t: datetime.datetime | None) -> int | None:
        if t is None:
            return None
        aware = t if t.tzinfo else t.replace(tzinfo=UTC)
        return round(aware.timestamp() * 1000)

    point = values["point"]
    out = {
        **values,
        "ts": millis(values["ts"]),
        "local_ts": millis(values["local_ts"]),
        "point": None if point is None else (point["x"], point["y"]),
    }
    return out


def from_avro(value: dict[str, Any]) -> dict[str, Any]:
    codes = value["codes"]
    return canonical({**value, "codes": {e["key"]: e["value"] for e in codes}})


def from_json_schema(value: dict[str, Any]) -> dict[str, Any]:
    def days(n: int | None) -> datetime.date | None:
        return None if n is None else datetime.date(1970, 1, 1) + datetime.timedelta(days=n)

    def ms(n: int | None) -> datetime.datetime | None:
        return None if n is None else datetime.datetime.fromtimestamp(n / 1000, UTC)

    unscaled = int.from_bytes(base64.b64decode(value["price"]), "big", signed=True)
    return canonical({
        **value,
        "price": decimal.Decimal(unscaled).scaleb(-3),
        "day": days(value["day"]),
        "ts": ms(value["ts"]),
        "local_ts": ms(value["local_ts"]),
        "raw": None if value["raw"] is None else base64.b64decode(value["raw"]),
        "codes": {e["key"]: days(e["value"]) for e in value["codes"]},
    })  # fmt: skip


def from_protobuf(msg: Any) -> dict[str, Any]:
    def has(name: str) -> bool:
        return bool(msg.HasField(name))

    def date(d: Any) -> datetime.date:
        return datetime.date(d.year, d.month, d.day)

    def stamp(name: str) -> datetime.datetime | None:
        return getattr(msg, name).ToDatetime(tzinfo=UTC) if has(name) else None

    unscaled = int.from_bytes(msg.price.value, "big", signed=True)
    return canonical({
        "id": msg.id, "tiny": msg.tiny, "small": msg.small if has("small") else None,
        "whole": msg.whole, "half": msg.half, "flag": msg.flag,
        "ratio": msg.ratio, "price": decimal.Decimal(unscaled).scaleb(-msg.price.scale),
        "day": date(msg.day) if has("day") else None, "ts": stamp("ts"),
        "local_ts": stamp("local_ts"), "raw": msg.raw if has("raw") else None,
        "note": msg.note if has("note") else None, "tags": list(msg.tags),
        "point": {"x": msg.point.x, "y": msg.point.y} if has("point") else None,
        "attrs": dict(msg.attrs), "codes": {k: date(v) for k, v in msg.codes.items()},
        "empty": msg.empty if has("empty") else None,
    })  # fmt: skip


class ProtobufReader:
    """confluent-kafka's ProtobufDeserializer with the class protoc makes of each schema
    (the message named in the schema the registry holds)."""

    def __init__(self, url: str, workdir: Path) -> None:
        self.url, self.workdir = url, workdir
        self._readers: dict[int, Any] = {}

    def __call__(self, topic: str, data: bytes) -> Any:
        from tests.integration.registry_readers import context, protobuf_reader

        found = self._readers.get(schema_id(data))
        if found is None:
            text = httpx.get(f"{self.url}/schemas/ids/{schema_id(data)}").json()["schema"]
            name = re.search(r"^message (\w+)", text, re.M)
            assert name, text
            cls = protobuf_class(self.url, data, name[1], self.workdir)
            found = self._readers[schema_id(data)] = protobuf_reader(cls)
        return found(data, context(topic))


# --------------------------------------------------------------------------- the run


def connectors(
    dirs: dict[str, Path], topics: dict[str, str], registry: str, dead: str
) -> list[dict[str, str]]:
    common = {
        "connector.class": "services.connectors.spark:SparkSource",
        "exactly.once.support": "required",
        "key.columns": "id",
        "poll.interval.ms": "300",
        "batch.rows": "100",
        "max.buffered.rows": "1000",
    }
    made = []
    for name, converter in FORMATS.items():
        made.append({
            **common, "name": name, "path": str(dirs[name]), "topic": topics[name],
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": converter, "value.converter.schema.registry.url": registry,
            "value.converter.optional.for.nullables": "true",
        })  # fmt: skip
    made.append({
        **common, "name": "poison", "path": str(dirs["poison"]), "topic": topics["poison"],
        "transforms": "amount",
        "transforms.amount.type": "org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.amount.spec": "amount:float64",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dead,
        "errors.deadletterqueue.context.headers.enable": "true",
        "lineage.headers": "true",
    })  # fmt: skip
    return made


async def progress(config: ClientConfig, topics: list[str]) -> int:
    """Records and markers in ``topics`` (committed or not)."""
    total = 0
    for topic in topics:
        reader = TopicReader(config, topic)
        await reader.start()
        try:
            total += sum((await reader.end_offsets()).values())
        finally:
            await reader.close()
    return total


async def incompatible_change(
    worker: WorkerProcess, directory: Path, topic: str, registry: str, config: ClientConfig
) -> None:
    """A connector whose second file changes a column's type: FAILED naming the change,
    only the first file's rows in its topic."""
    write_notes(directory, 0, [f"n{i}" for i in range(50)])
    settings = {
        "connector.class": "services.connectors.spark:SparkSource",
        "exactly.once.support": "required", "path": str(directory), "topic": topic,
        "key.columns": "id", "poll.interval.ms": "300",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": FORMATS["avro"], "value.converter.schema.registry.url": registry,
    }  # fmt: skip
    async with httpx.AsyncClient(base_url=worker.rest_url, timeout=10) as http:
        answer = await http.put("/connectors/breaking/config", json=settings)
        assert answer.status_code in (200, 201), answer.text
        with anyio.fail_after(120):
            while True:
                if len(await read_to_end(config, topic)) >= 50:
                    break
                await anyio.sleep(0.5)
        write_notes(directory, 50, list(range(50)))  # note: a string, now a long
        with anyio.fail_after(120):
            while True:
                tasks = (await http.get("/connectors/breaking/status")).json().get("tasks", [])
                if tasks and tasks[0]["state"] == "FAILED":
                    break
                await anyio.sleep(0.3)
    first = tasks[0]["trace"].splitlines()[0]
    assert (
        f"refused the schema for subject '{topic}-value' (compatibility BACKWARD), "
        "incompatible change"
    ) in first, first
    ids = [read_avro(registry, topic, r.value)["id"] for r in await read_to_end(config, topic)]
    assert sorted(ids) == list(range(50))  # the first file once; nothing of the second


async def test_formats_evolution_and_dead_letters_exactly_once_through_sigkills(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    dev_registry: RegistryState,
    tmp_path: Path,
) -> None:
    names = [*FORMATS, "poison"]
    topics = {name: await topic_factory(partitions=2) for name in names}
    dead = await topic_factory()
    dirs = {name: tmp_path / name for name in names}
    url = dev_registry.url
    props = {**worker_props(bootstrap, unique_name("g")), **QUICK_REJOIN, **SPARK}
    worker = WorkerProcess(tmp_path, props, connectors(dirs, topics, url, dead))
    rng = random.Random(f"formats-{dead}")
    try:
        for round_no in range(KILLS + 1):
            for f in range(FILES):
                first = (round_no * FILES + f) * ROWS
                for name in FORMATS:
                    evolved = name == "avro" and round_no >= EVOLVES_FROM
                    write_typed(dirs[name], first, evolved)
                write_poison(dirs["poison"], first)
            worker.start()
            for name in names:
                await anyio.to_thread.run_sync(worker.wait_running, name, 1, 180)
            if round_no == KILLS:
                break
            # kill once a random part of this round's rows (four connectors) is written
            target = await progress(client_config, list(topics.values()))
            target += rng.randint(ROWS // 4, 2 * FILES * ROWS)
            with anyio.move_on_after(60):
                while await progress(client_config, list(topics.values())) < target:
                    assert worker.alive(), worker.tail()
                    await anyio.sleep(0.05)
            await anyio.sleep(rng.uniform(0, 0.3))
            worker.kill(signal.SIGKILL)
        total = (KILLS + 1) * FILES * ROWS
        poison = sum(1 for i in range(total) if amount(i) == "n/a")
        with anyio.fail_after(240):
            while True:
                counts = {n: len(await read_to_end(client_config, t)) for n, t in topics.items()}
                dead_count = len(await read_to_end(client_config, dead))
                if (
                    min(counts[n] for n in FORMATS) >= total
                    and dead_count >= poison
                    and (counts["poison"] >= total - poison)
                ):
                    break
                assert worker.alive(), worker.tail()
                await anyio.sleep(1)
        breaking = await topic_factory()
        await incompatible_change(worker, tmp_path / "breaking", breaking, url, client_config)
    finally:
        worker.stop()
    assert worker.starts == KILLS + 1
    expected = {i: canonical(row(i)) for i in range(total)}
    evolved_from = EVOLVES_FROM * FILES * ROWS
    protobuf = ProtobufReader(url, tmp_path / "proto")
    readers: dict[str, Callable[[str, bytes], dict[str, Any]]] = {
        "avro": lambda topic, data: from_avro(read_avro(url, topic, data)),
        "jsonschema": lambda topic, data: from_json_schema(read_json(url, topic, data)),
        "protobuf": lambda topic, data: from_protobuf(protobuf(topic, data)),
    }
    for name, read in readers.items():
        records = await read_to_end(client_config, topics[name])
        values = [read(topics[name], r.value) for r in records]
        ids = Counter(v["id"] for v in values)
        assert sorted(ids) == list(range(total)), name
        assert max(ids.values()) == 1, (name, [i for i, n in ids.items() if n > 1][:10])
        assert all(r.key == str(v["id"]).encode() for r, v in zip(records, values, strict=True))
        for value in values:
            extra = value.pop("extra", None)
            assert value == expected[value["id"]], name
            if name == "avro" and value["id"] >= evolved_from:
                assert extra == row(value["id"], True)["extra"]
        if name == "avro":
            versions = {schema_id(r.value) for r in records}
            assert len(versions) == 2, versions  # before and after the added column
            subject = f"{url}/subjects/{topics['avro']}-value/versions"
            assert len(httpx.get(subject).json()) == 2  # noqa: ASYNC210 - the test's own reader
    good = await read_to_end(client_config, topics["poison"])
    assert sorted(json.loads(r.value)["id"] for r in good) == [
        i for i in range(total) if amount(i) != "n/a"
    ]  # every good row once
    assert all(json.loads(r.value)["amount"] == float(amount(json.loads(r.value)["id"]))
               for r in good)  # fmt: skip
    letters = await read_to_end(client_config, dead)
    assert sorted(json.loads(r.value)["id"] for r in letters) == [
        i for i in range(total) if amount(i) == "n/a"
    ]  # every poison row once, as the transform received it
    for letter in letters:
        headers = dict(letter.headers)
        assert json.loads(letter.value)["amount"] == "n/a"
        assert headers["__connect.errors.stage"] == b"TRANSFORMATION"
        assert headers["__connect.errors.class.name"] == (
            b"org.apache.kafka.connect.transforms.Cast$Value"
        )
        assert headers["__connect.errors.connector.name"] == b"poison"
        assert headers["__connect.errors.topic"] == topics["poison"].encode()
        assert b"n/a" in headers["__connect.errors.exception.message"]
        assert json.loads(headers["__eos.errors.source.partition"])["file"].endswith(".parquet")
        assert headers["eos.spark.file"]  # the row's own headers come first
