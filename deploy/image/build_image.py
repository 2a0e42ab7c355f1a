"""Builds the container images of the worker (``make image``): ``eos:latest`` with every
extra, ``eos:slim`` without Spark and without a JRE.

    python deploy/image/build_image.py [--variant latest|slim] [--tag TAG] [--rebuild]

No image can be pulled from a registry here, so the base is made from Debian packages:
``mmdebstrap`` writes a root file system of Debian bookworm with Python 3.11, a JRE for
Spark (not in slim) and tini (from the Debian sources the machine's apt uses),
``podman import`` makes it an image. ``deploy/image/Containerfile`` adds eos and its
dependencies, installed from wheels only: ``pip wheel`` puts eos and the versions this
project's ``.venv`` runs into the build context (from ``$PIP_CACHE_DIR``, i.e.
``.cache/pip``, when they are there).

Slow steps run once. Each variant's base is keyed by a hash of its recipe and kept as
``.cache/image/base-<variant>-<key>.tar`` and as the image ``localhost/eos-base-<variant>:<key>``;
the worker image by a hash of the base key, the variant's extras, the Containerfile, this
file, the pinned versions and every file of ``eos/``, ``services/``, ``metrics/`` and
``pyproject.toml`` and ``README.md``, tagged ``localhost/eos-build-<variant>:<key>``.
``eos:latest`` (``eos:slim``) is that image plus the labels of the source's git revision
(a layer-less step of a second). With nothing changed a build takes a second or two;
``--rebuild`` starts from scratch.

podman, runc and mmdebstrap are installed from Debian when missing (needs root). podman
runs with ``--runtime runc`` and lowered limits (``--ulimit nofile=1024:1024``): the
sandbox this project is developed in has no cgroup support for crun and cannot raise
limits; both are harmless elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from services.file_lock import file_lock

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "deploy" / "image"
CACHE = Path(os.environ.get("EOS_CACHE_DIR") or REPO / ".cache") / "image"
CONTAINERFILE = HERE / "Containerfile"
SUITE = "bookworm"


class Variant(NamedTuple):
    """An image of the worker: its Debian packages and eos's extras."""

    name: str
    packages: tuple[str, ...]
    extras: str
    tag: str


VARIANTS = {
    "latest": Variant(
        "latest",
        ("python3", "python3-venv", "openjdk-17-jre-headless", "tini", "ca-certificates"),
        "spark,delta,iceberg,librdkafka,formats,cdc",
        "eos:latest",
    ),
    # No Spark and no JRE: VerifiableSource, FileSource, PostgresCdcSource, the formats,
    # librdkafka and connectors installed with pip.
    "slim": Variant(
        "slim", ("python3", "python3-venv", "tini", "ca-certificates"),
        "librdkafka,formats,cdc", "eos:slim",
    ),
}  # fmt: skip
#: Documentation, manual pages and translations are left out of the base (~60 MB).
DPKG_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
)
#: openjdk's post-install script links its manual page: the directory must exist.
SETUP_HOOK = 'mkdir -p "$1/usr/share/man/man1"'
SOURCES = ("eos", "services", "metrics", "pyproject.toml", "README.md")
PODMAN_RUN_FLAGS = (
    "--runtime",
    "runc",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
)
TOOLS = {"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap"}
LABEL_KEY = "dev.eos.build.key"
REVISION = "org.opencontainers.image.revision"


class ImageError(RuntimeError):
    """The image could not be built; the message says which step failed and why."""


def log(message: str) -> None:
    print(f"[image] {message}", file=sys.stderr, flush=True)


def run(
    cmd: Sequence[str | Path], *, timeout: float = 60, env: Mapping[str, str] | None = None
) -> str:
    """Run ``cmd``; its stdout, or :class:`ImageError` with its output on failure."""
    args = [str(c) for c in cmd]
    done = subprocess.run(
        args, capture_output=True, text=True, check=False, timeout=timeout, env=env
    )
    if done.returncode != 0:
        output = done.stdout[-4000:] + done.stderr[-4000:]
        raise ImageError(f"{' '.join(args)} failed:\n{output}")
    return done.stdout


APT_LOCK = Path(tempfile.gettempdir()) / "eos-apt-get.lock"
"""Held around every apt-get run, here and in the test suite (``tests/debian.py``), which
installs packages from its parallel workers while this installs the container tools: a
second ``apt-get update`` fails at once on apt's own lock instead of waiting for it."""


def apt_lock() -> contextlib.AbstractContextManager[None]:
    """One apt-get at a time among eos's processes (:data:`APT_LOCK`)."""
    return file_lock(APT_LOCK)


