"""Checking a connector's ``transforms`` and ``predicates`` settings without running
anything: what ``…/config/validate``, create and update report per setting.

:func:`problems` creates and configures every listed transform and predicate (and
closes them) and returns each problem as a :class:`~eos.errors.ConfigError` naming the
full setting. :func:`encoded_problems` adds, for a connector that hands its rows over
already encoded (``SourceConnector.encodes_rows``), one problem per step that reads
record keys or values. :func:`definitions` lists the settings of every listed step for
the validate answer.
"""

from __future__ import annotations

from collections.abc import Mapping

from eos.errors import ConfigError
from eos.transforms.config import TRANSFORMS, definitions, load

__all__ = ["definitions", "encoded_problems", "problems"]


def problems(props: Mapping[str, str]) -> list[ConfigError]:
    """Every problem of the ``transforms`` / ``predicates`` settings."""
    loaded = load(props)
    loaded.close()
    return loaded.problems


def encoded_problems(props: Mapping[str, str], connector: str) -> list[ConfigError]:
    """One problem per configured step that reads keys or values, for a connector
    (``connector``: its name in the message) whose rows arrive already encoded."""
    loaded = load(props)
    loaded.close()
    found = []
    for step in loaded.steps:
        reader = step.transform if step.transform.reads_values else step.predicate
        if reader is None or not reader.reads_values:
            continue
        what = "transformation" if reader is step.transform else f"predicate {step.predicate_alias}"
        found.append(
            ConfigError(
                f"{TRANSFORMS}.{step.alias}.type",
                step.type_name,
                f"this {what} reads record keys or values, but {connector} hands its rows over "
                "already encoded with this configuration; only transforms of topics, headers "
                "and timestamps (RegexRouter, TimestampRouter, InsertHeader, DropHeaders, "
                "Filter with TopicNameMatches, HasHeaderKey or RecordIsTombstone) run on them",
            )
        )
    return found
