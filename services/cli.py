"""The ``eos`` command line: ``eos dev-kafka``, ``eos dev-registry``, ``eos run`` and the
commands later issues add."""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from aiokafka.errors import KafkaError

import eos
from eos.errors import EosError
from services import dev_kafka, dev_kafka_security, log_setup


def _dev_kafka(args: argparse.Namespace) -> int:
    kafka = dev_kafka.DevKafka(args.data_dir)
    if args.action == "start":
        try:
            state = kafka.start(args.brokers, args.port, security=args.security, users=args.user)
        except dev_kafka.AlreadyRunning as already:
            print(str(already))
            return 0
        print(f"Kafka {state.version} ready: bootstrap.servers={state.bootstrap}")
        stop = dev_kafka.stop_command("dev-kafka", state.data_dir)
        print(f"  data and logs: {state.data_dir}   stop with: {stop}")
        security = kafka.security(state)
        if security.secured:
            print(f"  security: {security.protocol} ({args.security}), super user admin")
            print(f"  admin's client settings: {security.admin_file}")
    elif args.action == "user":
        return _dev_kafka_user(kafka, args)
    elif args.action == "stop":
        stopped = kafka.stop()
        print(
            f"stopped broker(s) {stopped}"
            if stopped
            else f"no dev-kafka broker was running in {kafka.data_dir}"
        )
    else:
        known = kafka.state()
        if known is None:
            print(f"no dev-kafka cluster in {kafka.data_dir}")
            return 3
        for node in known.nodes:
            what = f"running (pid {node.pid})" if node.alive() else "stopped"
            print(f"broker {node.node_id}: {node.bootstrap} {what}; log {node.log_file}")
        return 0 if kafka.running() else 3
    return 0


def _dev_registry(args: argparse.Namespace) -> int:
    from services import dev_registry

    registry = dev_registry.DevRegistry(args.data_dir)
    if args.action == "start":
        try:
            state = registry.start(args.port, storage=args.storage,
                                   bootstrap_servers=args.bootstrap_servers)  # fmt: skip
        except dev_registry.AlreadyRunning as already:
            print(str(already))
            return 0
        print(f"Apicurio Registry {state.version} ready: schema.registry.url={state.url}")
        stop = dev_kafka.stop_command("dev-registry", state.data_dir)
        print(f"  storage: {state.storage}   log: {state.log_file}   stop with: {stop}")
    elif args.action == "stop":
        stopped = registry.stop()
        print(
            "stopped the registry"
            if stopped
            else f"no dev-registry was running in {registry.data_dir}"
        )
    else:
        known = registry.state()
        if known is None:
            print(f"no dev-registry in {registry.data_dir}")
            return 3
        what = f"running (pid {known.pid})" if known.alive() else "stopped"
        print(f"registry: {known.url} {what}; storage {known.storage}; log {known.log_file}")
        return 0 if known.alive() else 3
    return 0


def _dev_kafka_user(kafka: dev_kafka.DevKafka, args: argparse.Namespace) -> int:
    import anyio

    from services.dev_kafka_users import add_user

    if len(args.what) != 2 or args.what[0] != "add":
        print("usage: eos dev-kafka user add NAME [--password P]", file=sys.stderr)
        return 2
    state = kafka.state()
    security = kafka.security(state)
    if state is None or not security.secured:
        print(f"error: no secured dev-kafka cluster in {kafka.data_dir} "
              "(start one with --security)", file=sys.stderr)  # fmt: skip
        return 2
    running = kafka.running()
    path = anyio.run(
        add_user, security, running.bootstrap if running else None, args.what[1], args.password
    )
    print(f"user {args.what[1]} added; client settings: {path}")
    return 0


def _run(args: argparse.Namespace) -> int:
    import importlib.util

    import anyio

    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"error: eos run reads its sample with Spark, and {' and '.join(missing)} "
              "is not installed here: install eos with the spark extra (pip install "
              "'eos[spark]'), or run the eos:latest image (eos:slim has no Spark)",
              file=sys.stderr)  # fmt: skip
        return 2
    from services.demo_run import demo_run
    from services.worker_service import tune_gc, tune_malloc

    bootstrap = args.bootstrap_servers
    if bootstrap:
        print(f"using the Kafka at {bootstrap}")
    else:
        kafka = dev_kafka.DevKafka(args.data_dir)
        state = kafka.running()
        if state is None:
            state = kafka.start(1, args.port)
            print(f"started Kafka {state.version} at {state.bootstrap} (data: {state.data_dir})")
        else:
            print(f"using the Kafka that already runs at {state.bootstrap}")
        bootstrap = state.bootstrap
    data = dev_kafka.cache_dir() / "run" / "orders"
    tune_gc()
    tune_malloc()
    return 0 if anyio.run(demo_run, bootstrap, data, args.rest_port) else 1


def _worker(args: argparse.Namespace) -> int:
    from services.worker_service import main as worker_main

    return worker_main(args.worker_config, args.connector_configs, log_format=args.log_format)


