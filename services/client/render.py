"""Human output of the client: plain tables (two spaces between columns, ``-`` for
nothing) and indented blocks, built from Kafka Connect's response shapes. Fields a
worker may leave out are read with defaults, so the answers of older Connect
versions and of eos render alike."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

TRACE_WIDTH = 100
"""Characters of a trace's first line shown in a status table."""
STATUS_HEADERS = ("CONNECTOR", "TASK", "STATE", "WORKER", "TRACE")


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [list(headers), *([cell(value) for value in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def cell(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, dict | list):
        return compact(value)
    return str(value)


def compact(value: object) -> str:
    """JSON on one line, keys sorted: how partitions and offsets are shown."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def first_line(trace: object, width: int = TRACE_WIDTH) -> str:
    """The first non-blank line of a failure trace (its message), cut at ``width``."""
    if not isinstance(trace, str):
        return ""
    line = next((ln.strip() for ln in trace.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


# ------------------------------------------------------------------ connectors


def status_rows(status: Mapping[str, Any]) -> list[list[object]]:
    """One row for the connector (task ``-``) and one per task."""
    name = status.get("name")
    connector = status.get("connector") or {}
    rows: list[list[object]] = [
        [name, None, connector.get("state"), connector.get("worker_id"),
         first_line(connector.get("trace"))]
    ]  # fmt: skip
    for task in status.get("tasks") or []:
        rows.append(
            [name, task.get("id"), task.get("state"), task.get("worker_id"),
             first_line(task.get("trace"))]
        )  # fmt: skip
    return rows


def status_table(statuses: Iterable[Mapping[str, Any]]) -> str:
    return table(STATUS_HEADERS, (row for status in statuses for row in status_rows(status)))


def task_summary(tasks: Iterable[Mapping[str, Any]]) -> str:
    """``"2 RUNNING"``, ``"1 RUNNING, 1 FAILED"``; ``-`` without tasks."""
    counts = Counter(str(t.get("state")) for t in tasks)
    return ", ".join(f"{n} {state}" for state, n in counts.items()) or "-"


def connectors_table(expanded: Mapping[str, Mapping[str, Any]]) -> str:
    """``GET /connectors?expand=status`` as NAME, TYPE, STATE, TASKS, WORKER."""
    rows = []
    for name in sorted(expanded):
        status = expanded[name].get("status") or {}
        connector = status.get("connector") or {}
        rows.append(
            [name, status.get("type"), connector.get("state"),
             task_summary(status.get("tasks") or []), connector.get("worker_id")]
        )  # fmt: skip
    return table(("NAME", "TYPE", "STATE", "TASKS", "WORKER"), rows)


def settings_block(config: Mapping[str, Any], indent: str = "  ") -> str:
    """``key = value`` lines, sorted, keys aligned."""
    if not config:
        return f"{indent}(none)"
    width = max(len(key) for key in config)
    return "\n".join(f"{indent}{key.ljust(width)} = {config[key]}" for key in sorted(config))


def describe(info: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    connector = status.get("connector") or {}
    head: list[tuple[str, object]] = [
        ("name", info.get("name")),
        ("type", info.get("type") or status.get("type")),
        ("state", connector.get("state")),
        ("worker", connector.get("worker_id")),
        ("tasks", len(info.get("tasks") or [])),
    ]
    width = max(len(k) for k, _ in head)
    lines = [f"{key.ljust(width)}  {cell(value)}" for key, value in head]
    return "\n".join(
        [*lines, "config:", settings_block(info.get("config") or {}), "status:",
         status_table([status])]
    )  # fmt: skip


# ------------------------------------------------------------------ offsets, plugins


def offsets_table(body: Mapping[str, Any]) -> str:
    entries = body.get("offsets") or []
    return table(("PARTITION", "OFFSET"), ([e.get("partition"), e.get("offset")] for e in entries))


def plugins_table(plugins: Sequence[Mapping[str, Any]]) -> str:
    """CLASS, TYPE, VERSION, and ALIAS when the worker names aliases (eos does)."""
    aliases = any(p.get("alias") for p in plugins)
    headers = ("CLASS", "TYPE", "VERSION", *(("ALIAS",) if aliases else ()))
    rows = [
        [p.get("class"), p.get("type"), p.get("version"), *((p.get("alias"),) if aliases else ())]
        for p in plugins
    ]
    return table(headers, rows)


def plugin_settings(definitions: Sequence[Mapping[str, Any]]) -> str:
    """One block per setting of ``GET /connector-plugins/{plugin}/config``: the name,
    type, default (or ``required``) and importance, then the documentation."""
    blocks = []
    for d in definitions:
        default = "required" if d.get("required") else f"default {cell(d.get('default_value'))}"
        head = f"{d.get('name')}  {cell(d.get('type'))}  {default}  {cell(d.get('importance'))}"
        doc = " ".join(str(d.get("documentation") or "").split())
        blocks.append(f"{head}\n    {doc}" if doc else head)
    return "\n".join(blocks)


def info_block(root: Mapping[str, Any], url: str) -> str:
    """``GET /``: Connect's three fields, then eos's ``cluster`` view when present."""
    lines = [
        f"url               {url}",
        f"version           {cell(root.get('version'))}",
        f"commit            {cell(root.get('commit'))}",
        f"kafka_cluster_id  {cell(root.get('kafka_cluster_id'))}",
    ]
    cluster = root.get("cluster")
    if isinstance(cluster, Mapping):
        members = cluster.get("members") or []
        lines += [
            f"worker_id         {cell(root.get('worker_id'))}",
            f"group_id          {cell(cluster.get('group_id'))}",
            f"leader            {cell(cluster.get('leader_url'))}",
            f"generation        {cell(cluster.get('generation'))}",
            f"protocol          {cell(cluster.get('protocol'))}",
            f"members           {len(members)}",
        ]
        if cluster.get("error"):
            lines.append(f"error             {cluster['error']}")
        if members:
            lines.append(
                table(
                    ("  WORKER", "URL"),
                    ([f"  {cell(m.get('worker_id'))}", m.get("url")] for m in members),
                )
            )
    return "\n".join(lines)
