"""The ``eos connectors|plugins|offsets|info`` client against recorded Kafka Connect
answers (the shapes of Java Kafka Connect 3.x, served by httpx.MockTransport): the
requests it sends, its tables and JSON, its messages and exit codes."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.cli import parser
from services.client import commands
from services.client.http import ClientError, ConnectClient

URL = "http://connect.example:8083"
WORKER = "10.0.0.5:8083"
TRACE = (
    "org.apache.kafka.connect.errors.ConnectException: Unable to open /data/in.txt\n"
    "\tat org.apache.kafka.connect.file.FileStreamSourceTask.poll(FileStreamSourceTask.java:90)\n"
)
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def status(name: str, *tasks: str, state: str = "RUNNING") -> dict[str, Any]:
    """Connect's status body; a task given as ``"FAILED"`` carries :data:`TRACE`."""
    return {
        "name": name,
        "connector": {"state": state, "worker_id": WORKER},
        "tasks": [
            {
                "id": i,
                "state": s,
                "worker_id": WORKER,
                **({"trace": TRACE} if s == "FAILED" else {}),
            }
            for i, s in enumerate(tasks)
        ],
        "type": "source",
    }


def info(name: str, config: dict[str, str], tasks: int = 1) -> dict[str, Any]:
    return {
        "name": name,
        "config": config,
        "tasks": [{"connector": name, "task": i} for i in range(tasks)],
        "type": "source",
    }


def definition(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name, "type": "STRING", "required": False, "default_value": None,
        "importance": "HIGH", "documentation": f"The {name}.", "group": "Common",
        "width": "MEDIUM", "display_name": name, "dependents": [], "order": 1, **extra,
    }  # fmt: skip


def validation(errors: dict[str, list[str]], config: dict[str, str]) -> dict[str, Any]:
    """Connect's validate answer: one entry per setting of ``config`` and ``errors``."""
    names = dict.fromkeys([*config, *errors])
    return {
        "name": FILE_SOURCE,
        "error_count": sum(len(e) for e in errors.values()),
        "groups": ["Common", "Transforms", "Predicates", "Error Handling"],
        "configs": [
            {
                "definition": definition(n),
                "value": {
                    "name": n,
                    "value": config.get(n),
                    "recommended_values": [],
                    "errors": errors.get(n, []),
                    "visible": True,
                },
            }
            for n in names
        ],
    }


Answer = tuple[int, Any] | Callable[[httpx.Request], tuple[int, Any]]


@dataclass
class FakeConnect:
    """A recorded Connect worker: ``answers[(method, path)]`` is (status, JSON body or
    raw text) or a function of the request; ``requests`` records what was sent."""

    answers: dict[tuple[str, str], Answer] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.raw_path.decode().split("?")[0]
        answer = self.answers.get((request.method, path))
        if answer is None:
            message = f"HTTP 404 Not Found: {request.method} {path}"
            return httpx.Response(404, json={"error_code": 404, "message": message})
        code, body = answer(request) if callable(answer) else answer
        if body is None:
            return httpx.Response(code)
        if isinstance(body, str):
            return httpx.Response(code, text=body, headers={"content-type": "text/html"})
        return httpx.Response(code, json=body)

    def sent(self, method: str | None = None) -> list[str]:
        return [
            f"{r.method} {r.url.raw_path.decode()}"
            for r in self.requests
            if method is None or r.method == method
        ]

    def body(self, index: int) -> Any:
        return json.loads(self.requests[index].content)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def connect() -> FakeConnect:
    return FakeConnect()


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EOS_URL", "EOS_USER", "EOS_PASSWORD", "EOS_CACERT", "EOS_CERT", "EOS_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def eos(connect: FakeConnect) -> Callable[..., Result]:
    def run(*argv: str) -> Result:
        out, err = io.StringIO(), io.StringIO()
        args = parser().parse_args(argv)
        code = commands.run(args, transport=httpx.MockTransport(connect.handle), out=out, err=err)
        return Result(code, out.getvalue(), err.getvalue())

    return run


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


