"""What Connect's transforms cost in eos, in CPU instructions per record: a count that
does not move with the machine's load, where bench/transforms.py's µs do (on a shared
virtual machine its rounds differ by a third).

Runs bench/transforms.py's records (dicts and structs, batches of 1000, the garbage
collector tuned as in the worker) through each of its chains under valgrind's callgrind,
once with no batch and once with 20, and prints the difference per record: the chain on
a batch as the record path runs it (``TransformChain.apply_all``) and one record at a
time (``apply``). Needs valgrind (``apt-get install valgrind``). Usage:

    python bench/chain_instructions.py [--batches 20] [--chains insert,route,v2k,three]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHAINS = ("insert", "route", "v2k", "three")
BATCH = 1000
"""Records a batch: bench/transforms.py's BATCH."""


def run_chain(kind: str, name: str, mode: str, batches: int) -> None:
    """The measured work (in the process valgrind runs)."""
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    import transforms as bench

    from eos.api import SourceRecord
    from services.worker_service import tune_gc

    tune_gc()
    schema = bench.SCHEMA if kind == "structs" else None
    records = [
        SourceRecord(bench.PARTITION, {"i": i}, "orders", v, value_schema=schema)
        for i, v in enumerate(bench.values(kind, BATCH))
    ]
    chain = bench.chain(name)
    for _ in range(batches):
        if mode == "batch":
            chain.apply_all(records)
        else:
            for record in records:
                chain.apply(record)


def instructions(kind: str, name: str, mode: str, batches: int) -> int:
    command = [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
        sys.executable, __file__, "--run", kind, name, mode, str(batches),
    ]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True).stderr
    found = re.search(r"Collected : (\d+)", out)
    if found is None:
        raise SystemExit(f"callgrind said no count:\n{out[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--run":
        kind, name, mode, batches = sys.argv[2:6]
        run_chain(kind, name, mode, int(batches))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--chains", default=",".join(CHAINS))
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)")
        return
    records = args.batches * BATCH
    print("| record | chain | instructions a record, batch | one by one | batch ÷ one by one |")
    print("|---|---|---:|---:|---:|")
    for kind in ("dicts", "structs"):
        for name in args.chains.split(","):
            setup = instructions(kind, name, "batch", 0)  # the same without a batch either way
            batch = (instructions(kind, name, "batch", args.batches) - setup) / records
            single = (instructions(kind, name, "one", args.batches) - setup) / records
            print(f"| {kind} | {name} | {batch:,.0f} | {single:,.0f} | {batch / single:.2f} |")


if __name__ == "__main__":
    main()
