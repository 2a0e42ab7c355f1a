"""``eos acls plan|check|grant WORKER_FILE``: the least-privilege ACLs of an eos cluster.

- ``plan``: every ACL the cluster's principals need (docs/security.md's table applied to the
  worker file and the connectors), without contacting Kafka when the connectors are given as
  files (``--connector-config``);
- ``check``: the plan against the cluster's ACLs (DescribeAcls): each missing one on a line
  with the ``kafka-acls.sh`` command that grants it; exit status 1 if any is missing;
- ``grant``: creates the missing ones (CreateAcls).

The connectors are the files given with ``--connector-config``, else those of the cluster's
config topic (``--connector NAME`` picks some). ``--command-config`` is a Kafka client
properties file, as for Kafka's own tools: the principal that reads the ACLs, grants them and
reads the config topic (an operator's; without it, the worker file's own settings are used).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

import anyio

from eos.acls.rules import Plan, client_config_of, cluster_of, output_topics, plan
from eos.config.files import load_config_file
from eos.config.providers import ConfigProviders
from eos.config.worker import WorkerConfig
from eos.kafka.acls import create_acls, describe_acls, kafka_acls_command
from eos.kafka.authorized import authorized_operations
from eos.kafka.clients import ClientConfig
from eos.storage.config_log import ConfigLog


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acls = sub.add_parser("acls", help="least-privilege ACLs: plan, check, grant")
    acls.add_argument("action", choices=["plan", "check", "grant"])
    acls.add_argument("worker_config", help="the workers' settings file")
    acls.add_argument(
        "--connector", action="append", default=[], metavar="NAME",
        help="only these connectors of the cluster (repeatable; default: all)",
    )  # fmt: skip
    acls.add_argument(
        "--connector-config", action="append", default=[], type=Path, metavar="FILE",
        help="a connector's settings file instead of the config topic's (repeatable)",
    )  # fmt: skip
    acls.add_argument(
        "--command-config", type=Path, default=None, metavar="FILE",
        help="Kafka client properties of the operator who reads and grants ACLs",
    )  # fmt: skip
    acls.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from services.worker_service import worker_settings

    worker = worker_settings(load_config_file(args.worker_config))
    admin = _admin_config(worker, args.command_config)
    connectors: Mapping[str, Mapping[str, str]] = {
        (props := load_config_file(path)).get("name", path.stem): props
        for path in args.connector_config
    }
    if not connectors:
        connectors = anyio.run(_cluster_connectors, worker, admin, args.connector)
    providers = ConfigProviders.from_worker(worker.raw)  # a principal may be in ${file:…}
    connectors = {name: providers.resolve(props) for name, props in connectors.items()}
    clusters = plan(worker, connectors, output_topics).clusters()
    if args.action == "plan":
        for cluster, found in clusters.items():
            if len(clusters) > 1:
                print(f"# on the cluster at {cluster}")
            _print_plan(found)
        _print_notes(next(iter(clusters.values()), None))
        return 0
    status = 0
    for cluster, found in clusters.items():
        if len(clusters) > 1:
            print(f"# on the cluster at {cluster}")
        status |= anyio.run(_check_or_grant, found, _on(cluster, found, admin, args), args)
    _print_notes(next(iter(clusters.values()), None))
    return status


def _on(cluster: str, found: Plan, admin: ClientConfig, args: argparse.Namespace) -> ClientConfig:
    """The operator's client for ``cluster``: ``admin`` itself on the workers' cluster; on a
    connector's other cluster, the ``--command-config`` settings pointed there, or without
    them the connector's own admin client (``admin.override.*``)."""
    if cluster == cluster_of(admin.bootstrap_servers):
        return admin
    if args.command_config is not None:
        there = {"bootstrap.servers": cluster}
        return ClientConfig(
            {**admin.common, **there}, admin.producer, admin.consumer, {**admin.admin, **there}
        )
    chosen = next((p for p in found.acls if p.rule.layer == "admin"), found.acls[0])
    return client_config_of(chosen)


def _admin_config(worker: WorkerConfig, command_config: Path | None) -> ClientConfig:
    if command_config is None:
        return worker.client_config
    props = load_config_file(command_config)
    props["bootstrap.servers"] = ",".join(worker.bootstrap_servers)
    return ClientConfig.from_properties(props)


async def _cluster_connectors(
    worker: WorkerConfig, admin: ClientConfig, names: list[str]
) -> Mapping[str, Mapping[str, str]]:
    timeout = worker.worker_sync_timeout_ms / 1000
    async with ConfigLog(admin, worker.config_topic, worker.group_id, read_timeout=timeout) as log:
        snapshot = await log.refresh()
    missing = [n for n in names if n not in snapshot.connectors]
    if missing:
        raise SystemExit(f"error: no connector {', '.join(missing)} in {worker.config_topic}")
    return {n: p for n, p in snapshot.connectors.items() if not names or n in names}


def _print_plan(found: Plan) -> None:
    rows = [("principal", "resource", "pattern", "operation", "why")]
    rows += [(a.principal, f"{a.resource} {a.name}", a.pattern, a.operation, a.why)
             for a in found.least()]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[4]
        )


def _print_notes(found: Plan | None) -> None:
    for note in found.notes if found else ():
        print(f"note: {note}")


async def _check_or_grant(found: Plan, admin: ClientConfig, args: argparse.Namespace) -> int:
    topics = {p.acl.name for p in found.acls if p.acl.resource == "Topic"}
    found = found.until_existing((await authorized_operations(admin, topics)).missing)
    allowed, denied = await describe_acls(admin)
    wanted = found.least()
    missing = [acl for acl in wanted if not any(acl.covers(g) for g in allowed)]
    blocked = [acl for acl in wanted if any(acl.covers(d) for d in denied)]
    bootstrap = admin.bootstrap_servers
    config = str(args.command_config or "admin.properties")
    if args.action == "grant" and missing:
        await create_acls(admin, missing)
        for acl in missing:
            print(f"granted: {acl.principal} {acl.describe()}")
        missing = []
    for acl in missing:
        print(f"missing: {acl.principal} {acl.describe()} ({acl.why}); grant it with: "
              f"{kafka_acls_command(acl, bootstrap, config)}")  # fmt: skip
    for acl in blocked:
        print(f"denied: a DENY ACL takes {acl.principal} {acl.describe()} away; remove it")
    if not missing and not blocked:
        print(f"all {len(wanted)} ACLs of the plan are granted")
        return 0
    return 1
