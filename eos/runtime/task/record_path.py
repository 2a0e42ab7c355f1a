"""The steps between a task's poll and its producer, for one segment of a poll batch
(the template loop's send step, :meth:`eos.runtime.task.source_task.SourceTaskRunner._send`,
calls :meth:`RecordPath.prepare`, then hands the producer :attr:`RecordPath.convert`):

0. **runs of records** sharing a topic and schemas folded into typed blocks
   (:mod:`~eos.runtime.task.record_runs`), where the converters are schema-aware, no registry
   is involved, every step is a bundled one and ``commit_record`` is not overridden;
1. **transforms** (:class:`~eos.transforms.TransformChain`) on records, and on blocks
   column by column where the steps can (rows decoded by a
   :mod:`~eos.converters.decode` decoder where a step reads encoded values);
   a dropped record is not written, its source offset still commits (the loop takes the
   offsets from the polled records);
2. **the schema registry**: schemas the registry converters have not seen yet are
   registered in a worker thread, retried within ``errors.retry.timeout`` (the convert
   step then never waits for the network on the event loop);
3. **typed blocks** (``RecordBlock(encoded=False)``) encoded a column at a time
   (:func:`~eos.converters.encode_block`); a block that cannot be goes on row by
   row, so that the failing row is named (or skipped alone);
4. **convert**, called by the producer as it queues each record: the key and value
   converters, with the record's schemas and headers (the schemaless ``convert`` where the
   record has none: the default path's cost is unchanged).

A record that fails in 1 or 4 goes to the :class:`~eos.runtime.task.tolerance.ErrorHandler`:
it fails the task (``errors.tolerance=none``) or is skipped; a skipped record's dead letter
(:mod:`eos.runtime.task.dead_letters`) waits in :attr:`RecordPath.dead` for the loop to send
it right after the segment, in the same transaction as the output and the offsets.

``commit_record`` receives each record as the connector handed it (before the
transforms, as in Connect), with no metadata for a record that was dropped or skipped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, cast

import anyio
import anyio.to_thread

from eos.api import RecordBlock, RecordMetadata, SourceRecord
from eos.converters import Converter, encode_block
from eos.converters.base import SchemaConverter
from eos.converters.decode import decoder_for
from eos.converters.wire_format import RegistryConverter, schema_of
from eos.errors import ConversionError, EosError, TransformError
from eos.runtime.task.dead_letters import DeadLetters, Failure, Stage
from eos.runtime.task.producers.base import Convert, Outgoing, Sent, count_records, where
from eos.runtime.task.record_runs import Folded
from eos.runtime.task.task_deps import TaskDeps, TaskSpec
from eos.runtime.task.tolerance import ErrorHandler

Pair = tuple[bytes | None, bytes | None]

REGISTRY_WAIT_MAX_S = 10.0
"""Longest pause between two attempts to reach a schema registry at start-up."""


class _NotWritten:
    """What ``commit_record`` gets for a record that was not written."""

    def metadata(self) -> RecordMetadata | None:
        return None


NOT_WRITTEN = _NotWritten()


class RecordPath:
    """One task's steps from poll to producer (see the module docstring)."""

    def __init__(
        self,
        spec: TaskSpec,
        deps: TaskDeps,
        check_topic: Callable[[str], None],
        per_record: bool,
        log: Any,
    ) -> None:
        self.deps = deps
        self.chain = deps.transforms
        self.keys, self.values = deps.key_converter, deps.value_converter
        self.check_topic = check_topic
        self.per_record = per_record
        self.log = log
        settings = deps.errors
        letters = None
        if settings.dlq_topic is not None:
            letters = DeadLetters(
                settings.dlq_topic, spec.connector, spec.task_id, settings.dlq_context_headers
            )
        self.errors = ErrorHandler(settings, letters, deps.observer, deps.clock, log)
        self.decoder = None
        if self.chain is not None and self.chain.reads_values:
            self.decoder = decoder_for(self.keys, self.values)
        self._registry = [c for c in (self.keys, self.values) if isinstance(c, RegistryConverter)]
        self._steps: dict[Stage, str] = {
            "KEY_CONVERTER": deps.converter_names[0],
            "VALUE_CONVERTER": deps.converter_names[1],
        }
        self.folding = (
            not per_record and not self._registry
            and isinstance(self.keys, SchemaConverter) and isinstance(self.values, SchemaConverter)
            and (self.chain is None or self.chain.bundled)
        )  # fmt: skip
        """Whether runs of records go through as typed blocks (:mod:`.record_runs`)."""
        self._folded = Folded()
        self.active = self.chain is not None or bool(self._registry) or self.folding
        """Whether every segment needs :meth:`prepare` (else only those with blocks)."""
        self.blocks = False
        """The last prepared segment had blocks (its records must be counted row by row)."""
        self.dead: list[SourceRecord] = []
        self.dropped = 0
        self._skipped = 0
        self._pre: dict[int, SourceRecord] = {}
        """per_record: a transformed record → the record as polled."""
        self._lost: list[SourceRecord] = []
        """per_record: records as polled that were dropped or skipped."""
        self._rows: dict[int, tuple[RecordBlock, int]] = {}
        """Rows of blocks this path expanded → (block, row), to name a failing row."""
        self._seen: dict[tuple[int, str, int], object] = {}
        """(converter, topic, schema) registered with the registry (by identity)."""
        self.convert: Convert = self._make_convert()

    # ------------------------------------------------------------ start and stop

    async def start(self, waiting: Callable[[str], Awaitable[None]]) -> None:
        """Before the task starts: reach every schema registry (waiting as long as it
        takes, said once through ``waiting``), create the dead-letter topic."""
        for converter in self._registry:
            await self._reach(converter, waiting)
        settings = self.deps.errors
        if settings.dlq_topic is not None and self.deps.create_topic is not None:
            await self.deps.create_topic(settings.dlq_topic, settings.dlq_replication_factor)

    async def _reach(
        self, converter: RegistryConverter, waiting: Callable[[str], Awaitable[None]]
    ) -> None:
        pause, said = 1.0, False
        while True:
            try:
                await anyio.to_thread.run_sync(converter.probe, abandon_on_cancel=True)
            except EosError as exc:
                if not exc.retriable:
                    raise
                if not said:
                    self.log.warning("waiting for the schema registry", error=str(exc))
                    await waiting(f"waiting for the schema registry: {exc}")
                    said = True
                await self.deps.clock.sleep(pause)
                pause = min(2 * pause, REGISTRY_WAIT_MAX_S)
                continue
            if said:
                self.log.info("schema registry reached")
            return

    def close(self) -> None:
        """Close the transforms and the converters (each failure logged, none raised)."""
        parts = [self.chain, self.keys, self.values]
        for part in parts:
            close = getattr(part, "close", None)
            if callable(close):
                try:
                    close()
                except Exception as exc:
                    self.log.warning("closing failed", part=type(part).__name__, error=repr(exc))

    # ----------------------------------------------------------------- prepare

    async def prepare(self, segment: Sequence[Outgoing]) -> Sequence[Outgoing]:
        """The segment as the producer takes it: transformed, its schemas registered, its
        typed blocks encoded (the segment itself on the default path)."""
        self.dead, self.dropped, self._skipped = [], 0, 0
        self._pre, self._lost, self._rows = {}, [], {}
        self._folded.clear()
        self.blocks = RecordBlock in set(map(type, segment))  # C loops: the default path's
        if not self.active and not self.blocks:
            return segment
        items: Sequence[Outgoing] = segment
        if self.folding:
            items = self._folded.fold(segment)
            self.blocks = self.blocks or bool(self._folded.runs)
        if self.per_record and self.blocks:  # commit_record takes records: one per row
            items = self._expand(segment)
        staged = self._transform(items) if self.chain is not None else list(items)
        if self._registry:
            await self._register(staged)
        return self._encode(staged)

    def _expand(self, items: Sequence[Outgoing]) -> list[Outgoing]:
        out: list[Outgoing] = []
        for item in items:
            if isinstance(item, RecordBlock):
                rows = item.records()
                self._rows.update((id(row), (item, i)) for i, row in enumerate(rows))
                out += rows
            else:
                out.append(item)
        return out

    # --------------------------------------------------------------- transforms

    def _transform(self, items: Sequence[Outgoing]) -> list[Outgoing]:
        out: list[Outgoing] = []
        run: list[SourceRecord] = []  # records in a row, transformed as one batch
        for item in items:
            if type(item) is SourceRecord:
                run.append(item)
                continue
            assert isinstance(item, RecordBlock)
            if run:
                self._transform_records(run, out)
                run = []
            out += self._transform_block(item)
        if run:
            self._transform_records(run, out)
        return out

    def _transform_records(self, records: list[SourceRecord], out: list[Outgoing]) -> None:
        """``records`` through the chain (as one batch, or one by one where the chain
        cannot batch them or a record fails), the results appended to ``out``."""
        chain = self.chain
        assert chain is not None
        results = chain.apply_all(records)
        skipped: set[int] = set()  # ids of the records a failure skipped
        if results is None:
            results = []
            for item in records:
                try:
                    results.append(chain.apply(item))
                except TransformError as exc:
                    self._transform_failed(item, exc, self._where(item))
                    results.append(None)
                    skipped.add(id(item))
        track = self.per_record
        for item, result in zip(records, results, strict=True):
            if result is None:
                if skipped and id(item) in skipped:
                    continue
                self.dropped += 1
                if track:
                    self._lost.append(item)
            else:
                if track and result is not item:
                    self._pre[id(result)] = item
                out.append(result)

    def _transform_block(self, block: RecordBlock) -> list[Outgoing]:
        assert self.chain is not None
        records = self._folded.pop(block)
        try:
            result = self.chain.apply_block(block, self.decoder)
        except TransformError:
            if records is not None:
                return self._unfold(records)
            return self._rows_through_chain(block)
        if result is None:
            self.dropped += len(block)
            return []
        if records is not None:
            if not isinstance(result, RecordBlock):  # a step needs rows: records from now on
                self.folding = False
                return self._unfold(records)
            self._folded.keep(result, records)
        self.dropped += len(block) - len(result)
        return [result] if isinstance(result, RecordBlock) else list(result)

    def _unfold(self, records: list[SourceRecord], counted: int = 0) -> list[Outgoing]:
        """A folded run as its records again, through the chain (whose block had dropped
        ``counted`` of them): each is then named, skipped or dead-lettered alone, as if it
        had never been folded."""
        if self.chain is None:
            return list(records)
        out: list[Outgoing] = []
        self.dropped -= counted  # counted again, record by record
        self._transform_records(records, out)
        return out

    def _rows_through_chain(self, block: RecordBlock) -> list[Outgoing]:
        """The chain row by row, where it failed on a block: names the failing row (and
        skips only it under ``errors.tolerance=all``)."""
        chain = self.chain
        assert chain is not None
        if block.encoded and chain.reads_values and self.decoder is not None:
            rows = self.decoder.decode(block)
        else:
            rows = block.records()
        out: list[Outgoing] = []
        for i, row in enumerate(rows):
            try:
                result = chain.apply(row)
            except TransformError as exc:
                self._transform_failed(row, exc, f"row {i} of {where(block)}")
                continue
            if result is None:
                self.dropped += 1
            else:
                out.append(result)
        return out

    def _transform_failed(self, record: SourceRecord, exc: TransformError, named: str) -> None:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        step = exc.type_name or exc.alias
        fatal = TransformError(
            f"transforms.{exc.alias} ({step}) failed on {named}: {cause}", exc.alias, step
        )
        if cause is exc:
            fatal = exc
        letter = self.errors.failed(Failure(record, "TRANSFORMATION", step, cause), fatal)
        self._skip(record, letter)

    # ----------------------------------------------------------------- registry

    async def _register(self, items: Sequence[Outgoing]) -> None:
        """Register every schema of ``items`` a registry converter has not seen (in a
        thread, retried); refusals are left for the convert step to report per record."""
        for item in items:
            if type(item) is SourceRecord:
                if not item.encoded:
                    await self._schema(self.keys, item.topic, item.key_schema, item.key)
                    await self._schema(self.values, item.topic, item.value_schema, item.value)
                continue
            assert isinstance(item, RecordBlock)
            if item.encoded:
                continue
            for topic in {item.topic} if item.topics is None else set(item.topics):
                if item.keys is not None and item.key_schema is not None:
                    await self._schema(self.keys, topic, item.key_schema, True)
                if item.value_schema is not None:
                    await self._schema(self.values, topic, item.value_schema, True)

    async def _schema(self, converter: Converter, topic: str, schema: Any, value: Any) -> None:
        if value is None or not isinstance(converter, RegistryConverter):
            return
        if schema is None:
            try:
                schema = schema_of(value, converter.FORMAT)
            except EosError:
                return  # the convert step reports it
        key = (id(converter), topic, id(schema))
        if key in self._seen:
            return
        if not converter.known(topic, schema):
            register = partial(anyio.to_thread.run_sync, _writer, converter, topic, schema)
            await self.errors.retry(register, f"registering the schema of topic {topic!r}")
        self._seen[key] = schema

    # ------------------------------------------------------------------- blocks

    def _encode(self, items: list[Outgoing]) -> list[Outgoing]:
        """Typed blocks encoded (row by row where a whole column cannot be); the topics of
        every block checked."""
        if not self.blocks:
            return items
        out: list[Outgoing] = []
        for item in items:
            if type(item) is not RecordBlock:
                out.append(item)
                continue
            if not item.encoded:
                records = self._folded.pop(item)
                if item.topics is not None and self._registry:  # a subject per row's topic
                    out += self._expand([item])
                    continue
                try:
                    item = encode_block(item, self.keys, self.values)
                except Exception:  # the convert step names the failing row
                    if records is None:
                        out += self._expand([item])
                    else:
                        out += self._unfold(records, len(records) - len(item))
                    continue
            for topic in {item.topic} if item.topics is None else set(item.topics):
                self.check_topic(topic)
            out.append(item)
        return out

    # ------------------------------------------------------------------ convert

    def _make_convert(self) -> Convert:
        """The convert step (per record: keep it lean; it is the default path's cost)."""
        check_topic = self.check_topic
        key_plain, value_plain = self.keys.convert, self.values.convert
        key_typed, value_typed = _typed(self.keys), _typed(self.values)
        failed = self._conversion_failed

        def convert(record: SourceRecord) -> Pair | None:
            topic = record.topic
            check_topic(topic)
            if record.encoded:
                return _encoded(record)
            try:
                schema = record.key_schema
                if schema is None:
                    key = key_plain(topic, record.key)
                else:
                    key = key_typed(topic, schema, record.key, record.headers)
            except Exception as exc:
                return failed(record, "KEY_CONVERTER", exc)
            try:
                schema = record.value_schema
                if schema is None:
                    value = value_plain(topic, record.value)
                else:
                    value = value_typed(topic, schema, record.value, record.headers)
            except Exception as exc:
                return failed(record, "VALUE_CONVERTER", exc)
            return key, value

        return convert

    def _conversion_failed(self, record: SourceRecord, stage: Stage, exc: Exception) -> None:
        fatal = ConversionError(f"{self._where(record)} could not be converted: {exc}")
        letter = self.errors.failed(Failure(record, stage, self._steps[stage], exc), fatal)
        self._skipped += 1
        self._skip(record, letter)

    def _skip(self, record: SourceRecord, letter: SourceRecord | None) -> None:
        if letter is not None:
            self.dead.append(letter)
        if self.per_record:
            self._lost.append(self._pre.pop(id(record), record))

    def _where(self, record: SourceRecord) -> str:
        row = self._rows.get(id(record))
        return where(record) if row is None else f"row {row[1]} of {where(row[0])}"

    def convert_dead(self, record: SourceRecord) -> Pair:
        """The convert step of dead letters (already bytes)."""
        self.check_topic(record.topic)
        return record.key, record.value

    # ------------------------------------------------------------ after the send

    def take_dead(self) -> list[SourceRecord]:
        dead, self.dead = self.dead, []
        return dead

    def written(self, out: Sequence[Outgoing]) -> int:
        """Records of ``out`` the producer queued (rows counted, skipped ones not)."""
        return (count_records(out) if self.blocks else len(out)) - self._skipped

    def committed(self, sent: list[tuple[SourceRecord, Sent]]) -> list[tuple[SourceRecord, Sent]]:
        """``commit_record``'s arguments: the records as polled, written or not."""
        pre = self._pre
        records = [(pre.get(id(r), r), s) for r, s in sent] if pre else sent
        if self._lost:
            records = [*records, *((r, cast(Sent, NOT_WRITTEN)) for r in self._lost)]
        return records


def _typed(converter: Converter) -> Callable[..., bytes | None]:
    found = getattr(converter, "from_connect_data", None)
    if callable(found):
        return cast(Callable[..., bytes | None], found)
    return lambda topic, schema, value, headers: converter.convert(topic, value)


def _encoded(record: SourceRecord) -> Pair:
    key, value = record.key, record.value
    if (key is None or type(key) is bytes) and (value is None or type(value) is bytes):
        return key, value
    raise ConversionError(
        f"{where(record)} is marked encoded but its key or value is not bytes "
        f"(key {type(key).__name__}, value {type(value).__name__})"
    )


def _writer(converter: RegistryConverter, topic: str, schema: Any) -> None:
    """Register ``schema`` (a worker thread); only a retriable failure is raised."""
    try:
        converter.writer(topic, schema)
    except EosError as exc:
        if exc.retriable:
            raise
