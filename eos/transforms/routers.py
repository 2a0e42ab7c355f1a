"""Topic transforms: RegexRouter and TimestampRouter (Kafka Connect's, same settings).

Both keep the new topic of each input in a small cache: a connector writes to few
topics (and, for TimestampRouter, few time buckets), so a record costs a dict lookup.
On a record block they rename the topic column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos.api.records import RecordBlock
from eos.config.definition import NO_DEFAULT, ConfigDef, Importance, Type
from eos.errors import DataError
from eos.transforms.base import Mask, RowTransform
from eos.transforms.blocks import map_topics, selected, with_topics
from eos.transforms.dates import SimpleDateFormat
from eos.transforms.java import java_regex, java_replacement
from eos.transforms.row import Row
from eos.transforms.setting_validators import JavaRegex, setting_error

CACHE_SIZE = 1024
"""Entries each router keeps before it starts over."""

REGEX_ROUTER_CONFIG = (
    ConfigDef()
    .define(
        "regex",
        Type.STRING,
        NO_DEFAULT,
        JavaRegex(),
        Importance.HIGH,
        "Regular expression to use for matching (Java syntax).",
    )
    .define(
        "replacement",
        Type.STRING,
        NO_DEFAULT,
        None,
        Importance.HIGH,
        "Replacement string ($1, ${name} refer to groups of the regex).",
    )
)


class RegexRouter(RowTransform):
    """Update the record topic using the configured regular expression and replacement
    string: if the regex matches the whole topic, the first match is replaced (Java's
    ``Matcher.replaceFirst``)."""

    reads_values = False

    def config_def(self) -> ConfigDef:
        return REGEX_ROUTER_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = REGEX_ROUTER_CONFIG.parse(settings)
        self._regex = java_regex(v["regex"])
        try:
            self._template = java_replacement(v["replacement"], self._regex)
        except ValueError as exc:
            raise setting_error("replacement", v["replacement"], exc) from None
        self._cache: dict[str, str] = {}

    def rename(self, topic: str) -> str:
        renamed = self._cache.get(topic)
        if renamed is None:
            renamed = topic
            if self._regex.fullmatch(topic):
                renamed = self._regex.sub(self._template, topic, count=1)
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            self._cache[topic] = renamed
        return renamed

    def transform(self, row: Row) -> bool:
        renamed = self._cache.get(row.topic)
        row.topic = renamed if renamed is not None else self.rename(row.topic)
        return True

    def transform_rows(self, rows: list[Row]) -> list[Row]:
        cache = self._cache
        for row in rows:
            renamed = cache.get(row.topic)
            row.topic = renamed if renamed is not None else self.rename(row.topic)
        return rows

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        return map_topics(block, mask, self.rename)


TIMESTAMP_ROUTER_CONFIG = (
    ConfigDef()
    .define(
        "topic.format",
        Type.STRING,
        "${topic}-${timestamp}",
        None,
        Importance.HIGH,
        "Format string which can contain ${topic} and ${timestamp} as placeholders for "
        "the topic and timestamp, respectively.",
    )
    .define(
        "timestamp.format",
        Type.STRING,
        "yyyyMMdd",
        None,
        Importance.HIGH,
        "Format string for the timestamp that is compatible with "
        "java.text.SimpleDateFormat (in UTC).",
    )
)

_UNIT_MS = {
    "S": 1,
    "s": 1000,
    "m": 60_000,
    "H": 3_600_000,
    "k": 3_600_000,
    "K": 3_600_000,
    "h": 3_600_000,
    "a": 3_600_000,
}
_DAY_MS = 86_400_000


class TimestampRouter(RowTransform):
    """Update the record's topic as a function of the original topic and the record
    timestamp: ``topic.format`` with ``${topic}`` and ``${timestamp}`` replaced. A record
    without a timestamp fails (as in Connect)."""

    reads_values = False

    def config_def(self) -> ConfigDef:
        return TIMESTAMP_ROUTER_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = TIMESTAMP_ROUTER_CONFIG.parse(settings)
        self._topic_format: str = v["topic.format"]
        try:
            self._format = SimpleDateFormat(v["timestamp.format"])
        except ValueError as exc:
            raise setting_error("timestamp.format", v["timestamp.format"], exc) from None
        letters = set(v["timestamp.format"])
        # The text changes at most once per unit: cache it per (topic, time bucket).
        self._unit = min([ms for c, ms in _UNIT_MS.items() if c in letters] or [_DAY_MS])
        self._cache: dict[tuple[str, int], str] = {}

    def route(self, topic: str, timestamp: int) -> str:
        key = (topic, timestamp // self._unit)
        routed = self._cache.get(key)
        if routed is None:
            stamp = self._format.format_millis(timestamp)
            routed = self._topic_format.replace("${topic}", topic).replace("${timestamp}", stamp)
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            self._cache[key] = routed
        return routed

    def transform(self, row: Row) -> bool:
        if row.timestamp is None:
            raise DataError(f"Timestamp missing on record for topic {row.topic!r}")
        row.topic = self.route(row.topic, row.timestamp)
        return True

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        n = len(block)
        stamps: Any = block.timestamps if block.timestamps is not None else [None] * n
        topics = block.topics if block.topics is not None else [block.topic] * n
        routed = []
        for topic, stamp, chosen in zip(topics, stamps, selected(mask, n), strict=True):
            if not chosen:
                routed.append(topic)
            elif stamp is None:
                raise DataError(f"Timestamp missing on record for topic {topic!r}")
            else:
                routed.append(self.route(topic, stamp))
        return with_topics(block, routed)
