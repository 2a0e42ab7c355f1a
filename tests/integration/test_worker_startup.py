"""What a user sees when ``eos worker`` cannot start: one ``error:`` line that says
what is wrong and what to do, exit code 2, no traceback (unless ``--log-level
debug``), and nothing done in Kafka before the problem was found."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from services.dev_kafka import free_ports
from tests.integration.worker_harness import REPO, worker_props, write_properties

pytestmark = pytest.mark.integration


def eos_worker(
    path: Path, props: dict[str, str], *options: str, connectors: Sequence[Path] = ()
) -> subprocess.CompletedProcess[str]:
    write_properties(path, props)
    files = [str(path), *map(str, connectors)]
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *options, "worker", *files],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "Unclosed" not in done.stderr
    return errors[0]


@contextmanager
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


async def topics(bootstrap: str) -> set[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def test_a_taken_rest_address_stops_the_worker_before_kafka(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    group = unique_name("g")
    with taken_port() as port:
        props = worker_props(bootstrap, group, listeners=f"http://127.0.0.1:{port}")
        error = one_error_line(eos_worker(tmp_path / "worker.properties", props))
    assert f"http://127.0.0.1:{port}" in error
    assert "'listeners'" in error
    assert "in use" in error
    assert not {f"{group}-configs", f"{group}-offsets", f"{group}-status"} & await topics(bootstrap)


def test_a_taken_metrics_address_names_metrics_listeners(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    with taken_port() as port:
        props = worker_props(
            bootstrap, unique_name("g"), metrics_listeners=f"http://127.0.0.1:{port}"
        )
        error = one_error_line(eos_worker(tmp_path / "worker.properties", props))
    assert "'metrics.listeners'" in error
    assert str(port) in error


def test_an_unreachable_broker_is_one_line_naming_bootstrap_servers(
    unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    (nobody,) = free_ports(1)
    props = worker_props(f"127.0.0.1:{nobody}", unique_name("g"))
    error = one_error_line(eos_worker(tmp_path / "worker.properties", props))
    assert "'bootstrap.servers'" in error
    assert f"127.0.0.1:{nobody}" in error
    assert "eos dev-kafka start" in error

    debug = eos_worker(tmp_path / "worker.properties", props, "--log-level", "debug")
    assert debug.returncode == 2
    assert "Traceback" in debug.stderr
    assert "KafkaConnectionError" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1].startswith("error:")


async def test_a_bad_internal_topic_is_one_line(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    group = unique_name("g")
    config = ClientConfig({"bootstrap.servers": bootstrap})
    await ensure_topic(config, f"{group}-configs", partitions=3)
    props = worker_props(bootstrap, group)
    error = one_error_line(eos_worker(tmp_path / "worker.properties", props))
    assert f"{group}-configs" in error


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        (
            {"listeners.https.ssl.certfile": "/nonexistent/worker.pem"},
            "listeners.https.ssl.certfile",
        ),
        ({"rest.auth": "basic", "rest.auth.basic.credentials.file": "USERS"}, "line 1"),
        ({"rest.auth": "nosuch.module:Provider"}, "'rest.auth'"),
    ],
)
def test_security_settings_are_checked_before_kafka(
    settings: dict[str, str], names: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """With a broker that does not exist: the setting is what the worker complains about."""
    users = tmp_path / "users"
    users.write_text("alice:plain-text-password\n")
    (nobody,) = free_ports(1)
    props = worker_props(f"127.0.0.1:{nobody}", unique_name("g"))
    props["listeners"] = props["listeners"].replace("http:", "https:")
    if "rest.auth" in settings:
        props["listeners"] = props["listeners"].replace("https:", "http:")
    props.update({k: v.replace("USERS", str(users)) for k, v in settings.items()})
    error = one_error_line(eos_worker(tmp_path / "worker.properties", props))
    assert names in error


@pytest.mark.parametrize(
    ("connector", "names"),
    [
        ({"name": "bad", "connector.class": "VerifiableSource", "tasks.max": "zero"}, "tasks.max"),
        ({"connector.class": "VerifiableSource"}, "'name'"),
        (  # an unknown transform, a predicate nobody defined, a missing required setting
            {
                "name": "bad",
                "connector.class": "VerifiableSource",
                "transforms": "r",
                "transforms.r.type": "RegexRuoter",
            },
            "'transforms.r.type': unknown transformation 'RegexRuoter'",
        ),
        (
            {
                "name": "bad",
                "connector.class": "VerifiableSource",
                "transforms": "f",
                "transforms.f.type": "Filter",
                "transforms.f.predicate": "nope",
            },
            "transforms.f.predicate",
        ),
        (
            {
                "name": "bad",
                "connector.class": "VerifiableSource",
                "transforms": "k",
                "transforms.k.type": "ValueToKey",
            },
            "'transforms.k.fields': required setting is missing",
        ),
    ],
)
def test_a_bad_connector_file_is_one_line_and_closes_what_the_worker_opened(
    connector: dict[str, str],
    names: str,
    bootstrap: str,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """The worker had started (internal topics, clients, group) when the file was found
    wrong: it stops, closing every client, and says only what is wrong."""
    bad = write_properties(tmp_path / "bad.properties", connector)
    props = worker_props(bootstrap, unique_name("g"))
    done = eos_worker(tmp_path / "worker.properties", props, connectors=[bad])
    one_error_line(done)
    assert names in done.stderr.split("error:", 1)[1]
    assert "worker started" in done.stderr  # it failed after start-up, not before
    noise = [line for line in done.stderr.splitlines() if "[error" in line or "[warning" in line]
    assert noise == [], done.stderr[-3000:]
