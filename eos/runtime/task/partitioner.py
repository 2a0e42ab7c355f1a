"""Kafka's default partitioner: murmur2 of the key bytes, made positive, modulo the
topic's partition count (the Java client's ``BuiltInPartitioner``).

:class:`KeyPartitioner` hashes one key at a time (recent keys cached) and a whole
column of keys at once (:meth:`KeyPartitioner.partitions`): with numpy installed,
keys of one length are hashed together as columns of 32-bit words, about 0.05 µs
a key instead of 1 µs.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Sequence
from typing import Any, cast

_MAX_CACHED_KEYS = 65_536
_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_WORDS = [struct.Struct(f"<{n}I") for n in range(64)]
_VECTOR_MIN_KEYS = 32  # below this, numpy's per-call overhead outweighs it

try:
    _np: Any = importlib.import_module("numpy")  # optional (untyped here)
except ImportError:  # pragma: no cover - numpy ships with the spark extra
    _np = None


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` (unsigned 32 bits, as aiokafka's), reading the
    input four bytes at a time."""
    length = len(data)
    h = _SEED ^ length
    n4 = length >> 2
    words = _WORDS[n4].unpack_from(data) if n4 < 64 else struct.unpack_from(f"<{n4}I", data)
    for k in words:
        k = (k * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def murmur2_many(keys: Sequence[bytes]) -> list[int]:
    """:func:`murmur2` of every key (numpy: keys grouped by length, each group hashed
    word column by word column in uint32 arithmetic, which wraps like Java's int)."""
    if _np is None or len(keys) < _VECTOR_MIN_KEYS:
        return [murmur2(key) for key in keys]
    result: list[int] = _murmur2_array(keys).tolist()
    return result


def _murmur2_array(keys: Sequence[bytes]) -> Any:
    """:func:`murmur2_many` as a numpy ``uint32`` array (numpy present)."""
    np = _np
    m = np.uint32(_M)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    starts = np.zeros(len(keys), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    hashes = np.empty(len(keys), dtype=np.uint32)
    for length in np.flatnonzero(np.bincount(lengths)).tolist():  # lengths present
        rows = np.flatnonzero(lengths == length)
        h = np.full(len(rows), _SEED ^ length, dtype=np.uint32)
        if length:
            block = data[starts[rows][:, None] + np.arange(length)]  # one key per row
            n4 = length >> 2
            words = np.ascontiguousarray(block[:, : n4 * 4]).view("<u4")
            for j in range(n4):
                k = words[:, j] * m
                k ^= k >> np.uint32(24)
                h *= m
                h ^= k * m
            base, tail = n4 * 4, length & 3
            if tail == 3:
                h ^= block[:, base + 2].astype(np.uint32) << np.uint32(16)
            if tail >= 2:
                h ^= block[:, base + 1].astype(np.uint32) << np.uint32(8)
            if tail:
                h ^= block[:, base].astype(np.uint32)
                h *= m
        h ^= h >> np.uint32(13)
        h *= m
        h ^= h >> np.uint32(15)
        hashes[rows] = h
    return hashes


class KeyPartitioner:
    """Kafka's default partitioner for keyed records (``partitions``: the topic's
    partition ids in order)."""

    def __init__(self) -> None:
        self._hashes: dict[bytes, int] = {}

    def partition(self, key: bytes, partitions: Sequence[int]) -> int:
        """The partition of one key (hashes of recent keys are cached)."""
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) >= _MAX_CACHED_KEYS:
                self._hashes.clear()
            hashed = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return partitions[hashed % len(partitions)]

    def partitions(self, keys: Sequence[bytes | None], partitions: Sequence[int]) -> list[int]:
        """The partition of every key at once; -1 where the key is None (the caller
        picks a partition for records without a key)."""
        count = len(partitions)
        if _np is not None and len(keys) >= _VECTOR_MIN_KEYS and None not in keys:
            # every key present: the modulo on the hashes' array too, one list at the end
            hashes = _murmur2_array(cast(Sequence[bytes], keys))
            chosen_ids = (hashes & _np.uint32(0x7FFFFFFF)) % _np.uint32(count)
            if list(partitions) != list(range(count)):
                chosen_ids = _np.asarray(partitions)[chosen_ids]
            every: list[int] = chosen_ids.tolist()
            return every
        present = [key for key in keys if key is not None]
        hashed = murmur2_many(present)
        if list(partitions) == list(range(count)):
            chosen = [(h & 0x7FFFFFFF) % count for h in hashed]
        else:
            chosen = [partitions[(h & 0x7FFFFFFF) % count] for h in hashed]
        if len(present) == len(keys):
            return chosen
        it = iter(chosen)
        return [-1 if key is None else next(it) for key in keys]
