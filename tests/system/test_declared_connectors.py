"""Connectors declared in ``connectors.dir`` on a cluster of two ``eos worker`` processes,
the directory written as kubelet writes a mounted ConfigMap (an atomic ``..data`` swap):
files added, changed and given states; a half-written file (nothing pruned, its connector
running as it was); a file removed with prune; and the leader SIGKILLed right after a
change (the other worker, now leading, applies it: every connector once)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.worker_harness import Cluster
from tests.unit.test_declared_connectors import write_configmap

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]


def verifiable(name: str, topic: str, state: str | None = None, **settings: str) -> str:
    body: dict[str, Any] = {
        "name": name,
        "config": {
            "connector.class": "VerifiableSource",
            "tasks.max": "1",
            "topic": topic,
            "records.per.partition": "0",
            "throughput": "20",
            **settings,
        },
    }
    if state is not None:
        body["state"] = state
    return json.dumps(body)


def until(cluster: Cluster, check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not {what} within {timeout}s\n{cluster.tails()}"
        time.sleep(0.3)


def states(cluster: Cluster) -> dict[str, str]:
    """connector → its state, from the first live worker."""
    body = cluster.get("/connectors?expand=status") or {}
    return {name: c["status"]["connector"]["state"] for name, c in body.items()}


def config(cluster: Cluster, name: str) -> dict[str, str]:
    return cluster.get(f"/connectors/{name}/config") or {}


def file_outcomes(rest_url: str) -> dict[str, tuple[str, str]]:
    """eos_worker_connector_file_outcome on a worker's /metrics: file → (connector, outcome)."""
    text = httpx.get(f"{rest_url}/metrics", timeout=5).text
    return {
        s.labels["file"]: (s.labels["connector"], s.labels["outcome"])
        for f in text_string_to_metric_families(text)
        if f.name == "eos_worker_connector_file_outcome"
        for s in f.samples
        if s.value == 1
    }


def test_the_leader_keeps_the_cluster_in_line_with_connector_files(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    mount = tmp_path / "connectors"
    mount.mkdir()
    topic, group = unique_name("declared"), unique_name("g")
    write_configmap(mount, {
        "a.json": verifiable("a", topic), "b.json": verifiable("b", topic, "PAUSED"),
    }, 1)  # fmt: skip
    cluster = Cluster(
        tmp_path, bootstrap, group, workers=2, connectors_dir=str(mount),
        connectors_dir_poll_interval_ms="2000", connectors_dir_prune="true",
    )  # fmt: skip
    try:
        cluster.start()
        cluster.leader()
        until(cluster, lambda: states(cluster) == {"a": "RUNNING", "b": "PAUSED"}, "created")

        write_configmap(mount, {
            "a.json": verifiable("a", topic, throughput="30"),
            "b.json": verifiable("b", topic, "RUNNING"),
            "c.yaml": f"name: c\nstate: STOPPED\nconfig:\n  connector.class: VerifiableSource\n"
                      f"  topic: {topic}\n",
        }, 2)  # fmt: skip
        until(
            cluster,
            lambda: (
                states(cluster) == {"a": "RUNNING", "b": "RUNNING", "c": "STOPPED"}
                and config(cluster, "a").get("throughput") == "30"
            ),
            "changed",
        )
        root = httpx.get(f"{cluster.leader().rest_url}/", timeout=5).json()
        files = root["connectors_dir"]["files"]
        assert {f: o["outcome"] for f, o in files.items()} == {
            "a.json": "updated", "b.json": "state", "c.yaml": "created",
        }  # fmt: skip

        # half written: a.json cut mid-way, c gone: nothing pruned, a runs as it was
        write_configmap(mount, {
            "a.json": verifiable("a", topic)[:40], "b.json": verifiable("b", topic, "RUNNING"),
        }, 3)  # fmt: skip
        leader = cluster.leader()
        until(
            cluster,
            lambda: "unreadable" in httpx.get(f"{leader.rest_url}/", timeout=5).text,
            "a.json named unreadable",
        )
        # the leader's metric says the same per file; another worker exports none
        outcomes = file_outcomes(leader.rest_url)
        assert outcomes["a.json"] == ("", "unreadable")
        assert outcomes["b.json"] == ("b", "state")
        others = [w for w in cluster.live() if w.rest_url != leader.rest_url]
        assert all(file_outcomes(w.rest_url) == {} for w in others)
        time.sleep(3)  # more polls: still nothing pruned
        assert set(states(cluster)) == {"a", "b", "c"}
        assert config(cluster, "a").get("throughput") == "30"
        assert "connector file not applied: it does not parse" in leader.log.read_text()

        write_configmap(mount, {
            "a.json": verifiable("a", topic), "b.json": verifiable("b", topic, "RUNNING"),
        }, 4)  # fmt: skip
        until(cluster, lambda: set(states(cluster)) == {"a", "b"}, "c pruned")

        # the leader killed right after a change: the other worker leads and applies it
        leader = cluster.leader()
        write_configmap(mount, {
            "a.json": verifiable("a", topic), "b.json": verifiable("b", topic, "RUNNING"),
            "d.json": verifiable("d", topic), "e.json": verifiable("e", topic, "PAUSED"),
        }, 5)  # fmt: skip
        leader.kill(signal.SIGKILL)
        until(
            cluster,
            lambda: (
                states(cluster) == {"a": "RUNNING", "b": "RUNNING", "d": "RUNNING", "e": "PAUSED"}
            ),
            "applied by the next leader",
            timeout=90,
        )
        names = cluster.get("/connectors")
        assert sorted(names or []) == ["a", "b", "d", "e"]
    finally:
        cluster.stop()
