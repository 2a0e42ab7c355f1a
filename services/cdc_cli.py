"""``eos cdc privileges CONNECTOR_FILE``: what a PostgresCdcSource's database user needs,
and whether the server grants it (docs/cdc.md, "Setting up PostgreSQL").

It connects with the connector's own settings, lists the tables it would capture
(``table.include.list`` / ``table.exclude.list`` over the database's tables) and prints
each privilege of the plan as ``granted`` or ``missing`` with the statement that grants
it; exit status 1 if one is missing, 2 if the file or the server cannot be read (one line
saying which setting to check; the password is never printed). ``--worker-config``
resolves ``${file:…}``-style values through that worker file's config providers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eos.config.connector_files import read_connector
from eos.config.files import load_config_file
from eos.config.providers import ConfigProviders


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cdc = sub.add_parser("cdc", help="PostgreSQL change data capture: the user's privileges")
    cdc.add_argument("action", choices=["privileges"])
    cdc.add_argument("connector_config", help="a PostgresCdcSource connector file")
    cdc.add_argument(
        "--worker-config", type=Path, default=None, metavar="FILE",
        help="a worker file whose config.providers resolve ${…} values",
    )  # fmt: skip
    cdc.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from services.connectors.postgres_cdc.catalog import CdcSetupError, connect
    from services.connectors.postgres_cdc.privileges import review
    from services.connectors.postgres_cdc.settings import CdcSettings

    connector, problems = read_connector(args.connector_config)
    if connector is None:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    worker = load_config_file(args.worker_config) if args.worker_config else {}
    props = ConfigProviders.from_worker(worker).resolve(connector.config)
    settings = CdcSettings.parse(props)
    try:
        conn = connect(settings)
    except CdcSetupError as exc:  # one line naming the setting to check, no password
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        found = review(conn, settings)
    finally:
        conn.close()
    print(f"# {settings.user} capturing {len(found.tables)} table(s) of {settings.dbname}")
    for need in found.needs:
        if need in found.missing:
            print(f"missing: {need.line()}")
        else:
            print(f"granted: {need.privilege} on {need.on} ({need.why})")
    return 1 if found.missing else 0