def ensure_tools(tools: Iterable[str] = TOOLS) -> None:
    """Install the Debian packages of the missing ``tools`` (apt-get, as root, one
    apt-get at a time: :func:`apt_lock`)."""
    missing = [TOOLS[t] for t in tools if shutil.which(t) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise ImageError(f"{', '.join(missing)} missing: apt-get install {' '.join(missing)}")
    log(f"installing {' '.join(missing)} from Debian")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ("-o", "DPkg::Lock::Timeout=600")
    with apt_lock():
        run(["apt-get", *lock, "update", "-q"], env=env, timeout=900)
        run(["apt-get", *lock, "install", "-y", "-q", "--no-install-recommends", *missing],
            env=env, timeout=900)  # fmt: skip


def debian_sources(directory: Path = Path("/etc/apt/sources.list.d")) -> str:
    """The machine's apt sources of ``SUITE`` (deb822), for the base's packages: the
    stanzas of ``directory/*.sources`` whose suites are ``SUITE``'s."""
    stanzas = []
    for path in sorted(directory.glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1) for line in stanza.splitlines() if re.match(r"^\w[\w-]*:", line)
            )
            suites = fields.get("Suites", "").split()
            if "deb" in fields.get("Types", "").split() and any(
                s == SUITE or s.startswith(f"{SUITE}-") for s in suites
            ):
                stanzas.append(
                    "\n".join(f"{k}:{v}" for k, v in fields.items() if k != "Types")
                    + "\nTypes: deb"
                )
    if not stanzas:
        raise ImageError(f"no apt source of Debian {SUITE} in {directory}/*.sources")
    return "\n\n".join(stanzas) + "\n"


def digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def base_key(sources: str, variant: Variant) -> str:
    recipe = {
        "suite": SUITE, "packages": variant.packages, "dpkg": DPKG_OPTIONS, "hook": SETUP_HOOK,
    }  # fmt: skip
    return digest(json.dumps(recipe, sort_keys=True), sources)


def base_ref(sources: str, variant: Variant) -> str:
    return f"localhost/eos-base-{variant.name}:{base_key(sources, variant)}"


def image_exists(ref: str) -> bool:
    return subprocess.run(["podman", "image", "exists", ref], check=False).returncode == 0


def image_id(ref: str) -> str | None:
    if not image_exists(ref):
        return None
    return run(["podman", "image", "inspect", "--format", "{{.Id}}", ref]).strip()


def prune(keep: str) -> None:
    """Remove the images of ``keep``'s repository built for earlier keys: 1.3 GB each."""
    repository = keep.rsplit(":", 1)[0]
    listed = run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", repository])
    for ref in set(listed.split()) - {keep}:
        subprocess.run(["podman", "rmi", ref], capture_output=True, check=False)


def ensure_base(sources: str, variant: Variant) -> str:
    """The base image ``localhost/eos-base-<variant>:<key>``, made if missing."""
    ref = base_ref(sources, variant)
    if image_exists(ref):
        return ref
    packages = variant.packages
    tar = CACHE / f"base-{variant.name}-{base_key(sources, variant)}.tar"
    if not tar.exists():
        started = time.monotonic()
        log(f"building the base root file system (Debian {SUITE}: {', '.join(packages)})")
        ensure_tools(["mmdebstrap"])
        for old in CACHE.glob(f"base-{variant.name}-*.tar*"):
            old.unlink()
        list_file = CACHE / "debian.sources"
        list_file.write_text(sources)
        partial = tar.with_suffix(".partial")
        run(
            ["mmdebstrap", "--mode=root", "--variant=essential",
             f"--include={','.join(packages)}",
             *(f"--dpkgopt={o}" for o in DPKG_OPTIONS),
             "--aptopt=Apt::Install-Recommends \"false\"",
             f"--setup-hook={SETUP_HOOK}",
             "--format=tar", SUITE, partial, list_file],
            timeout=1200,
        )  # fmt: skip
        partial.rename(tar)
        log(f"base root file system in {time.monotonic() - started:.0f} s: {tar}")
    run(["podman", "import", "--quiet", tar, ref], timeout=600)
    return ref