def _verify(args: argparse.Namespace) -> int:
    from services.verify import run

    return run(args)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="eos", description="exactly-once into Apache Kafka")
    top.add_argument("--version", action="version", version=f"eos {eos.__version__}")
    top.add_argument("--log-level", default=None, help="DEBUG, INFO (default), WARNING, ERROR")
    top.add_argument(
        "--log-format",
        default=None,
        help="text (default) or json: one JSON object per line (also EOS_LOG_FORMAT, and "
        "log.format in a worker file)",
    )
    sub = top.add_subparsers(dest="command", required=True)

    dk = sub.add_parser("dev-kafka", help="a local Apache Kafka (KRaft) on 127.0.0.1")
    dk.add_argument("action", choices=["start", "stop", "status", "user"])
    dk.add_argument("what", nargs="*", help="user: add NAME")
    dk.add_argument("--brokers", type=int, default=1, help="number of nodes (default 1)")
    dk.add_argument(
        "--security",
        default="none",
        choices=dev_kafka_security.MODES,
        help="sasl-scram, sasl-ssl or mtls: authentication, TLS and ACLs (default none)",
    )
    dk.add_argument("--password", default=None, help="user add: the password (default: random)")
    dk.add_argument(
        "--user", action="append", default=[], metavar="NAME",
        help="start: a user to have from the start, PLAIN included (repeatable)",
    )  # fmt: skip
    dk.add_argument("--port", type=int, default=9092, help="first client port; 0 = free ports")
    dk.add_argument("--data-dir", type=Path, default=None, help="default $EOS_CACHE_DIR/dev-kafka")
    dk.set_defaults(func=_dev_kafka)

    dr = sub.add_parser("dev-registry", help="a local schema registry (Apicurio) on 127.0.0.1")
    dr.add_argument("action", choices=["start", "stop", "status"])
    dr.add_argument("--port", type=int, default=8081, help="HTTP port (default 8081; 0 = free)")
    dr.add_argument("--data-dir", type=Path, default=None,
                    help="default $EOS_CACHE_DIR/dev-registry")  # fmt: skip
    dr.add_argument("--storage", choices=["memory", "kafkasql"], default="memory",
                    help="memory (default) or kafkasql: schemas kept in a Kafka topic")  # fmt: skip
    dr.add_argument("--bootstrap-servers", default=None,
                    help="Kafka for kafkasql (default: the running dev-kafka)")  # fmt: skip
    dr.set_defaults(func=_dev_registry)

    worker = sub.add_parser("worker", help="run a worker (REST API, connectors from files)")
    worker.add_argument(
        "worker_config",
        nargs="?",
        help="worker settings (.properties, .yaml or .json); EOS_* environment variables "
        "add to them and win (EOS_BOOTSTRAP_SERVERS is bootstrap.servers)",
    )
    worker.add_argument("connector_configs", nargs="*", help="connectors to create or update")
    worker.set_defaults(func=_worker)

    from services.verify import add_arguments as verify_arguments

    verify = sub.add_parser("verify", help="check a topic's seqnos: no duplicates, no gaps")
    verify_arguments(verify)
    verify.set_defaults(func=_verify)

    run = sub.add_parser("run", help="the main job on embedded defaults")
    run.add_argument("--port", type=int, default=9092, help="Kafka's first port")
    run.add_argument("--rest-port", type=int, default=8083, help="the worker's REST port")
    run.add_argument("--data-dir", type=Path, default=None)
    run.add_argument(
        "--bootstrap-servers", default=None, help="use this Kafka instead of a local one"
    )
    run.set_defaults(func=_run)

    from services.acls_cli import add_command as acls_command

    acls_command(sub)

    from services.cdc_cli import add_command as cdc_command

    cdc_command(sub)

    from services.transactions_cli import add_command as transactions_command

    transactions_command(sub)

    from services.client.commands import add_commands

    add_commands(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command. An eos error, or a Kafka error (a broker that cannot be reached),
    also inside an exception group, ends it with one ``error:`` line per problem and
    exit code 2; the traceback only with ``--log-level debug``."""
    args = parser().parse_args(argv)
    try:
        args.log_format = log_setup.log_format(args.log_format)
    except EosError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log_setup.configure(args.log_level, json=args.log_format == "json")
    try:
        code: int = args.func(args)
    except (EosError, KafkaError, BaseExceptionGroup) as exc:
        messages = _user_errors(exc)
        if messages is None:
            raise
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            traceback.print_exception(exc)
        for message in messages:
            print(f"error: {message}", file=sys.stderr)
        return 2
    return code


def _user_errors(exc: BaseException) -> list[str] | None:
    """One message per eos or Kafka error in ``exc`` (an exception group is searched),
    if nothing else (e.g. a bug) is in it; the same message only once."""
    found: list[str] = []
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        elif isinstance(current, EosError):
            found.append(str(current))
        elif isinstance(current, KafkaError):
            what = str(current)
            if not what.startswith(type(current).__name__):
                what = f"{type(current).__name__}: {what}"
            found.append(f"Kafka: {what}; check bootstrap.servers and that Kafka runs")
        else:
            return None
    return list(dict.fromkeys(found))


if __name__ == "__main__":
    sys.exit(main())
