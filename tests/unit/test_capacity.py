"""How many tasks fit on a worker: the create-time warning and the producer batch size."""

from __future__ import annotations

import resource

import pytest

from eos.runtime import capacity
from eos.runtime.capacity import capacity_warning
from eos.runtime.worker import producer_batch_size


def test_a_connector_that_fits_gets_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (65536, 65536))
    monkeypatch.setattr(capacity, "available_memory", lambda: 8 << 30)
    assert capacity_warning("c", 300, 1, 0) is None


def test_too_many_tasks_for_the_open_files_limit_names_the_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 1024))
    monkeypatch.setattr(capacity, "available_memory", lambda: 8 << 30)
    warning = capacity_warning("orders", 1000, 2, 10)
    assert warning is not None
    assert "tasks.max=1000" in warning
    assert "about 510 tasks" in warning
    assert "limit 1024" in warning
    assert "ulimit -n" in warning
    assert "2 worker(s)" in warning


def test_too_little_memory_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1 << 20, 1 << 20))
    monkeypatch.setattr(capacity, "available_memory", lambda: 100 << 20)
    warning = capacity_warning("orders", 500, 1, 0)
    assert warning is not None
    assert "500 MiB of memory (100 MiB available)" in warning


@pytest.mark.parametrize(
    ("tasks", "batch"),
    [(1, 524288), (128, 524288), (256, 262144), (1000, 67108), (100_000, 16384)],
)
def test_batch_size_shrinks_with_the_task_count(tasks: int, batch: int) -> None:
    assert producer_batch_size(tasks) == batch
