"""``eos connectors|plugins|offsets|info`` against a real worker: every command, its
output and exit status, and bad files (every problem, exit 2, nothing changed)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from eos.kafka import ClientConfig, read_to_end
from eos.state import State
from eos.storage.status_log import StatusRecord, decode_status_record
from services.cli import parser
from services.client import commands
from services.dev_kafka import free_ports
from tests.integration.worker_harness import (
    REPO,
    RunningWorker,
    running_worker,
    worker_props,
    write_properties,
)

pytestmark = pytest.mark.integration


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def rows(self) -> list[list[str]]:
        return [line.split() for line in self.out.splitlines()[1:]]


async def eos(w: RunningWorker, *argv: str) -> Result:
    """``eos ARGV --url <the worker>``, run in a thread (the worker shares this loop)."""

    def call() -> Result:
        out, err = io.StringIO(), io.StringIO()
        args = parser().parse_args([*argv, "--url", w.settings.rest_url])
        code = commands.run(args, out=out, err=err)
        return Result(code, out.getvalue(), err.getvalue())

    return await anyio.to_thread.run_sync(call)


def verifiable(topic: str, **extra: str) -> dict[str, str]:
    return {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": "1",
        "partitions.per.task": "2",
        "throughput": "100",
        "topic": topic,
        **extra,
    }


async def until(w: RunningWorker, check: Callable[[dict[str, Any]], bool], name: str) -> None:
    with anyio.fail_after(60):
        while not check(await w.status(name)):  # noqa: ASYNC110 - polls REST
            await anyio.sleep(0.2)


async def seqnos(client: ClientConfig, topic: str) -> dict[str, set[int]]:
    found: dict[str, set[int]] = defaultdict(set)
    for record in await read_to_end(client, topic):
        value = json.loads(record.value)
        found[value["partition"]].add(value["seqno"])
    return found


async def test_a_connectors_life_through_the_cli(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    topic = unique_name("out")
    props = write_properties(tmp_path / "vs.properties", verifiable(topic))
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        me = w.settings.worker_id
        assert await eos(w, "connectors", "list") == Result(0, "", "no connectors\n")
        assert await eos(w, "connectors", "validate", str(props)) == Result(
            0, f"{props}: vs (VerifiableSource): no problems\n", ""
        )
        assert await eos(w, "connectors", "apply", str(props)) == Result(
            0, "created connector vs\n", ""
        )
        await w.wait_for_tasks("vs", "RUNNING", 1)
        assert (await eos(w, "connectors", "list")).out == "vs\n"
        listed = await eos(w, "connectors", "list", "--status")
        assert listed.rows() == [["vs", "source", "RUNNING", "1", "RUNNING", me]]
        assert (await eos(w, "connectors", "status", "vs")).rows() == [
            ["vs", "-", "RUNNING", me, "-"],
            ["vs", "0", "RUNNING", me, "-"],
        ]
        described = (await eos(w, "connectors", "describe", "vs", "--json")).json()
        assert described["config"] == verifiable(topic)
        assert described["status"]["connector"]["state"] == "RUNNING"
        assert described["task_configs"][0]["id"] == {"connector": "vs", "task": 0}
        human = (await eos(w, "connectors", "describe", "vs")).out
        assert f"  topic               = {topic}" in human.splitlines()

        # Applying a changed file updates; the described JSON applies as it is.
        write_properties(props, verifiable(topic, throughput="200"))
        assert (await eos(w, "connectors", "apply", str(props))).out == "updated connector vs\n"
        again = tmp_path / "described.json"
        again.write_text(json.dumps(described))
        assert (await eos(w, "connectors", "update", str(again))).out == "updated connector vs\n"
        await w.wait_for_tasks("vs", "RUNNING", 1)

        paused = await eos(w, "connectors", "pause", "vs", "--wait")
        assert paused.code == 0, paused.err
        assert paused.out.splitlines()[0] == "pause requested: vs"
        assert [r[2] for r in paused.rows()[1:]] == ["PAUSED", "PAUSED"]

        # Stopped, the offsets can be read, altered from a file and reset.
        stopped = await eos(w, "connectors", "stop", "vs", "--wait")
        assert stopped.rows()[1:] == [["vs", "-", "STOPPED", me, "-"]], stopped
        read = await eos(w, "offsets", "get", "vs", "--json")
        before = {e["partition"]["partition"]: e["offset"]["seqno"] for e in read.json()["offsets"]}
        assert set(before) == {"0-0", "0-1"}
        table = (await eos(w, "offsets", "get", "vs")).out.splitlines()
        assert table[0].split() == ["PARTITION", "OFFSET"]
        assert f'{{"partition": "0-0"}}  {{"seqno": {before["0-0"]}}}' in table
        jump = {"0-0": before["0-0"] + 10, "0-1": before["0-1"] + 7}
        change = tmp_path / "offsets.json"
        change.write_text(json.dumps({"offsets": [
            {"partition": {"partition": p}, "offset": {"seqno": n}} for p, n in jump.items()
        ]}))  # fmt: skip
        altered = await eos(w, "offsets", "alter", "vs", str(change))
        assert altered == Result(
            0, "The offsets for this connector have been altered successfully\n", ""
        )
        after = (await eos(w, "offsets", "get", "vs", "--json")).json()["offsets"]
        assert {e["partition"]["partition"]: e["offset"]["seqno"] for e in after} == jump

        resumed = await eos(w, "connectors", "resume", "vs", "--wait")
        assert [r[2] for r in resumed.rows()[1:]] == ["RUNNING", "RUNNING"], resumed
        with anyio.fail_after(60):  # the output goes on from the altered offsets
            while True:
                written = await seqnos(client_config, topic)
                if all(n in written[p] for p, n in jump.items()):
                    break
                await anyio.sleep(0.5)

        refused = await eos(w, "offsets", "reset", "vs")
        assert refused.code == 1
        assert refused.err.splitlines()[0] == "hint: eos connectors stop vs --wait, then try again"
        assert "STOPPED" in refused.err.splitlines()[1]
        assert (await eos(w, "connectors", "stop", "vs", "--wait")).code == 0
        assert (await eos(w, "offsets", "reset", "vs")).out == (
            "The offsets for this connector have been reset successfully\n"
        )
        assert await eos(w, "offsets", "get", "vs") == Result(0, "", "no offsets for vs\n")

        assert (await eos(w, "connectors", "resume", "vs", "--wait")).code == 0
        assert await eos(w, "connectors", "restart", "vs") == Result(
            0, "restarted connector vs\n", ""
        )
        assert await eos(w, "connectors", "delete", "vs") == Result(0, "deleted connector vs\n", "")
        assert (await eos(w, "connectors", "list", "--json")).json() == []


async def test_failed_tasks_in_the_status_table_and_restarting_them(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    (tmp_path / "fail-1").touch()  # task 1 fails while the file exists
    flaky = {
        "name": "flaky",
        "connector.class": "tests.integration.connectors:FlakySource",
        "tasks.max": "2",
        "topic": unique_name("out"),
        "fail.dir": str(tmp_path),
    }
    spec = tmp_path / "flaky.yaml"
    spec.write_text("".join(f"{k}: '{v}'\n" for k, v in flaky.items()))
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        me = w.settings.worker_id
        assert (await eos(w, "connectors", "create", str(spec))).out == "created connector flaky\n"
        await until(w, lambda s: [t["state"] for t in s["tasks"]] == ["RUNNING", "FAILED"], "flaky")
        assert (await eos(w, "connectors", "status")).out.splitlines() == [
            f"CONNECTOR  TASK  STATE    WORKER{' ' * (len(me) - 6)}  TRACE",
            f"flaky      -     RUNNING  {me}  -",
            f"flaky      0     RUNNING  {me}  -",
            f"flaky      1     FAILED   {me}  task 1 told to fail",
        ]
        listed = await eos(w, "connectors", "list", "--status")
        assert listed.rows() == [["flaky", "source", "RUNNING", "1", "RUNNING,", "1", "FAILED", me]]

        (tmp_path / "fail-1").unlink()
        plan = await eos(w, "connectors", "restart", "flaky", "--include-tasks", "--only-failed")
        assert plan.code == 0, plan.err
        assert plan.out.splitlines()[0] == "restart of flaky accepted; planned:"
        assert [row.split()[2] for row in plan.out.splitlines()[2:]] == [
            "RUNNING", "RUNNING", "RESTARTING"
        ]  # fmt: skip
        await w.wait_for_tasks("flaky", "RUNNING", 2)

        one = await eos(w, "connectors", "restart", "flaky", "--task", "0", "--task", "9")
        assert one.out == "restarted task flaky-0\n"
        assert one.err == "error: task flaky-9: Task flaky-9 not found (HTTP 404)\n"
        assert one.code == 1
        await w.wait_for_tasks("flaky", "RUNNING", 2)


async def test_bad_files_and_refusals_against_a_worker(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    good = write_properties(tmp_path / "good.properties", verifiable(unique_name("out")))
    bad = write_properties(tmp_path / "bad.properties", {
        "name": "bad", "connector.class": "VerifiableSource", "tasks.max": "zero",
        "throughput": "-1",
    })  # fmt: skip
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"name": "u", "config": {"connector.class": "NoSuchPlugin"}}))
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nconnector.class: [oops\n")
    files = [str(good), str(bad), str(unknown), str(broken), str(tmp_path / "missing.yaml")]
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        checked = await eos(w, "connectors", "validate", *files)
        assert checked.code == 2
        lines = checked.out.splitlines()
        assert lines[0] == f"{good}: vs (VerifiableSource): no problems"
        assert sorted(line.split(": ")[1] for line in lines if line.startswith(str(bad))) == [
            "tasks.max", "throughput", "topic"
        ]  # fmt: skip
        assert any(line.startswith(f"{unknown}: connector.class: ") for line in lines)
        assert f"{broken}: not valid YAML (line 3, column 1: expected ',' or ']', but got " \
               "'<stream end>')" in lines  # fmt: skip
        assert f"{tmp_path / 'missing.yaml'}: cannot be read (no such file)" in lines
        assert lines[-1] == "6 problems"

        for command in ("apply", "create"):
            refused = await eos(w, "connectors", command, *files)
            assert refused.code == 2
            assert refused.out == ""
            assert refused.err.splitlines()[-1] == "error: 6 problems; nothing was changed"
            assert (await w.http.get("/connectors")).json() == []  # not even the good one

        assert (await eos(w, "connectors", "create", str(good))).code == 0
        again = await eos(w, "connectors", "create", str(good))
        assert again == Result(1, "", "error: Connector vs already exists (HTTP 409)\n")
        unknown_name = await eos(w, "connectors", "describe", "nope")
        assert unknown_name == Result(1, "", "error: Connector nope not found (HTTP 404)\n")

        plugins = await eos(w, "plugins", "list")
        verifiable_row = next(r for r in plugins.rows() if r[-1] == "VerifiableSource")
        assert verifiable_row[:2] == ["services.connectors.verifiable.VerifiableSource", "source"]
        settings = (await eos(w, "plugins", "describe", "VerifiableSource")).out.splitlines()
        assert settings[:2] == ["topic  STRING  required  HIGH", "    Topic to write to."]
        info = (await eos(w, "info")).out.splitlines()
        assert info[0] == f"url               {w.settings.rest_url}"
        assert "members           1" in info


def test_the_eos_command_exits_1_without_a_worker_and_2_for_a_bad_file(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "EOS_URL": url}

    def eos_process(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "services.cli", *argv],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
        )  # fmt: skip

    nobody = eos_process("connectors", "list")
    assert (nobody.returncode, nobody.stdout) == (1, "")
    assert nobody.stderr == f"error: no eos worker answers at {url}: start one or pass --url\n"

    empty = tmp_path / "empty.properties"
    empty.write_text("# nothing\n")
    bad = eos_process("connectors", "apply", str(empty), str(tmp_path / "gone.properties"))
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        f"{empty}: no name: add name=<connector name>",
        f"{empty}: no connector.class: add connector.class=<plugin class or alias> "
        "(eos plugins list shows them)",
        f"{tmp_path / 'gone.properties'}: cannot be read (no such file)",
        "error: 3 problems; nothing was changed",
    ]


async def test_a_raised_restart_number_restarts_the_connector_and_its_tasks_once(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """A file's ``restart``, as Strimzi's strimzi.io/restart: applied with a new number,
    the connector and its task are restarted (each reported RESTARTING once in the status
    topic, then RUNNING); applied again unchanged, nothing happens."""
    topic = unique_name("out")
    file = tmp_path / "a.json"
    wprops = worker_props(bootstrap, unique_name("g"))

    def declare(restart: int) -> None:
        body = {"name": "a", "restart": restart, "config": {**verifiable(topic), "name": "a"}}
        file.write_text(json.dumps(body))

    async def restarts() -> Counter[str]:
        """Connector and task statuses RESTARTING written so far, by key."""
        found: Counter[str] = Counter()
        for record in await read_to_end(client_config, wprops["status.storage.topic"]):
            status = decode_status_record(record.key, record.value)
            if (
                isinstance(status, StatusRecord)
                and status.status is not None
                and status.status.state is State.RESTARTING
            ):
                found["connector" if status.task is None else f"task {status.task}"] += 1
        return found

    def running(s: dict[str, Any]) -> bool:
        return s["connector"]["state"] == "RUNNING" and [t["state"] for t in s["tasks"]] == [
            "RUNNING"
        ]

    declare(0)
    async with running_worker(wprops) as w:
        assert (await eos(w, "connectors", "apply", str(file))).out == "created connector a\n"
        await until(w, running, "a")
        declare(1)
        planned = await eos(w, "connectors", "apply", str(file), "--dry-run")
        assert planned.out.splitlines() == ["update a from a.json", "restart a from a.json"]
        applied = await eos(w, "connectors", "apply", str(file))
        assert applied.out.splitlines() == ["updated connector a", "restarted connector a"]
        with anyio.fail_after(30):
            while await restarts() != {"connector": 1, "task 0": 1}:  # noqa: ASYNC110
                await anyio.sleep(0.2)
        await until(w, running, "a")
        assert (await eos(w, "connectors", "apply", str(file))).out == "nothing to change\n"
        config = json.loads((await eos(w, "connectors", "describe", "a", "--json")).out)
        await anyio.sleep(1)
    assert await restarts() == {"connector": 1, "task 0": 1}
    assert config["config"]["declared.restart"] == "1"


async def test_apply_a_directory_with_prune_and_a_dry_run_first(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """``eos connectors apply DIR --prune --dry-run`` prints the plan and changes nothing;
    without --dry-run it creates (in a file's state), deletes what no file declares, and a
    second run has nothing to change."""
    topic = unique_name("out")
    old = write_properties(tmp_path / "old.properties", {**verifiable(topic), "name": "old"})
    declared = tmp_path / "connectors"
    declared.mkdir()
    (declared / "a.json").write_text(json.dumps(
        {"name": "a", "state": "PAUSED", "config": {**verifiable(topic), "name": "a"}}
    ))  # fmt: skip
    write_properties(declared / "b.properties", {**verifiable(topic), "name": "b"})
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        assert (await eos(w, "connectors", "apply", str(old))).out == "created connector old\n"
        planned = await eos(w, "connectors", "apply", str(declared), "--prune", "--dry-run")
        assert planned.out.splitlines() == [
            "create a (PAUSED) from a.json", "create b (RUNNING) from b.properties", "delete old",
        ]  # fmt: skip
        assert (await eos(w, "connectors", "list")).out == "old\n"
        applied = await eos(w, "connectors", "apply", str(declared), "--prune")
        assert applied.out.splitlines() == [
            "created connector a", "created connector b", "deleted connector old",
        ]  # fmt: skip
        await until(w, lambda s: s["connector"]["state"] == "PAUSED", "a")
        assert (await eos(w, "connectors", "apply", str(declared), "--prune")).out == (
            "nothing to change\n"
        )
