"""The project's scripts under deploy/ (they are run as files, not imported as packages)
loaded as modules for the tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent


def load_script(relative: str) -> ModuleType:
    """``deploy/grafana/build_dashboards.py`` etc. (relative to the repository) as a module."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
