"""``make test-pythons``: eos on each other Python it supports that this machine has.

For every version of :data:`VERSIONS` other than the one running this script, the
interpreter is looked for as ``python3.X`` on the PATH, then under pyenv
(``$PYENV_ROOT/versions/3.X.*``). A venv per version is built under
``.cache/pythons/3.X`` with eos and every extra (``.[dev]``; pip's cache is shared, so a
wheel is downloaded once) and rebuilt only when ``pyproject.toml`` changes. In it run the
unit suite and one integration test per subsystem: the broker (a worker in the process),
Spark (files through a worker), the schema registry (each format). A version the machine
does not have is listed as such; one that fails its install or a test fails the run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VERSIONS = ("3.11", "3.12", "3.13")
"""The versions eos supports (``requires-python``; README, "Python versions")."""
SUBSYSTEMS = {
    "broker": "tests/integration/test_record_path_worker.py::"
    "test_a_poison_record_is_a_dead_letter_or_fails_the_task_naming_it",
    "spark": "tests/integration/test_spark_worker.py::"
    "test_worker_delivers_files_exactly_once_and_picks_up_new_ones",
    "registry": "tests/integration/test_converters_latest.py",
}


def find(version: str) -> Path | None:
    """An interpreter of ``version`` that runs, or None."""
    candidates: list[Path] = []
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(Path(on_path))
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += sorted((root / "versions").glob(f"{version}.*/bin/python{version}"), reverse=True)
    for candidate in candidates:
        done = subprocess.run(
            [str(candidate), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode == 0 and done.stdout.strip() == version:
            return candidate
    return None


def venv(version: str, python: Path, cache: Path) -> Path:
    """The venv of ``version`` with eos installed (built again if pyproject.toml changed)."""
    home = cache / "pythons" / version
    stamp = home / "installed"
    key = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == key:
        return home
    shutil.rmtree(home, ignore_errors=True)
    subprocess.run([str(python), "-m", "venv", str(home)], check=True)
    pip = [str(home / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True, cwd=REPO)
    subprocess.run([*pip, "-e", ".[dev]"], check=True, cwd=REPO)
    stamp.write_text(key)
    return home


def run(version: str, home: Path) -> list[tuple[str, str, float]]:
    """Each suite's outcome in ``home``'s venv: (what, passed or failed, seconds)."""
    pytest = [str(home / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
              "--no-cov", "-n", os.environ.get("TEST_WORKERS", "2")]  # fmt: skip
    results = []
    for what, target in (("unit", "tests/unit"), *SUBSYSTEMS.items()):
        began = time.monotonic()
        print(f"== Python {version}: {what}", flush=True)
        done = subprocess.run([*pytest, target], cwd=REPO, check=False)
        outcome = "passed" if done.returncode == 0 else f"failed ({done.returncode})"
        results.append((what, outcome, time.monotonic() - began))
    return results


def main() -> int:
    cache = Path(os.environ.get("EOS_CACHE_DIR") or REPO / ".cache")
    running = "{}.{}".format(*sys.version_info[:2])
    rows: list[tuple[str, str, str, float]] = []
    for version in VERSIONS:
        if version == running:
            continue
        python = find(version)
        if python is None:
            rows.append((version, "-", "not on this machine", 0.0))
            continue
        began = time.monotonic()
        try:
            home = venv(version, python, cache)
        except subprocess.CalledProcessError as exc:
            rows.append((version, "install", f"failed: {exc}", time.monotonic() - began))
            continue
        rows.append((version, "install", "passed", time.monotonic() - began))
        rows += [(version, *result) for result in run(version, home)]
    print("\n| Python | what | outcome | seconds |\n|---|---|---|---|")
    for version, what, outcome, seconds in rows:
        print(f"| {version} | {what} | {outcome} | {seconds:.0f} |")
    return 1 if any(outcome.startswith("failed") for _, _, outcome, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
