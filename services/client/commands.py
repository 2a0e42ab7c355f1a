"""The client's sub-commands (docs/cli.md): ``eos connectors``, ``eos plugins``,
``eos offsets`` and ``eos info``, each against the worker at ``--url``.

Output is a human table or text by default and the JSON of docs/cli.md with
``--json``; errors go to stderr as ``error: ...`` lines. Exit status:

- 0: done;
- 1: the worker refused (the server's ``message``), failed, or cannot be reached;
- 2: a bad file, a config the plugin finds problems with, or bad arguments —
  every problem is printed and nothing is sent that would change anything.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

import httpx

from eos.config.connector_files import expand_directories
from eos.config.connector_plan import Change, plan
from services.client import render
from services.client.files import (
    INITIAL_STATES,
    BadFiles,
    ConnectorFile,
    read_connector,
    read_connectors,
    read_offsets,
)
from services.client.health import add_health, health
from services.client.http import (
    DEFAULT_TIMEOUT,
    DEFAULT_URL,
    ClientError,
    ConnectClient,
    Json,
    RequestFailed,
    tls_context,
)

OK, FAILED, BAD_INPUT = 0, 1, 2
WAIT_POLL_SECONDS = 0.5
"""How often ``--wait`` reads the status."""
DEFAULT_WAIT = 60.0
_FILE_ERRORS = (400, 404, 422)
"""Answers of the validate endpoint that mean the file names no usable plugin."""


class UsageError(Exception):
    """Arguments that cannot work together (exit 2)."""


@dataclass
class Context:
    client: ConnectClient
    args: argparse.Namespace
    out: TextIO
    err: TextIO

    @property
    def json(self) -> bool:
        return bool(self.args.json)

    def say(self, text: str) -> None:
        print(text, file=self.out)

    def warn(self, text: str) -> None:
        print(text, file=self.err)

    def emit(self, data: Json, human: Callable[[], str]) -> None:
        """``data`` as JSON with ``--json``, else the human text."""
        self.say(json.dumps(data, indent=2, ensure_ascii=False) if self.json else human())


Handler = Callable[[Context], int]
T = TypeVar("T")


# ------------------------------------------------------------------ running


def run(
    args: argparse.Namespace,
    *,
    transport: httpx.BaseTransport | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the sub-command ``args`` names; its exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    handler: Handler = args.handler
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:  # a line per request is noise
        logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        with _client(args, transport) as client:
            return handler(Context(client, args, out, err))
    except BadFiles as bad:
        for problem in bad.problems:
            print(problem, file=err)
        count = len(bad.problems)
        print(f"error: {count} problem{'s'[: count - 1]}; nothing was changed", file=err)
        return BAD_INPUT
    except UsageError as exc:
        print(f"error: {exc}", file=err)
        return BAD_INPUT
    except ClientError as exc:
        print(f"error: {exc}", file=err)
        return FAILED


def url(args: argparse.Namespace) -> str:
    return str(args.url or os.environ.get("EOS_URL") or DEFAULT_URL)


def _client(args: argparse.Namespace, transport: httpx.BaseTransport | None) -> ConnectClient:
    cafile = args.cacert or os.environ.get("EOS_CACERT")
    certfile = args.cert or os.environ.get("EOS_CERT")
    keyfile = args.key or os.environ.get("EOS_KEY")
    verify = tls_context(cafile, certfile, keyfile) if cafile or certfile else True
    return ConnectClient(
        url(args), timeout=args.timeout, auth=_credentials(args), verify=verify,
        transport=transport,
    )  # fmt: skip


def _credentials(args: argparse.Namespace) -> tuple[str, str] | None:
    user = args.user or os.environ.get("EOS_USER")
    if not user:
        return None
    name, colon, password = user.partition(":")
    if colon:
        return name, password
    password = os.environ.get("EOS_PASSWORD", "")
    if password:
        return name, password
    if not sys.stdin.isatty():
        raise UsageError(f"no password for {name}: pass --user {name}:PASSWORD or set EOS_PASSWORD")
    return name, getpass.getpass(f"password for {name} at {url(args)}: ")


def _each(c: Context, items: Iterable[T], action: Callable[[T], None], what: str = "{}") -> int:
    """``action`` for every item; a refusal is reported (the item named by ``what``)
    and the others still run."""
    status = OK
    for item in items:
        try:
            action(item)
        except RequestFailed as exc:
            c.warn(f"error: {what.format(item)}: {exc}")
            status = FAILED
    return status


# ------------------------------------------------------------------ connectors: read


def connectors_list(c: Context) -> int:
    if c.args.status:
        expanded = c.client.connectors_expanded("status")
        if not expanded and not c.json:
            c.warn("no connectors")
            return OK
        c.emit(expanded, lambda: render.connectors_table(expanded))
        return OK
    names = sorted(c.client.connector_names())
    if not names and not c.json:
        c.warn("no connectors")
        return OK
    c.emit(names, lambda: "\n".join(names))
    return OK


def connectors_describe(c: Context) -> int:
    name = c.args.name
    info, status = c.client.connector(name), c.client.status(name)
    if c.json:
        tasks = c.client.tasks(name)
        c.emit({**info, "task_configs": tasks, "status": status}, str)
    else:
        c.say(render.describe(info, status))
    return OK


def connectors_status(c: Context) -> int:
    statuses: list[Json] = []
    if c.args.names:
        code = _each(c, c.args.names, lambda n: statuses.append(c.client.status(n)))
    else:
        expanded = c.client.connectors_expanded("status")
        statuses = [expanded[n].get("status") or {"name": n} for n in sorted(expanded)]
        code = OK
        if not statuses and not c.json:
            c.warn("no connectors")
            return OK
    if statuses or c.json:
        c.emit(statuses, lambda: render.status_table(statuses))
    return code


# ------------------------------------------------------------------ connectors: write


def validation_problems(body: Json) -> list[tuple[str | None, str]]:
    """(setting, message) for every error of a validate answer (Connect's shape)."""
    found: list[tuple[str | None, str]] = []
    for entry in (body or {}).get("configs") or []:
        value = entry.get("value") or {}
        found += [(value.get("name"), str(e)) for e in value.get("errors") or []]
    count = (body or {}).get("error_count") or 0
    if count and not found:
        found.append((None, f"the worker counts {count} error(s) but names none"))
    return found


def _problems_of(c: Context, connector: ConnectorFile) -> list[tuple[str | None, str]]:
    plugin = connector.config["connector.class"]
    try:
        answer = c.client.validate(plugin, connector.config)
    except RequestFailed as exc:
        if exc.status not in _FILE_ERRORS:
            raise
        return [("connector.class", exc.message)]
    return validation_problems(answer)


def _line(path: str, setting: str | None, message: str) -> str:
    return f"{path}: {setting}: {message}" if setting else f"{path}: {message}"


def _checked(c: Context) -> list[ConnectorFile]:
    """The connectors of the files, read and (unless ``--no-validate``) validated by
    their plugins; :class:`BadFiles` with every problem of every file."""
    connectors, problems = read_connectors(expand_directories(c.args.files))
    if not c.args.no_validate:
        problems += [
            _line(f.path, setting, message)
            for f in connectors
            for setting, message in _problems_of(c, f)
        ]
    if problems:
        raise BadFiles(problems)
    return connectors


def _applied(c: Context, results: list[dict[str, Any]]) -> int:
    c.emit(results, lambda: "\n".join(f"{r['action']} connector {r['name']}" for r in results))
    return OK


def connectors_apply(c: Context) -> int:
    """Make the worker's cluster match the files (and directories of files), as the
    worker's ``connectors.dir`` does: create what is missing (in its ``state`` or
    ``initial_state``), update only what differs, move a file's ``state``, restart what
    a file's ``restart`` asks for once, and with
    ``--prune`` delete the connectors no file declares; ``--dry-run`` prints the plan."""
    connectors = _checked(c)
    current = c.client.connectors_expanded("info", "status")
    configs = {n: dict(body["info"]["config"]) for n, body in current.items()}
    states = {
        n: _declared_state(body["status"]["connector"]["state"]) for n, body in current.items()
    }
    changes = plan(connectors, configs, states, prune=c.args.prune, default_state=None)
    if c.args.dry_run:
        text = "\n".join(ch.describe() for ch in changes) or "nothing to change"
        c.emit([_change_json(ch) for ch in changes], lambda: text)
        return OK
    results = []
    for change in changes:
        name = change.connector
        if change.action == "create" and change.state in (None, "RUNNING"):
            info, created = c.client.put_config(name, change.props or {})  # PUT creates too
            results.append({"name": name, "action": "created" if created else "updated",
                            "info": info})  # fmt: skip
        elif change.action == "create":
            info = c.client.create(name, change.props or {}, change.state)
            results.append({"name": name, "action": "created", "info": info})
        elif change.action == "update":
            info, _ = c.client.put_config(name, change.props or {})
            results.append({"name": name, "action": "updated", "info": info})
        elif change.action == "state":
            verb = {"RUNNING": "resume", "PAUSED": "pause"}.get(change.state or "RUNNING", "stop")
            getattr(c.client, verb)(name)
            done = {"resume": "resumed", "pause": "paused", "stop": "stopped"}[verb]
            results.append({"name": name, "action": done})
        elif change.action == "restart":
            c.client.restart(name, include_tasks=True, only_failed=False)
            results.append({"name": name, "action": "restarted"})
        else:
            c.client.delete(name)
            results.append({"name": name, "action": "deleted"})
    if not results and not c.json:
        c.say("nothing to change")
        return OK
    return _applied(c, results)


def _declared_state(status: str) -> str:
    """A connector's status as a file's state (UNASSIGNED, FAILED… count as RUNNING)."""
    return status if status in INITIAL_STATES else "RUNNING"


def _change_json(change: Change) -> dict[str, Any]:
    return {"name": change.connector, "action": change.action, "file": change.file,
            "state": change.state}  # fmt: skip


def connectors_create(c: Context) -> int:
    connectors = _checked(c)
    results = []
    for f in connectors:
        info = c.client.create(f.name, f.config, c.args.initial_state or f.initial_state)
        results.append({"name": f.name, "action": "created", "info": info})
    return _applied(c, results)


def connectors_update(c: Context) -> int:
    connectors = _checked(c)
    for f in connectors:  # all must exist before any is changed
        try:
            c.client.connector(f.name)
        except RequestFailed as exc:
            if exc.status != 404:
                raise
            raise RequestFailed(
                404, f"{exc.message} ({f.path}): use eos connectors create or apply"
            ) from None
    results = []
    for f in connectors:
        info, _ = c.client.put_config(f.name, f.config)
        results.append({"name": f.name, "action": "updated", "info": info})
    return _applied(c, results)


def connectors_validate(c: Context) -> int:
    reports: list[dict[str, Any]] = []
    for path in c.args.files:
        connector, problems = read_connector(path)
        found: list[tuple[str | None, str]] = [
            (None, p.removeprefix(f"{path}: ")) for p in problems
        ]
        if connector is not None:
            found = _problems_of(c, connector)
        reports.append({
            "file": path,
            "name": connector.name if connector else None,
            "connector.class": connector.config["connector.class"] if connector else None,
            "problems": [{"setting": s, "message": m} for s, m in found],
        })  # fmt: skip
    c.emit(reports, lambda: "\n".join(_validation_lines(reports)))
    return BAD_INPUT if any(r["problems"] for r in reports) else OK


def _validation_lines(reports: Sequence[dict[str, Any]]) -> Iterable[str]:
    for r in reports:
        if not r["problems"]:
            yield f"{r['file']}: {r['name']} ({r['connector.class']}): no problems"
        for p in r["problems"]:
            yield _line(r["file"], p["setting"], p["message"])
    count = sum(len(r["problems"]) for r in reports)
    if count:
        yield f"{count} problem{'s'[: count - 1]}"


def connectors_delete(c: Context) -> int:
    done: list[dict[str, Any]] = []

    def delete(name: str) -> None:
        c.client.delete(name)
        done.append({"name": name, "action": "deleted"})

    code = _each(c, c.args.names, delete)
    if done or c.json:
        _applied(c, done)
    return code


_TARGETS = {"pause": "PAUSED", "resume": "RUNNING", "stop": "STOPPED"}


def connectors_target(c: Context) -> int:
    """pause, resume or stop (202: the worker gets there shortly; ``--wait`` waits)."""
    action = c.args.action
    requested: list[str] = []

    def ask(name: str) -> None:
        getattr(c.client, action)(name)
        requested.append(name)

    code = _each(c, c.args.names, ask)
    target = _TARGETS[action]
    results: list[dict[str, Any]] = [
        {"name": n, "action": action, "target": target} for n in requested
    ]
    if requested and not c.json:
        c.say("\n".join(f"{action} requested: {n}" for n in requested))
    if c.args.wait:
        for result in results:
            result["status"] = _wait_for(c, result["name"], target)
        reached = [r["status"] for r in results if r["status"] is not None]
        code = code if len(reached) == len(results) else FAILED
        if reached and not c.json:
            c.say(render.status_table(reached))
    if c.json:
        c.emit(results, str)
    return code


def _at(status: Json, target: str) -> bool:
    connector = (status.get("connector") or {}).get("state")
    tasks = [t.get("state") for t in status.get("tasks") or []]
    if target != "STOPPED" and not tasks:
        return False  # the tasks are not (re)made yet
    return connector == target and all(t in (target, "FAILED") for t in tasks)


def _wait_for(c: Context, name: str, target: str) -> Json | None:
    deadline = time.monotonic() + c.args.wait_timeout
    status: Json = {}
    while time.monotonic() < deadline:
        status = c.client.status(name)
        if _at(status, target):
            return status
        time.sleep(WAIT_POLL_SECONDS)
    now = (status.get("connector") or {}).get("state")
    c.warn(
        f"error: {name} is not {target} after {c.args.wait_timeout:g} s (connector {now}, "
        f"tasks {render.task_summary(status.get('tasks') or [])})"
    )
    return None


def connectors_restart(c: Context) -> int:
    name = c.args.name
    if c.args.task:
        if c.args.include_tasks or c.args.only_failed:
            raise UsageError("--task restarts one task: leave out --include-tasks/--only-failed")
        done: list[dict[str, Any]] = []

        def restart(task: int) -> None:
            c.client.restart_task(name, task)
            done.append({"name": name, "action": "restarted", "task": task})

        code = _each(c, c.args.task, restart, what=f"task {name}-{{}}")
        c.emit(done, lambda: "\n".join(f"restarted task {name}-{d['task']}" for d in done))
        return code
    plan = c.client.restart(name, include_tasks=c.args.include_tasks,
                            only_failed=c.args.only_failed)  # fmt: skip
    result = {"name": name, "action": "restarted", "plan": plan}
    if plan is None:
        c.emit(result, lambda: f"restarted connector {name}")
    else:
        c.emit(result, lambda: f"restart of {name} accepted; planned:\n"
               + render.status_table([plan]))  # fmt: skip
    return OK


# ------------------------------------------------------------------ offsets


def offsets_get(c: Context) -> int:
    body = c.client.offsets(c.args.name)
    if not (body or {}).get("offsets") and not c.json:
        c.warn(f"no offsets for {c.args.name}")
        return OK
    c.emit(body, lambda: render.offsets_table(body))
    return OK


def offsets_alter(c: Context) -> int:
    body = read_offsets(c.args.file)
    message = _offsets_change(c, lambda: c.client.alter_offsets(c.args.name, body))
    c.emit({"name": c.args.name, "action": "altered", "message": message}, lambda: message)
    return OK


def offsets_reset(c: Context) -> int:
    message = _offsets_change(c, lambda: c.client.reset_offsets(c.args.name))
    c.emit({"name": c.args.name, "action": "reset", "message": message}, lambda: message)
    return OK


def _offsets_change(c: Context, change: Callable[[], str]) -> str:
    """The worker's message; a refusal because the connector runs says how to stop it."""
    try:
        return change()
    except RequestFailed as exc:
        if exc.status == 409 and "STOPPED" in exc.message:
            c.warn(f"hint: eos connectors stop {c.args.name} --wait, then try again")
        raise


# ------------------------------------------------------------------ plugins, info


def plugins_list(c: Context) -> int:
    plugins = c.client.plugins(connectors_only=not c.args.all)
    c.emit(plugins, lambda: render.plugins_table(plugins))
    return OK


def plugins_describe(c: Context) -> int:
    definitions = c.client.plugin_config(c.args.plugin)
    c.emit(definitions, lambda: render.plugin_settings(definitions))
    return OK


def info(c: Context) -> int:
    root = c.client.root()
    c.emit(root, lambda: render.info_block(root or {}, c.client.url))
    return OK


# ------------------------------------------------------------------ arguments


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("worker")
    where.add_argument(
        "--url", default=None,
        help=f"the worker's REST URL (default $EOS_URL or {DEFAULT_URL})",
    )  # fmt: skip
    where.add_argument("--json", action="store_true", help="JSON output (docs/cli.md)")
    where.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT,
        help=f"seconds a request may take (default {DEFAULT_TIMEOUT:g})",
    )  # fmt: skip
    where.add_argument(
        "--user", default=None,
        help="USER[:PASSWORD] for basic auth (default $EOS_USER, $EOS_PASSWORD; asks if needed)",
    )  # fmt: skip
    where.add_argument("--cacert", default=None, help="CA file to trust (default $EOS_CACERT)")
    where.add_argument("--cert", default=None, help="client certificate (PEM, default $EOS_CERT)")
    where.add_argument("--key", default=None, help="its private key (PEM, default $EOS_KEY)")
    return common


