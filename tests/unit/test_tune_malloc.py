"""tune_malloc: the memory a block of records frees stays in the process for the next
block. Counted in page faults (the kernel's count, not a time): with glibc's defaults,
encoding 1 000 lines the way the JSON converter does touches fresh pages for every
block; after tune_malloc, none."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import resource, sys, orjson
from services.worker_service import tune_malloc
if sys.argv[1] == "tuned":
    tune_malloc()
lines = [f"line-{i:012d}".ljust(99, "x") for i in range(1000)]
for _ in range(5):
    list(map(orjson.dumps, lines))  # a FileSource block through the JSON converter
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):
    list(map(orjson.dumps, lines))
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], check=True, capture_output=True, text=True
    )
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_blocks_reuse_the_memory_of_the_blocks_before() -> None:
    assert page_faults("default") > 10_000  # hundreds a block of 1 000 lines
    assert page_faults("tuned") < 100
