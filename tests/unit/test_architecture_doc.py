"""docs/architecture.md cannot drift: every repository path it mentions exists, every
relative link points at a file, and every backticked dotted name that names code resolves.

A dotted name names code when it starts with ``eos.``, ``services.`` or ``metrics.`` (a
module path, then a name in it, then a member of that class), with a module's or
package's short name from ``eos/`` (``record_path.RecordPath.prepare``), or with a class
name (``SourceTaskRunner._send``). Setting names (``errors.tolerance``) are not code.
Names are looked up in the source (no imports): top-level definitions and imports of a
module, and for a class the names its body defines or its methods assign on ``self``."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from eos.config.connector import CONNECTOR_CONFIG
from eos.config.worker import WORKER_CONFIG

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
ROOTS = ("eos", "services", "metrics")

PATH = re.compile(r"\b(?:eos|services|metrics|tests|bench|deploy|docs)/[\w./-]*\w/?")
LINK = re.compile(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)")
TICKS = re.compile(r"`([^`\s]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


class Index:
    """Module names → their top-level names; classes → their members."""

    def __init__(self) -> None:
        self.modules: dict[str, set[str]] = {}
        self.members: dict[tuple[str, str], set[str]] = {}
        self.by_stem: dict[str, list[str]] = defaultdict(list)
        self.by_class: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for root in ROOTS:
            for path in sorted((REPO / root).rglob("*.py")):
                parts = list(path.relative_to(REPO).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                module = ".".join(parts)
                self._read(module, ast.parse(path.read_text()))
                if module.startswith("eos."):
                    self.by_stem[parts[-1]].append(module)

    def _read(self, module: str, tree: ast.Module) -> None:
        names: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.members[module, node.name] = _class_members(node)
                self.by_class[node.name].append((module, node.name))
            names |= _defined(node)
        self.modules[module] = names

    def resolves(self, dotted: str) -> bool:
        parts = dotted.split(".")
        if parts[0] in ROOTS:
            for cut in range(len(parts), 0, -1):
                module = ".".join(parts[:cut])
                if module in self.modules:
                    return self._in_module(module, parts[cut:])
            return False
        if parts[0] in self.by_stem:
            return any(self._in_module(m, parts[1:]) for m in self.by_stem[parts[0]])
        return any(self._in_class(c, parts[1:]) for c in self.by_class[parts[0]])

    def _in_module(self, module: str, rest: list[str]) -> bool:
        if not rest:
            return True
        if f"{module}.{rest[0]}" in self.modules:  # a submodule
            return self._in_module(f"{module}.{rest[0]}", rest[1:])
        if rest[0] not in self.modules[module]:
            return False
        return len(rest) == 1 or self._in_class((module, rest[0]), rest[1:])

    def _in_class(self, cls: tuple[str, str], rest: list[str]) -> bool:
        members = self.members.get(cls)
        return members is not None and len(rest) == 1 and rest[0] in members


def _defined(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.ImportFrom | ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.If):  # if TYPE_CHECKING: imports
        return set().union(*(_defined(n) for n in node.body + node.orelse))
    return set()


def _class_members(cls: ast.ClassDef) -> set[str]:
    names = set().union(*(_defined(n) for n in cls.body))
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                names |= {t.attr} if t.value.id == "self" else set()
    return names


def _settings() -> set[str]:
    return set(CONNECTOR_CONFIG.keys) | set(WORKER_CONFIG.keys)


def test_every_path_exists() -> None:
    text = DOC.read_text()
    missing = sorted({p for p in PATH.findall(text) if not (REPO / p).exists()})
    assert missing == []


def test_every_relative_link_exists() -> None:
    text = DOC.read_text()
    missing = sorted({link for link in LINK.findall(text) if not (DOC.parent / link).exists()})
    assert missing == []


def test_every_dotted_name_of_code_resolves() -> None:
    index, settings = Index(), _settings()
    names = {t.removesuffix("()") for t in TICKS.findall(DOC.read_text())}
    code = [
        n
        for n in sorted(names)
        if DOTTED.fullmatch(n)
        and n not in settings
        and (n.split(".")[0] in (*ROOTS, *index.by_stem, *index.by_class))
    ]
    assert len(code) > 50  # the doc names code, and the filter still finds it
    assert [n for n in code if not index.resolves(n)] == []


def test_the_check_catches_a_renamed_name() -> None:
    index = Index()
    assert index.resolves("source_task.SourceTaskRunner.request_stop")
    assert index.resolves("eos.runtime.task.source_task.InFlight.offsets")  # a dataclass field
    assert index.resolves("eos.runtime.task.producers.base.where")
    assert index.resolves("SourceTaskRunner._send")
    assert index.resolves("Worker.stopped")  # assigned on self
    assert not index.resolves("source_task.SourceTaskRunner.no_such_step")
    assert not index.resolves("eos.runtime.no_such_module.thing")
    assert not index.resolves("SourceTaskRunner.no_such_method")
