"""Kafka Connect's predicates (TopicNameMatches, HasHeaderKey, RecordIsTombstone) and
the Filter transform they are mostly used with. All of them also work on a record
block's columns (topic, headers, values), without a record per row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eos.api.records import RecordBlock, SourceRecord
from eos.columns.text_struct import TextStruct
from eos.config.definition import NO_DEFAULT, ConfigDef, Importance, NonEmpty, Type
from eos.transforms.base import Mask, RowPredicate, RowTransform
from eos.transforms.blocks import drop_rows
from eos.transforms.java import java_regex
from eos.transforms.row import Row
from eos.transforms.setting_validators import JavaRegex


class Filter(RowTransform):
    """Drops all records, filtering them from subsequent transformations in the chain:
    meant to be used with a predicate (``transforms.f.predicate=p``)."""

    reads_values = False

    def transform(self, row: Row) -> bool:
        return False

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        return None if mask is None else drop_rows(block, mask)


TOPIC_NAME_MATCHES_CONFIG = ConfigDef().define(
    "pattern",
    Type.STRING,
    NO_DEFAULT,
    JavaRegex(non_empty=True),
    Importance.MEDIUM,
    "A Java regular expression for matching against the name of a record's topic.",
)


class TopicNameMatches(RowPredicate):
    """True for records whose topic name matches ``pattern`` (the whole name)."""

    reads_values = False

    def config_def(self) -> ConfigDef:
        return TOPIC_NAME_MATCHES_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        self._regex = java_regex(TOPIC_NAME_MATCHES_CONFIG.parse(settings)["pattern"])
        self._cache: dict[str, bool] = {}

    def matches(self, topic: str) -> bool:
        found = self._cache.get(topic)
        if found is None:
            found = self._regex.fullmatch(topic) is not None
            if len(self._cache) >= 1024:
                self._cache.clear()
            self._cache[topic] = found
        return found

    def test(self, record: SourceRecord) -> bool:
        return self.matches(record.topic)

    def test_block(self, block: RecordBlock) -> bool | Sequence[bool]:
        if block.topics is None:
            return self.matches(block.topic)
        return [self.matches(t) for t in block.topics]


HAS_HEADER_KEY_CONFIG = ConfigDef().define(
    "name", Type.STRING, NO_DEFAULT, NonEmpty(), Importance.MEDIUM, "The header name."
)


class HasHeaderKey(RowPredicate):
    """True for records with at least one header called ``name``."""

    reads_values = False

    def config_def(self) -> ConfigDef:
        return HAS_HEADER_KEY_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        self._name: str = HAS_HEADER_KEY_CONFIG.parse(settings)["name"]

    def test(self, record: SourceRecord) -> bool:
        name = self._name
        return any(h[0] == name for h in record.headers)

    def test_block(self, block: RecordBlock) -> bool | Sequence[bool]:
        if any(h[0] == self._name for h in block.headers):
            return True
        column = block.header_columns.get(self._name)
        return False if column is None else [v is not None for v in column]


class RecordIsTombstone(RowPredicate):
    """True for tombstones: records whose value is null (None)."""

    reads_values = False  # a None value stays None encoded

    def test(self, record: SourceRecord) -> bool:
        return record.value is None

    def test_block(self, block: RecordBlock) -> bool | Sequence[bool]:
        values: Any = block.values
        if type(values) is TextStruct:  # lines: never null
            return False
        if hasattr(values, "is_null"):  # a pyarrow array
            return bool(values.null_count) and list(values.is_null().to_pylist())
        return [v is None for v in values]
