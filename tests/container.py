"""The worker's container image for tests: built (or found: the build caches itself) by
``deploy/image/build_image.py``, which installs podman, runc and mmdebstrap from Debian
when they are missing; containers run with podman as this machine needs (runc, lowered
limits) and with the host's network, so they reach the session's broker on loopback.

Use the ``eos_image`` and ``eos_slim_image`` fixtures (import them into a test module);
``podman_run(image, ...)`` gives the command line of a container.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from types import ModuleType
from typing import Any, cast

import pytest

from tests.scripts import load_script

TAG = "localhost/eos:latest"
SLIM_TAG = "localhost/eos:slim"


def builder() -> ModuleType:
    """``deploy/image/build_image.py`` as a module."""
    return load_script("deploy/image/build_image.py")


def podman_run(image: str, *args: str, name: str = "", options: tuple[str, ...] = ()) -> list[str]:
    """``podman run`` of ``image`` with ``args``: removed when it exits, the host's network,
    no health-check timer (podman's needs systemd; the definition is tested, not run)."""
    flags = cast(tuple[str, ...], builder().PODMAN_RUN_FLAGS)
    return [
        "podman", "run", "--rm", *flags, "--network", "host", "--no-healthcheck",
        "--name", name or f"eos-test-{uuid.uuid4().hex[:8]}", *options, image, *args,
    ]  # fmt: skip


def inspect(image: str) -> dict[str, Any]:
    out = subprocess.run(
        ["podman", "image", "inspect", image], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, Any] = json.loads(out)[0]
    return found


def stop(name: str, timeout: int = 30) -> None:
    subprocess.run(["podman", "stop", "-t", str(timeout), name], capture_output=True, check=False)


@pytest.fixture(scope="session")
def eos_image() -> str:
    """``localhost/eos:latest``, built from this checkout (minutes cold, a second warm)."""
    return cast(str, builder().build(TAG))


@pytest.fixture(scope="session")
def eos_slim_image() -> str:
    """``localhost/eos:slim`` (no Spark, no JRE), built from this checkout."""
    return cast(str, builder().build(SLIM_TAG, variant="slim"))
