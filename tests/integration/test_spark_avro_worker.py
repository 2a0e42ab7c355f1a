"""An ``eos worker`` process runs SparkSource with Confluent's Avro converter class names
for keys and values, through the session's schema registry: every Spark type SparkSource
maps arrives as the source row, read back with confluent-kafka's AvroDeserializer."""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from eos.kafka import ClientConfig, read_to_end
from services.dev_registry import RegistryState
from tests.conftest import TopicFactory
from tests.integration.registry_readers import read_avro
from tests.integration.test_spark_files import TYPE_ROWS, TYPE_SCHEMA
from tests.integration.test_spark_harness import session_of, spark_resources
from tests.integration.test_spark_worker import SPARK, spark_connector
from tests.integration.worker_harness import WorkerProcess, worker_props

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
UTC = datetime.UTC
AVRO = "io.confluent.connect.avro.AvroConverter"

EXPECTED: list[dict[str, Any]] = [
    {
        "id": 1, "small": 7, "flag": True, "ratio": 0.5, "price": decimal.Decimal("12.300"),
        "day": datetime.date(2024, 2, 29),
        "ts": datetime.datetime(2024, 2, 29, 12, 30, 1, 123000, UTC),  # milliseconds
        "local_ts": datetime.datetime(2024, 2, 29, 12, 30, 1, tzinfo=UTC),
        "raw": b"\x00\xffeos", "note": "zoë", "tags": ["a", None], "point": {"x": 1, "y": 2.5},
        "attrs": {"k": 1}, "codes": [{"key": 3, "value": datetime.date(2000, 1, 1)}],
        "empty": None,
    },
    {
        "id": 2, "small": None, "flag": False, "ratio": math.nan,
        "price": decimal.Decimal("-0.001"), "day": None, "ts": None, "local_ts": None,
        "raw": None, "note": None, "tags": [], "point": None, "attrs": {}, "codes": None,
        "empty": None,
    },
]  # fmt: skip


async def test_a_worker_writes_every_spark_type_as_avro_through_the_registry(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    dev_registry: RegistryState,
    tmp_path: Path,
) -> None:
    topic = await topic_factory()
    data = tmp_path / "typed"
    spark = session_of(spark_resources())
    spark.createDataFrame(TYPE_ROWS, TYPE_SCHEMA).coalesce(1).write.parquet(str(data))
    registry = {"schema.registry.url": dev_registry.url}
    connector = spark_connector("typed", topic, data, **{
        "key.converter": AVRO, "value.converter": AVRO,
        **{f"key.converter.{k}": v for k, v in registry.items()},
        **{f"value.converter.{k}": v for k, v in registry.items()},
    })  # fmt: skip
    worker = WorkerProcess(tmp_path, {**worker_props(bootstrap, unique_name("g")), **SPARK},
                           [connector])  # fmt: skip
    try:
        worker.start()
        await anyio.to_thread.run_sync(worker.wait_running, "typed", 1, 120)
        with anyio.fail_after(120):
            while len(records := await read_to_end(client_config, topic, timeout=30)) < 2:
                assert worker.alive(), worker.tail()
                await anyio.sleep(0.5)
    finally:
        worker.stop()
    keys = [read_avro(dev_registry.url, topic, r.key, key=True) for r in records]
    values = [read_avro(dev_registry.url, topic, r.value) for r in records]
    assert keys == [1, 2]
    assert math.isnan(values[1].pop("ratio"))
    assert values == [EXPECTED[0], {k: v for k, v in EXPECTED[1].items() if k != "ratio"}]
