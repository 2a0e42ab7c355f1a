"""Screenshots of what a person sees in Prometheus's own web UI while eos runs: the alert
rules page, and one graph per dashboard row (the row's first time-series panel, every
query of it on one graph). They illustrate docs/monitoring.md.

    .venv/bin/python -m tests.screenshots [--seconds 180] [--out docs/screenshots]

The metrics come from a real run: :class:`tests.metrics_demo.ScriptedWorkload` reports
through eos's :class:`metrics.PrometheusObserver` (tasks committing and aborting, one
failing, a producer fenced, a cluster rebalancing), a real Prometheus
(tests/prometheus_server.py) scrapes it every second with deploy/prometheus/alerts.yml
loaded, and headless Chromium (Debian's ``chromium``, installed when missing) loads
Prometheus's pages. The PNGs are reduced to a small palette to stay small.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from tests.debian import ensure_commands
from tests.metrics_demo import DASHBOARDS, scraped_workload, substitute
from tests.prometheus_server import REPO

OUT = REPO / "docs" / "screenshots"
WINDOW = (1200, 1080)
COLORS = 48


@dataclass(frozen=True)
class Shot:
    """One page to photograph: ``name``.png of ``path`` on the Prometheus server."""

    name: str
    title: str
    path: str


def row_panels(dashboard: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(row title, first time-series panel of the row)`` for every row of a dashboard."""
    found: list[tuple[str, dict[str, Any]]] = []
    row = ""
    for panel in json.loads(dashboard.read_text())["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
        elif panel["type"] == "timeseries" and not any(r == row for r, _ in found):
            found.append((row, panel))
    return found


def one_expression(panel: dict[str, Any]) -> str:
    """Every query of ``panel`` as one PromQL expression: with several queries, each
    query's series get a ``series`` label with its legend (templates such as
    ``{{task}}`` left out: those labels stay on the series)."""
    targets = panel["targets"]
    if len(targets) == 1:
        return substitute(targets[0]["expr"])
    parts = []
    for target in targets:
        legend = re.sub(r"\{\{\s*\w+\s*\}\}", "", target.get("legendFormat", "")).strip()
        parts.append(f'label_replace({substitute(target["expr"])}, "series", "{legend}", "", "")')
    return " or ".join(parts)


def stacked(panel: dict[str, Any]) -> bool:
    custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})
    return bool(custom.get("stacking", {}).get("mode") == "normal")


def graph_path(expr: str, minutes: int, *, stack: bool = False) -> str:
    """Prometheus's classic graph page (the one Debian's package serves) of ``expr``."""
    query = {
        "g0.expr": expr,
        "g0.tab": "0",
        "g0.stacked": "1" if stack else "0",
        "g0.show_exemplars": "0",
        "g0.range_input": f"{minutes}m",
    }
    return "/classic/graph?" + urllib.parse.urlencode(query)


def shots(minutes: int) -> list[Shot]:
    found = [Shot("alerts", "Alert rules (deploy/prometheus/alerts.yml)", "/classic/alerts")]
    for dashboard in sorted(DASHBOARDS.glob("*.json")):
        for row, panel in row_panels(dashboard):
            slug = re.sub(r"[^a-z0-9]+", "-", f"{dashboard.stem}-{row}".lower()).strip("-")
            title = f"{dashboard.stem} / {row}: {panel['title']}"
            path = graph_path(one_expression(panel), minutes, stack=stacked(panel))
            found.append(Shot(slug, title, path))
    return found


def screenshot(url: str, out: Path) -> None:
    """Headless Chromium's picture of ``url``, reduced to a small palette."""
    ensure_commands({"chromium": "chromium"})
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             "--virtual-time-budget=8000", f"--screenshot={out}", url],
            capture_output=True, timeout=120, check=True,
        )  # fmt: skip
    from PIL import Image, ImageOps

    with Image.open(out) as image:
        rgb = image.convert("RGB")
        content = ImageOps.invert(rgb).getbbox()  # the page without its blank bottom
        if content:
            rgb = rgb.crop((0, 0, rgb.width, min(rgb.height, content[3] + 16)))
        small = rgb.quantize(colors=COLORS, method=Image.Quantize.MEDIANCUT)
        small.save(out, optimize=True)


async def _main(seconds: float, out: Path) -> None:
    async with scraped_workload() as prom:
        started = time.monotonic()
        await anyio.sleep(seconds)
        minutes = max(1, round((time.monotonic() - started) / 60))
        for shot in shots(minutes):
            path = out / f"{shot.name}.png"
            await anyio.to_thread.run_sync(screenshot, prom.url + shot.path, path)
            print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    anyio.run(_main, args.seconds, args.out)


if __name__ == "__main__":
    main()
