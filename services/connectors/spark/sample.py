"""The sample dataset of ``make run`` and the benchmark: Parquet files with a unique ``id``.

Rows are a pure function of their id, so the same call writes the same data, and
ids never repeat across calls that use disjoint ``first_id`` ranges (new files
"dropped into the directory"). Each row is about 200 bytes of JSON once mapped.
Files are written under a hidden name and renamed into place, so a reader that
lists the directory never sees a half-written file.
"""

from __future__ import annotations

import datetime
import decimal
import importlib
import os
from pathlib import Path
from typing import Any

COLUMNS = ("id", "customer", "country", "amount", "quantity", "created_at", "day", "tags", "note")
_COUNTRIES = ("DE", "FR", "US", "JP", "BR", "IN", "CN", "GB")
_EPOCH = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def generate_sample_dataset(
    path: str | os.PathLike[str], rows: int = 100_000, *, files: int = 4, first_id: int = 0
) -> list[Path]:
    """Write ``rows`` rows (ids ``first_id`` … ``first_id + rows - 1``) as ``files``
    Parquet files into directory ``path``; returns the files written."""
    pa: Any = importlib.import_module("pyarrow")  # untyped; pyspark's Arrow dependency
    pq: Any = importlib.import_module("pyarrow.parquet")

    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("customer", pa.string()),
            ("country", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("quantity", pa.int32()),
            ("created_at", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("tags", pa.list_(pa.string())),
            ("note", pa.string()),
        ]
    )
    written: list[Path] = []
    files = max(1, min(files, rows)) if rows else 0
    per_file = -(-rows // files) if files else 0
    for n in range(files):
        start = first_id + n * per_file
        stop = min(first_id + rows, start + per_file)
        ids = range(start, stop)
        created = [_EPOCH + datetime.timedelta(seconds=i * 7) for i in ids]
        table = pa.table(
            {
                "id": list(ids),
                "customer": [f"customer-{i % 9973:05d}" for i in ids],
                "country": [_COUNTRIES[i % len(_COUNTRIES)] for i in ids],
                "amount": [decimal.Decimal(i % 100_000) / 100 for i in ids],
                "quantity": [1 + i % 17 for i in ids],
                "created_at": created,
                "day": [c.date() for c in created],
                "tags": [["sample", f"batch-{i // 1000}"] for i in ids],
                "note": [f"order {i} of the eos sample dataset" for i in ids],
            },
            schema=schema,
        )
        target = directory / f"part-{start:012d}.parquet"
        hidden = directory / f".{target.name}.tmp"
        pq.write_table(table, hidden, row_group_size=64 * 1024)
        os.replace(hidden, target)
        written.append(target)
    return written
