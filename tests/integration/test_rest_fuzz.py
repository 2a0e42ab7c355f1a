"""Fuzzing the REST API from its own OpenAPI document (schemathesis) against a real
worker process and broker: no answer is a 5xx, every 4xx is in Kafka Connect's JSON
error shape, every answer's status, content type and body are the ones the document
describes, and afterwards the worker still serves and its config topic holds only
records it can read, with connector configs that pass validation.

Each generated request (valid and invalid ones) is sent as it is and, when its path
has parameters, once more for things that exist (the connector ``fuzz``, its task 0,
the VerifiableSource plugin), so that the bodies reach the code behind the 404s
(config updates and validation, restarts, offsets of a stopped connector, ...)."""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from eos.kafka import ClientConfig, read_to_end
from eos.storage.config_log import ConnectorConfigRecord, decode_record
from tests.integration.worker_harness import WorkerProcess, worker_props

TIMEOUT = int(os.environ.get("EOS_FUZZ_TIMEOUT", "400"))
pytestmark = [pytest.mark.integration, pytest.mark.timeout(TIMEOUT)]

EXISTING = "fuzz"
REAL = {"name": EXISTING, "task": "0", "plugin": "VerifiableSource"}
"""Path parameters that name something that exists, for the second try of a request."""
ONLY = os.environ.get("EOS_FUZZ_ONLY", "")
"""Fuzz only the operations whose "VERB /path" contains this (to chase a failure)."""
EXAMPLES = int(os.environ.get("EOS_FUZZ_EXAMPLES", "40"))
"""Examples per operation: under a minute for the whole API on a small machine;
EOS_FUZZ_EXAMPLES=500 searches longer."""


def verifiable(topic: str) -> dict[str, str]:
    return {
        "name": EXISTING,
        "connector.class": "VerifiableSource",
        "tasks.max": "1",
        "topic": topic,
        "records.per.partition": "0",
        "throughput": "5",
    }


@pytest.fixture(scope="module")
def worker(
    bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[WorkerProcess, dict[str, str]]]:
    directory = tmp_path_factory.mktemp("fuzz")
    suffix = directory.name.replace("_", "-")
    props = worker_props(bootstrap, f"fuzz-{suffix}", rest_max_request_bytes="65536")
    process = WorkerProcess(directory, props, [verifiable(f"fuzz-out-{suffix}")])
    process.start()
    try:
        process.wait_running(EXISTING, 1)
        yield process, props
    finally:
        process.stop()


def json_error_shape(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx (and 5xx) is {"error_code": <status>, "message": <text>}."""
    if response.status_code < 400:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        raise AssertionError(f"{response.status_code} is not JSON: {response.content!r}") from None
    assert isinstance(body, dict), body
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == response.status_code, body
    assert isinstance(body["message"], str), body
    return None


CHECKS: list[Callable[..., bool | None]] = [
    not_a_server_error,
    json_error_shape,
    status_code_conformance,  # the document lists every status an operation answers
    response_schema_conformance,  # and the shape of each answer
    content_type_conformance,
]


def fuzz(operation: Any) -> None:
    """Valid and invalid requests of one operation (hypothesis shrinks a failure)."""
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @given(case=cases)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=[Phase.generate, Phase.shrink],
    )
    def run(case: Any) -> None:
        case.call_and_validate(checks=CHECKS, timeout=60)
        params = case.path_parameters or {}
        if params and case.method != "DELETE":
            params.update({k: v for k, v in REAL.items() if k in params})
            case.call_and_validate(checks=CHECKS, timeout=60)

    run()


def test_no_request_makes_the_worker_fail(worker: tuple[WorkerProcess, dict[str, str]]) -> None:
    process, _ = worker
    api = schemathesis.openapi.from_url(f"{process.rest_url}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in api.get_all_operations():
        if isinstance(result, Err):
            failures.append(f"an operation schemathesis cannot use: {result.err()}")
            continue
        operation = result.ok()
        if ONLY not in f"{operation.method.upper()} {operation.path}":
            continue
        operations += 1
        try:
            fuzz(operation)
        except Exception as exc:  # every operation is tried; all failures are reported
            text = "".join(traceback.format_exception(exc)[-40:])
            failures.append(f"{operation.method.upper()} {operation.path}:\n{text}")
    assert operations >= (25 if not ONLY else 1)
    assert not failures, "\n\n".join(failures)


async def test_the_worker_still_serves_and_its_config_topic_is_valid(
    worker: tuple[WorkerProcess, dict[str, str]], client_config: ClientConfig
) -> None:
    process, props = worker
    url = process.rest_url
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        root = await http.get("/")
        assert root.status_code == 200
        assert root.json()["kafka_cluster_id"]
        assert EXISTING in (await http.get("/connectors")).json()
        # Whatever state the fuzzing left it in, the connector runs again when asked.
        deadline = time.monotonic() + 60
        while True:
            resumed = await http.put(f"/connectors/{EXISTING}/resume")
            if resumed.status_code == 202:
                break
            assert resumed.status_code == 409, resumed.text
            assert time.monotonic() < deadline, resumed.text
        process.wait_running(EXISTING, 1)

        records = await read_to_end(client_config, props["config.storage.topic"])
        assert records
        for record in records:
            decoded = decode_record(record.key, record.value)
            assert decoded is not None, (record.key, record.value)
            if isinstance(decoded, ConnectorConfigRecord) and decoded.properties is not None:
                config = dict(decoded.properties)
                plugin = config["connector.class"].rpartition(".")[2].rpartition(":")[2]
                check = await http.put(f"/connector-plugins/{plugin}/config/validate", json=config)
                assert check.status_code == 200, check.text
                assert check.json()["error_count"] == 0, (decoded.name, config)


def test_the_fuzz_log_has_no_traceback(worker: tuple[WorkerProcess, dict[str, str]]) -> None:
    process, _ = worker
    text = Path(process.log).read_text(errors="replace")
    assert "Traceback" not in text, process.tail(80)
