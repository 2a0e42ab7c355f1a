"""What PostgresCdcSource's database user needs, defined once: :data:`RULES` makes the
table in docs/cdc.md (:func:`docs_table`), ``eos cdc privileges`` (:func:`plan`, then
:func:`review` against the server) and the task's start-up refusal, which names every
missing privilege with the statement that grants it, as ``eos acls plan|check`` does for
Kafka's ACLs.

For a user ``u`` capturing ``public.orders`` in database ``shop`` with the default
``publication.autocreate.mode=all_tables`` the plan reads: the REPLICATION attribute,
CONNECT on ``shop``, USAGE on schema ``public``, SELECT on ``public.orders``, and a
superuser to create the publication (or a publication made beforehand); with
``filtered``, CREATE on ``shop`` and ownership of ``public.orders`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from services.connectors.postgres_cdc.catalog import quoted, selected, user_tables
from services.connectors.postgres_cdc.settings import CdcSettings


@dataclass(frozen=True)
class Need:
    """One privilege the user needs, why, and the statement that grants it (run by a
    superuser or the object's owner)."""

    privilege: str
    on: str
    why: str
    grant: str

    def line(self) -> str:
        return f"{self.privilege} on {self.on} ({self.why}): {self.grant}"


@dataclass(frozen=True)
class Rule:
    """A privilege of the plan: ``privilege`` on ``on`` (``{user}``, ``{db}``,
    ``{schema}``, ``{table}``, ``{publication}``), why, the statement that grants it."""

    privilege: str
    on: str
    why: str
    grant: str
    when: str = ""
    """When it applies (empty: always): the ``publication.autocreate.mode`` that creates
    the publication, while it does not exist (a missing publication with ``disabled`` is
    no privilege: the task refuses it by name)."""
    signal: bool = False
    """It holds for the signal table (``signal.data.collection``) too, which the
    publication must include though it is not captured."""


RULES: Final = (
    Rule("REPLICATION", "the user {user}", "the replication connection and the slot",
         'ALTER ROLE "{user}" REPLICATION;'),
    Rule("CONNECT", "database {db}", "every connection",
         'GRANT CONNECT ON DATABASE "{db}" TO "{user}";'),
    Rule("USAGE", "schema {schema}", "reading its tables",
         'GRANT USAGE ON SCHEMA "{schema}" TO "{user}";', signal=True),
    Rule("SELECT", "table {table}", "the snapshot (and the catalog of its columns)",
         'GRANT SELECT ON {quoted} TO "{user}";'),
    Rule("CREATE", "database {db}", "creating the publication FOR TABLE",
         'GRANT CREATE ON DATABASE "{db}" TO "{user}";', "filtered"),
    Rule("ownership", "table {table}", "creating the publication FOR TABLE",
         'ALTER TABLE {quoted} OWNER TO "{user}"; -- or create the publication as its owner',
         "filtered", signal=True),
    Rule("superuser", "the user {user}", "creating the publication FOR ALL TABLES",
         'CREATE PUBLICATION "{publication}" FOR ALL TABLES; -- as a superuser, beforehand',
         "all_tables"),
)  # fmt: skip
"""Every privilege of the plan, one row of docs/cdc.md's table each."""

_AUTOCREATE: Final = ("all_tables", "filtered")


def plan(settings: CdcSettings, tables: Sequence[str], *, publication_exists: bool) -> list[Need]:
    """Every privilege the user needs to capture ``tables`` (``schema.table``) and to
    publish the signal table, if any."""
    values = {"user": settings.user, "db": settings.dbname, "publication": settings.publication}
    signal = settings.signal_table if settings.signal_table not in tables else ""
    needs: list[Need] = []
    for rule in RULES:
        if rule.when in _AUTOCREATE and (publication_exists or rule.when != settings.autocreate):
            continue
        objects = [*tables, signal] if rule.signal and signal else list(tables)
        if "{table}" in rule.on:
            scopes = [{"table": t, "quoted": quoted(t)} for t in objects]
        elif "{schema}" in rule.on:
            scopes = [{"schema": s} for s in dict.fromkeys(t.partition(".")[0] for t in objects)]
        else:
            scopes = [{}]
        for scope in scopes:
            named = {**values, **scope}
            needs.append(Need(rule.privilege, rule.on.format(**named), rule.why,
                              rule.grant.format(**named)))  # fmt: skip
    return needs


@dataclass(frozen=True)
class Review:
    """What the server says of a user's privileges for this connector."""

    tables: list[str]
    """The tables it would capture (``table.include.list`` / ``table.exclude.list``)."""
    needs: list[Need]
    """The plan (:func:`plan`) for them."""
    missing: list[Need]
    """The needs the connection's user lacks."""


def review(conn: Any, settings: CdcSettings) -> Review:
    """The plan for the tables the connector would capture, and what the user lacks."""
    with conn.cursor() as cur:
        tables = selected(user_tables(cur), settings)
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (settings.publication,))
        exists = cur.fetchone() is not None
        cur.execute("SELECT rolsuper, rolreplication FROM pg_roles WHERE rolname = current_user")
        superuser, replication = cur.fetchone() or (False, False)
        needs = plan(settings, tables, publication_exists=exists)
        missing = [n for n in needs if not superuser and not _granted(cur, n, replication)]
    return Review(tables, needs, missing)


def _granted(cur: Any, need: Need, replication: bool) -> bool:
    name = need.on.partition(" ")[2]  # "table public.t" → public.t
    if need.privilege == "REPLICATION":
        return replication
    if need.privilege == "superuser":
        return False  # a superuser was answered before
    if need.privilege in ("CONNECT", "CREATE"):
        cur.execute("SELECT has_database_privilege(%s, %s)", (name, need.privilege))
    elif need.privilege == "USAGE":
        cur.execute("SELECT has_schema_privilege(%s, 'USAGE')", (name,))
    elif need.privilege == "SELECT":
        cur.execute("SELECT has_table_privilege(%s::regclass, 'SELECT')", (quoted(name),))
    else:  # ownership
        cur.execute(
            "SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = %s::regclass",
            (quoted(name),),
        )
    row = cur.fetchone()
    return bool(row and row[0])


def refusal(settings: CdcSettings, missing: Sequence[Need]) -> str:
    """The one message a task fails with: every missing privilege and its statement."""
    lines = "; ".join(need.line() for need in missing)
    return f"database.user {settings.user} lacks {len(missing)} privilege(s): {lines}"


def docs_table() -> str:
    """The privileges table of docs/cdc.md."""
    shown = {"{user}": "<user>", "{db}": "<database>", "{schema}": "<schema>",
             "{publication}": "<publication>", "{quoted}": '"<schema>"."<table>"'}  # fmt: skip
    rows = ["| privilege | on | why | granted with |", "|---|---|---|---|"]
    for rule in RULES:
        on = rule.on.replace(
            "table {table}", "each captured table" + (" and the signal table" * rule.signal)
        )
        on = on.replace(
            "schema {schema}", "the schema of each" + (" (and the signal table's)" * rule.signal)
        )
        grant = rule.grant
        for key, text in shown.items():
            on, grant = on.replace(key, f"`{text}`"), grant.replace(key, text)
        when = f" (only with `publication.autocreate.mode={rule.when}` while it is missing)"
        rows.append(f"| {rule.privilege} | {on} | {rule.why}{when if rule.when else ''} | "
                    f"`{grant}` |")  # fmt: skip
    return "\n".join(rows) + "\n"
