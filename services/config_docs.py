"""Keeps the settings tables in ``docs/configuration.md`` equal to the definitions.

``python -m services.config_docs`` rewrites the tables between the
``<!-- worker-settings ... -->`` and ``<!-- connector-settings ... -->`` markers;
a unit test fails when they are out of date.
"""

from __future__ import annotations

import re
from pathlib import Path

from eos.config.connector import CONNECTOR_CONFIG
from eos.config.worker import WORKER_CONFIG, docs_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
TABLES = {"worker-settings": WORKER_CONFIG, "connector-settings": CONNECTOR_CONFIG}


def render(text: str) -> str:
    for marker, definition in TABLES.items():
        pattern = re.compile(rf"(<!-- {marker}:[^\n]*-->\n).*?(<!-- /{marker} -->)", re.S)
        replacement = r"\g<1>" + docs_table(definition).replace("\\", "\\\\") + r"\n\g<2>"
        text = pattern.sub(replacement, text)
    return text


def main() -> None:
    DOC.write_text(render(DOC.read_text()))


if __name__ == "__main__":
    main()
