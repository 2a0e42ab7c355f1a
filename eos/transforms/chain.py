"""The chain of a connector's transforms, the one object a task uses:
``TransformChain.from_config(props)`` once, then ``apply(record)`` per record (the
transformed record, or None when a step dropped it), or ``apply_all(records)`` on a
batch of them (each bundled step loops over the whole batch: no call per step and
record), and ``apply_block(block)`` per record block, ``close()`` at the end.

Steps run in ``transforms`` order; a step with a predicate applies only to the records
its predicate matches (``negate``: does not match); a dropped record goes no further
(as Connect's ``TransformationChain``). Bundled steps change one copy of the record
(:mod:`eos.transforms.row`), which the chain returns (or the input itself if nothing
changed); a user's step gets a copy of its own and returns a record.

A failing step raises :class:`~eos.errors.TransformError` naming it and the record
(its cause is the step's own error): what ``errors.tolerance`` acts on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, Protocol, cast

from eos.api.records import RecordBlock, SourceRecord
from eos.api.transforms import Predicate, Transformation
from eos.errors import TransformError
from eos.transforms.base import Mask, NeedsRows, RowPredicate, RowTransform
from eos.transforms.chain_settings import Step, load
from eos.transforms.row import Row, copy_record, same_as
from eos.transforms.row import load as load_row


class BlockDecoder(Protocol):
    """Turns a block whose keys and values are encoded bytes into records with Connect
    values (and schemas), for steps that read them. The runtime's converters provide it
    where they can read back what they write."""

    def decode(self, block: RecordBlock) -> list[SourceRecord]: ...


class _Stage:
    __slots__ = (
        "alias",
        "negate",
        "predicate",
        "predicate_alias",
        "reads_values",
        "row_predicate",
        "row_transform",
        "transform",
        "type_name",
    )

    def __init__(self, step: Step) -> None:
        self.alias = step.alias
        self.type_name = step.type_name
        self.transform: Transformation = step.transform
        self.predicate: Predicate | None = step.predicate
        self.predicate_alias = step.predicate_alias
        self.negate = step.negate
        self.row_transform = isinstance(step.transform, RowTransform)
        self.row_predicate = isinstance(step.predicate, RowPredicate)
        self.reads_values = step.transform.reads_values or bool(
            step.predicate is not None and step.predicate.reads_values
        )

    def label(self) -> str:
        return f"transforms.{self.alias} ({self.type_name})"

    def failure(self, where: str, exc: Exception) -> TransformError:
        return TransformError(
            f"{self.label()} failed on {where}: {exc}", self.alias, self.type_name
        )


class TransformChain:
    """A connector's configured steps; see the module's docstring."""

    def __init__(self, steps: Sequence[Step] = ()) -> None:
        self._configured = tuple(steps)
        self._stages = tuple(_Stage(s) for s in steps)
        self._steps = tuple(_step(s) for s in self._stages)
        self._reads_from = [
            any(s.reads_values for s in self._stages[i:]) for i in range(len(self._stages))
        ]
        self.reads_values = bool(self._reads_from) and self._reads_from[0]
        """Whether some step reads record keys or values (it cannot run on encoded rows)."""
        batch = [_batch_step(s) for s in self._stages]
        self._batch = None if None in batch else cast(list[_Rows], batch)
        self.bundled = self._batch is not None
        """Whether every step and predicate is a bundled one (none is a user's)."""

    @classmethod
    def from_config(cls, props: Mapping[str, str]) -> TransformChain:
        """The chain ``props`` (a connector's settings) define; the first problem raises
        :class:`~eos.errors.ConfigError` naming the setting."""
        loaded = load(props)
        if loaded.problems:
            loaded.close()
            raise loaded.problems[0]
        used = {s.predicate_alias for s in loaded.steps}
        for alias, (_, predicate) in loaded.predicates.items():
            if alias not in used:
                predicate.close()
        return cls(loaded.steps)

    def __len__(self) -> int:
        return len(self._stages)

    def close(self) -> None:
        """Close every step and predicate (each once)."""
        closed: set[int] = set()
        for stage in self._stages:
            for part in (stage.transform, stage.predicate):
                if part is not None and id(part) not in closed:
                    closed.add(id(part))
                    part.close()

    # ------------------------------------------------------------------ records

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record after every step, or None if one dropped it."""
        steps = self._steps
        if not steps:
            return record
        if record.encoded and self.reads_values:
            raise self._encoded(self._first_reading(0), "record blocks or encoded records")
        row = copy_record(record)
        step = None
        try:
            for step in steps:
                if not step(row):
                    return None
        except TransformError:
            raise
        except Exception as exc:
            failed = next(i for i, s in enumerate(steps) if s is step)
            raise self._stages[failed].failure(_where(record), exc) from exc
        # the fields steps change most first, then the others
        if row.value is record.value and row.topic is record.topic and same_as(row, record):
            return record
        return row

    def apply_all(self, records: Sequence[SourceRecord]) -> list[SourceRecord | None] | None:
        """Every record after every step, step by step over the whole batch: one result
        per record, in order (None: dropped). None when the batch must go record by
        record with :meth:`apply` instead: a step is a user's (it may count what it sees,
        and a failure runs the batch again), an encoded record meets a step that reads
        values, or a step failed on some record (:meth:`apply` then names it). The
        results are copies, never the input records."""
        batch = self._batch
        if batch is None:
            return None
        if not batch:
            return list(records)
        if self.reads_values and any(map(_ENCODED, records)):  # a C loop, not a generator
            return None
        rows = list(map(copy_record, records))
        live = rows
        try:
            for step in batch:
                live = step(live)
        except Exception:
            return None
        if len(live) == len(rows):
            return cast(list[SourceRecord | None], rows)
        kept = set(map(id, live))
        return [row if id(row) in kept else None for row in rows]

    # ------------------------------------------------------------------- blocks

    def apply_block(
        self, block: RecordBlock, decoder: BlockDecoder | None = None
    ) -> RecordBlock | list[SourceRecord] | None:
        """The block after every step, column by column where the steps can; from the
        first step that needs single rows on, the rows as records (decoded by ``decoder``
        if a later step reads keys or values of an encoded block). None: every row
        dropped. The caller commits ``block.source_offset`` whatever comes back, as it
        does a dropped record's offset."""
        for i, stage in enumerate(self._stages):
            try:
                mask = _mask(stage, block)
                if mask is _SKIP:
                    continue
                if not stage.row_transform:
                    raise NeedsRows
                out = stage.transform.transform_block(block, mask)  # type: ignore[attr-defined]
            except NeedsRows:
                return self._by_rows(i, block, decoder)
            except TransformError:
                raise
            except Exception as exc:
                raise stage.failure(_where_block(block), exc) from exc
            if out is None:
                return None
            block = out
        return block

    def _by_rows(
        self, first: int, block: RecordBlock, decoder: BlockDecoder | None
    ) -> list[SourceRecord]:
        if block.encoded and self._reads_from[first]:
            if decoder is None:
                raise self._encoded(self._first_reading(first), "record blocks")
            records = decoder.decode(block)
        else:
            records = block.records()
        rest = TransformChain(self._configured[first:])  # the same transforms
        results = rest.apply_all(records)
        if results is None:  # one by one: a failing row raises, named
            results = [rest.apply(record) for record in records]
        return [r for r in results if r is not None]

    def _first_reading(self, first: int) -> _Stage:
        return next(s for s in self._stages[first:] if s.reads_values)

    def _encoded(self, stage: _Stage, what: str) -> TransformError:
        return TransformError(
            f"{stage.label()} reads record keys or values, but the connector hands them "
            f"over already encoded ({what} of bytes): remove the transform, or configure "
            "the connector so that the converters encode its records",
            stage.alias,
            stage.type_name,
        )