FILE_CONFIG = {
    "name": "local-file-source",
    "connector.class": FILE_SOURCE,
    "tasks.max": "1",
    "file": "/data/in.txt",
    "topic": "lines",
}


@pytest.fixture
def properties(tmp_path: Path) -> str:
    return write(tmp_path, "file.properties", "".join(f"{k}={v}\n" for k, v in FILE_CONFIG.items()))


# ------------------------------------------------------------------ reading


def test_list_prints_names_one_a_line_and_json(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    connect.answers[("GET", "/connectors")] = (200, ["b-source", "a-source"])
    result = eos("connectors", "list", "--url", URL)
    assert (result.code, result.out, result.err) == (0, "a-source\nb-source\n", "")
    assert connect.requests[0].url == httpx.URL(f"{URL}/connectors")
    assert eos("connectors", "list", "--json").json() == ["a-source", "b-source"]


def test_list_without_connectors_says_so_on_stderr(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    connect.answers[("GET", "/connectors")] = (200, [])
    result = eos("connectors", "list")
    assert (result.code, result.out, result.err) == (0, "", "no connectors\n")


def test_list_status_is_a_table_of_state_tasks_and_worker(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    expanded = {
        "files": {"status": status("files", "RUNNING", "FAILED", "RUNNING")},
        "db": {"status": status("db", state="PAUSED")},
    }
    connect.answers[("GET", "/connectors")] = (200, expanded)
    result = eos("connectors", "list", "--status")
    assert result.code == 0
    assert result.out.splitlines() == [
        "NAME   TYPE    STATE    TASKS                WORKER",
        "db     source  PAUSED   -                    10.0.0.5:8083",
        "files  source  RUNNING  2 RUNNING, 1 FAILED  10.0.0.5:8083",
    ]
    assert connect.requests[0].url.params.get_list("expand") == ["status"]
    assert eos("connectors", "list", "--status", "--json").json() == expanded


def test_status_table_shows_every_task_and_the_first_line_of_a_trace(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    connect.answers[("GET", "/connectors/files/status")] = (
        200,
        status("files", "RUNNING", "FAILED"),
    )
    result = eos("connectors", "status", "files")
    assert result.code == 0
    assert result.out.splitlines() == [
        "CONNECTOR  TASK  STATE    WORKER         TRACE",
        "files      -     RUNNING  10.0.0.5:8083  -",
        "files      0     RUNNING  10.0.0.5:8083  -",
        "files      1     FAILED   10.0.0.5:8083  "
        "org.apache.kafka.connect.errors.ConnectException: Unable to open /data/in.txt",
    ]


def test_status_of_every_connector_and_of_an_unknown_one(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    connect.answers[("GET", "/connectors")] = (200, {"a": {"status": status("a", "RUNNING")}})
    connect.answers[("GET", "/connectors/a/status")] = (200, status("a", "RUNNING"))
    everything = eos("connectors", "status", "--json")
    assert everything.json() == [status("a", "RUNNING")]

    # One name is unknown: the others are still shown, the refusal is named, exit 1.
    result = eos("connectors", "status", "a", "nope")
    assert result.code == 1
    assert "a          0     RUNNING" in result.out
    assert result.err == "error: nope: HTTP 404 Not Found: GET /connectors/nope/status (HTTP 404)\n"


def test_describe_shows_config_and_status(connect: FakeConnect, eos: Callable[..., Result]) -> None:
    connect.answers[("GET", "/connectors/files")] = (200, info("files", FILE_CONFIG))
    connect.answers[("GET", "/connectors/files/status")] = (200, status("files", "RUNNING"))
    task_configs = [{"id": {"connector": "files", "task": 0}, "config": {"task.class": "x"}}]
    connect.answers[("GET", "/connectors/files/tasks")] = (200, task_configs)
    result = eos("connectors", "describe", "files")
    assert result.code == 0
    assert result.out.splitlines() == [
        "name    files",
        "type    source",
        "state   RUNNING",
        "worker  10.0.0.5:8083",
        "tasks   1",
        "config:",
        f"  connector.class = {FILE_SOURCE}",
        "  file            = /data/in.txt",
        "  name            = local-file-source",
        "  tasks.max       = 1",
        "  topic           = lines",
        "status:",
        "CONNECTOR  TASK  STATE    WORKER         TRACE",
        "files      -     RUNNING  10.0.0.5:8083  -",
        "files      0     RUNNING  10.0.0.5:8083  -",
    ]
    described = eos("connectors", "describe", "files", "--json").json()
    assert described == {
        **info("files", FILE_CONFIG), "task_configs": task_configs,
        "status": status("files", "RUNNING"),
    }  # fmt: skip


def test_info_of_a_java_worker_and_of_an_eos_worker(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    java = {"version": "3.7.0", "commit": "2ae524ed625438c5", "kafka_cluster_id": "I4ZmrWqfT2e"}
    connect.answers[("GET", "/")] = (200, java)
    assert eos("info", "--url", URL).out.splitlines() == [
        f"url               {URL}",
        "version           3.7.0",
        "commit            2ae524ed625438c5",
        "kafka_cluster_id  I4ZmrWqfT2e",
    ]
    member = {"member_id": "m-1", "url": "http://10.0.0.5:8083", "worker_id": WORKER}
    cluster = {"group_id": "g", "leader": True, "leader_url": "http://10.0.0.5:8083",
               "generation": 4, "protocol": "sessioned/sticky", "members": [member],
               "error": None}  # fmt: skip
    connect.answers[("GET", "/")] = (200, {**java, "worker_id": WORKER, "cluster": cluster})
    lines = eos("info", "--url", URL).out.splitlines()
    assert lines[4:] == [
        "worker_id         10.0.0.5:8083",
        "group_id          g",
        "leader            http://10.0.0.5:8083",
        "generation        4",
        "protocol          sessioned/sticky",
        "members           1",
        "  WORKER         URL",
        "  10.0.0.5:8083  http://10.0.0.5:8083",
    ]


def test_plugins_of_a_java_worker_have_no_alias_column(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    plugins = [
        {"class": FILE_SOURCE, "type": "source", "version": "3.7.0"},
        {"class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "type": "sink",
         "version": "3.7.0"},
    ]  # fmt: skip
    connect.answers[("GET", "/connector-plugins")] = (200, plugins)
    result = eos("plugins", "list")
    assert result.out.splitlines() == [
        f"{'CLASS'.ljust(len(FILE_SOURCE))}  TYPE    VERSION",
        f"{FILE_SOURCE}  source  3.7.0",
        "org.apache.kafka.connect.file.FileStreamSinkConnector    sink    3.7.0",
    ]
    assert "connectorsOnly" not in connect.requests[0].url.params
    eos("plugins", "list", "--all")
    assert connect.requests[1].url.params["connectorsOnly"] == "false"


def test_plugins_describe_lists_each_setting_with_its_documentation(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    definitions = [definition("file"), definition("topic", required=True, type="LIST")]
    connect.answers[("GET", "/connector-plugins/FileStreamSource/config")] = (200, definitions)
    result = eos("plugins", "describe", "FileStreamSource")
    assert result.out.splitlines() == [
        "file  STRING  default -  HIGH",
        "    The file.",
        "topic  LIST  required  HIGH",
        "    The topic.",
    ]


# ------------------------------------------------------------------ validating and applying


def test_validate_prints_every_problem_and_exits_2(
    connect: FakeConnect, eos: Callable[..., Result], properties: str
) -> None:
    errors = {
        "topic": ['Missing required configuration "topic" which has no default value.'],
        "tasks.max": ["Invalid value 0 for configuration tasks.max: Value must be at least 1"],
    }
    path = f"/connector-plugins/{FILE_SOURCE}/config/validate"
    connect.answers[("PUT", path)] = (200, validation(errors, FILE_CONFIG))
    result = eos("connectors", "validate", properties)
    assert result.code == 2
    assert result.out.splitlines() == [
        f"{properties}: tasks.max: Invalid value 0 for configuration tasks.max: "
        "Value must be at least 1",
        f'{properties}: topic: Missing required configuration "topic" which has no default value.',
        "2 problems",
    ]
    assert connect.sent() == [f"PUT {path}"]
    assert connect.body(0) == FILE_CONFIG

    report = eos("connectors", "validate", properties, "--json")
    assert report.code == 2
    assert report.json()[0]["problems"][1] == {
        "setting": "topic",
        "message": 'Missing required configuration "topic" which has no default value.',
    }


def test_validate_a_good_file_and_files_with_problems_of_their_own(
    connect: FakeConnect, eos: Callable[..., Result], properties: str, tmp_path: Path
) -> None:
    path = f"/connector-plugins/{FILE_SOURCE}/config/validate"
    connect.answers[("PUT", path)] = (200, validation({}, FILE_CONFIG))
    good = eos("connectors", "validate", properties)
    assert (good.code, good.out) == (
        0,
        f"{properties}: local-file-source ({FILE_SOURCE}): no problems\n",
    )

    unknown = write(tmp_path, "unknown.yaml", "name: x\nconnector.class: Nope\n")
    message = "Failed to find any class that implements Connector and which name matches Nope"
    connect.answers[("PUT", "/connector-plugins/Nope/config/validate")] = (
        400, {"error_code": 400, "message": message},
    )  # fmt: skip
    broken = write(tmp_path, "broken.json", '{"name": "x",')
    result = eos("connectors", "validate", unknown, broken, str(tmp_path / "missing.properties"))
    assert result.code == 2
    assert result.out.splitlines()[0] == f"{unknown}: connector.class: {message}"
    assert result.out.splitlines()[1].startswith(f"{broken}: not valid JSON (")
    assert result.out.splitlines()[2:] == [
        f"{tmp_path / 'missing.properties'}: cannot be read (no such file)",
        "3 problems",
    ]


def test_apply_creates_or_updates_after_validating(
    connect: FakeConnect, eos: Callable[..., Result], properties: str
) -> None:
    validate = f"/connector-plugins/{FILE_SOURCE}/config/validate"
    connect.answers[("PUT", validate)] = (200, validation({}, FILE_CONFIG))
    listed = "/connectors?expand=info&expand=status"
    connect.answers[("GET", "/connectors")] = (200, {})
    config = "/connectors/local-file-source/config"
    connect.answers[("PUT", config)] = (201, info("local-file-source", FILE_CONFIG))
    created = eos("connectors", "apply", properties)
    assert (created.code, created.out) == (0, "created connector local-file-source\n")
    assert connect.sent() == [f"PUT {validate}", f"GET {listed}", f"PUT {config}"]
    assert connect.body(2) == FILE_CONFIG

    connect.answers[("PUT", config)] = (200, info("local-file-source", FILE_CONFIG))
    updated = eos("connectors", "apply", properties, "--json", "--no-validate")
    assert updated.json() == [
        {"name": "local-file-source", "action": "updated",
         "info": info("local-file-source", FILE_CONFIG)}
    ]  # fmt: skip
    assert f"PUT {validate}" not in connect.sent()[3:]


def test_apply_creates_with_the_files_initial_state(
    connect: FakeConnect, eos: Callable[..., Result], tmp_path: Path
) -> None:
    body = {"name": "files", "config": {**FILE_CONFIG, "name": "files"}, "initial_state": "PAUSED"}
    path = write(tmp_path, "files.json", json.dumps(body))
    connect.answers[("GET", "/connectors")] = (200, [])
    connect.answers[("POST", "/connectors")] = (201, info("files", body["config"]))  # type: ignore[arg-type]
    result = eos("connectors", "apply", path, "--no-validate")
    assert result.code == 0
    assert connect.body(1) == body


def test_create_an_existing_connector_prints_the_servers_message(
    connect: FakeConnect, eos: Callable[..., Result], properties: str
) -> None:
    message = "Connector local-file-source already exists"
    connect.answers[("POST", "/connectors")] = (409, {"error_code": 409, "message": message})
    result = eos("connectors", "create", properties, "--no-validate", "--initial-state", "STOPPED")
    assert (result.code, result.out) == (1, "")
    assert result.err == f"error: {message} (HTTP 409)\n"
    assert connect.body(0) == {
        "name": "local-file-source", "config": FILE_CONFIG, "initial_state": "STOPPED"
    }  # fmt: skip


def test_update_needs_the_connector_to_exist(
    connect: FakeConnect, eos: Callable[..., Result], properties: str
) -> None:
    connect.answers[("GET", "/connectors/local-file-source")] = (
        404, {"error_code": 404, "message": "Connector local-file-source not found"},
    )  # fmt: skip
    result = eos("connectors", "update", properties, "--no-validate")
    assert result.code == 1
    assert result.err == (
        f"error: Connector local-file-source not found ({properties}): "
        "use eos connectors create or apply (HTTP 404)\n"
    )
    assert connect.sent("PUT") == []


def test_bad_files_print_every_problem_exit_2_and_change_nothing(
    connect: FakeConnect, eos: Callable[..., Result], properties: str, tmp_path: Path
) -> None:
    validate = f"/connector-plugins/{FILE_SOURCE}/config/validate"
    errors = {"topic": ['Missing required configuration "topic" which has no default value.']}
    connect.answers[("PUT", validate)] = (200, validation(errors, FILE_CONFIG))
    no_class = write(tmp_path, "no-class.properties", "tasks.max=1\n")
    broken = write(tmp_path, "broken.yaml", "name: x\nconnector.class: [oops\n")
    twice = write(
        tmp_path, "twice.yaml", f"name: local-file-source\nconnector.class: {FILE_SOURCE}\n"
    )
    state = write(tmp_path, "state.json", '{"name": "s", "config": {"connector.class": "A"}, '
                  '"initial_state": "SLEEPING"}')  # fmt: skip
    for command in ("apply", "create", "update"):
        connect.requests.clear()
        result = eos("connectors", command, properties, no_class, broken, twice, state)
        assert result.code == 2
        assert result.out == ""
        assert result.err.splitlines() == [
            f"{no_class}: no name: add name=<connector name>",
            f"{no_class}: no connector.class: add connector.class=<plugin class or alias> "
            "(eos plugins list shows them)",
            f"{broken}: not valid YAML (line 3, column 1: expected ',' or ']', but got "
            "'<stream end>')",
            f"{twice}: connector 'local-file-source' is also in {properties}",
            f"{state}: initial_state 'SLEEPING' is not one of ('RUNNING', 'PAUSED', 'STOPPED')",
            f'{properties}: topic: Missing required configuration "topic" which has no default '
            "value.",
            "error: 6 problems; nothing was changed",
        ]
        assert connect.sent() == [f"PUT {validate}"]  # only the check


# ------------------------------------------------------------------ lifecycle


@pytest.mark.parametrize(("action", "target"), [("pause", "PAUSED"), ("resume", "RUNNING"),
                                                ("stop", "STOPPED")])  # fmt: skip
def test_pause_resume_stop_ask_and_report(
    connect: FakeConnect, eos: Callable[..., Result], action: str, target: str
) -> None:
    connect.answers[("PUT", f"/connectors/a/{action}")] = (202, None)
    connect.answers[("PUT", f"/connectors/b/{action}")] = (202, None)
    result = eos("connectors", action, "a", "b")
    assert (result.code, result.out) == (0, f"{action} requested: a\n{action} requested: b\n")
    assert connect.sent() == [f"PUT /connectors/a/{action}", f"PUT /connectors/b/{action}"]
    assert eos("connectors", action, "a", "--json").json() == [
        {"name": "a", "action": action, "target": target}
    ]


def test_wait_polls_the_status_until_the_target_state(
    connect: FakeConnect, eos: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commands, "WAIT_POLL_SECONDS", 0)
    answers = iter([status("a", "RUNNING"), status("a", "PAUSED", state="RUNNING"),
                    status("a", "PAUSED", state="PAUSED")])  # fmt: skip
    connect.answers[("PUT", "/connectors/a/pause")] = (202, None)
    connect.answers[("GET", "/connectors/a/status")] = lambda _: (200, next(answers))
    result = eos("connectors", "pause", "a", "--wait")
    assert result.code == 0
    assert result.out.splitlines() == [
        "pause requested: a",
        "CONNECTOR  TASK  STATE   WORKER         TRACE",
        "a          -     PAUSED  10.0.0.5:8083  -",
        "a          0     PAUSED  10.0.0.5:8083  -",
    ]
    assert len(connect.sent("GET")) == 3


def test_wait_gives_up_after_its_timeout(
    connect: FakeConnect, eos: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commands, "WAIT_POLL_SECONDS", 0)
    connect.answers[("PUT", "/connectors/a/stop")] = (202, None)
    connect.answers[("GET", "/connectors/a/status")] = (200, status("a", "RUNNING"))
    result = eos("connectors", "stop", "a", "--wait", "--wait-timeout", "0.05")
    assert result.code == 1
    assert (
        result.err == "error: a is not STOPPED after 0.05 s (connector RUNNING, tasks 1 RUNNING)\n"
    )


def test_a_stopped_connector_without_tasks_is_stopped(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    connect.answers[("PUT", "/connectors/a/stop")] = (202, None)
    connect.answers[("GET", "/connectors/a/status")] = (200, status("a", state="STOPPED"))
    assert eos("connectors", "stop", "a", "--wait").code == 0


def test_restart_the_connector_alone_or_with_its_tasks(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    connect.answers[("POST", "/connectors/a/restart")] = (204, None)
    alone = eos("connectors", "restart", "a")
    assert (alone.code, alone.out) == (0, "restarted connector a\n")
    assert connect.requests[0].url.query == b""

    plan = status("a", "RUNNING", "RESTARTING")
    connect.answers[("POST", "/connectors/a/restart")] = (202, plan)
    result = eos("connectors", "restart", "a", "--include-tasks", "--only-failed")
    assert result.out.splitlines() == [
        "restart of a accepted; planned:",
        "CONNECTOR  TASK  STATE       WORKER         TRACE",
        "a          -     RUNNING     10.0.0.5:8083  -",
        "a          0     RUNNING     10.0.0.5:8083  -",
        "a          1     RESTARTING  10.0.0.5:8083  -",
    ]
    assert dict(connect.requests[1].url.params) == {"includeTasks": "true", "onlyFailed": "true"}
    assert eos("connectors", "restart", "a", "--include-tasks", "--json").json() == {
        "name": "a", "action": "restarted", "plan": plan
    }  # fmt: skip


def test_restart_tasks(connect: FakeConnect, eos: Callable[..., Result]) -> None:
    connect.answers[("POST", "/connectors/a/tasks/0/restart")] = (204, None)
    connect.answers[("POST", "/connectors/a/tasks/7/restart")] = (
        404, {"error_code": 404, "message": "Task a-7 not found"},
    )  # fmt: skip
    result = eos("connectors", "restart", "a", "--task", "0", "--task", "7")
    assert (result.code, result.out) == (1, "restarted task a-0\n")
    assert result.err == "error: task a-7: Task a-7 not found (HTTP 404)\n"

    both = eos("connectors", "restart", "a", "--task", "0", "--only-failed")
    assert both.code == 2
    assert "--task restarts one task" in both.err


def test_delete(connect: FakeConnect, eos: Callable[..., Result]) -> None:
    connect.answers[("DELETE", "/connectors/a")] = (204, None)
    result = eos("connectors", "delete", "a")
    assert (result.code, result.out) == (0, "deleted connector a\n")


# ------------------------------------------------------------------ offsets


OFFSETS = {
    "offsets": [
        {"partition": {"filename": "/data/in.txt"}, "offset": {"position": 1337}},
        {"partition": {"filename": "/data/other.txt"}, "offset": {"position": 0}},
    ]
}


def test_offsets_get_is_a_table_or_connects_json(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    connect.answers[("GET", "/connectors/files/offsets")] = (200, OFFSETS)
    assert eos("offsets", "get", "files").out.splitlines() == [
        "PARTITION                        OFFSET",
        '{"filename": "/data/in.txt"}     {"position": 1337}',
        '{"filename": "/data/other.txt"}  {"position": 0}',
    ]
    assert eos("offsets", "get", "files", "--json").json() == OFFSETS
    connect.answers[("GET", "/connectors/files/offsets")] = (200, {"offsets": []})
    assert eos("offsets", "get", "files").err == "no offsets for files\n"


def test_offsets_alter_sends_the_file_and_reset_deletes(
    connect: FakeConnect, eos: Callable[..., Result], tmp_path: Path
) -> None:
    change = {"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": None}]}
    path = write(tmp_path, "change.json", json.dumps(change))
    altered = "The offsets for this connector have been altered successfully"
    reset = "The offsets for this connector have been reset successfully"
    connect.answers[("PATCH", "/connectors/files/offsets")] = (200, {"message": altered})
    connect.answers[("DELETE", "/connectors/files/offsets")] = (200, {"message": reset})
    assert eos("offsets", "alter", "files", path).out == f"{altered}\n"
    assert connect.body(0) == change
    assert eos("offsets", "reset", "files").out == f"{reset}\n"
    assert connect.sent() == ["PATCH /connectors/files/offsets", "DELETE /connectors/files/offsets"]


def test_offsets_of_a_running_connector_say_how_to_stop_it(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    message = (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can "
        "be done for the specified connector by issuing a 'PUT' request to the "
        "'/connectors/files/stop' endpoint"
    )
    connect.answers[("DELETE", "/connectors/files/offsets")] = (
        400, {"error_code": 400, "message": message},
    )  # fmt: skip
    result = eos("offsets", "reset", "files")
    assert result.code == 1
    assert result.err == f"error: {message} (HTTP 400)\n"
    connect.answers[("DELETE", "/connectors/files/offsets")] = (
        409, {"error_code": 409, "message": message},
    )  # fmt: skip
    assert eos("offsets", "reset", "files").err.splitlines()[0] == (
        "hint: eos connectors stop files --wait, then try again"
    )


def test_a_bad_offsets_file_prints_every_problem(
    connect: FakeConnect, eos: Callable[..., Result], tmp_path: Path
) -> None:
    entries = [{"partition": "p", "offset": 3}, {"offset": {}}, 5, {"partition": {}}]
    path = write(tmp_path, "bad.json", json.dumps({"offsets": entries}))
    result = eos("offsets", "alter", "files", path)
    assert result.code == 2
    assert result.err.splitlines() == [
        f"{path}: offsets[0]: partition must be an object",
        f"{path}: offsets[0]: offset must be an object or null",
        f"{path}: offsets[1]: partition must be an object",
        f"{path}: offsets[2]: must be an object with partition and offset",
        f"{path}: offsets[3]: offset is missing (null resets the partition)",
        "error: 5 problems; nothing was changed",
    ]
    empty = write(tmp_path, "empty.json", "{}")
    assert eos("offsets", "alter", "files", empty).err.splitlines()[0] == (
        f'{empty}: needs {{"offsets": [{{"partition": {{...}}, "offset": {{...}}}}, ...]}}'
    )
    assert connect.requests == []


# ------------------------------------------------------------------ errors and connection


def test_an_error_without_connects_shape_shows_the_body(
    connect: FakeConnect, eos: Callable[..., Result]
) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    connect.answers[("GET", "/connectors")] = (502, page)
    result = eos("connectors", "list")
    assert (result.code, result.err) == (1, f"error: {page} (HTTP 502)\n")


def test_a_non_json_answer_is_named(connect: FakeConnect, eos: Callable[..., Result]) -> None:
    connect.answers[("GET", "/connectors")] = (200, "<html>hello</html>")
    result = eos("connectors", "list", "--url", URL)
    assert result.code == 1
    assert result.err == (
        f"error: GET {URL}/connectors answered 200 with a body that is not JSON: "
        "is this a Kafka Connect worker?\n"
    )


def test_401_says_how_to_authenticate(connect: FakeConnect, eos: Callable[..., Result]) -> None:
    refused = {"error_code": 401, "message": "authentication required"}
    connect.answers[("GET", "/connectors")] = (401, refused)
    assert eos("connectors", "list").err == (
        "error: authentication required (pass --user, or set EOS_USER and EOS_PASSWORD) "
        "(HTTP 401)\n"
    )
    assert eos("connectors", "list", "--user", "alice:secret").err == (
        "error: authentication required (HTTP 401)\n"
    )


def test_credentials_from_the_flag_or_the_environment(
    connect: FakeConnect, eos: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    connect.answers[("GET", "/connectors")] = (200, [])
    eos("connectors", "list", "--user", "alice:s3cr:et")
    monkeypatch.setenv("EOS_USER", "bob")
    monkeypatch.setenv("EOS_PASSWORD", "hunter2")
    eos("connectors", "list")
    sent = [r.headers["authorization"] for r in connect.requests]
    assert sent == [httpx.BasicAuth("alice", "s3cr:et")._auth_header,
                    httpx.BasicAuth("bob", "hunter2")._auth_header]  # fmt: skip

    monkeypatch.delenv("EOS_PASSWORD")
    monkeypatch.setattr("sys.stdin", io.StringIO())  # not a terminal: no prompt
    result = eos("connectors", "list")
    assert result.code == 2
    assert (
        result.err == "error: no password for bob: pass --user bob:PASSWORD or set EOS_PASSWORD\n"
    )


def raising(exc: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"),
         f"no eos worker answers at {URL}: start one or pass --url"),
        (httpx.ConnectTimeout("timed out"),
         f"no eos worker answers at {URL}: start one or pass --url"),
        (httpx.ReadTimeout("timed out"),
         f"the worker at {URL} did not answer within 90 s (--timeout)"),
        (httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
         f"the worker at {URL} presented a certificate this client does not trust "
         "([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed): pass --cacert with the "
         "CA that signed it"),
        (httpx.RemoteProtocolError("Server disconnected"),
         f"GET {URL}/connectors failed: Server disconnected"),
    ],
)  # fmt: skip
def test_transport_failures_are_one_line(exc: Exception, message: str) -> None:
    client = ConnectClient(URL + "/", transport=httpx.MockTransport(raising(exc)))
    with pytest.raises(ClientError) as raised:
        client.connector_names()
    assert str(raised.value) == message


def test_the_url_comes_from_the_flag_the_environment_or_the_default(
    connect: FakeConnect, eos: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    connect.answers[("GET", "/connectors")] = (200, [])
    eos("connectors", "list")
    monkeypatch.setenv("EOS_URL", "http://from-env:9000/")
    eos("connectors", "list")
    eos("connectors", "list", "--url", URL)
    eos("connectors", "list", "--url", "localhost:8084")
    hosts = [str(r.url) for r in connect.requests]
    assert hosts == [
        "http://127.0.0.1:8083/connectors",
        "http://from-env:9000/connectors",
        f"{URL}/connectors",
        "http://localhost:8084/connectors",
    ]


def test_names_are_one_path_segment(connect: FakeConnect, eos: Callable[..., Result]) -> None:
    connect.answers[("GET", "/connectors/a%2Fb%20c/status")] = (200, status("a/b c"))
    assert eos("connectors", "status", "a/b c").code == 0
    assert connect.sent() == ["GET /connectors/a%2Fb%20c/status"]


def test_the_worker_commands_are_still_there() -> None:
    for argv in (["dev-kafka", "status"], ["worker", "w.properties"], ["run"],
                 ["verify", "--bootstrap-server", "b:9092", "--topic", "t"]):  # fmt: skip
        assert parser().parse_args(argv).command == argv[0]


@pytest.fixture
def client_modules() -> list[Path]:
    return sorted((Path(__file__).resolve().parents[2] / "services" / "client").glob("*.py"))


def test_the_client_speaks_only_the_rest_contract(client_modules: list[Path]) -> None:
    """No runtime, storage, REST server or worker code: only the settings and connector
    file readers and the plan ``apply`` shares with ``connectors.dir``."""
    import ast

    allowed = (
        "services.client", "eos.config.files", "eos.config.connector_files",
        "eos.config.connector_plan", "eos.errors",
    )  # fmt: skip
    for path in client_modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] in ("eos", "services", "metrics"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"
