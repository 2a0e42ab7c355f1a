"""Debian packages the suite needs, installed when the machine lacks them (as root, with
apt-get): a test that needs a tool or a server never skips.

``apt-get update`` runs once per process, then ``apt-get install -y
--no-install-recommends``. Debian's ``policy-rc.d`` keeps the packages' system services
from starting (the tests start their own servers on free ports); if that file is
missing, one that says "don't start services" is put in place for the install and
removed afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from services.file_lock import file_lock
from tests.scripts import load_script

_POLICY_RC = Path("/usr/sbin/policy-rc.d")
_APT_LOCK: Path = load_script("deploy/image/build_image.py").APT_LOCK
"""Held around every install: the suite's parallel workers take turns, with each other and
with the container tools' install (``deploy/image/build_image.py``, started by
``tests/prebuild.py`` beside the first tests): apt-get's own locks would fail the second
``apt-get update``, and each worker's ``policy-rc.d`` would be removed under the other's
install."""
_INSTALL_TIMEOUT = 900.0
_lock = threading.Lock()
_updated = False


class InstallError(RuntimeError):
    """A package could not be installed; the message says what to run by hand."""


def ensure_installed(binaries: Sequence[Path], packages: Sequence[str]) -> None:
    """Install ``packages`` unless every path of ``binaries`` exists."""
    if all(b.exists() for b in binaries):
        return
    _install(packages, f"{binaries[0]} is missing")
    missing = [str(b) for b in binaries if not b.exists()]
    if missing:
        raise InstallError(f"installed {' '.join(packages)} but {', '.join(missing)} is missing")


def ensure_commands(commands: Mapping[str, str]) -> None:
    """Install the package of every command of ``commands`` (command → package) that is
    not on the PATH."""
    missing = sorted(
        {package for command, package in commands.items() if not shutil.which(command)}
    )
    if missing:
        _install(missing, f"{', '.join(c for c in commands if not shutil.which(c))} missing")


def _install(packages: Sequence[str], why: str) -> None:
    global _updated
    wanted = " ".join(packages)
    if os.geteuid() != 0:
        raise InstallError(
            f"{why} and installing it needs root: run `apt-get install {wanted}` and try again"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    with _lock, file_lock(_APT_LOCK), _services_kept_down():
        commands = [] if _updated else [["apt-get", *lock, "update", "-q"]]
        commands.append(
            ["apt-get", *lock, "install", "-y", "-q", "--no-install-recommends", *packages]
        )
        for cmd in commands:
            done = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT
            )
            if done.returncode != 0:
                raise InstallError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
        _updated = True


@contextlib.contextmanager
def _services_kept_down() -> Iterator[None]:
    if _POLICY_RC.exists():
        yield
        return
    _POLICY_RC.write_text("#!/bin/sh\nexit 101\n")
    _POLICY_RC.chmod(0o755)
    try:
        yield
    finally:
        _POLICY_RC.unlink(missing_ok=True)
