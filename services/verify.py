"""``eos verify``: check a VerifiableSource topic for duplicates and gaps.

Reads the topic with ``isolation.level=read_committed`` — what any consumer that
honours transactions sees — and checks, per source partition, that the sequence
numbers form ``0..max`` with each present exactly once, except those that the
connector aborted on purpose (``--aborted`` / ``--aborted-pattern``): those must be
absent, and their absence is no gap. Prints one summary line::

    records=1200 partitions=8 duplicates=0 gaps=0 unexpected=0

then a few lines describing the first problems. Exit status 0 only when every
count is zero, the topic was read to its end and (with ``--expect``) at least that
many records arrived; 1 otherwise; 2 for unusable arguments.

``duplicates`` counts surplus copies of a sequence number, ``gaps`` missing
sequence numbers below a partition's highest, and ``unexpected`` records that must
not be there: an aborted sequence number that is visible (every copy), or a value
that is not a VerifiableSource JSON object. "The end" is the last stable offset of
each partition at the time of the read, so a transaction left open does not hold
the verifier back; with ``--expect`` it reads again until enough records arrived
or ``--timeout`` passed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from eos.config.files import load_config_file
from eos.errors import EosError
from eos.kafka import ClientConfig, make_client, make_consumer
from services.connectors.verifiable import aborted_records

DETAIL_LINES = 10
"""How many problems are described after the summary line."""
REREAD_SECONDS = 0.5
"""Pause between reads while waiting for ``--expect`` records."""
_FETCH_MS = 200

Aborted = Mapping[str, AbstractSet[int]]
"""Partition id → sequence numbers that were aborted on purpose."""


@dataclass(frozen=True)
class VerifyResult:
    records: int
    partitions: int
    duplicates: int
    gaps: int
    unexpected: int
    invalid: int = 0
    """Values that are not VerifiableSource records (included in ``unexpected``)."""
    complete: bool = True
    """False when not even one read reached the end of the topic before the timeout."""
    details: tuple[str, ...] = ()

    def summary(self) -> str:
        return (
            f"records={self.records} partitions={self.partitions} duplicates={self.duplicates} "
            f"gaps={self.gaps} unexpected={self.unexpected}"
        )

    def ok(self, expect: int | None = None) -> bool:
        clean = self.duplicates == self.gaps == self.unexpected == 0
        return clean and self.complete and (expect is None or self.records >= expect)

    def report(self, expect: int | None = None) -> list[str]:
        """The summary line, then the detail lines."""
        lines = [self.summary(), *(f"  {d}" for d in self.details)]
        if not self.complete:
            lines.append(
                "  could not read the topic to its end in time (does it exist? --timeout?)"
            )
        if expect is not None and self.records < expect:
            lines.append(f"  expected at least {expect} records, read {self.records}")
        return lines


@dataclass(frozen=True)
class AbortedPattern:
    """The aborts of a VerifiableSource run (``--aborted-pattern``), computed by
    :func:`~services.connectors.verifiable.aborted_records` for every task.
    ``total_per_partition=0`` (an endless run) means: up to the highest sequence
    number read."""

    partitions_per_task: int
    commit_every: int
    abort_every: int
    tasks: int
    total_per_partition: int

    @classmethod
    def parse(cls, spec: str) -> AbortedPattern:
        """``partitions_per_task,commit_every,abort_every,tasks,total_per_partition``."""
        try:
            numbers = [int(part) for part in spec.split(",")]
            pattern = cls(*numbers)
        except (ValueError, TypeError):
            raise ValueError(
                f"--aborted-pattern {spec!r}: expected five integers "
                "partitions_per_task,commit_every,abort_every,tasks,total_per_partition"
            ) from None
        if min(numbers) < 0 or pattern.partitions_per_task < 1 or pattern.tasks < 1:
            raise ValueError(f"--aborted-pattern {spec!r}: numbers out of range")
        return pattern

    def records(self, upto: int) -> dict[str, set[int]]:
        """Partition id → aborted sequence numbers (below ``total_per_partition``, or
        below ``upto`` for an endless run)."""
        total = self.total_per_partition or upto
        aborted: dict[str, set[int]] = {}
        for task in range(self.tasks):
            aborted.update(
                aborted_records(
                    self.partitions_per_task, self.commit_every, self.abort_every, task, total
                )
            )
        return aborted


def load_aborted(path: Path) -> dict[str, set[int]]:
    """A JSON file ``{"<partition>": [seqno, …], …}``."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{path}: expected a JSON object of partition id → list of seqnos")
    return {str(p): {int(s) for s in seqnos} for p, seqnos in data.items()}


