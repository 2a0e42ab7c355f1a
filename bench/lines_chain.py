"""What the ``-three`` chain of bench/peers.py costs FileSource's lines before the
producer, in a tight loop (no broker, no worker): a block of ``--block`` lines as
FileSource hands it over (the lines of bench/peers.py's file), through the JSON converter
(schemas off, the default), without and with the chain (HoistField$Value, InsertField$Value
with a static field, RegexRouter). Three rows, timed in the same round:

  none    the block encoded as it comes (a JSON string a line)
  three   the chain, then the converter: the lines stay a Python list
          (eos.columns.text_struct), written with one join
  arrow   the same, with the hoisted lines made the Arrow struct column they stand for
          before the converter (what every converter but JSON's reads; the path every
          block took before the lines stayed a list)

Every round is printed, in µs a line; ``÷ none`` is the share of the ``none`` rate left.
The garbage collector and malloc are tuned as in the worker. Usage:

    python bench/lines_chain.py [--block 1000] [--blocks 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

from peers import THREE  # beside this script: python puts its folder first on the path

from eos.api import RecordBlock
from eos.columns.text_struct import arrow_of
from eos.converters import JsonConverter, encode_block
from eos.transforms import TransformChain
from services.connectors.file import lines_block
from services.worker_service import tune_gc, tune_malloc


def rows(block_lines: int) -> dict[str, Callable[[], RecordBlock]]:
    texts = [f"line-{n:012d}".ljust(99, "x") for n in range(block_lines)]
    converter = JsonConverter()
    converter.configure({}, False)
    chain = TransformChain.from_config(THREE)

    def block() -> RecordBlock:
        return lines_block("/data/lines.txt", texts, 99 * block_lines, "lines")

    def none() -> RecordBlock:
        return encode_block(block(), converter, converter)

    def three() -> RecordBlock:
        out = chain.apply_block(block())
        assert isinstance(out, RecordBlock)
        return encode_block(out, converter, converter)

    def arrow() -> RecordBlock:
        out = chain.apply_block(block())
        assert isinstance(out, RecordBlock)
        out = dataclasses.replace(out, values=arrow_of(out.values))
        return encode_block(out, converter, converter)

    if list(three().values) != list(arrow().values):
        raise SystemExit("the two paths wrote different bytes")
    return {"none": none, "three": three, "arrow": arrow}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--block", type=int, default=1000, help="lines a block (batch.size)")
    parser.add_argument("--blocks", type=int, default=2000, help="blocks a row and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tune_malloc()
    tune_gc()
    runs = rows(args.block)
    costs: dict[str, list[float]] = {name: [] for name in runs}
    print(
        "| round | " + " | ".join(f"{n} µs/line" for n in runs) + " | three ÷ none | arrow ÷ none |"
    )
    print("|---:|" + "---:|" * (len(runs) + 2))
    for round_no in range(args.rounds + 1):  # round 0 warms up
        got = {}
        for name, run in runs.items():
            started = time.perf_counter()
            for _ in range(args.blocks):
                run()
            got[name] = (time.perf_counter() - started) / (args.blocks * args.block) * 1e6
        label = "warm-up" if round_no == 0 else str(round_no)
        print(
            f"| {label} | " + " | ".join(f"{got[n]:.3f}" for n in runs)
            + f" | {got['none'] / got['three']:.2f} | {got['none'] / got['arrow']:.2f} |"
        )  # fmt: skip
        if round_no:
            for name, cost in got.items():
                costs[name].append(cost)
    median = {name: statistics.median(c) for name, c in costs.items()}
    print(
        "| median | " + " | ".join(f"{median[n]:.3f}" for n in runs)
        + f" | {median['none'] / median['three']:.2f} | {median['none'] / median['arrow']:.2f} |"
    )  # fmt: skip


if __name__ == "__main__":
    main()
