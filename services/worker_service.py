"""``eos worker``: one worker process — the worker actors, the REST API on
``listeners``, connectors from files, and clean shutdown on SIGTERM/SIGINT.

This is the only place that listens to signals.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import cast

import anyio
import structlog
from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, NoBrokersAvailable
from anyio.abc import TaskStatus
from starlette.applications import Starlette

from eos.acls.denied import explain
from eos.acls.rules import output_topics
from eos.config.files import load_config_file
from eos.config.providers import PROVIDERS, resolve_worker_file
from eos.config.worker import WorkerConfig
from eos.errors import ConfigError, EosError
from eos.kafka.login import check_login
from eos.runtime.capacity import raise_open_files_limit
from eos.runtime.observer import WorkerObserver
from eos.runtime.plugins import reserved_worker_prefixes
from eos.runtime.validation import converter_problems
from eos.runtime.worker import Worker
from metrics import PrometheusObserver
from services import log_setup
from services.env_settings import settings_from_env
from services.http import (
    METRICS_LISTENERS,
    METRICS_PREFIX,
    Listener,
    listen,
    metrics_route,
    serve_listener,
)
from services.rest import build_app
from services.rest.auth import AuthProvider, auth_provider

log = structlog.get_logger(__name__)


def worker_settings(props: Mapping[str, str]) -> WorkerConfig:
    """Parse worker settings (variables resolved by the file's own config providers), with
    the prefixes that plugins and this service reserve; the converters every connector
    inherits checked as a connector's are (a bad one raises :class:`ConfigError`)."""
    settings = WorkerConfig.from_properties(
        resolve_worker_file(props),
        reserved=(*reserved_worker_prefixes(), METRICS_PREFIX, PROVIDERS),
    )
    problems = converter_problems(settings.raw)
    if problems:
        raise problems[0].error
    if settings.connectors_dir is not None and not Path(settings.connectors_dir).is_dir():
        raise ConfigError(
            "connectors.dir",
            settings.connectors_dir,
            "not a directory: create it (or mount the connectors' ConfigMap there), or "
            "leave the setting out",
        )
    return settings


def plugin_settings(settings: WorkerConfig) -> dict[str, str]:
    """The worker settings connector plugins declared they read."""
    prefixes = reserved_worker_prefixes()
    return {k: v for k, v in settings.raw.items() if k.startswith(prefixes)}


async def run_worker(
    settings: WorkerConfig,
    connector_configs: Sequence[Mapping[str, str]] = (),
    *,
    observer: WorkerObserver | None = None,
    task_status: TaskStatus[Worker] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run a worker until SIGTERM/SIGINT (or ``worker.stop()``).

    The listeners are bound first, before anything touches Kafka: a taken address
    (or an unusable TLS file, or a ``rest.auth`` that cannot be loaded) stops the
    worker with a :class:`ConfigError` naming it. Without an ``observer`` the worker
    reports to Prometheus: ``GET /metrics`` on the REST listeners, and on
    ``metrics.listeners`` (``http://host:port``) if set."""
    auth = auth_provider(settings)
    client, probed = settings.client_config, set()
    for role in ("producer", "consumer", "admin"):  # a refused login named, with its setting
        login = frozenset({**client.common, **getattr(client, role)}.items())
        if login not in probed:
            probed.add(login)
            await check_login(client, role)
    with contextlib.ExitStack() as bound:
        metrics_listener = None
        if observer is None and METRICS_LISTENERS in settings.raw:
            metrics_listener = listen(settings.raw[METRICS_LISTENERS], METRICS_LISTENERS)
            bound.callback(metrics_listener.close)
        listeners = []
        for url in settings.listeners:
            listeners.append(listen(url, "listeners", settings.rest_tls))
            bound.callback(listeners[-1].close)
        try:
            await _run(settings, connector_configs, observer, auth, listeners,
                       metrics_listener, task_status)  # fmt: skip
        except Exception as exc:  # an authorization error: the ACLs that are missing
            explained = await explain(settings, {}, output_topics, exc)
            if explained is exc:
                raise
            raise explained from exc


async def _run(
    settings: WorkerConfig,
    connector_configs: Sequence[Mapping[str, str]],
    observer: WorkerObserver | None,
    auth: AuthProvider | None,
    listeners: Sequence[Listener],
    metrics_listener: Listener | None,
    task_status: TaskStatus[Worker],
) -> None:
    prometheus = PrometheusObserver() if observer is None else None
    worker = Worker(
        settings, observer=observer or prometheus, plugin_settings=plugin_settings(settings)
    )
    routes = [metrics_route(prometheus.registry)] if prometheus else []
    metrics_open = [] if settings.rest_auth.metrics_protected else routes
    app = build_app(worker, routes, auth=auth, open_routes=metrics_open, settle=worker.settled)

    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signals, worker)
        if prometheus and metrics_listener is not None:
            metrics_app = Starlette(routes=[metrics_route(prometheus.registry)])
            await tg.start(serve_listener, metrics_app, metrics_listener)
        for listener in listeners:  # first: GET / and GET /health tell how start-up goes
            await tg.start(partial(serve_listener, app, listener, health=worker.health.health))
        await tg.start(worker.run)
        for props in connector_configs:
            name = props.get("name", "")
            if not name:
                raise ConfigError("name", None, "every connector config file needs a name")
            created = await worker.apply_connector(name, props)
            log.info("connector applied", connector=name, created=created)
        log.info("worker ready", rest=settings.rest_url, connectors=len(connector_configs))
        task_status.started(worker)
        await worker.stopped.wait()
        tg.cancel_scope.cancel()


async def _stop_on_signals(worker: Worker) -> None:
    """SIGTERM or SIGINT stops the worker gracefully; another one while it stops (a
    second Ctrl-C, a group signal after the worker's own) changes nothing: the stop is
    bounded by ``task.shutdown.graceful.timeout.ms`` already (docs/operations.md)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            if worker.stopping:
                log.info("signal received again; already stopping", signal=name)
                continue
            log.info("signal received; stopping", signal=name)
            worker.stop()


def tune_gc() -> None:
    """Make full garbage collections rare in a worker process.

    A worker allocates objects per record and keeps many of them alive for a while
    (the records of an open transaction), so with CPython's default thresholds a
    full collection, which walks every object (PySpark and pandas bring over a
    million), runs every few thousand records. Measured on SparkSource with 2 tasks
    (bench/spark_to_kafka.py setup): 43 000 rows/s with the defaults, 50 000 with the
    start-up objects frozen, 52 000 with full collections 10x rarer.

    Young collections too: with hundreds of tasks, each poll and commit allocates a
    few dozen short-lived objects, and the default threshold (700) ran about 18 young
    collections a second at 400 tasks x 10 records/s, ≈ 1 ms of CPU each (the young
    generation's survivors are walked every time): 2.4 s of CPU in 100 s, ≈ 6 % of the
    worker's. At 50 000 allocations the same run needed 9 collections, 0.09 s in all,
    with the same RSS (bench/scale.py, docs/sizing.md)."""
    gc.freeze()  # what start-up created (modules, plugins) lives as long as the process
    gc.set_threshold(50_000, 20, 100)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def tune_malloc() -> None:
    """Keep freed memory in the process instead of handing it back to the kernel at once.

    A block of records allocates its encoded rows (orjson's output buffers are larger
    than Python's small-object allocator takes), frees them once sent, and the next
    block allocates them again. glibc returns the top of its heap to the kernel as soon
    as more than 128 KiB is free there (its threshold adapts only once a large
    ``mmap``-ed chunk is freed), so every block touched fresh pages, and a page fault
    costs several µs in a virtual machine: ``orjson.dumps`` over 1 000 lines of 100 bytes
    took 1.3-2.0 µs a line this way and 0.07 µs with the thresholds below (2026-11-28,
    docs/performance.md). The thresholds are the ones glibc's own adaptation tops out at:
    trim only beyond 64 MiB free, ``mmap`` only allocations over 32 MiB. Without glibc
    (or its ``mallopt``) nothing changes."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 64 << 20)


def load_worker_settings(worker_file: str | None, environ: Mapping[str, str]) -> WorkerConfig:
    """The settings of ``worker_file`` (if any) and of the ``EOS_*`` environment variables
    (:mod:`services.env_settings`), which win; only the names taken from the environment
    are logged."""
    props = load_config_file(worker_file) if worker_file else {}
    from_env = settings_from_env(environ)
    if from_env:
        log.info("settings from the environment", settings=sorted(from_env))
    return worker_settings({**props, **from_env})


def main(
    worker_file: str | None,
    connector_files: Sequence[str],
    environ: Mapping[str, str] = os.environ,
    *,
    log_format: str | None = None,
) -> int:
    """Run ``eos worker``. ``log_format`` is the one the command line or the environment
    asked for; without one the worker file's ``log.format`` applies from here on."""
    tune_gc()
    tune_malloc()
    raise_open_files_limit()  # hundreds of tasks hold two sockets each
    settings = load_worker_settings(worker_file, environ)
    if log_format is None and settings.log_format == "json":
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        log_setup.configure(level, json=True)
    connectors = [load_config_file(path) for path in connector_files]
    try:
        anyio.run(run_worker, settings, connectors)
    except (KafkaError, ExceptionGroup) as exc:
        explained = explain_kafka_errors(exc, settings)
        if explained is exc:
            raise
        raise explained from exc
    return 0


def explain_kafka_errors(exc: BaseException, settings: WorkerConfig) -> BaseException:
    """``exc`` with each aiokafka error in it (a broker that cannot be reached, a request
    Kafka refused) replaced by a :class:`ConfigError` naming ``bootstrap.servers`` and
    what to do, if nothing but eos and Kafka errors is in it; else ``exc`` itself."""
    leaves = _leaves(exc)
    if not any(isinstance(e, KafkaError) for e in leaves) or not all(
        isinstance(e, KafkaError | EosError) for e in leaves
    ):
        return exc
    servers = ",".join(settings.bootstrap_servers)
    explained = [
        ConfigError("bootstrap.servers", servers, _kafka_advice(e))
        if isinstance(e, KafkaError)
        else e
        for e in leaves
    ]
    if len(explained) == 1:
        return explained[0]
    return ExceptionGroup("the worker could not start", cast(list[Exception], explained))


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _kafka_advice(exc: BaseException) -> str:
    what = str(exc) if str(exc).startswith(type(exc).__name__) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, KafkaConnectionError | NoBrokersAvailable | KafkaTimeoutError):
        return (
            f"no Kafka broker answered there ({what}); start Kafka (`eos dev-kafka start` "
            "runs a local one) or fix bootstrap.servers"
        )
    if "Authentication" in type(exc).__name__ or "Authorization" in type(exc).__name__:
        return (
            f"Kafka refused the worker ({what}); check its security settings (security.protocol, "
            "sasl.*, ssl.*) and the ACLs of its principal (docs/security.md)"
        )
    return f"Kafka answered the worker with an error ({what}); check bootstrap.servers"
