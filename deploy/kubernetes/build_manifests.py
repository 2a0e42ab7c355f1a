"""Keeps the Helm chart's copies and the plain manifests it renders up to date
(``make kubernetes``).

    python deploy/kubernetes/build_manifests.py          # copy, render, write
    python deploy/kubernetes/build_manifests.py --check  # exit 1 if anything is stale

A chart reads only files inside it, so ``eos/files/`` holds copies of
``deploy/prometheus/alerts.yml`` (the PrometheusRule) and of the Grafana dashboards
(their ConfigMaps). ``manifests/eos.yaml`` is ``helm template eos eos`` with the chart's
default values, for those who apply plain manifests (``kubectl apply -f``).

helm itself is built from source once (``go install helm.sh/helm/v3/cmd/helm@HELM``,
about 4 minutes on 2 cores) into ``.cache/helm/<version>/``, with Go's module and build
caches under ``.cache/go/``: a second build, or a second checkout sharing ``.cache``,
finds it there.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "deploy" / "kubernetes"
CHART = HERE / "eos"
MANIFESTS = HERE / "manifests" / "eos.yaml"
CACHE = Path(os.environ.get("EOS_CACHE_DIR") or REPO / ".cache")
HELM_VERSION = "v3.22.0"
HELM = CACHE / "helm" / HELM_VERSION / "helm"
RELEASE = "eos"
#: chart file → the file of the project it copies
COPIES = {
    CHART / "files" / "alerts.yml": REPO / "deploy" / "prometheus" / "alerts.yml",
    CHART / "files" / "connect-compat.yml": REPO / "deploy" / "prometheus" / "connect-compat.yml",
    **{
        CHART / "files" / "dashboards" / source.name: source
        for source in sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json"))
    },
}


class HelmError(RuntimeError):
    """helm could not be built or failed; the message has its output."""


def ensure_helm() -> Path:
    """The helm binary, built with ``go install`` if it is not in the cache yet (one build
    at a time: a second caller waits for the first and finds its binary)."""
    if HELM.exists():
        return HELM
    HELM.parent.mkdir(parents=True, exist_ok=True)
    with (HELM.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not HELM.exists():
            _build_helm()
    return HELM


def _build_helm() -> None:
    go = shutil.which("go")
    if go is None:
        raise HelmError(f"helm {HELM_VERSION} is built with Go, which is missing: install Go")
    started = time.monotonic()
    print(f"[helm] building helm {HELM_VERSION} with go install (once, ~4 min)", file=sys.stderr)
    gocache = CACHE / "go"
    env = {
        **os.environ,
        "GOPATH": str(gocache / "path"),
        "GOMODCACHE": str(gocache / "mod"),
        "GOCACHE": str(gocache / "build"),
        "GOBIN": str(HELM.parent / "bin"),
        "GOFLAGS": "-trimpath",
        "CGO_ENABLED": "0",
    }
    done = subprocess.run(
        [go, "install", f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"],
        env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    built = HELM.parent / "bin" / "helm"
    if done.returncode != 0 or not built.exists():
        raise HelmError(f"go install helm failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    built.replace(HELM)  # whole or not at all: a reader never finds half a binary
    print(f"[helm] built in {time.monotonic() - started:.0f} s: {HELM}", file=sys.stderr)


def helm(*args: str | Path) -> str:
    """Run helm; its stdout, or :class:`HelmError` with its output."""
    done = subprocess.run(
        [str(ensure_helm()), *map(str, args)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise HelmError(f"helm {' '.join(map(str, args))} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def render(*values: Path) -> str:
    """``helm template`` of the chart with its defaults and the given values files."""
    return helm("template", RELEASE, CHART, *(arg for v in values for arg in ("-f", v)))


def stale() -> list[Path]:
    """The chart's copies and the manifests that differ from what they should be."""
    found = [copy for copy, source in COPIES.items() if _read(copy) != source.read_bytes()]
    copies = CHART / "files" / "dashboards"
    found += [p for p in sorted(copies.glob("*.json")) if p not in COPIES]
    if found:
        return found  # the manifests follow from the copies
    return [] if _read(MANIFESTS) == render().encode() else [MANIFESTS]


def write() -> None:
    copies = CHART / "files" / "dashboards"
    for path in copies.glob("*.json"):
        if path not in COPIES:
            path.unlink()
    for copy, source in COPIES.items():
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
    MANIFESTS.parent.mkdir(parents=True, exist_ok=True)
    MANIFESTS.write_text(render())
    print(f"wrote {len(COPIES)} chart files and {MANIFESTS.relative_to(REPO)}")


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def main(argv: Sequence[str]) -> int:
    try:
        if "--check" not in argv:
            write()
            return 0
        found = stale()
    except HelmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if found:
        names = ", ".join(str(p.relative_to(REPO)) for p in found)
        print(f"stale: {names}; run make kubernetes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