def decode(raw: bytes | None) -> object:
    """A record value as JSON, or the raw bytes when it is not JSON (counted invalid)."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw


def _identify(value: object) -> tuple[str, int] | None:
    """(partition, seqno) of a VerifiableSource value (also inside a schema envelope)."""
    if isinstance(value, Mapping) and "partition" not in value and "payload" in value:
        value = value["payload"]
    if not isinstance(value, Mapping):
        return None
    partition, seqno = value.get("partition"), value.get("seqno")
    if partition is None or not isinstance(seqno, int) or isinstance(seqno, bool) or seqno < 0:
        return None
    return str(partition), seqno


def check(values: Iterable[object], aborted: Aborted | None = None) -> VerifyResult:
    """Check decoded record values (see the module documentation)."""
    aborted = aborted or {}
    counts: dict[str, Counter[int]] = defaultdict(Counter)
    records = invalid = 0
    problems: list[str] = []
    for value in values:
        records += 1
        found = _identify(value)
        if found is None:
            invalid += 1
            problems.append(f"record #{records} is not a VerifiableSource value: {value!r:.80}")
            continue
        counts[found[0]][found[1]] += 1
    duplicates = gaps = unexpected = 0
    for partition in sorted(counts):
        seen, skipped = counts[partition], aborted.get(partition, set())
        visible = sorted(s for s in seen if s in skipped)
        unexpected += sum(seen[s] for s in visible)
        if visible:
            problems.append(f"partition {partition}: aborted seqnos visible: {_ranges(visible)}")
        repeated = sorted(s for s, n in seen.items() if n > 1 and s not in skipped)
        duplicates += sum(seen[s] - 1 for s in repeated)
        if repeated:
            problems.append(f"partition {partition}: duplicated seqnos: {_ranges(repeated)}")
        missing = [s for s in range(max(seen) + 1) if s not in seen and s not in skipped]
        gaps += len(missing)
        if missing:
            problems.append(f"partition {partition}: missing seqnos: {_ranges(missing)}")
    return VerifyResult(
        records=records,
        partitions=len(counts),
        duplicates=duplicates,
        gaps=gaps,
        unexpected=unexpected + invalid,
        invalid=invalid,
        details=tuple(problems[:DETAIL_LINES]),
    )


def _ranges(numbers: list[int], most: int = 5) -> str:
    """``[1, 2, 3, 7]`` → ``"1..3, 7"`` (sorted input; at most ``most`` runs shown)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    shown = [f"{a}" if a == b else f"{a}..{b}" for a, b in runs[:most]]
    if len(runs) > most:
        shown.append(f"… ({len(numbers)} in all)")
    return ", ".join(shown)


