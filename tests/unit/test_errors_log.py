"""``errors.log.enable`` and ``errors.log.include.messages`` (eos/runtime/task/tolerance.py) on a
task run with the scripted producer: a failed record gives one log line naming the task,
the stage, the step, the error and where the record is, and its key and value only under
``include.messages`` (Kafka Connect's ``LogReporter``: the record only with
``errors.log.include.messages=true``, which is off by default because records may hold
secrets). The log is captured with structlog's ``capture_logs``."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from eos.api import SourceRecord, Transformation
from eos.config.error_handling import ErrorHandling
from eos.runtime.task.exactly_once_task import ExactlyOnceTask
from eos.runtime.task.source_task import TaskSpec
from eos.state import State
from eos.transforms import TransformChain
from tests.unit.task_fakes import PARTITION, TOPIC, Batches, Harness

SPEC = TaskSpec("orders-source", 3, 1, {})
LINE = "error encountered in task"
ACCOUNT = "acct-4242-secret-key"
PASSWORD = "hunter2-secret-value"
Event = MutableMapping[str, Any]
"""A captured log event."""


class NoPasswords(Transformation):
    """Fails on a value holding a password; its message names no value."""

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        if str(record.value).startswith("password="):
            raise ValueError("passwords are not allowed here")
        return record


class Opaque:
    """A value the JSON converter cannot write (its repr shows what it holds)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def __repr__(self) -> str:
        return f"Opaque({self.secret!r})"


def records(stage: str) -> list[SourceRecord]:
    """Three records; the second fails in ``stage`` and holds the secrets."""
    bad: Any = f"password={PASSWORD}" if stage == "TRANSFORMATION" else Opaque(PASSWORD)
    return [
        SourceRecord(PARTITION, {"n": 0}, TOPIC, "order 0"),
        SourceRecord(PARTITION, {"n": 1}, TOPIC, bad, ACCOUNT),
        SourceRecord(PARTITION, {"n": 2}, TOPIC, "order 2"),
    ]


def no_passwords() -> TransformChain:
    return TransformChain.from_config(
        {"transforms": "guard", "transforms.guard.type": f"{__name__}:NoPasswords"}
    )


async def run(stage: str, **settings: str) -> tuple[Harness, list[Event]]:
    """One task over :func:`records` with ``errors.*`` ``settings``; the harness and every
    log event of the run."""
    h = Harness()
    errors = ErrorHandling.of({f"errors.{k}": v for k, v in settings.items()})
    deps = h.deps(transforms=no_passwords(), errors=errors)
    source = Batches(records(stage))
    with capture_logs() as logs:
        runner = ExactlyOnceTask(SPEC, deps, source.task_class()())
        source.stop = runner.request_stop
        with anyio.fail_after(5):
            await runner.run()
    return h, logs


def secrets(logs: list[Event]) -> list[str]:
    """The record's secrets found in any of ``logs``."""
    return [secret for secret in (ACCOUNT, PASSWORD) if secret in repr(logs)]


STAGES = pytest.mark.parametrize(
    ("stage", "step", "exception", "message"),
    [
        (
            "TRANSFORMATION",
            f"{__name__}:NoPasswords",
            "ValueError",
            f"transforms.guard ({__name__}:NoPasswords) failed on the record for topic 'out' "
            "from source partition {'p': 0} at offset {'n': 1}: passwords are not allowed here",
        ),
        (
            "VALUE_CONVERTER",
            "json",
            "TypeError",
            "the record for topic 'out' from source partition {'p': 0} at offset {'n': 1} "
            "could not be converted: Opaque is not JSON serialisable",
        ),
    ],
)


@STAGES
async def test_a_tolerated_failure_logs_one_line_with_where_but_not_the_record(
    stage: str, step: str, exception: str, message: str
) -> None:
    h, logs = await run(stage, **{"tolerance": "all", "log.enable": "true"})
    assert h.broker.values() == ["order 0", "order 2"]  # skipped, the task went on
    assert h.broker.offset(PARTITION) == {"n": 2}
    (line,) = [e for e in logs if e["event"] == LINE]
    assert line["log_level"] == "error"
    assert (line["connector"], line["task"]) == ("orders-source", 3)
    assert (line["stage"], line["exception"], line["tolerated"]) == (stage, exception, True)
    assert (line["step"], line["error"]) == (step, message)
    assert (line["topic"], line["source_partition"], line["source_offset"]) == (
        TOPIC, PARTITION, {"n": 1}
    )  # fmt: skip
    assert not {"key", "value"} & line.keys()
    assert secrets(logs) == []  # in no line at all


@STAGES
async def test_include_messages_adds_the_key_and_the_value(
    stage: str, step: str, exception: str, message: str
) -> None:
    settings = {"tolerance": "all", "log.enable": "true", "log.include.messages": "true"}
    _, logs = await run(stage, **settings)
    (line,) = [e for e in logs if e["event"] == LINE]
    assert (line["stage"], line["exception"]) == (stage, exception)
    assert line["key"] == repr(ACCOUNT)
    assert PASSWORD in line["value"]


@pytest.mark.parametrize("log_enable", [{"log.enable": "false"}, {}])  # false is the default
async def test_without_log_enable_nothing_is_logged(log_enable: dict[str, str]) -> None:
    h, logs = await run("TRANSFORMATION", tolerance="all", **log_enable)
    assert h.observer.failures == [("TRANSFORMATION", "skipped")]  # skipped all the same
    assert not [e for e in logs if e["event"] == LINE]
    assert secrets(logs) == []
    _, logs = await run("TRANSFORMATION", tolerance="all", **log_enable,
                        **{"log.include.messages": "true"})  # fmt: skip
    assert not [e for e in logs if e["event"] == LINE]  # include.messages alone: nothing


async def test_a_failure_that_fails_the_task_is_logged_too_without_the_record() -> None:
    # Connect's reporters run before the tolerance check: the record that fails the task
    # is reported by LogReporter as well.
    h, logs = await run("TRANSFORMATION", **{"log.enable": "true"})
    assert h.statuses[-1][0] is State.FAILED
    (line,) = [e for e in logs if e["event"] == LINE]
    assert (line["stage"], line["tolerated"], line["source_offset"]) == (
        "TRANSFORMATION", False, {"n": 1}
    )  # fmt: skip
    assert not {"key", "value"} & line.keys()
    assert secrets(logs) == []