def _leaf(
    sub: Any, name: str, handler: Handler, common: argparse.ArgumentParser, help: str
) -> argparse.ArgumentParser:
    leaf: argparse.ArgumentParser = sub.add_parser(
        name, parents=[common], help=help, description=help
    )
    leaf.set_defaults(func=run, handler=handler)
    return leaf


def add_commands(sub: Any) -> None:
    """Register ``connectors``, ``plugins``, ``offsets`` and ``info`` on the ``eos``
    parser's sub-parsers ``sub``."""
    common = _common()
    _connectors(sub, common)
    _offsets(sub, common)
    _plugins(sub, common)
    _leaf(sub, "info", info, common, "the worker's version, Kafka cluster and (eos) cluster")
    add_health(_leaf(sub, "health", health, common, "is the worker healthy? (exit 0 if so)"))


def _connectors(sub: Any, common: argparse.ArgumentParser) -> None:
    top = sub.add_parser("connectors", help="list, change and watch connectors (a REST client)")
    actions = top.add_subparsers(dest="action", required=True, metavar="ACTION")

    listed = _leaf(actions, "list", connectors_list, common, "connector names")
    listed.add_argument("--status", action="store_true", help="a table: state, tasks, worker")
    _leaf(
        actions, "describe", connectors_describe, common, "config, tasks and status"
    ).add_argument("name")
    status = _leaf(actions, "status", connectors_status, common, "connector and task states")
    status.add_argument("names", nargs="*", metavar="NAME", help="default: every connector")

    files_help = "connector files (.properties, .json, .yaml), or directories of them"
    for name, handler, text in [
        ("apply", connectors_apply, "create the connectors of the files, or update them"),
        ("create", connectors_create, "create connectors (an existing one is an error)"),
        ("update", connectors_update, "update existing connectors"),
    ]:
        leaf = _leaf(actions, name, handler, common, text)
        leaf.add_argument("files", nargs="+", metavar="FILE", help=files_help)
        leaf.add_argument(
            "--no-validate", action="store_true",
            help="skip the check against the plugin's validate endpoint",
        )  # fmt: skip
        if name == "create":
            leaf.add_argument("--initial-state", choices=INITIAL_STATES, default=None)
        if name == "apply":
            leaf.add_argument(
                "--prune", action="store_true",
                help="delete the connectors no file declares (a directory: as connectors.dir)",
            )  # fmt: skip
            leaf.add_argument(
                "--dry-run", action="store_true",
                help="print the plan (create, update, state, delete) and change nothing",
            )  # fmt: skip
    validate = _leaf(
        actions, "validate", connectors_validate, common,
        "check connector files against their plugins; print every problem (exit 2 if any)",
    )  # fmt: skip
    validate.add_argument("files", nargs="+", metavar="FILE", help=files_help)

    delete = _leaf(actions, "delete", connectors_delete, common, "delete connectors")
    delete.add_argument("names", nargs="+", metavar="NAME")
    for name, text in [
        ("pause", "pause connectors and their tasks"),
        ("resume", "resume paused or stopped connectors"),
        ("stop", "stop connectors: tasks shut down, config and offsets kept"),
    ]:
        leaf = _leaf(actions, name, connectors_target, common, text)
        leaf.add_argument("names", nargs="+", metavar="NAME")
        leaf.add_argument("--wait", action="store_true", help=f"until {_TARGETS[name]}")
        leaf.add_argument(
            "--wait-timeout", type=float, default=DEFAULT_WAIT, metavar="SECONDS",
            help=f"how long --wait waits (default {DEFAULT_WAIT:g})",
        )  # fmt: skip

    restart = _leaf(actions, "restart", connectors_restart, common, "restart a connector or tasks")
    restart.add_argument("name")
    restart.add_argument("--include-tasks", action="store_true", help="its tasks too")
    restart.add_argument("--only-failed", action="store_true", help="only what FAILED")
    restart.add_argument(
        "--task", type=int, action="append", metavar="ID", help="restart this task (repeatable)"
    )


def _offsets(sub: Any, common: argparse.ArgumentParser) -> None:
    top = sub.add_parser("offsets", help="read, alter or reset a connector's offsets")
    actions = top.add_subparsers(dest="action", required=True, metavar="ACTION")
    _leaf(actions, "get", offsets_get, common, "the connector's offsets").add_argument("name")
    alter = _leaf(
        actions, "alter", offsets_alter, common,
        "alter the offsets of a STOPPED connector from a JSON file",
    )  # fmt: skip
    alter.add_argument("name")
    alter.add_argument("file", metavar="FILE", help='{"offsets": [{"partition": …, "offset": …}]}')
    reset = _leaf(actions, "reset", offsets_reset, common, "reset a STOPPED connector's offsets")
    reset.add_argument("name")


def _plugins(sub: Any, common: argparse.ArgumentParser) -> None:
    top = sub.add_parser("plugins", help="the worker's connector plugins")
    actions = top.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = _leaf(actions, "list", plugins_list, common, "installed connector plugins")
    listed.add_argument("--all", action="store_true", help="converters and the rest too")
    describe = _leaf(actions, "describe", plugins_describe, common, "a plugin's own settings")
    describe.add_argument("plugin", help="class name or alias")
