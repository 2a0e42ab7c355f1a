"""Connector plugins (Kafka Connect's paths and shapes):

- ``GET /connector-plugins[?connectorsOnly=false]``: the installed connectors (and,
  with ``connectorsOnly=false``, the bundled converters, the transformations and the
  predicates);
- ``GET /connector-plugins/{plugin}/config``: the plugin's own settings (a connector, a
  transformation or a predicate);
- ``PUT /connector-plugins/{plugin}/config/validate``: every setting of the framework,
  the plugin and its transforms and predicates with its definition, value and problems,
  grouped — the same checks that create and update run.

``{plugin}`` is an alias (``VerifiableSource``), a class path, or a class name; for
``…/config`` also a transformation's or predicate's name (``InsertField$Value``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import eos
from eos.api import SourceConnector
from eos.config.connector import CONNECTOR_CONFIG
from eos.config.definition import ConfigDef, ConfigKey
from eos.converters import CONVERTERS
from eos.errors import NotFoundError, PluginError
from eos.runtime.plugins import available_connectors, connector_class
from eos.runtime.worker_api import WorkerApi
from eos.transforms import chain_validation as transforms
from eos.transforms import loader as transform_loader
from services.rest.errors import guard, json_object
from services.rest.hidden import hidden


def _plugin(name: str) -> type[SourceConnector]:
    aliases = available_connectors()
    by_class = {target.rpartition(":")[2]: alias for alias, target in aliases.items()}
    try:
        return connector_class(by_class.get(name, name))
    except PluginError as exc:
        raise NotFoundError(f"Unknown plugin {name}: {exc}") from exc


def _class_path(cls: type[Any]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


async def plugins(request: Request) -> Response:
    listed: list[dict[str, Any]] = [
        {"class": target.replace(":", "."), "alias": alias, "type": "source",
         "version": eos.__version__}
        for alias, target in sorted(available_connectors().items())
    ]  # fmt: skip
    if request.query_params.get("connectorsOnly", "true").lower() == "false":
        listed += [
            {"class": name, "type": "converter", "version": eos.__version__}
            for name in sorted(CONVERTERS)
        ]
        for kind in ("transformation", "predicate"):
            listed += [
                {"class": name, "type": kind, "version": eos.__version__}
                | ({"alias": alias} if alias else {})
                for name, alias in transform_loader.installed(kind)
            ]
    return JSONResponse(listed)


def _definition(key: ConfigKey, order: int) -> dict[str, Any]:
    return {
        **key.describe(),
        "order_in_group": order,
        "width": "NONE",
        "display_name": key.name,
        "dependents": [],
    }


async def plugin_config(request: Request) -> Response:
    name = request.path_params["plugin"]
    try:
        own = _plugin(name)().config_def()
    except NotFoundError:
        own = _step_definition(name)
    return JSONResponse([_definition(k, i) for i, k in enumerate(own.keys.values())])


def _step_definition(name: str) -> ConfigDef:
    """The settings of the transformation or predicate ``name`` (404 if there is none)."""
    for find in (transform_loader.transform_class, transform_loader.predicate_class):
        try:
            definition: ConfigDef = find(name)().config_def()
        except PluginError:
            continue
        return definition
    raise NotFoundError(f"Unknown plugin {name}: no connector, transformation or predicate")


async def validate(request: Request) -> Response:
    worker: WorkerApi = request.app.state.worker
    cls = _plugin(request.path_params["plugin"])
    body = await json_object(request)
    props = {str(k): str(v) for k, v in body.items() if v is not None}
    props.setdefault("connector.class", _class_path(cls))
    problems = worker.problems(props)
    keys = CONNECTOR_CONFIG.merged(cls().config_def()).merged(transforms.definitions(props))
    shown = hidden(props, props["connector.class"])
    return JSONResponse(_validation(_class_path(cls), keys, shown, problems))


def _validation(
    name: str, keys: ConfigDef, props: dict[str, str], problems: dict[str, list[str]]
) -> dict[str, Any]:
    configs: list[dict[str, Any]] = []
    groups: list[str] = []
    for order, key in enumerate(keys.keys.values()):
        if key.group and key.group not in groups:
            groups.append(key.group)
        configs.append(
            {
                "definition": _definition(key, order),
                "value": {
                    "name": key.name,
                    "value": props.get(key.name),
                    "recommended_values": [],
                    "errors": problems.get(key.name, []),
                    "visible": True,
                },
            }
        )
    for extra, errors in problems.items():  # problems of settings no definition covers
        if extra not in keys.keys and errors:
            configs.append(
                {
                    "definition": None,
                    "value": {"name": extra, "value": props.get(extra),
                              "recommended_values": [], "errors": errors, "visible": True},
                }
            )  # fmt: skip
    count = sum(len(errors) for errors in problems.values())
    return {"name": name, "error_count": count, "groups": groups, "configs": configs}


ROUTES = [
    Route("/connector-plugins", guard(plugins), methods=["GET"]),
    Route("/connector-plugins/{plugin}/config", guard(plugin_config), methods=["GET"]),
    Route("/connector-plugins/{plugin}/config/validate", guard(validate), methods=["PUT"]),
]
