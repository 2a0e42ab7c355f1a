"""A struct column of plain text that stays Python: what HoistField makes of a typed
block's list of strings (a FileSource block's lines, or folded records of one string
each), and InsertField adds static fields to, without an Arrow array in between.

The JSON converter writes such a column with one join over all its rows
(:func:`text_rows`): the rows are the lines with the same text before and after each, as
long as no line needs an escape. Everything else that reads a struct column takes it as
the ``pyarrow`` struct array it stands for (:meth:`TextStruct.to_arrow`, the array the
column paths built before this one), or as the rows' dicts (:meth:`to_pylist`, what
``pyarrow`` gives too); the transform chain turns it into that array before a step that
is not one of eos's own, so that a user's step sees only sequences and ``pyarrow``
arrays, as the connector API says.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import orjson

from eos.api.schema import Schema, SchemaType


@dataclass(frozen=True, slots=True, eq=False)
class TextStruct(Sequence[dict[str, Any]]):
    """Rows of the fields ``names`` (in the schema's order): the first is each row's
    string of ``texts``; every other one holds one string in every row, the
    ``constants`` in field order. ``joined`` is ``"".join(texts)``: the join that proved
    every line a ``str``, kept for :func:`text_rows`."""

    names: tuple[str, ...]
    texts: list[str]
    constants: tuple[str, ...]
    joined: str

    @classmethod
    def hoisted(cls, name: str, texts: Any) -> TextStruct | None:
        """A list of lines as the one field ``name``; None unless ``texts`` is a ``list``
        of ``str`` only (a null, a value of another type: the caller's other path)."""
        if type(texts) is not list or not texts:
            return None
        try:
            joined = "".join(texts)  # fails on anything but a str
        except TypeError:
            return None
        return cls((name,), texts, (), joined)

    def with_constant(self, name: str, value: str) -> TextStruct:
        """The rows with one more field, ``value`` in every row."""
        return TextStruct((*self.names, name), self.texts, (*self.constants, value), self.joined)

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def null_count(self) -> int:
        """No row is null (as a ``pyarrow`` array says it)."""
        return 0

    def _row(self, text: str) -> dict[str, Any]:
        return dict(zip(self.names, (text, *self.constants), strict=True))

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> TextStruct: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | TextStruct:
        """A row's dict, or the rows of a slice as a column again (as ``pyarrow``'s)."""
        if isinstance(i, slice):
            return self._of(self.texts[i])
        return self._row(self.texts[i])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self._row, self.texts)

    def to_pylist(self) -> list[dict[str, Any]]:
        """Each row as a dict of its fields, as ``pyarrow``'s ``to_pylist`` gives them."""
        return list(self)

    def take(self, keep: Sequence[int]) -> TextStruct:
        """The rows at ``keep``."""
        return self._of([self.texts[i] for i in keep])

    def _of(self, texts: list[str]) -> TextStruct:
        return TextStruct(self.names, texts, self.constants, "".join(texts))

    def to_arrow(self) -> Any:
        """The ``pyarrow`` struct array of the same rows: string children, the lines' one
        built from the list, each constant repeated."""
        import pyarrow as pa

        kind = pa.string()
        children = [pa.array(self.texts, kind)]
        children += [pa.repeat(pa.scalar(c, kind), len(self)) for c in self.constants]
        fields = [pa.field(n, kind) for n in self.names]
        return pa.StructArray.from_arrays(children, fields=fields)


def arrow_of(column: Any) -> Any:
    """``column`` as it is, unless a :class:`TextStruct`: then its ``pyarrow`` array."""
    return column.to_arrow() if type(column) is TextStruct else column


def text_rows(schema: Schema | None, column: TextStruct) -> list[bytes] | None:
    """Each row's JSON object as orjson writes it (fields in order, compact): the text
    before and after a line is the same in every row, so the rows are one join of the
    lines, encoded once and split at a NUL. Only where no line needs an escape (ASCII,
    no control character, quote or backslash: orjson's JSON of the joined lines is then
    just them in quotes) and every field is a plain STRING of the schema; None otherwise
    (the caller writes the column's ``pyarrow`` array)."""
    if schema is None or schema.type is not SchemaType.STRUCT:
        return None
    fields = schema.fields
    if len(fields) != len(column.names) or any(
        f.name != n or f.schema.type is not SchemaType.STRING or f.schema.name is not None
        for f, n in zip(fields, column.names, strict=True)
    ):
        return None
    if not column.texts:
        return []
    joined = column.joined
    if not joined.isascii() or len(orjson.dumps(joined)) != len(joined) + 2:
        return None
    head = "{" + orjson.dumps(column.names[0]).decode() + ':"'
    tail = (
        '"'
        + "".join(
            "," + orjson.dumps(n).decode() + ":" + orjson.dumps(c).decode()
            for n, c in zip(column.names[1:], column.constants, strict=True)
        )
        + "}"
    )
    text = head + (tail + "\x00" + head).join(column.texts) + tail
    return text.encode().split(b"\x00")
