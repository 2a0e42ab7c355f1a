"""``eos transactions``: Kafka's ``kafka-transactions.sh`` for Python users (docs/transactions.md).

Same commands, options, tables and meaning::

    eos transactions --bootstrap-server B [--command-config FILE] list [--duration-filter MS]
    eos transactions … describe --transactional-id ID
    eos transactions … describe-producers --topic T --partition P [--broker-id N]
    eos transactions … find-hanging (--topic T [--partition P] | --broker-id N)
                       [--max-transaction-timeout MINUTES] [--include-ongoing]
    eos transactions … abort --topic T --partition P --start-offset OFFSET
    eos transactions … abort --topic T --partition P --producer-id I --producer-epoch E
                       --coordinator-epoch C

``--command-config`` is a Kafka client properties file (an operator's: ``abort`` needs
ClusterAction on the Cluster). ``--include-ongoing`` is eos's: ``find-hanging`` then also
lists open transactions the coordinator still tracks (they end when their timeout expires;
Kafka's tool leaves them out). A failed request prints one ``error:`` line, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
from aiokafka.errors import KafkaError

from eos.config.files import load_config_file
from eos.errors import EosError
from eos.kafka.clients import ClientConfig
from eos.kafka.hanging import OpenTransaction, ProducerState, TransactionsAdmin


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tx = sub.add_parser("transactions", help="list, describe, find and abort transactions")
    tx.add_argument("--bootstrap-server", required=True, metavar="host:port")
    tx.add_argument("--command-config", type=Path, default=None, metavar="FILE",
                    help="Kafka client properties (security settings)")  # fmt: skip
    commands = tx.add_subparsers(dest="tx_command", required=True, metavar="COMMAND")
    listing = commands.add_parser("list", help="list transactions")
    listing.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                         help="only transactions running longer than this")  # fmt: skip
    describe = commands.add_parser("describe", help="describe an active transactional-id")
    describe.add_argument("--transactional-id", required=True)
    producers = commands.add_parser(
        "describe-producers", help="the active producers of a topic partition"
    )
    _partition(producers, required=True)
    producers.add_argument("--broker-id", type=int, default=None)
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    _partition(hanging, required=False)
    hanging.add_argument("--broker-id", type=int, default=None)
    hanging.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES")
    hanging.add_argument("--include-ongoing", action="store_true",
                         help="also open transactions the coordinator still tracks")  # fmt: skip
    abort = commands.add_parser("abort", help="abort a hanging transaction (admin rights)")
    _partition(abort, required=True)
    abort.add_argument("--start-offset", type=int, default=None)
    abort.add_argument("--producer-id", type=int, default=None)
    abort.add_argument("--producer-epoch", type=int, default=None)
    abort.add_argument("--coordinator-epoch", type=int, default=None)
    tx.set_defaults(func=run)


def _partition(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--topic", required=required)
    parser.add_argument("--partition", type=int, required=required, default=None)


def run(args: argparse.Namespace) -> int:
    props = load_config_file(args.command_config) if args.command_config else {}
    props["bootstrap.servers"] = args.bootstrap_server
    config = ClientConfig.from_properties(props)
    try:
        rows = anyio.run(_command, config, args)
    except (KafkaError, EosError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    headers, table = rows
    if headers:
        print_table(headers, table)
    return 0


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Kafka's ``ToolsUtils.prettyPrintTable``: padded columns, each followed by a tab."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    for row in (headers, *rows):
        print("".join(f"{value.ljust(width)}\t" for value, width in zip(row, widths, strict=True)))


Table = tuple[list[str], list[list[str]]]


async def _command(config: ClientConfig, args: argparse.Namespace) -> Table:
    async with TransactionsAdmin(config) as admin:
        command = args.tx_command
        if command == "list":
            listings = await admin.list_transactions(duration_ms=args.duration_filter)
            rows = [[t.transactional_id, str(t.coordinator), str(t.producer_id), t.state]
                    for ts in listings.values() for t in ts]  # fmt: skip
            return ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows
        if command == "describe":
            return await _describe(admin, args.transactional_id)
        if command == "describe-producers":
            found = await admin.describe_producers([(args.topic, args.partition)], args.broker_id)
            return _PRODUCERS, [_producer_row(p) for p in found[(args.topic, args.partition)]]
        if command == "find-hanging":
            return await _find_hanging(admin, args)
        return await _abort(admin, args)


_PRODUCERS = [
    "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
    "CurrentTransactionStartOffset",
]  # fmt: skip


def _producer_row(p: ProducerState) -> list[str]:
    start = str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None"
    return [str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
            str(p.last_sequence), str(p.last_timestamp), start]  # fmt: skip


async def _describe(admin: TransactionsAdmin, transactional_id: str) -> Table:
    d = await admin.describe_transaction(transactional_id)
    started = d.start_time_ms >= 0
    duration = str(int(time.time() * 1000) - d.start_time_ms) if started else "None"
    row = [
        str(d.coordinator), d.transactional_id, str(d.producer_id), str(d.producer_epoch),
        d.state, str(d.timeout_ms), str(d.start_time_ms) if started else "None", duration,
        ",".join(f"{t}-{p}" for t, p in d.partitions),
    ]  # fmt: skip
    headers = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
               "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
               "TransactionDurationMs", "TopicPartitions"]  # fmt: skip
    return headers, [row]


async def _find_hanging(admin: TransactionsAdmin, args: argparse.Namespace) -> Table:
    if args.topic is None and args.broker_id is None:
        raise EosError(
            "The `find-hanging` command requires either --topic or --broker-id to limit the "
            "scope of the search"
        )
    if args.partition is not None and args.topic is None:
        raise EosError("The --partition argument requires --topic to be provided")
    if args.partition is not None:
        partitions = [(args.topic, args.partition)]
    else:
        topics = [args.topic] if args.topic else None
        partitions = sorted(await admin.partitions(topics, args.broker_id))
    now = int(time.time() * 1000)
    found = await admin.find_hanging(
        partitions,
        now_ms=now,
        max_timeout_ms=args.max_transaction_timeout * 60_000,
        broker_id=args.broker_id,
        include_ongoing=args.include_ongoing,
    )
    headers = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
               "StartOffset", "LastTimestamp", "Duration(min)"]  # fmt: skip
    if args.include_ongoing:
        headers.append("CoordinatorState")
    return headers, [_hanging_row(t, now, args.include_ongoing) for t in found]


def _hanging_row(t: OpenTransaction, now_ms: int, with_state: bool) -> list[str]:
    p = t.producer
    row = [t.topic, str(t.partition), str(p.producer_id), str(p.producer_epoch),
           str(p.coordinator_epoch), str(p.current_txn_start_offset), str(p.last_timestamp),
           str((now_ms - p.last_timestamp) // 60_000)]  # fmt: skip
    return [*row, t.coordinator_state or "-"] if with_state else row


async def _abort(admin: TransactionsAdmin, args: argparse.Namespace) -> Table:
    if args.start_offset is not None:
        await admin.abort(args.topic, args.partition, args.start_offset)
        return [], []
    if args.producer_id is None:
        raise EosError(
            "The transaction to abort must be identified either with --start-offset (for "
            "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
            "--coordinator-epoch (for older brokers)"
        )
    for option in ("producer_epoch", "coordinator_epoch"):
        if getattr(args, option) is None:
            raise EosError(f"Missing required argument --{option.replace('_', '-')}")
    state = ProducerState(args.producer_id, args.producer_epoch, -1, -1,
                          max(args.coordinator_epoch, 0), -1)  # fmt: skip
    await admin.write_abort_marker(args.topic, args.partition, state)
    return [], []