def _step(stage: _Stage) -> Callable[[Row], bool]:
    """One call per record doing the stage's work on a row (False: dropped): the
    transform's own method where it has no predicate and works on rows."""
    transform, predicate, negate = stage.transform, stage.predicate, stage.negate
    if isinstance(transform, RowTransform):
        run: Callable[[Row], bool] = transform.transform
    else:
        user_apply = transform.apply

        def run(row: Row) -> bool:
            result = user_apply(copy_record(row))
            if result is None:
                return False
            load_row(row, result)
            return True

    if predicate is None:
        return run
    if isinstance(predicate, RowPredicate):
        test: Callable[[Row], bool] = predicate.test
    else:
        user_test = predicate.test

        def test(row: Row) -> bool:
            return bool(user_test(copy_record(row)))

    def guarded(row: Row) -> bool:
        return run(row) if test(row) is not negate else True

    return guarded


_Rows = Callable[[list[Row]], list[Row]]
_ENCODED = attrgetter("encoded")


def _batch_step(stage: _Stage) -> _Rows | None:
    """The stage's work on a batch of rows (the rows kept), or None for a user's step
    or predicate, which goes record by record."""
    transform, predicate, negate = stage.transform, stage.predicate, stage.negate
    if not isinstance(transform, RowTransform):
        return None
    if predicate is None:
        return transform.transform_rows
    if not isinstance(predicate, RowPredicate):
        return None
    run, test = transform.transform, predicate.test

    def guarded(rows: list[Row]) -> list[Row]:
        return [row for row in rows if test(row) is negate or run(row)]

    return guarded


_SKIP: Any = object()
"""The step's predicate matches no row of the block."""


def _mask(stage: _Stage, block: RecordBlock) -> Mask:
    predicate = stage.predicate
    if predicate is None:
        return None
    if not stage.row_predicate:
        raise NeedsRows
    result = predicate.test_block(block)  # type: ignore[attr-defined]
    if isinstance(result, bool):
        return None if result != stage.negate else _SKIP
    applies = [bool(r) != stage.negate for r in result]
    if all(applies):
        return None
    return applies if any(applies) else _SKIP


def _where(record: SourceRecord) -> str:
    return (
        f"the record for topic {record.topic!r} from source partition "
        f"{dict(record.source_partition)} at offset {_offset(record.source_offset)}"
    )


def _where_block(block: RecordBlock) -> str:
    return (
        f"a block of {len(block)} records for topic {block.topic!r} from source partition "
        f"{dict(block.source_partition)} (ending at offset {_offset(block.source_offset)})"
    )


def _offset(offset: Mapping[str, Any] | None) -> object:
    return None if offset is None else dict(offset)
