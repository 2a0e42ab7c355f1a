"""A locked-down REST API against real workers (docs/security.md): TLS listeners that
only clients trusting the cluster's CA can talk to, basic auth answering 401 in
Kafka Connect's JSON shape, internal endpoints that keep their signature check and
need no user credentials, and a two-worker cluster whose workers call each other
over https with client certificates while a request through the follower carries
the caller's credentials to the leader."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from eos.runtime.clock import SystemClock
from eos.runtime.cluster.signatures import sign
from eos.runtime.worker import Worker
from services.rest.auth import hash_password
from services.worker_service import run_worker, worker_settings
from tests.integration.worker_harness import cluster_worker_props, worker_props
from tests.tls_certs import CertificateAuthority

pytestmark = pytest.mark.integration

ALICE = ("alice", "wonderland")
REQUIRED = {"listeners.https.ssl.client.auth": "required"}


def verifiable(topic: str, tasks: int = 2) -> dict[str, str]:
    return {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "records.per.partition": "0",
        "throughput": "50",
    }


def https_settings(ca: CertificateAuthority, name: str, **extra: str) -> dict[str, str]:
    issued = ca.issue(name)
    return {
        "listeners.https.ssl.certfile": str(issued.certfile),
        "listeners.https.ssl.keyfile": str(issued.keyfile),
        "listeners.https.ssl.cafile": str(ca.cafile),
        **extra,
    }


def https(props: dict[str, str]) -> dict[str, str]:
    """``props`` with its http listener made https (same port)."""
    return {**props, "listeners": props["listeners"].replace("http://", "https://")}


def credentials_file(path: Path) -> str:
    path.write_text(f"# REST users\n{ALICE[0]}:{hash_password(ALICE[1], iterations=1000)}\n")
    return str(path)


def trusting(ca: CertificateAuthority, cert: Any = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.cafile))
    if cert is not None:
        context.load_cert_chain(cert.certfile, cert.keyfile)
    return context


@asynccontextmanager
async def workers(*props: Mapping[str, str]) -> AsyncIterator[list[Worker]]:
    """In-process workers (stopped on exit)."""
    async with anyio.create_task_group() as tg:
        started: list[Worker] = []
        try:
            for p in props:
                started.append(await tg.start(run_worker, worker_settings(p)))
            yield started
        finally:
            for worker in started:
                worker.stop()


def assert_json_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error_code", "message"}
    assert body["error_code"] == status
    return body


async def test_tls_only_clients_that_trust_the_ca_get_in(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    ca = CertificateAuthority(tmp_path)
    other = CertificateAuthority(tmp_path, "someone else's CA")
    props = https(worker_props(bootstrap, unique_name("g"), **https_settings(ca, "worker")))
    async with workers(props) as (worker,):
        url = worker.settings.rest_url
        assert url.startswith("https://127.0.0.1:")
        async with httpx.AsyncClient(verify=trusting(ca), timeout=30) as http:
            root = await http.get(f"{url}/")
            assert root.status_code == 200
            assert root.json()["cluster"]["leader_url"] == url
            assert (await http.get(f"{url}/connectors")).json() == []
            assert (await http.get(f"{url}/metrics")).status_code == 200
        for verify in (True, trusting(other)):  # the system's CAs; an unrelated CA
            async with httpx.AsyncClient(verify=verify, timeout=30) as http:
                with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                    await http.get(f"{url}/")
        plain = url.replace("https://", "http://")
        async with httpx.AsyncClient(timeout=30) as http:
            with pytest.raises(httpx.HTTPError):
                await http.get(f"{plain}/")


async def test_client_certificates_when_required(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    ca = CertificateAuthority(tmp_path)
    settings = https_settings(ca, "worker", **REQUIRED)
    props = https(worker_props(bootstrap, unique_name("g"), **settings))
    async with workers(props) as (worker,):
        url = worker.settings.rest_url
        async with httpx.AsyncClient(verify=trusting(ca), timeout=30) as http:
            with pytest.raises(httpx.HTTPError):
                await http.get(f"{url}/")
        stranger = CertificateAuthority(tmp_path, "stranger CA").issue("stranger")
        async with httpx.AsyncClient(verify=trusting(ca, stranger), timeout=30) as http:
            with pytest.raises(httpx.HTTPError):
                await http.get(f"{url}/")
        client = ca.issue("operator")
        async with httpx.AsyncClient(verify=trusting(ca, client), timeout=30) as http:
            assert (await http.get(f"{url}/")).status_code == 200


async def test_basic_auth_and_the_endpoints_it_leaves_alone(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    users = credentials_file(tmp_path / "users")
    props = worker_props(
        bootstrap, unique_name("g"), rest_auth="basic", rest_auth_basic_credentials_file=users
    )
    async with workers(props) as (worker,):
        url = worker.settings.rest_url
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            none = assert_json_error(await http.get("/"), 401)
            assert "credentials" in none["message"]
            assert (await http.get("/")).headers["www-authenticate"].startswith("Basic ")
            wrong = await http.get("/connectors", auth=(ALICE[0], "looking-glass"))
            assert_json_error(wrong, 401)
            assert wrong.headers["www-authenticate"].startswith("Basic ")
            assert (await http.get("/connectors", auth=ALICE)).json() == []
            assert (await http.get("/", auth=ALICE)).status_code == 200
            assert_json_error(await http.put("/connectors/vs/config", json={}), 401)
            assert_json_error(await http.get("/connectors/vs/tasks"), 401)
            assert_json_error(await http.get("/nowhere"), 401)  # nothing leaks without credentials

            # Prometheus scrapes without credentials (rest.auth.metrics.protected=false).
            metrics = await http.get("/metrics")
            assert metrics.status_code == 200
            assert "eos_" in metrics.text

            # Internal endpoints: no user credentials needed, the signature still checked.
            unsigned = assert_json_error(await http.put("/connectors/vs/fence"), 400)
            assert "signature" in unsigned["message"]
            assert_json_error(await http.post("/connectors/vs/tasks", content=b"[]"), 400)
            forged = sign(
                b"x" * 32, "HmacSHA256", "PUT", "/connectors/vs/fence", b"", SystemClock().wall_ms()
            )
            assert_json_error(await http.put("/connectors/vs/fence", headers=forged), 403)
            with_user_only = await http.put("/connectors/vs/fence", auth=ALICE)
            assert_json_error(with_user_only, 400)


async def test_metrics_can_require_credentials(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    props = worker_props(
        bootstrap,
        unique_name("g"),
        rest_auth="basic",
        rest_auth_basic_credentials_file=credentials_file(tmp_path / "users"),
        rest_auth_metrics_protected="true",
    )
    async with workers(props) as started, httpx.AsyncClient(timeout=30) as http:
        url = started[0].settings.rest_url
        assert_json_error(await http.get(f"{url}/metrics"), 401)
        assert (await http.get(f"{url}/metrics", auth=ALICE)).status_code == 200


async def test_a_cluster_over_https_with_client_certificates_and_basic_auth(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """Both workers require client certificates and credentials: a connector created
    through the follower reaches the leader (forwarded with the caller's credentials),
    and its tasks start on both workers (signed internal requests over https)."""
    ca = CertificateAuthority(tmp_path)
    users = credentials_file(tmp_path / "users")
    group, topic = unique_name("g"), unique_name("out")
    props = [
        https(
            cluster_worker_props(
                bootstrap,
                group,
                rest_auth="basic",
                rest_auth_basic_credentials_file=users,
                **https_settings(
                    ca, f"worker-{i}", **{"listeners.https.ssl.client.auth": "required"}
                ),
            )
        )
        for i in range(2)
    ]
    operator = ca.issue("operator")
    async with (
        workers(*props) as started,
        httpx.AsyncClient(verify=trusting(ca, operator), auth=ALICE, timeout=60) as http,
    ):
        leader_url = await _agreed_leader(http, [w.settings.rest_url for w in started])
        follower = next(w.settings for w in started if w.settings.rest_url != leader_url)
        with anyio.fail_after(60):
            while True:
                created = await http.put(
                    f"{follower.rest_url}/connectors/vs/config", json=verifiable(topic)
                )
                if created.status_code != 409:
                    break
                await anyio.sleep(0.3)
        assert created.status_code == 201, created.text
        status = await _running(http, f"{follower.rest_url}/connectors/vs/status", tasks=2)
        placed = {status["connector"]["worker_id"], *(t["worker_id"] for t in status["tasks"])}
        assert follower.worker_id in placed  # the follower asked the leader for something
        without = await http.get(f"{follower.rest_url}/connectors", auth=("alice", "nope"))
        assert_json_error(without, 401)


async def _agreed_leader(http: httpx.AsyncClient, urls: Sequence[str]) -> str:
    with anyio.fail_after(60):
        while True:
            views = [(await http.get(f"{url}/")).json()["cluster"] for url in urls]
            leaders = {v["leader_url"] for v in views}
            if len(leaders) == 1 and None not in leaders and all(v["generation"] for v in views):
                (leader,) = leaders
                return str(leader)
            await anyio.sleep(0.2)


async def _running(http: httpx.AsyncClient, url: str, tasks: int) -> dict[str, Any]:
    body: dict[str, Any] = {}
    with anyio.fail_after(90):
        while True:
            response = await http.get(url)
            if response.status_code == 200:
                body = response.json()
                states = [t["state"] for t in body["tasks"]]
                if len(states) == tasks and set(states) == {"RUNNING"}:
                    return body
            await anyio.sleep(0.3)
