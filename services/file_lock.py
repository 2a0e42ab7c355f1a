"""One process at a time: an exclusive ``flock`` on a file, for the download cache that
several processes may fill at once (two ``eos dev-kafka start`` on a fresh machine, or
the test suite's parallel workers). The lock goes with the process: a killed holder
frees it."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created with its directory) until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
