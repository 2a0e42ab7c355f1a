"""Debian packages the suite needs, installed when missing (as root, with apt-get), as
tests/prometheus_server.py does for Prometheus: a test that needs a tool never skips."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

_TIMEOUT = 900.0


class DebianPackageError(RuntimeError):
    """A package could not be installed; the message has apt-get's output."""


def ensure_commands(commands: Mapping[str, str]) -> None:
    """Install the package of every command of ``commands`` (command → package) that is
    not on the PATH."""
    missing = sorted(
        {package for command, package in commands.items() if not shutil.which(command)}
    )
    if not missing:
        return
    if os.geteuid() != 0:
        raise DebianPackageError(f"missing: run `apt-get install {' '.join(missing)}` as root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    for cmd in (
        ["apt-get", *lock, "update", "-q"],
        ["apt-get", *lock, "install", "-y", "-q", "--no-install-recommends", *missing],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=_TIMEOUT)
        if done.returncode != 0:
            raise DebianPackageError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