def pinned_versions() -> str:
    """``name==version`` of every package of the running environment but eos: the
    versions the project's tests run with, as pip constraints."""
    pins = {
        dist.metadata["Name"].lower().replace("_", "-"): dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"] and dist.metadata["Name"].lower() != "eos"
    }
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def source_files() -> list[Path]:
    found = []
    for name in SOURCES:
        path = REPO / name
        if path.is_file():
            found.append(path)
            continue
        for file in sorted(path.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts and file.suffix != ".pyc":
                found.append(file)
    return found


def app_key(base: str, constraints: str, variant: Variant) -> str:
    files = [f"{p.relative_to(REPO)}\0".encode() + p.read_bytes() for p in source_files()]
    builder = [CONTAINERFILE.read_bytes(), Path(__file__).read_bytes()]
    return digest(base, constraints, variant.extras, *builder, *files)


def app_ref(base: str, constraints: str, variant: Variant) -> str:
    return f"localhost/eos-build-{variant.name}:{app_key(base, constraints, variant)}"


def version() -> str:
    text = (REPO / "eos" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    if not found:
        raise ImageError("no __version__ in eos/__init__.py")
    return found[1]


def ensure_app(base: str, constraints: str, variant: Variant) -> str:
    """The worker image ``localhost/eos-build-<variant>:<key>``, built if missing."""
    ref = app_ref(base, constraints, variant)
    if image_exists(ref):
        return ref
    started = time.monotonic()
    context = CACHE / "context"
    shutil.rmtree(context, ignore_errors=True)
    wheels = context / "wheels"
    wheels.mkdir(parents=True)
    (wheels / "constraints.txt").write_text(constraints)
    log("collecting the wheels of eos and its dependencies")
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
         "-w", wheels, "-c", wheels / "constraints.txt", f"{REPO}[{variant.extras}]"],
        timeout=1200,
    )  # fmt: skip
    log(f"building the worker image ({variant.name})")
    run(
        ["podman", "build", *PODMAN_RUN_FLAGS, "--format", "docker", "--layers=false",
         "--build-arg", f"BASE={base}", "--build-arg", f"VERSION={version()}",
         "--build-arg", f"EXTRAS={variant.extras}", "--build-arg", f"VARIANT={variant.name}",
         "--label", f"{LABEL_KEY}={ref.rsplit(':', 1)[1]}", "-f", CONTAINERFILE,
         "-t", ref, context],
        timeout=1800,
    )  # fmt: skip
    shutil.rmtree(context, ignore_errors=True)
    log(f"worker image in {time.monotonic() - started:.0f} s: {ref}")
    return ref


def git_revision() -> str:
    """The commit of the sources, ``-dirty`` if the image's inputs differ from it."""
    git = ["git", "-C", str(REPO)]
    try:
        head = run([*git, "rev-parse", "HEAD"]).strip()
        changed = run([*git, "status", "--porcelain", "--", *SOURCES, str(HERE)]).strip()
    except (OSError, ImageError):
        return "unknown"
    return f"{head}-dirty" if changed else head


def labels(ref: str) -> dict[str, str]:
    out = run(["podman", "image", "inspect", "--format", "{{json .Labels}}", ref])
    found: dict[str, str] = json.loads(out) or {}
    return found


def tag_latest(app: str, tag: str) -> None:
    """``tag`` = ``app`` plus the git revision label, unless it is that already."""
    revision = git_revision()
    if image_exists(tag):
        current = labels(tag)
        if (
            current.get(LABEL_KEY) == labels(app).get(LABEL_KEY)
            and current.get(REVISION) == revision
        ):
            return
    context = CACHE / "label"
    context.mkdir(parents=True, exist_ok=True)
    (context / "Containerfile").write_text(f"FROM {app}\nLABEL {REVISION}={json.dumps(revision)}\n")
    run(
        ["podman", "build", *PODMAN_RUN_FLAGS, "--format", "docker", "-t", tag, context],
        timeout=300,
    )


def image_size(ref: str) -> int:
    return int(run(["podman", "image", "inspect", "--format", "{{.Size}}", ref]).strip())


def build_lock() -> contextlib.AbstractContextManager[None]:
    """One build at a time (``make image`` and a test session may both ask)."""
    return file_lock(CACHE / ".lock")


def build(tag: str | None = None, *, variant: str = "latest", rebuild: bool = False) -> str:
    """Build (or find) the image of ``variant`` and tag it ``tag`` (the variant's own tag
    by default); returns the tag."""
    chosen = VARIANTS[variant]
    tag = tag or chosen.tag
    ensure_tools()
    with build_lock():
        sources = debian_sources()
        if rebuild:
            for old in CACHE.glob(f"base-{chosen.name}-*.tar"):
                old.unlink()
            for ref in (base_ref(sources, chosen), tag):
                subprocess.run(["podman", "rmi", "--force", ref], capture_output=True, check=False)
        base = ensure_base(sources, chosen)
        constraints = pinned_versions()
        if rebuild:
            subprocess.run(
                ["podman", "rmi", "--force", app_ref(base, constraints, chosen)],
                capture_output=True, check=False,
            )  # fmt: skip
        app = ensure_app(base, constraints, chosen)
        previous = image_id(tag)
        tag_latest(app, tag)
        if previous and previous != image_id(tag):  # untagged now: it holds its parents
            subprocess.run(["podman", "rmi", previous], capture_output=True, check=False)
        prune(app)
        prune(base)
    return tag


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="latest")
    parser.add_argument("--tag", help="the image's tag (default: eos:latest, eos:slim)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the base and the image")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        tag = build(args.tag, variant=args.variant, rebuild=args.rebuild)
    except (ImageError, subprocess.TimeoutExpired) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = image_size(tag)
    print(f"{tag}: {size / 1e6:.0f} MB, version {version()}, revision {labels(tag).get(REVISION)}"
          f" ({time.monotonic() - started:.0f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
