"""The image builder's pure parts: what its cache keys depend on, which apt sources the
base is made from."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import pytest

from tests import debian
from tests.container import builder
from tests.scripts import REPO

BUILDER = REPO / "deploy/image/build_image.py"
DEBIAN = """Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""
OTHER = """Types: deb
URIs: https://vendor.example/apt
Suites: nodistro
Components: main
"""


def test_image_key_changes_with_base_versions_and_sources() -> None:
    build = builder()
    constraints = build.pinned_versions()
    latest, slim = build.VARIANTS["latest"], build.VARIANTS["slim"]
    key = build.app_key("base", constraints, latest)
    assert key == build.app_key("base", constraints, latest)
    assert key != build.app_key("base", constraints + "extra==1\n", latest)
    assert key != build.app_key("other-base", constraints, latest)
    assert key != build.app_key("base", constraints, slim)  # other extras
    names = {p.name for p in build.source_files()}
    assert {"worker_service.py", "pyproject.toml", "README.md"} <= names
    assert not any(p.suffix == ".pyc" for p in build.source_files())


def test_pinned_versions_are_the_environments_without_eos() -> None:
    pins = builder().pinned_versions().splitlines()
    assert any(line.startswith("aiokafka==") for line in pins)
    assert not any(line.startswith("eos==") for line in pins)


def test_base_comes_from_the_machines_debian_sources(tmp_path: Path) -> None:
    (tmp_path / "debian.sources").write_text(DEBIAN)
    (tmp_path / "vendor.sources").write_text(OTHER)
    (tmp_path / "old.sources.disabled").write_text(DEBIAN.replace("bookworm", "bullseye"))
    build = builder()
    sources = build.debian_sources(tmp_path)
    assert sources.count("Types: deb") == 2
    assert "vendor.example" not in sources
    latest, slim = build.VARIANTS["latest"], build.VARIANTS["slim"]
    assert build.base_key(sources, latest) != build.base_key(
        sources.replace("main", "main contrib"), latest
    )
    assert build.base_key(sources, latest) != build.base_key(sources, slim)  # no JRE
    assert "openjdk-17-jre-headless" not in slim.packages
    assert not {"spark", "delta", "iceberg"} & set(slim.extras.split(","))


def test_no_debian_source_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "vendor.sources").write_text(OTHER)
    build = builder()
    with pytest.raises(build.ImageError, match="no apt source of Debian bookworm"):
        build.debian_sources(tmp_path)


def test_the_container_tools_install_and_the_suite_s_installs_take_turns() -> None:
    """While the image builder holds its apt lock (installing podman beside the first tests),
    the suite's own install (tests/debian.py) cannot start its apt-get: the same lock."""
    script = (
        f"import runpy, sys; lock = runpy.run_path({str(BUILDER)!r})['apt_lock']\n"
        "with lock():\n    print('held', flush=True); sys.stdin.read()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdin is not None
        assert holder.stdout.readline() == "held\n"
        with debian._APT_LOCK.open("a") as handle, pytest.raises(BlockingIOError):
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