async def read_committed(
    config: ClientConfig, topic: str, *, expect: int | None, timeout: float
) -> tuple[list[bytes | None], bool]:
    """Every committed value of ``topic``: read to the end (each partition's last
    stable offset), again and again until ``expect`` values arrived (if given).
    Returns the values and whether a read reached the end before the timeout."""
    values: list[bytes | None] = []
    reached_end = False
    with anyio.move_on_after(timeout):
        partitions = await _partitions(config, topic)
        consumer = make_consumer(
            config,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            client_id="eos-verify",
        )
        try:
            await consumer.start()  # in the try: a timeout during start still stops it
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            while True:
                ends = await consumer.end_offsets(partitions)  # read_committed: the LSO
                while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                    batches = await consumer.getmany(*partitions, timeout_ms=_FETCH_MS)
                    for batch in batches.values():
                        values.extend(record.value for record in batch)
                reached_end = True
                if expect is None or len(values) >= expect:
                    break
                await anyio.sleep(REREAD_SECONDS)
        finally:
            with anyio.CancelScope(shield=True):
                await consumer.stop()
    return values, reached_end


async def _partitions(config: ClientConfig, topic: str) -> list[TopicPartition]:
    """The topic's partitions, waiting for the topic to appear."""
    client = make_client(config, client_id="eos-verify-metadata")
    try:  # closed also when bootstrapping fails half-way
        await client.bootstrap()
        while True:
            cluster = await client.fetch_all_metadata()
            found = cluster.partitions_for_topic(topic)
            if found:
                return [TopicPartition(topic, p) for p in sorted(found)]
            await anyio.sleep(REREAD_SECONDS)
    finally:
        with anyio.CancelScope(shield=True):
            await client.close()


async def verify(
    client_config: ClientConfig,
    topic: str,
    expect: int | None = None,
    timeout: float = 60.0,
    aborted: Aborted | AbortedPattern | None = None,
) -> VerifyResult:
    """Read ``topic`` (read_committed) and :func:`check` what it holds."""
    raw, complete = await read_committed(client_config, topic, expect=expect, timeout=timeout)
    values = [decode(v) for v in raw]
    if isinstance(aborted, AbortedPattern):
        highest = max((found[1] for v in values if (found := _identify(v))), default=-1)
        aborted = aborted.records(highest + 1)
    result = check(values, aborted)
    if not complete:
        result = dataclasses.replace(result, complete=False)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default="localhost:9092", help="Kafka to read")
    parser.add_argument("--topic", required=True, help="the VerifiableSource output topic")
    parser.add_argument(
        "--expect", type=int, default=None, help="wait for at least this many records"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait in all (default 60)"
    )
    aborted = parser.add_mutually_exclusive_group()
    aborted.add_argument(
        "--aborted",
        type=Path,
        default=None,
        metavar="FILE",
        help="JSON file: partition id -> list of seqnos aborted on purpose",
    )
    aborted.add_argument(
        "--aborted-pattern",
        default=None,
        metavar="P,C,A,TASKS,N",
        help="VerifiableSource settings partitions.per.task, commit.every.records, "
        "abort.every.transactions, tasks.max, records.per.partition (0: endless)",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="Kafka client properties file (security settings), as Kafka's tools take",
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Kafka client property, e.g. security.protocol=SSL (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    """``eos verify``; prints the report and returns the exit status."""
    try:
        config = _client_config(args.bootstrap_server, args.property, args.command_config)
        aborted: Aborted | AbortedPattern | None = None
        if args.aborted is not None:
            aborted = load_aborted(args.aborted)
        elif args.aborted_pattern is not None:
            aborted = AbortedPattern.parse(args.aborted_pattern)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        result = anyio.run(verify, config, args.topic, args.expect, args.timeout, aborted)
    except (EosError, KafkaError, OSError) as exc:
        print(f"error: cannot read topic {args.topic!r}: {exc}", file=sys.stderr)
        return 1
    print("\n".join(result.report(args.expect)))
    return 0 if result.ok(args.expect) else 1


def _client_config(
    bootstrap: str, properties: list[str], command_config: Path | None = None
) -> ClientConfig:
    props: dict[str, Any] = load_config_file(command_config) if command_config else {}
    props["bootstrap.servers"] = bootstrap
    for item in properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--property {item!r}: expected KEY=VALUE")
        props[key.strip()] = value
    return ClientConfig.from_properties(props)
