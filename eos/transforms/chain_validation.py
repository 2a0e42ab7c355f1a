"""Checking a connector's ``transforms`` and ``predicates`` settings without running
anything: what ``…/config/validate``, create and update report per setting.

:func:`problems` creates and configures every listed transform and predicate (and
closes them) and returns each problem as a :class:`~eos.errors.ConfigError` naming the
full setting. Given the name of a connector that hands its rows over already encoded
(``SourceConnector.encodes_rows``), it adds one problem per step that reads record keys
or values. :func:`definitions` lists the settings of every listed step for the validate
answer.
"""

from __future__ import annotations

from collections.abc import Mapping

from eos.errors import ConfigError
from eos.transforms.chain_settings import TRANSFORMS, Loaded, definitions, load

__all__ = ["definitions", "problems"]


def problems(props: Mapping[str, str], *, encoded_by: str | None = None) -> list[ConfigError]:
    """Every problem of the ``transforms`` / ``predicates`` settings; with ``encoded_by``
    (a connector's name) also the steps that cannot run on its encoded rows."""
    loaded = load(props)
    loaded.close()
    found = list(loaded.problems)
    if encoded_by is not None:
        found += _reading_values(loaded, encoded_by)
    return found


def _reading_values(loaded: Loaded, connector: str) -> list[ConfigError]:
    found = []
    for step in loaded.steps:
        if step.transform.reads_values:
            what = "this transformation"
        elif step.predicate is not None and step.predicate.reads_values:
            what = f"its predicate {step.predicate_alias}"
        else:
            continue
        found.append(
            ConfigError(
                f"{TRANSFORMS}.{step.alias}.type",
                step.type_name,
                f"{what} reads record keys or values, but {connector} hands its rows over "
                "already encoded with this configuration; only transforms of topics, headers "
                "and timestamps (RegexRouter, TimestampRouter, InsertHeader, DropHeaders, "
                "Filter) and the predicates TopicNameMatches, HasHeaderKey and "
                "RecordIsTombstone run on them",
            )
        )
    return found
