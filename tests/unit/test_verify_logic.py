"""The verifier's judgement (``services.verify.check``), without Kafka."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from services.connectors.verifiable import aborted_records, record_value
from services.verify import (
    AbortedPattern,
    add_arguments,
    check,
    decode,
    load_aborted,
    run,
)


def values(partition: str, *seqnos: int) -> list[dict[str, object]]:
    return [record_value(partition, n, 0) for n in seqnos]


def test_clean() -> None:
    result = check(values("0-0", 0, 1, 2) + values("0-1", 0, 1) + values("1-0", 0))
    assert result.summary() == "records=6 partitions=3 duplicates=0 gaps=0 unexpected=0"
    assert result.ok()
    assert result.ok(expect=6)
    assert not result.ok(expect=7)
    assert result.details == ()


def test_duplicates() -> None:
    result = check(values("0-0", 0, 1, 1, 2, 2, 2))
    assert (result.duplicates, result.gaps, result.unexpected) == (3, 0, 0)
    assert not result.ok()
    assert result.details == ("partition 0-0: duplicated seqnos: 1..2",)


def test_gaps() -> None:
    result = check(values("0-0", 0, 3, 4, 7) + values("0-1", 1))
    assert result.gaps == 5  # 1, 2, 5, 6 and 0-1's 0
    assert "partition 0-0: missing seqnos: 1..2, 5..6" in result.details
    assert "partition 0-1: missing seqnos: 0" in result.details


def test_aborted_seqnos_missing_are_fine() -> None:
    result = check(values("0-0", 0, 3, 4) + values("0-1", 0, 1), {"0-0": {1, 2}, "9-9": {0}})
    assert result.summary() == "records=5 partitions=2 duplicates=0 gaps=0 unexpected=0"
    assert result.ok()


def test_aborted_seqno_present_is_unexpected() -> None:
    result = check(values("0-0", 0, 1, 2, 2, 3), {"0-0": {2}})
    assert (result.duplicates, result.gaps, result.unexpected) == (0, 0, 2)
    assert result.details == ("partition 0-0: aborted seqnos visible: 2",)
    assert not result.ok()


def test_not_verifiable_values_are_errors() -> None:
    raw = [b"not json", b'{"partition": "0-0", "seqno": 0}', b'{"seqno": 1}', b'"text"', None]
    result = check([decode(v) for v in raw])
    assert result.records == 5
    assert (result.invalid, result.unexpected, result.partitions) == (4, 4, 1)
    assert result.details[0].startswith("record #1 is not a VerifiableSource value: b'not json'")
    assert not result.ok()


def test_schema_envelope_is_unwrapped() -> None:
    enveloped = [{"schema": None, "payload": v} for v in values("0-0", 0, 1)]
    assert check(enveloped).ok()


def test_details_are_few() -> None:
    result = check(v for n in range(50) for v in values(f"p{n}", 1))
    assert result.gaps == 50
    assert len(result.details) == 10


def test_long_runs_are_summarised() -> None:
    result = check(values("0-0", *range(0, 40, 3)))
    assert result.details[0].endswith("(26 in all)")


def test_aborted_pattern() -> None:
    pattern = AbortedPattern.parse("2,4,3,2,10")
    expected = {**aborted_records(2, 4, 3, 0, 10), **aborted_records(2, 4, 3, 1, 10)}
    assert pattern.records(upto=999) == expected
    endless = AbortedPattern.parse("2,4,3,2,0")
    assert endless.records(upto=10) == expected
    for bad in ("1,2,3", "a,b,c,d,e", "0,1,1,1,1", "1,1,1,1,-1"):
        with pytest.raises(ValueError, match="aborted-pattern"):
            AbortedPattern.parse(bad)


def test_load_aborted(tmp_path: Path) -> None:
    spec = tmp_path / "aborted.json"
    spec.write_text(json.dumps({"0-0": [1, 2], "1-0": []}))
    assert load_aborted(spec) == {"0-0": {1, 2}, "1-0": set()}
    spec.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        load_aborted(spec)


def test_cli_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--topic", "t", "--expect", "5", "--aborted-pattern", "1,2"])
    assert (args.topic, args.expect, args.bootstrap_server) == ("t", 5, "localhost:9092")
    assert run(args) == 2
    assert "aborted-pattern" in capsys.readouterr().err
    bad_property = parser.parse_args(["--topic", "t", "--property", "novalue"])
    assert run(bad_property) == 2
    with pytest.raises(SystemExit):  # both forms at once
        parser.parse_args(["--topic", "t", "--aborted", "f", "--aborted-pattern", "1,1,1,1,1"])


def test_report_lines() -> None:
    result = dataclasses.replace(check(values("0-0", 0, 2)), complete=False)
    assert result.report(expect=5) == [
        "records=2 partitions=1 duplicates=0 gaps=1 unexpected=0",
        "  partition 0-0: missing seqnos: 1",
        "  could not read the topic to its end in time (does it exist? --timeout?)",
        "  expected at least 5 records, read 2",
    ]
    assert not dataclasses.replace(check([]), complete=False).ok()
    assert check([]).ok()
