"""``GET /openapi.json``: the REST API as an OpenAPI 3.1 document (docs/rest.md has
the same endpoints with examples). Every route the worker serves is described here;
``tests/unit/test_rest_openapi.py`` checks both ways."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import eos

JSON = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _string_map() -> dict[str, Any]:
    return {"type": "object", "additionalProperties": {"type": "string"}}


def _path(name: str, doc: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": doc,
            "schema": {"type": "string"}}  # fmt: skip


_NAME = _path("name", "The connector's name.")
_TASK = _path("task", "The task's number (0, 1, …).")
_PLUGIN = _path("plugin", "An alias (VerifiableSource), a class path or a class name.")
_LOGGER = _path("name", "A logger name (eos.runtime.worker), or root.")


def _flag(name: str, doc: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": doc,
            "schema": {"type": "string", "enum": ["true", "false"]}}  # fmt: skip


_FORWARD = _flag(
    "forward",
    "Set by a worker that forwards the request to the leader: true on the first hop, "
    "false on the second (a worker that is not the leader answers 409).",
)


def _error(doc: str) -> dict[str, Any]:
    return {"description": doc, "content": {JSON: {"schema": _ref("Error")}}}


def _ok(doc: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    if schema is None:
        return {"description": doc}
    return {"description": doc, "content": {JSON: {"schema": schema}}}


def _op(
    summary: str,
    tag: str,
    responses: dict[str, Any],
    *,
    params: Sequence[dict[str, Any]] = (),
    body: dict[str, Any] | None = None,
    leader: bool = False,
) -> dict[str, Any]:
    """One operation; every one may answer 503 (starting) and, with ``rest.auth``,
    401/403; writes served by the leader add ``forward`` and 409."""
    answers = dict(responses)
    if leader:
        answers.setdefault(
            "409",
            _error(
                "a rebalance is under way, no leader is known, or the request made two hops; retry"
            ),
        )
    answers.setdefault("413", _error("the body is larger than rest.max.request.bytes"))
    answers.setdefault("503", _error("the worker has not read its config topic yet"))
    operation: dict[str, Any] = {
        "summary": summary,
        "tags": [tag],
        "parameters": [*params, *([_FORWARD] if leader else [])],
        "responses": answers,
    }
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {JSON: {"schema": body}}}
    return operation


_NOT_FOUND = _error("no such connector")
_BAD = _error("the body or a setting is invalid; the message lists every problem")

# fmt: off
PATHS: dict[str, dict[str, Any]] = {
    "/": {
        "get": _op("The worker: version, Kafka cluster id, and its view of the cluster",
                   "worker", {"200": _ok("the worker", _ref("ServerInfo"))}),
    },
    "/openapi.json": {
        "get": _op("This document", "worker", {"200": _ok("OpenAPI 3.1", {"type": "object"})}),
    },
    "/health": {
        "get": _op("Kafka Connect's health check (KIP-1017); needs no credentials", "worker",
                   {"200": _ok("healthy: started, its actors answer", _ref("Health")),
                    "503": _ok("starting, with the stage it is in", _ref("Health")),
                    "500": _ok("unhealthy: an actor has not answered for 10 s, or "
                               "stopping", _ref("Health"))}),
    },
    "/metrics": {
        "get": _op("Prometheus metrics (text format, or OpenMetrics when asked)", "worker",
                   {"200": {"description": "metrics",
                            "content": {"text/plain": {"schema": {"type": "string"}}}}}),
    },
    "/connectors": {
        "get": _op(
            "Connector names, or with expand=status / expand=info each connector's details",
            "connectors",
            {"200": _ok("names, or name → {status, info}",
                        {"oneOf": [{"type": "array", "items": {"type": "string"}},
                                   {"type": "object"}]})},
            params=[{"name": "expand", "in": "query", "required": False, "style": "form",
                     "explode": True, "schema": {"type": "array",
                     "items": {"type": "string", "enum": ["status", "info"]}}}],
        ),
        "post": _op(
            "Create a connector",
            "connectors",
            {"201": _ok("created", _ref("ConnectorInfo")), "400": _BAD,
             "409": _error("a connector of that name exists, or the cluster is rebalancing")},
            body=_ref("CreateConnector"),
            leader=True,
        ),
    },
    "/connectors/{name}": {
        "get": _op("A connector's name, config, tasks and type", "connectors",
                   {"200": _ok("the connector", _ref("ConnectorInfo")), "404": _NOT_FOUND},
                   params=[_NAME]),
        "delete": _op("Delete a connector", "connectors",
                      {"204": _ok("deleted"), "404": _NOT_FOUND}, params=[_NAME], leader=True),
    },
    "/connectors/{name}/config": {
        "get": _op("A connector's settings", "connectors",
                   {"200": _ok("the settings", _string_map()), "404": _NOT_FOUND},
                   params=[_NAME]),
        "put": _op("Create (201) or replace (200) a connector's settings", "connectors",
                   {"200": _ok("updated", _ref("ConnectorInfo")),
                    "201": _ok("created", _ref("ConnectorInfo")), "400": _BAD},
                   params=[_NAME], body=_ref("Settings"), leader=True),
        "patch": _op("Change some settings (null removes one); the others stay", "connectors",
                     {"200": _ok("updated", _ref("ConnectorInfo")), "400": _BAD,
                      "404": _NOT_FOUND},
                     params=[_NAME], body=_ref("SettingsPatch"), leader=True),
    },
    "/connectors/{name}/status": {
        "get": _op("The states of the connector and its tasks, with failure traces",
                   "connectors", {"200": _ok("status", _ref("ConnectorStatus")),
                                  "404": _NOT_FOUND}, params=[_NAME]),
    },
    "/connectors/{name}/tasks": {
        "get": _op("The task configs", "connectors",
                   {"200": _ok("one entry per task", {"type": "array", "items": _ref("TaskInfo")}),
                    "404": _NOT_FOUND}, params=[_NAME]),
        "post": _op("Internal: a worker hands the leader a connector's task configs "
                    "(signed with the session key)", "internal",
                    {"204": _ok("written"), "400": _error("unsigned or malformed"),
                     "403": _error("bad signature")},
                    params=[_NAME], body={"type": "array", "items": _string_map()}),
    },
    "/connectors/{name}/tasks/{task}/status": {
        "get": _op("One task's state", "connectors",
                   {"200": _ok("status", _ref("TaskState")),
                    "404": _error("no such connector or task")}, params=[_NAME, _TASK]),
    },
    "/connectors/{name}/tasks/{task}/progress": {
        "get": _op("eos: the figures of a task running on this worker", "connectors",
                   {"200": _ok("the figures", _ref("Progress")),
                    "404": _error("the task does not run on this worker")},
                   params=[_NAME, _TASK]),
    },
    "/connectors/{name}/tasks/{task}/restart": {
        "post": _op("Restart one task", "lifecycle",
                    {"204": _ok("the restart is under way"),
                     "404": _error("no such connector or task")},
                    params=[_NAME, _TASK], leader=True),
    },
    "/connectors/{name}/pause": {
        "put": _op("Pause the connector and its tasks", "lifecycle",
                   {"202": _ok("accepted"), "404": _NOT_FOUND}, params=[_NAME], leader=True),
    },
    "/connectors/{name}/resume": {
        "put": _op("Resume a paused or stopped connector", "lifecycle",
                   {"202": _ok("accepted"), "404": _NOT_FOUND}, params=[_NAME], leader=True),
    },
    "/connectors/{name}/stop": {
        "put": _op("Stop: shut the tasks down, keep the connector (offsets can then change)",
                   "lifecycle", {"202": _ok("accepted"), "404": _NOT_FOUND},
                   params=[_NAME], leader=True),
    },
    "/connectors/{name}/restart": {
        "post": _op(
            "Restart the connector (204), or with includeTasks / onlyFailed also its tasks "
            "(202 and the planned states)",
            "lifecycle",
            {"202": _ok("the planned states", _ref("ConnectorStatus")),
             "204": _ok("the connector restarts"), "404": _NOT_FOUND,
             "500": _error("the config topic could not be read in time")},
            params=[_NAME, _flag("includeTasks", "also restart the tasks"),
                    _flag("onlyFailed", "only what is FAILED")],
            leader=True,
        ),
    },
    "/connectors/{name}/offsets": {
        "get": _op("The connector's offsets (KIP-875)", "offsets",
                   {"200": _ok("offsets", _ref("Offsets")), "404": _NOT_FOUND},
                   params=[_NAME]),
        "patch": _op("Alter offsets (the connector must be STOPPED); a null offset resets "
                     "that partition", "offsets",
                     {"200": _ok("altered", _ref("Message")), "400": _BAD,
                      "404": _NOT_FOUND, "409": _error("the connector is not STOPPED")},
                     params=[_NAME], body=_ref("Offsets"), leader=True),
        "delete": _op("Reset every offset (the connector must be STOPPED)", "offsets",
                      {"200": _ok("reset", _ref("Message")), "404": _NOT_FOUND,
                       "409": _error("the connector is not STOPPED")},
                      params=[_NAME], leader=True),
    },
    "/connectors/{name}/fence": {
        "put": _op("Internal: a worker asks the leader to fence the connector's last task "
                   "generation (signed with the session key)", "internal",
                   {"204": _ok("fenced"), "400": _error("unsigned"),
                    "403": _error("bad signature"), "409": _error("round cancelled")},
                   params=[_NAME]),
    },
    "/connectors/{name}/topics": {
        "get": _op("The topics the connector wrote to since the last reset (KIP-558)",
                   "topics", {"200": _ok("name → {topics}", {"type": "object"}),
                              "403": _error("topic.tracking.enable=false")}, params=[_NAME]),
    },
    "/connectors/{name}/topics/reset": {
        "put": _op("Forget the connector's active topics", "topics",
                   {"202": _ok("reset"), "403": _error("tracking or its reset is disabled")},
                   params=[_NAME]),
    },
    "/connector-plugins": {
        "get": _op("Installed connector plugins (with connectorsOnly=false also converters, "
                   "transformations and predicates)",
                   "plugins",
                   {"200": _ok("plugins", {"type": "array", "items": _ref("PluginInfo")})},
                   params=[_flag("connectorsOnly", "false also lists converters, "
                                 "transformations and predicates")]),
    },
    "/connector-plugins/{plugin}/config": {
        "get": _op("The plugin's own settings (a connector, transformation or predicate)",
                   "plugins",
                   {"200": _ok("definitions", {"type": "array", "items": {"type": "object"}}),
                    "404": _error("no such plugin")}, params=[_PLUGIN]),
    },
    "/connector-plugins/{plugin}/config/validate": {
        "put": _op("Validate settings: every setting's definition, value and errors",
                   "plugins",
                   {"200": _ok("the validation", _ref("Validation")), "400": _BAD,
                    "404": _error("no such plugin")},
                   params=[_PLUGIN], body=_ref("Settings")),
    },
    "/admin/loggers": {
        "get": _op("The root logger and every logger with a level of its own", "admin",
                   {"200": _ok("name → level", {"type": "object",
                                                "additionalProperties": _ref("LoggerLevel")})}),
    },
    "/admin/loggers/{name}": {
        "get": _op("One logger's level", "admin",
                   {"200": _ok("its level", _ref("LoggerLevel")),
                    "404": _error("no such logger")}, params=[_LOGGER]),
        "put": _op("Set the level of a logger and of every logger below it, on this worker",
                   "admin",
                   {"200": _ok("the loggers changed", {"type": "array",
                                                       "items": {"type": "string"}}),
                    "400": _error("bad level, or scope=cluster")},
                   params=[_LOGGER, {"name": "scope", "in": "query", "required": False,
                                     "schema": {"type": "string", "enum": ["worker"]}}],
                   body={"type": "object", "required": ["level"],
                         "properties": {"level": {"type": "string", "enum": [
                             "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"]}}}),
    },
}

# fmt: on
_STATE: dict[str, Any] = {
    "type": "object",
    "required": ["state", "worker_id"],
    "properties": {
        "state": {"type": "string"},
        "worker_id": {"type": ["string", "null"]},
        "trace": {"type": "string"},
        "auto_restart": {
            "type": "object",
            "description": "eos: the automatic restarts in a row, when the next is due "
            "(UTC), or why it is not restarted automatically (docs/operations.md)",
            "required": ["restarts", "next_attempt"],
            "properties": {
                "restarts": {"type": "integer"},
                "next_attempt": {"type": ["string", "null"], "format": "date-time"},
                "not_restarted": {"type": "string"},
            },
        },
    },
}
# fmt: off
SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error_code", "message"],
        "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}},
    },
    "Message": {"type": "object", "properties": {"message": {"type": "string"}}},
    "Health": {
        "type": "object",
        "required": ["status", "message"],
        "properties": {
            "status": {"type": "string", "enum": ["healthy", "starting", "unhealthy"]},
            "message": {"type": "string"},
        },
    },
    "ServerInfo": {
        "type": "object",
        "required": ["version", "commit", "kafka_cluster_id"],
        "properties": {
            "version": {"type": "string"},
            "commit": {"type": "string"},
            "kafka_cluster_id": {"type": ["string", "null"]},
            "worker_id": {"type": "string"},
            "exactly_once_source_support": {"type": "string"},
            "connectors_dir": {
                "type": ["object", "null"],
                "description": "connectors.dir: its path, prune, and each file's outcome",
            },
            "cluster": {"type": "object"},
        },
    },
    "Settings": {**_string_map(), "description": "setting → value (values are strings)"},
    "SettingsPatch": {
        "type": "object",
        "additionalProperties": {"type": ["string", "null"]},
        "description": "setting → new value, or null to remove it",
    },
    "CreateConnector": {
        "type": "object",
        "required": ["name", "config"],
        "properties": {
            "name": {"type": "string"},
            "config": _ref("Settings"),
            "initial_state": {"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"]},
        },
    },
    "ConnectorInfo": {
        "type": "object",
        "required": ["name", "config", "tasks", "type"],
        "properties": {
            "name": {"type": "string"},
            "config": _ref("Settings"),
            "tasks": {"type": "array", "items": _ref("TaskId")},
            "type": {"type": "string", "enum": ["source"]},
        },
    },
    "TaskId": {"type": "object", "required": ["connector", "task"],
               "properties": {"connector": {"type": "string"}, "task": {"type": "integer"}}},
    "TaskInfo": {"type": "object", "required": ["id", "config"],
                 "properties": {"id": _ref("TaskId"), "config": _ref("Settings")}},
    "TaskState": {**_STATE, "required": ["id", "state", "worker_id"],
                  "properties": {"id": {"type": "integer"}, **_STATE["properties"],
                                 "progress": {"$ref": "#/components/schemas/Progress"}}},
    "Progress": {"type": "object", "additionalProperties": {"type": "number"},
                 "description": "eos: a RUNNING task's own figures (context.count totals "
                 "since it started, context.gauge values), as its worker reports them"},
    "ConnectorStatus": {
        "type": "object",
        "required": ["name", "connector", "tasks", "type"],
        "properties": {"name": {"type": "string"}, "connector": _STATE,
                       "tasks": {"type": "array", "items": _ref("TaskState")},
                       "type": {"type": "string"}},
    },
    "Offsets": {
        "type": "object",
        "required": ["offsets"],
        "properties": {"offsets": {"type": "array", "items": {
            "type": "object", "required": ["partition", "offset"],
            "properties": {"partition": {"type": "object"},
                           "offset": {"type": ["object", "null"]}}}}},
    },
    "PluginInfo": {"type": "object", "required": ["class", "type"],
                   "properties": {"class": {"type": "string"}, "type": {"type": "string"},
                                  "version": {"type": "string"}, "alias": {"type": "string"}}},
    "Validation": {
        "type": "object",
        "required": ["name", "error_count", "groups", "configs"],
        "properties": {"name": {"type": "string"}, "error_count": {"type": "integer"},
                       "groups": {"type": "array", "items": {"type": "string"}},
                       "configs": {"type": "array", "items": {"type": "object"}}},
    },
    "LoggerLevel": {"type": "object", "required": ["level", "last_modified"],
                    "properties": {"level": {"type": "string"},
                                   "last_modified": {"type": ["integer", "null"]}}},
}
# fmt: on


def document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "eos worker REST API",
            "version": eos.__version__,
            "description": "Kafka Connect's REST API as an eos worker serves it. Errors are "
            '{"error_code": <status>, "message": "..."}; with rest.auth set, requests need '
            "credentials (401/403). Writes reach the leader (forwarded by any worker).",
        },
        "paths": PATHS,
        "components": {"schemas": SCHEMAS},
    }


async def openapi(request: Request) -> Response:
    return JSONResponse(document())


ROUTES = [Route("/openapi.json", openapi, methods=["GET"])]
