"""The rest of the Connect surface against a real worker and uvicorn: a connector's
active topics (KIP-558), log levels at run time, the OpenAPI document, and bodies over
``rest.max.request.bytes`` refused with 413 before they are read."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import anyio
import httpx
import pytest

from tests.integration.worker_harness import WorkerProcess, running_worker, worker_props

pytestmark = pytest.mark.integration


def verifiable(name: str, topic: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "VerifiableSource",
        "tasks.max": "1",
        "topic": topic,
        "records.per.partition": "0",
        "throughput": "20",
    }


async def test_active_topics_and_the_openapi_document(
    bootstrap: str,
    unique_name: Callable[[str], str],
    topic_factory: Callable[..., Any],
) -> None:
    topic = await topic_factory()
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        created = await w.http.post(
            "/connectors", json={"name": "vs", "config": verifiable("vs", topic)}
        )
        assert created.status_code == 201, created.text

        # Active topics: the topic appears once written to; a reset empties the set.
        with anyio.fail_after(60):
            while (await w.http.get("/connectors/vs/topics")).json() != {  # noqa: ASYNC110
                "vs": {"topics": [topic]}
            }:
                await anyio.sleep(0.2)
        assert (await w.http.get("/connectors/nope/topics")).json() == {"nope": {"topics": []}}
        await w.http.put("/connectors/vs/pause")
        await w.wait_for_tasks("vs", "PAUSED", 1)
        reset = await w.http.put("/connectors/vs/topics/reset")
        assert reset.status_code == 202
        assert reset.content == b""
        assert (await w.http.get("/connectors/vs/topics")).json() == {"vs": {"topics": []}}

        # A name in the body of PUT .../config must be the one in the path (as in Connect).
        other = await w.http.put("/connectors/other/config", json=verifiable("vs", topic))
        assert other.status_code == 400
        assert "doesn't match connector name in the URL (other)" in other.json()["message"]
        assert (await w.http.get("/connectors")).json() == ["vs"]

        document = await w.http.get("/openapi.json")
        assert document.status_code == 200
        assert "/admin/loggers/{name}" in document.json()["paths"]


def test_log_levels_change_while_the_worker_runs(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """In a worker process (where eos logs through stdlib loggers, one per module)."""
    props = worker_props(bootstrap, unique_name("g"))
    process = WorkerProcess(tmp_path, props, [verifiable("vs", unique_name("out"))])
    process.start()
    try:
        process.wait_running("vs", 1)
        url = process.rest_url
        before = httpx.get(f"{url}/admin/loggers", timeout=10).json()
        assert before["root"] == {"level": "INFO", "last_modified": None}
        assert "[debug" not in process.log.read_text()

        changed = httpx.put(f"{url}/admin/loggers/eos", json={"level": "DEBUG"}, timeout=10)
        assert changed.status_code == 200
        names = changed.json()
        assert names == sorted(names)
        assert {"eos", "eos.runtime.worker"} <= set(names)
        assert all(name == "eos" or name.startswith("eos.") for name in names)
        listed = httpx.get(f"{url}/admin/loggers", timeout=10).json()
        assert listed["eos.runtime.worker"]["level"] == "DEBUG"
        assert isinstance(listed["eos.runtime.worker"]["last_modified"], int)
        assert listed["root"]["level"] == "INFO"
        one = httpx.get(f"{url}/admin/loggers/eos.runtime.worker", timeout=10).json()
        assert one["level"] == "DEBUG"

        # The worker now logs at debug level; back at INFO it stops.
        deadline = time.monotonic() + 30
        while "[debug" not in process.log.read_text():
            assert time.monotonic() < deadline, process.tail()
            time.sleep(0.2)
        httpx.put(f"{url}/admin/loggers/eos", json={"level": "INFO"}, timeout=10)
        time.sleep(0.5)
        size = process.log.read_text().count("[debug")
        time.sleep(2)
        assert process.log.read_text().count("[debug") == size
    finally:
        process.stop()


async def raw_request(url: str, head: bytes, body: AsyncIterator[bytes]) -> bytes:
    """Send ``head`` and the chunks of ``body`` as they come, reading the answer at the
    same time (a refusal need not wait for the body); the answer, once the server has
    closed the connection."""
    address = urlparse(url)
    stream = await anyio.connect_tcp(address.hostname or "", address.port or 80)
    answer = b""

    async def read() -> None:
        nonlocal answer
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            while True:
                answer += await stream.receive()

    async with stream, anyio.create_task_group() as tg:
        tg.start_soon(read)
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await stream.send(head)
            async for chunk in body:
                if answer:
                    break
                await stream.send(chunk)
        with anyio.move_on_after(10):
            while not answer.rstrip().endswith(b"}"):  # noqa: ASYNC110 - polls the answer
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    return answer


async def test_oversized_bodies_are_refused_with_413(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    props = worker_props(bootstrap, unique_name("g"), rest_max_request_bytes="4096")
    async with running_worker(props) as w:
        declared = await w.http.post("/connectors", content=b"{" + b" " * 10_000 + b"}")
        assert declared.status_code == 413
        assert declared.json() == {
            "error_code": 413,
            "message": "Request body is larger than 4096 bytes (rest.max.request.bytes)",
        }

        # Announced as 100 MB but never sent: refused from the header alone.
        async def nothing() -> AsyncIterator[bytes]:
            empty: list[bytes] = []
            for chunk in empty:
                yield chunk

        host = urlparse(w.settings.rest_url).netloc.encode()
        head = (
            b"POST /connectors HTTP/1.1\r\nHost: " + host + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
        )
        answer = await raw_request(w.settings.rest_url, head, nothing())
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]

        # Chunked, without a length: refused once the bytes read pass the limit, while
        # the client is still sending.
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(64):
                yield b"400\r\n" + b" " * 1024 + b"\r\n"
                await anyio.sleep(0.01)
            yield b"0\r\n\r\n"

        head = (
            b"PUT /connectors/big/config HTTP/1.1\r\nHost: " + host + b"\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        answer = await raw_request(w.settings.rest_url, head, chunks())
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert b'"error_code":413' in answer

        # A body within the limit is served, and nothing was created by the refusals.
        assert (await w.http.get("/connectors")).json() == []
        small = await w.http.put("/connectors/small/config", json={"connector.class": "nope"})
        assert small.status_code == 400
        assert small.json()["error_code"] == 400
