"""Binary arrays of per-row encodings, built with numpy and Arrow: what the column paths of
the Avro and Protobuf converters (:mod:`.avro_arrow`, :mod:`.protobuf_arrow`) share.

A column's encodings are a ``pa.binary()`` array, one value per row, made from numpy
buffers (varints, fixed-width numbers, Decimal's unscaled bytes) and put together with
Arrow's ``binary_join_element_wise`` (the parts of each row) and ``binary_join`` (the
items of each row's list).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos.errors import DataError

_UNIT_PER_MS = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}

Part = Any
"""An array of per-row encodings, or a scalar the same for every row."""


def binary(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """The binary array of ``data`` cut at ``offsets`` (one more than the values)."""
    n = len(offsets) - 1
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


def empty(n: int) -> pa.Array:
    """``n`` empty binaries."""
    return binary(np.zeros(n + 1, dtype=np.int32), np.zeros(0, dtype=np.uint8))


def fixed(values: np.ndarray, width: int) -> pa.Array:
    """Each of ``values`` as its ``width`` bytes in memory (little-endian numbers)."""
    return binary(np.arange(len(values) + 1, dtype=np.int32) * width, values.view(np.uint8))


def uvarints(values: np.ndarray) -> pa.Array:
    """Varints (unsigned LEB128) of uint64 ``values``, one binary per value."""
    z = values.astype(np.uint64, copy=False)
    length = np.ones(len(z), dtype=np.int32)
    rest = z >> np.uint64(7)
    while True:
        more = rest > 0
        if not more.any():
            break
        length += more
        rest >>= np.uint64(7)
    offsets = np.zeros(len(z) + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    for j in range(int(length.max()) if len(z) else 0):
        rows = np.nonzero(length > j)[0] if j else np.arange(len(z))
        byte = ((z[rows] >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
        byte |= (length[rows] > j + 1).astype(np.uint8) << 7
        data[offsets[rows] + j] = byte
    return binary(offsets, data)


def varints(values: np.ndarray) -> pa.Array:
    """Zig-zag varints of int64 ``values`` (Avro's ints), one binary per value."""
    v = values.astype(np.int64, copy=False)
    return uvarints(((v << 1) ^ (v >> 63)).view(np.uint64))


def join(*parts: Part) -> pa.Array:
    """The row-wise concatenation of ``parts`` (at least one of them an array)."""
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, b"")


def scatter(encoded: pa.Array, mask: np.ndarray) -> pa.Array:
    """``encoded`` (one value per true ``mask`` position) put back in place, null elsewhere."""
    if mask.all():
        return encoded
    if not mask.any():
        return pa.nulls(len(mask), encoded.type)
    positions = np.cumsum(mask) - 1
    return pc.take(encoded, pa.array(positions, mask=~mask))


def valid_mask(array: pa.Array) -> np.ndarray:
    """Which rows of ``array`` are not null, as numpy booleans."""
    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    mask: np.ndarray = array.is_valid().to_numpy(zero_copy_only=False)
    return mask


def on_valid(array: pa.Array, encode: Any) -> pa.Array:
    """``encode`` of the valid rows only, put back in place (null where ``array`` is)."""
    if array.null_count == 0:
        return encode(array)
    valid = valid_mask(array)
    if not valid.any():
        return pa.nulls(len(array), pa.binary())
    return scatter(encode(array.filter(pa.array(valid))), valid)


def items(array: pa.Array) -> pa.Array:
    """The elements of a list or map array's rows, in order (its slice of the child)."""
    offsets = array.offsets.to_numpy()
    return array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def counts(array: pa.Array) -> np.ndarray:
    """The number of elements in each row of a list or map array (int64)."""
    out: np.ndarray = np.diff(array.offsets.to_numpy()).astype(np.int64)
    return out


def per_row(row_counts: np.ndarray, values: pa.Array) -> pa.Array:
    """The concatenation of each row's ``values`` (``row_counts`` of them, in order)."""
    offsets = np.zeros(len(row_counts) + 1, dtype=np.int32)
    np.cumsum(row_counts, out=offsets[1:])
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), values), b"")


def epoch_integers(array: pa.Array, name: str | None) -> np.ndarray:
    """The integers (int64) a Connect value of ``array`` is stored as: milliseconds for
    times and timestamps (floor), days for dates, integers as they are."""
    typ = array.type
    if pa.types.is_timestamp(typ) or pa.types.is_time(typ):
        per_ms = _UNIT_PER_MS[typ.unit]
        raw = array.cast(pa.int64() if pa.types.is_timestamp(typ) or typ.bit_width == 64
                         else pa.int32()).to_numpy().astype(np.int64)  # fmt: skip
        out: np.ndarray = raw * 1000 if per_ms is None else raw // per_ms
        return out
    if pa.types.is_date(typ):
        days: np.ndarray = array.cast(pa.date32()).cast(pa.int32()).to_numpy().astype(np.int64)
        return days
    if not pa.types.is_integer(typ):
        raise DataError(f"cannot encode an Arrow {typ} column as {name or 'an integer'}")
    ints: np.ndarray = array.cast(pa.int64()).to_numpy()
    return ints


def decimal_words(array: pa.Array) -> np.ndarray:
    """The 16 bytes of each value of a ``decimal128`` array, big-endian (n x 16 uint8)."""
    n = len(array)
    raw = np.frombuffer(array.buffers()[1], dtype=np.uint8)
    words: np.ndarray = raw[array.offset * 16 : (array.offset + n) * 16].reshape(n, 16)[:, ::-1]
    return words


def unscaled_bytes(array: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """The unscaled value of each of a ``decimal128`` array's values (no nulls) as Java's
    ``BigInteger.toByteArray`` writes it (big-endian two's complement, shortest form):
    their lengths (int64) and the bytes."""
    big = decimal_words(array)
    n = len(array)
    top, nxt = big[:, :-1], big[:, 1:]
    redundant = ((top == 0) & (nxt < 0x80)) | ((top == 0xFF) & (nxt >= 0x80))
    leading = np.cumprod(redundant, axis=1).sum(axis=1)
    keep = np.arange(16)[None, :] >= leading[:, None]
    lengths = (16 - leading).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return lengths, binary(offsets, np.ascontiguousarray(big[keep]))
