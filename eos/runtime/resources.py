"""Worker resources shared with tasks (:class:`eos.api.WorkerResources`): plugin
settings, per-worker shared objects, and the bounded thread pool for blocking calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio
import structlog

from eos.runtime.observer import NullObserver, WorkerObserver

T = TypeVar("T")
log = structlog.get_logger(__name__)


class SharedResources:
    def __init__(
        self,
        settings: Mapping[str, str],
        threads: int,
        observer: WorkerObserver | None = None,
    ) -> None:
        self._settings = dict(settings)
        self._limiter = anyio.CapacityLimiter(threads)
        self._objects: dict[str, tuple[Any, Callable[[Any], None]]] = {}
        self._observer = observer or NullObserver()

    @property
    def settings(self) -> Mapping[str, str]:
        return self._settings

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        return self._limiter

    def shared(self, key: str, factory: Callable[[], T], close: Callable[[T], None]) -> T:
        if key not in self._objects:
            self._objects[key] = (factory(), close)
        obj: T = self._objects[key][0]
        return obj

    async def run_blocking(self, func: Callable[..., T], *args: Any) -> T:
        stats = self._limiter.statistics()
        self._observer.thread_pool(stats.borrowed_tokens, stats.tasks_waiting + 1)
        try:
            return await anyio.to_thread.run_sync(func, *args, limiter=self._limiter)
        finally:
            stats = self._limiter.statistics()
            self._observer.thread_pool(stats.borrowed_tokens, stats.tasks_waiting)

    async def aclose(self) -> None:
        """Close every shared object (in a thread; errors are logged)."""
        objects, self._objects = self._objects, {}
        for key, (obj, close) in objects.items():
            try:
                await anyio.to_thread.run_sync(close, obj)
            except Exception as exc:
                log.warning("closing shared resource failed", resource=key, error=repr(exc))
