"""PostgreSQL's ``pgoutput`` logical replication messages, decoded (pure functions).

The format is PostgreSQL's "Logical Replication Message Formats" chapter: one message
per ``XLogData`` payload, its first byte the kind. Protocol version 1 (every server
from 10 on) is what :mod:`.replication` asks for; the kinds of later versions
(streamed transactions, two-phase) are never sent to it. ``Type``, ``Origin`` and
logical ``Message`` payloads are decoded as :class:`Other` and ignored by the task.

A tuple column is ``(kind, text)``: ``"t"`` with the value's text (PostgreSQL's output
function, the same text ``SELECT col::text`` gives), ``"n"`` NULL, ``"u"`` an unchanged
TOASTed value the server did not send.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

PG_EPOCH_US = 946_684_800_000_000
"""2000-01-01 in Unix microseconds: pgoutput's timestamps count from there."""

Column = tuple[str, str | None]
"""A tuple column: ``("t", text)``, ``("n", None)`` or ``("u", None)``."""


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int
    """The LSN of the transaction's commit record (the Commit's ``commit_lsn``)."""
    commit_us: int
    """Commit time, Unix microseconds."""
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_us: int


@dataclass(frozen=True, slots=True)
class RelationColumn:
    name: str
    type_oid: int
    typmod: int
    key: bool
    """Part of the replica identity (the primary key by default)."""


@dataclass(frozen=True, slots=True)
class Relation:
    oid: int
    schema: str
    table: str
    replica_identity: str
    """``d`` default, ``n`` nothing, ``f`` full, ``i`` index."""
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True, slots=True)
class Insert:
    oid: int
    new: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class Update:
    oid: int
    new: tuple[Column, ...]
    old: tuple[Column, ...] | None
    """The old row: its key columns only (replica identity default or index, and only
    when the key changed) or all of them (replica identity full); None otherwise."""
    old_is_key: bool


@dataclass(frozen=True, slots=True)
class Delete:
    oid: int
    old: tuple[Column, ...]
    old_is_key: bool


@dataclass(frozen=True, slots=True)
class Truncate:
    oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True, slots=True)
class Other:
    kind: str


Message = Begin | Commit | Relation | Insert | Update | Delete | Truncate | Other


class DecodeError(ValueError):
    """A payload that is not a pgoutput message of protocol version 1."""


_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_COLUMN = struct.Struct(">Ii")


def decode(payload: bytes) -> Message:
    """The message ``payload`` holds."""
    if not payload:
        raise DecodeError("an empty pgoutput message")
    kind = chr(payload[0])
    try:
        if kind == "B":
            lsn, ts, xid = _BEGIN.unpack_from(payload, 1)
            return Begin(lsn, ts + PG_EPOCH_US, xid)
        if kind == "C":
            _flags, commit_lsn, end_lsn, ts = _COMMIT.unpack_from(payload, 1)
            return Commit(commit_lsn, end_lsn, ts + PG_EPOCH_US)
        if kind == "R":
            return _relation(payload)
        if kind == "I":
            (oid,) = _U32.unpack_from(payload, 1)
            _expect(payload, 5, "N")
            new, _ = _tuple(payload, 6)
            return Insert(oid, new)
        if kind == "U":
            return _update(payload)
        if kind == "D":
            (oid,) = _U32.unpack_from(payload, 1)
            which = chr(payload[5])
            if which not in "KO":
                raise DecodeError(f"a Delete with submessage {which!r}")
            old, _ = _tuple(payload, 6)
            return Delete(oid, old, which == "K")
        if kind == "T":
            (count,) = _U32.unpack_from(payload, 1)
            options = payload[5]
            oids = struct.unpack_from(f">{count}I", payload, 6)
            return Truncate(tuple(oids), bool(options & 1), bool(options & 2))
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise DecodeError(f"a truncated or malformed {kind!r} message: {exc}") from None
    if kind in "YOM":
        return Other(kind)
    raise DecodeError(f"unknown pgoutput message kind {kind!r} (protocol version 1 expected)")


def _expect(payload: bytes, at: int, kind: str) -> None:
    if chr(payload[at]) != kind:
        raise DecodeError(
            f"expected submessage {kind!r} at byte {at}, found {payload[at : at + 1]!r}"
        )


def _cstring(payload: bytes, at: int) -> tuple[str, int]:
    end = payload.index(0, at)
    return payload[at:end].decode("utf-8"), end + 1


def _relation(payload: bytes) -> Relation:
    (oid,) = _U32.unpack_from(payload, 1)
    schema, at = _cstring(payload, 5)
    table, at = _cstring(payload, at)
    identity = chr(payload[at])
    (count,) = _U16.unpack_from(payload, at + 1)
    at += 3
    columns = []
    for _ in range(count):
        flags = payload[at]
        name, at = _cstring(payload, at + 1)
        type_oid, typmod = _COLUMN.unpack_from(payload, at)
        at += _COLUMN.size
        columns.append(RelationColumn(name, type_oid, typmod, bool(flags & 1)))
    return Relation(oid, schema, table, identity, tuple(columns))


def _update(payload: bytes) -> Update:
    (oid,) = _U32.unpack_from(payload, 1)
    which = chr(payload[5])
    old: tuple[Column, ...] | None = None
    at = 6
    if which in "KO":
        old, at = _tuple(payload, 6)
        _expect(payload, at, "N")
        at += 1
    elif which != "N":
        raise DecodeError(f"an Update with submessage {which!r}")
    new, _ = _tuple(payload, at)
    return Update(oid, new, old, which == "K")


def _tuple(payload: bytes, at: int) -> tuple[tuple[Column, ...], int]:
    (count,) = _U16.unpack_from(payload, at)
    at += 2
    columns: list[Column] = []
    for _ in range(count):
        kind = chr(payload[at])
        at += 1
        if kind == "t":
            (size,) = _U32.unpack_from(payload, at)
            at += 4
            columns.append(("t", payload[at : at + size].decode("utf-8")))
            at += size
        elif kind in "nu":
            columns.append((kind, None))
        else:
            raise DecodeError(f"a tuple column of kind {kind!r}")
    return tuple(columns), at


def lsn_text(lsn: int) -> str:
    """An LSN as PostgreSQL writes it (``0/1925ED8``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """``0/1925ED8`` → its integer."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)
