"""The schema-registry client: eos's own (eos/converters/schema_registry.py) against
confluent-kafka's ``SchemaRegistryClient``, both with their defaults, on a local Apicurio
Registry (``eos dev-registry``'s, Confluent-compatible API), every round printed:

  import ms        a fresh interpreter importing the client module (median of 5)
  register ms      registering a new schema under a new subject (one request each)
  cached id µs     the id of a schema already registered, asked again (each caches)
  latest ms        a subject's latest version (``use.latest.version``; eos asks once per
                   writer, confluent-kafka's client caches it for its ttl: here uncached)
and what each needs installed beside eos's base dependencies (httpx is one already).

Usage: python bench/registry_client.py [--rounds 3] [--subjects 200]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from eos.converters.schema_registry import RegistryClient, RegistrySchema
from services.dev_registry import DevRegistry

AVRO = {"type": "record", "name": "Row", "fields": [{"name": "id", "type": "long"}]}


def import_ms(module: str) -> float:
    runs = []
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-c", "import time; t = time.perf_counter(); "
             f"import {module}; print((time.perf_counter() - t) * 1000)"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        runs.append(float(out.stdout))
    return statistics.median(runs)


def timed(calls: int, call: Callable[[int], Any]) -> float:
    began = time.perf_counter()
    for i in range(calls):
        call(i)
    return (time.perf_counter() - began) / calls


def schema_text(i: int) -> str:
    return json.dumps({**AVRO, "name": f"Row{i}"})


def eos_round(url: str, subjects: int) -> dict[str, float]:
    client = RegistryClient.from_settings({"schema.registry.url": url})
    prefix = uuid.uuid4().hex[:8]
    try:
        schemas = [RegistrySchema("AVRO", schema_text(i)) for i in range(subjects)]
        register = timed(subjects, lambda i: client.register(f"{prefix}-eos-{i}", schemas[i]))
        cached = timed(subjects * 50, lambda i: client.register(
            f"{prefix}-eos-{i % subjects}", schemas[i % subjects]))  # fmt: skip
        latest = timed(subjects, lambda i: client.latest(f"{prefix}-eos-{i}"))
    finally:
        client.close()
    return {"register ms": register * 1e3, "cached id µs": cached * 1e6, "latest ms": latest * 1e3}


def confluent_round(url: str, subjects: int) -> dict[str, float]:
    prefix = uuid.uuid4().hex[:8]
    schemas = [Schema(schema_text(i), "AVRO") for i in range(subjects)]
    with SchemaRegistryClient({"url": url}) as client:
        register = timed(subjects, lambda i: client.register_schema(
            f"{prefix}-ck-{i}", schemas[i]))  # fmt: skip
        cached = timed(subjects * 50, lambda i: client.register_schema(
            f"{prefix}-ck-{i % subjects}", schemas[i % subjects]))  # fmt: skip
        latest = timed(subjects, lambda i: client.get_latest_version(f"{prefix}-ck-{i}"))
    return {"register ms": register * 1e3, "cached id µs": cached * 1e6, "latest ms": latest * 1e3}


def installed(distributions: list[str]) -> str:
    sizes = []
    for name in distributions:
        dist = importlib.metadata.distribution(name)
        size = sum((f.size or 0) for f in dist.files or ())
        sizes.append(f"{name} {size / 1e6:.1f} MB")
    return ", ".join(sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--subjects", type=int, default=200)
    args = parser.parse_args()
    registry = DevRegistry(Path(tempfile.mkdtemp(prefix="eos-bench-registry-")))
    url = registry.start(0).url
    rows: list[tuple[str, int, dict[str, float]]] = []
    try:
        for n in range(1, args.rounds + 1):  # alternating, both warm after round 1
            rows.append(("eos", n, eos_round(url, args.subjects)))
            rows.append(("confluent-kafka", n, confluent_round(url, args.subjects)))
    finally:
        registry.stop()
    print("| client | import ms | needs beside eos's base |")
    print("|---|---|---|")
    print(f"| eos | {import_ms('eos.converters.schema_registry'):.0f} | nothing |")
    needs = installed(["confluent-kafka", "authlib", "cachetools", "attrs"])
    print(f"| confluent-kafka | {import_ms('confluent_kafka.schema_registry'):.0f} | {needs} |")
    print()
    columns = ["register ms", "cached id µs", "latest ms"]
    print("| client | round | " + " | ".join(columns) + " |")
    print("|---|---" + "|---" * len(columns) + "|")
    for client, n, found in rows:
        print(f"| {client} | {n} | " + " | ".join(f"{found[c]:.2f}" for c in columns) + " |")


if __name__ == "__main__":
    main()
