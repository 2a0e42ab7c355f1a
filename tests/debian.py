"""Installing the Debian packages a test server needs (PostgreSQL, MariaDB) when the
machine lacks them: ``apt-get update`` once per process, then ``apt-get install -y
--no-install-recommends``, as root. Debian's ``policy-rc.d`` keeps the packages'
system services from starting (the tests start their own servers on free ports); if
that file is missing, one that says "don't start services" is put in place for the
install and removed afterwards."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

_POLICY_RC = Path("/usr/sbin/policy-rc.d")
_INSTALL_TIMEOUT = 900.0
_lock = threading.Lock()
_updated = False


class InstallError(RuntimeError):
    """A package could not be installed; the message says what to run by hand."""


def ensure_installed(binaries: Sequence[Path], packages: Sequence[str]) -> None:
    """Install ``packages`` unless every path of ``binaries`` exists."""
    global _updated
    if all(b.exists() for b in binaries):
        return
    wanted = " ".join(packages)
    if os.geteuid() != 0:
        raise InstallError(f"{binaries[0]} is missing and installing it needs root: "
                           f"run `apt-get install {wanted}` and try again")  # fmt: skip
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with _lock, _services_kept_down():
        commands = [] if _updated else [["apt-get", "update"]]
        commands.append(["apt-get", "install", "-y", "--no-install-recommends", *packages])
        for cmd in commands:
            done = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT
            )
            if done.returncode != 0:
                raise InstallError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
        _updated = True
    missing = [str(b) for b in binaries if not b.exists()]
    if missing:
        raise InstallError(f"installed {wanted} but {', '.join(missing)} is missing")


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
