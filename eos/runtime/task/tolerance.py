"""What a task does with a record that fails to transform or convert, and with a step
that may succeed later: the ``errors.*`` settings at work (Kafka Connect's
``RetryWithToleranceOperator`` and its reporters, in one small object).

- :meth:`ErrorHandler.failed`: ``errors.tolerance=none`` raises the error that fails the
  task; ``all`` counts and logs the failure and answers the record's dead letter (or None
  without a dead-letter topic). Retriable errors are never tolerated: a schema registry
  that is down is no property of the record, and skipping every record while it is down
  would move the whole stream aside (Connect would skip them; eos fails the task, which
  a restart resumes).
- :meth:`ErrorHandler.retry`: runs a step that may raise a
  :class:`~eos.errors.RetriableError` again, waiting 300 ms, 600 ms, … (at most
  ``errors.retry.delay.max.ms``) until ``errors.retry.timeout`` has passed; then the last
  error fails the task (its message names the registry's URL).
- ``errors.log.enable``: one log line per failed record, tolerated or not (Connect's
  ``LogReporter`` reports before the task fails): the task's connector and number (the
  task's bound logger), the stage, the step, the error's class and message, and where the
  record is (topic, source partition and offset). Its key and value only under
  ``errors.log.include.messages``, which is off by default: records may hold what must
  not be logged. No traceback (a dead letter's context headers carry one).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from eos.config.error_handling import ErrorHandling
from eos.errors import EosError, RetriableError, TaskError
from eos.runtime.clock import Clock
from eos.runtime.observer import TaskObserver
from eos.runtime.task.dead_letters import DeadLetters, Failure, qualified_name

T = TypeVar("T")

FIRST_DELAY_S = 0.3
"""The first wait between two attempts of a retriable step (Connect's)."""


class ErrorHandler:
    def __init__(
        self,
        settings: ErrorHandling,
        dead_letters: DeadLetters | None,
        observer: TaskObserver,
        clock: Clock,
        log: Any,
    ) -> None:
        self.settings = settings
        self.dead_letters = dead_letters if settings.tolerates else None
        self.observer = observer
        self.clock = clock
        self.log = log

    def failed(self, failure: Failure, fatal: EosError) -> Any:
        """Raise ``fatal`` (from the step's error) unless the failure is tolerated; then
        the record's dead letter, or None."""
        error = failure.error
        tolerated = self.settings.tolerates and not isinstance(error, RetriableError)
        if self.settings.log_enable:
            self._log(failure, fatal, tolerated)
        if not tolerated:
            self.observer.record_failed(failure.stage, "failed")
            if fatal is error:
                raise fatal
            raise fatal from error
        if self.dead_letters is None:
            self.observer.record_failed(failure.stage, "skipped")
            return None
        self.observer.record_failed(failure.stage, "dead_lettered")
        return self.dead_letters.of(failure)

    def _log(self, failure: Failure, fatal: EosError, tolerated: bool) -> None:
        record = failure.record
        details: dict[str, Any] = {
            "stage": failure.stage,
            "step": failure.step,
            "topic": record.topic,
            "source_partition": dict(record.source_partition),
            "source_offset": None if record.source_offset is None else dict(record.source_offset),
            "error": str(fatal),
            "exception": qualified_name(failure.error),
            "tolerated": tolerated,
        }
        if self.settings.log_include_messages:
            details["key"] = repr(record.key)
            details["value"] = repr(record.value)
        self.log.error("error encountered in task", **details)

    async def retry(self, step: Callable[[], Awaitable[T]], what: str) -> T:
        """``step()``, again after each :class:`RetriableError` until
        ``errors.retry.timeout``; then a :class:`TaskError` carrying the last message."""
        timeout_s = self.settings.retry_timeout_ms / 1000
        started = self.clock.monotonic()
        delay = FIRST_DELAY_S
        while True:
            try:
                return await step()
            except RetriableError as exc:
                waited = self.clock.monotonic() - started
                if timeout_s >= 0 and waited >= timeout_s:
                    raise TaskError(f"{what}: {exc} (retried for {waited:.1f} s: "
                                    f"errors.retry.timeout={self.settings.retry_timeout_ms})"
                                    ) from exc  # fmt: skip
                pause = min(delay, self.settings.retry_delay_max_ms / 1000)
                if timeout_s >= 0:
                    pause = min(pause, timeout_s - waited)
                self.log.warning("retrying", step=what, error=str(exc), retry_in_s=round(pause, 3))
                await self.clock.sleep(pause)
                delay *= 2
