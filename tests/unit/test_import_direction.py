"""The layering of the code, enforced: services → eos, metrics; metrics → eos.api, the
runtime's observer port and the state enum at most; eos imports neither services, metrics
nor pyspark; bundled connectors import only eos.api from eos. Inside eos: the connector
API, the settings and the Kafka layer never reach up into storage or the runtime, storage
never reaches into the runtime or the connector API, and the settings never import the
connector API (validation against a plugin is the runtime's job). The transforms build on
the connector API and the columns (and the runtime's plugin loader); so do the
converters. The columns (``eos/columns``) build on the connector API alone. The
runtime's two rooms: the cluster's (``eos/runtime/cluster``) never reaches into a task's,
and a task's reaches into the cluster's only for what its start-up gate asks of the
leader. Imports under
``if TYPE_CHECKING:`` count too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def modules(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def offenders(folder: str, allowed: str) -> list[str]:
    found = []
    for path in modules(folder):
        for name in imports(path):
            top = name.split(".")[0]
            if top in ("eos", "services", "metrics", "pyspark") and not _allowed(name, allowed):
                found.append(f"{path.relative_to(REPO)} imports {name}")
    return found


def _allowed(name: str, allowed: str) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed.split())


@pytest.mark.parametrize(
    ("folder", "allowed"),
    [
        ("eos", "eos"),
        ("metrics", "metrics eos.api eos.runtime.observer eos.state"),
        ("services/connectors", "eos.api services.connectors pyspark"),
        ("eos/api", "eos.api eos.errors eos.state eos.config.definition"),
        ("eos/config", "eos.config eos.errors eos.kafka"),
        ("eos/kafka", "eos.kafka eos.errors eos.config"),
        ("eos/storage", "eos.storage eos.kafka eos.errors eos.state eos.config"),
        (
            "eos/transforms",
            "eos.transforms eos.columns eos.api eos.errors eos.config.definition"
            " eos.runtime.plugins",
        ),
        ("eos/columns", "eos.columns eos.api eos.errors"),
        (
            "eos/converters",
            "eos.converters eos.columns eos.api eos.errors eos.runtime.plugins"
            " eos.transforms.value_text",  # Connect's Values text: header converter, transforms
        ),
        (
            "eos/runtime/cluster",
            "eos.runtime.cluster eos.runtime.actor eos.runtime.clock eos.runtime.observer"
            " eos.runtime.plugins eos.config eos.errors eos.kafka eos.state eos.storage",
        ),
        (
            "eos/runtime/task",
            "eos.runtime.task eos.runtime.clock eos.runtime.observer eos.runtime.resources"
            " eos.runtime.cluster.coordinator.leader_requests"
            " eos.runtime.cluster.coordinator.cluster_state"
            " eos.api eos.columns eos.config eos.converters eos.errors eos.kafka eos.state"
            " eos.storage"
            " eos.transforms",
        ),
    ],
)
def test_layers(folder: str, allowed: str) -> None:
    assert modules(folder), folder
    assert offenders(folder, allowed) == []


def test_the_rest_api_asks_a_worker_through_its_interface() -> None:
    """REST handlers depend on :class:`eos.runtime.worker_api.WorkerApi`, never on the
    concrete worker (only ``services/worker_service.py`` builds one)."""
    concrete = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in modules("services/rest")
        for name in imports(path)
        if name == "eos.runtime.worker"
    ]
    assert concrete == []
