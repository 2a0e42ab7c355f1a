"""Rows with schemas, for the converters that write typed formats.

When a connector's key or value converter is schema-aware (Connect's JsonConverter,
Confluent's Avro, Protobuf and JSON Schema converters, or ``json`` with
``schemas.enable=true``), SparkSource hands its rows over with the Connect schemas of
:mod:`.schemas`: each Arrow batch Spark streams becomes a :class:`~eos.api.RecordBlock`
with ``encoded=False`` whose values are the batch's columns as one struct array (no Python
object per row), which the converters encode a column at a time.

The task loop encodes such blocks before its producer (with ``transforms`` that read
values, row by row). With :data:`BLOCKS` False the block is handed over as its rows
(:meth:`RecordBlock.records`: one Struct per row) — correct, and as slow as any
per-record path (kept for comparison in benches). The timestamp (``timestamp.column``)
is computed by Spark in epoch milliseconds; the topic column stays in the value, as with
the JSON mapping.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from eos.api import RecordBlock, Schema, SourceOffset, SourcePartition, SourceRecord
from services.connectors.spark.schemas import key_schema, value_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from services.connectors.spark.config import SparkSourceSettings

BLOCKS = True
"""Hand rows over as ``encoded=False`` blocks (False: one record per row)."""


class TypedRows:
    """The key and value schemas of a frame's rows, and its Arrow batches as records."""

    def __init__(
        self, frame: DataFrame, settings: SparkSourceSettings, hidden: Sequence[str]
    ) -> None:
        self.value_schema: Schema = value_schema(frame.schema, hidden)
        self.key_schema = key_schema(frame.schema, settings.key_columns)
        self.value_names = [f.name for f in self.value_schema.fields]
        self.key_columns = tuple(settings.key_columns)
        self.topic_column = settings.topic_column
        self._pa: Any = importlib.import_module("pyarrow")

    def block(
        self,
        batch: Any,
        *,
        topic: str,
        partition: SourcePartition,
        offset: SourceOffset | None,
        headers: Sequence[tuple[str, bytes]],
        header_columns: dict[str, Sequence[bytes | None]],
        timestamps: Sequence[int | None] | None,
    ) -> list[SourceRecord | RecordBlock]:
        pa = self._pa
        values = pa.StructArray.from_arrays(
            [batch.column(n) for n in self.value_names], names=self.value_names
        )
        keys = None
        if len(self.key_columns) == 1:
            keys = batch.column(self.key_columns[0])
        elif self.key_columns:
            keys = pa.StructArray.from_arrays(
                [batch.column(n) for n in self.key_columns], names=list(self.key_columns)
            )
        topics = None
        if self.topic_column:
            topics = [
                str(t) if t is not None else "" for t in batch.column(self.topic_column).to_pylist()
            ]
            if not all(topics):
                raise ValueError("a row has no topic: its topic.column is empty")
        block = RecordBlock(
            partition, offset, topic, values, keys, timestamps, headers, header_columns, topics,
            key_schema=self.key_schema, value_schema=self.value_schema, encoded=False,
        )  # fmt: skip
        return [block] if BLOCKS else list(block.records())
