"""The separate metrics listener (uvicorn) over real sockets: both exposition formats,
errors in the JSON-free plain shape, and a malformed request that must not stop it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import anyio
import httpx
import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families as parse_text

from metrics import OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE, PrometheusObserver
from services.http import serve_metrics

parse_om: Callable[[str], Iterator[Metric]] = openmetrics_parser.text_string_to_metric_families
pytestmark = pytest.mark.integration

PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


async def test_serves_both_formats_and_survives_garbage() -> None:
    observer = PrometheusObserver()
    observer.task("orders", 0).transaction_committed(7, 0.01, 0.1)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_metrics, observer.registry, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url) as client:
            om = await client.get("/metrics", headers={"Accept": PROMETHEUS_ACCEPT})
            text = await client.get("/metrics")
            head = await client.head("/metrics")
            missing = await client.get("/nope")
            post = await client.post("/metrics")
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(b"garbage\r\n\r\n")
            garbage = await stream.receive()
        async with httpx.AsyncClient(base_url=url) as client:
            again = await client.get("/metrics")
        tg.cancel_scope.cancel()

    assert om.headers["content-type"] == OPENMETRICS_CONTENT_TYPE
    assert om.text.endswith("# EOF\n")
    families = {f.name: f for f in parse_om(om.text)}
    assert families["eos_task_transactions_committed"].samples[0].value == 1
    assert text.headers["content-type"] == TEXT_CONTENT_TYPE
    assert "eos_task_transaction_size_max" in {f.name for f in parse_text(text.text)}
    assert head.status_code == 200
    assert head.content == b""
    assert missing.status_code == 404
    assert post.status_code == 405
    assert garbage.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert again.status_code == 200
