"""Secrets through config providers never show: the passwords of four principals come from
``${file:…}`` (the worker's), ``${env:…}`` and ``${dir:…}`` (two connectors' own); each is
a sentinel that must appear in no log line, REST answer (validation included), status trace,
metric and record of the config or status topic — while the logins they make work.
``GET …/config`` keeps the ``${…}`` form, password settings show ``[hidden]``, and a
variable that cannot be resolved fails its connector with one line naming the setting."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from eos.kafka import make_consumer
from tests.integration.secured import Secured, eos
from tests.integration.worker_harness import WorkerProcess, worker_props

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PROVIDERS = {
    "config.providers": "file,env,dir",
    "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
    "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
    "config.providers.env.param.allowlist.pattern": "EOS_TEST_.*",
    "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
}


def jaas(user: str, password: str) -> str:
    return f'{SCRAM} required username="{user}" password="{password}";'


def vs(name: str, topic: str, user: str, password: str) -> dict[str, str]:
    return {
        "name": name, "connector.class": "VerifiableSource", "tasks.max": "1", "topic": topic,
        "records.per.partition": "200", "throughput": "200",
        "producer.override.sasl.mechanism": "SCRAM-SHA-512",
        "producer.override.sasl.jaas.config": jaas(user, password),
    }  # fmt: skip


async def topic_records(secured: Secured, topic: str) -> bytes:
    """Every key and value of ``topic`` (read_uncommitted), joined."""
    consumer = make_consumer(secured.admin, group_id=None, auto_offset_reset="earliest",
                             enable_auto_commit=False)  # fmt: skip
    found = []
    await consumer.start()
    try:
        consumer.subscribe([topic])
        for _ in range(10):
            batches = await consumer.getmany(timeout_ms=300)
            found += [
                (r.key or b"") + b"=" + (r.value or b"") for rs in batches.values() for r in rs
            ]
    finally:
        await consumer.stop()
    return b"\n".join(found)


async def test_a_sentinel_password_through_each_provider_never_shows(
    secured_kafka: Callable[[str], Secured],
    unique_name: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secured = secured_kafka("sasl-scram")
    sentinels = {k: f"SENTINEL-{k}-{secrets.token_hex(8)}" for k in ("file", "env", "dir")}
    worker_user = await secured.user("w", sentinels["file"])
    env_user = await secured.user("e", sentinels["env"])
    dir_user = await secured.user("d", sentinels["dir"])
    group = unique_name("secrets")
    topics = [await secured.topic(unique_name(f"out{i}")) for i in range(2)]
    store = tmp_path / "secrets.properties"
    store.write_text(f"password={sentinels['file']}\ntopic={topics[0]}\n")
    (tmp_path / "vol").mkdir()
    (tmp_path / "vol" / "password").write_text(sentinels["dir"])
    monkeypatch.setenv("EOS_TEST_PASSWORD", sentinels["env"])
    props = {
        **worker_props(secured.bootstrap, group),
        **PROVIDERS,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": jaas(worker_user, f"${{file:{store}:password}}"),
    }
    by_env = vs("by-env", f"${{file:{store}:topic}}", env_user, "${env:EOS_TEST_PASSWORD}")
    by_dir = vs("by-dir", topics[1], dir_user, f"${{dir:{tmp_path / 'vol'}:password}}")
    broken = vs("broken", topics[1], dir_user, f"${{file:{store}:nope}}")
    worker = WorkerProcess(tmp_path, props, [])
    files = [tmp_path / f"{c['name']}.json" for c in (by_env, by_dir)]
    for path, config in zip(files, (by_env, by_dir), strict=True):
        path.write_text(json.dumps(config))
    args = [str(worker.worker_file), "--command-config", str(secured.admin_file)]
    args += [a for f in files for a in ("--connector-config", str(f))]
    planned = eos("acls", "plan", *args)
    assert f"User:{env_user}" in planned.stdout, planned.stdout + planned.stderr
    assert f"User:{dir_user}" in planned.stdout
    assert eos("acls", "grant", *args).returncode == 0

    answers: list[str] = []
    try:
        worker.start()
        async with httpx.AsyncClient(base_url=worker.rest_url, timeout=30) as http:
            await created(http, [by_env, by_dir])
            refused = await http.post("/connectors", json={"name": "broken", "config": broken})
            assert refused.status_code == 400
            message = refused.json()["message"]
            assert (
                f"password=\"${{file:{store}:nope}}\";' for setting 'producer.override.sasl"
                f".jaas.config': the file {store} has no key nope" in message
            )
            await anyio.to_thread.run_sync(worker.wait_running, "by-env", 1)
            await anyio.to_thread.run_sync(worker.wait_running, "by-dir", 1)
            await anyio.sleep(1.5)  # records, commits, statuses, metrics
            paths = (
                "/connectors?expand=info&expand=status", "/connectors/by-env",
                "/connectors/by-env/config", "/connectors/by-env/tasks",
                "/connectors/by-env/status", "/connectors/broken/status",
                "/connectors/by-env/topics", "/metrics", "/",
            )  # fmt: skip
            for url in paths:
                answers.append((await http.get(url)).text)
            config = (await http.get("/connectors/by-env/config")).json()
            assert config["topic"] == f"${{file:{store}:topic}}"
            assert config["producer.override.sasl.jaas.config"] == "[hidden]"
            validated = await http.put(
                "/connector-plugins/VerifiableSource/config/validate", json=by_env
            )
            answers.append(validated.text)
            shown = {c["value"]["name"]: c["value"]["value"] for c in validated.json()["configs"]}
            assert shown["topic"] == f"${{file:{store}:topic}}"
            assert validated.json()["error_count"] == 0
            put_back = await http.put("/connectors/by-env/config", json=config)  # [hidden] kept
            assert put_back.status_code == 200, put_back.text
            # The secret volume loses its file: the task's next start fails, naming the setting.
            (tmp_path / "vol" / "password").unlink()
            await http.post("/connectors/by-dir/tasks/0/restart")
            trace = await failed_trace(http, "by-dir")
            assert trace.split("\n")[0].endswith(
                f"password=\"${{dir:{tmp_path / 'vol'}:password}}\";' for setting 'producer."
                f"override.sasl.jaas.config': the directory {tmp_path / 'vol'} has no file password"
            )
            answers.append((await http.get("/connectors/by-dir/status")).text)
    finally:
        worker.stop()
    stored = await topic_records(secured, f"{group}-configs")
    stored += await topic_records(secured, f"{group}-status")
    assert f"${{file:{store}:topic}}".encode() in stored  # the variable, never its value
    seen: dict[str, Any] = {
        "log": worker.log.read_text(),
        "REST": "\n".join(answers),
        "config and status topics": stored.decode(errors="replace"),
    }
    for where, text in seen.items():
        for provider, sentinel in sentinels.items():
            assert sentinel not in text, f"the {provider} sentinel is in the {where}"
    assert "by-env" in worker.log.read_text()  # the log was written


async def created(http: httpx.AsyncClient, configs: list[dict[str, str]]) -> None:
    with anyio.fail_after(60):
        for config in configs:
            while True:
                try:
                    response = await http.post(
                        "/connectors", json={"name": config["name"], "config": config}
                    )
                    if response.status_code == 201:
                        break
                except httpx.HTTPError:
                    pass  # not listening yet
                await anyio.sleep(0.3)


async def failed_trace(http: httpx.AsyncClient, name: str) -> str:
    with anyio.fail_after(60):
        while True:
            body = (await http.get(f"/connectors/{name}/status")).json()
            for entry in [body.get("connector", {}), *body.get("tasks", [])]:
                if entry.get("state") == "FAILED":
                    return str(entry["trace"])
            await anyio.sleep(0.2)
