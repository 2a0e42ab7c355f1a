"""docs/monitoring.md shows one screenshot per dashboard row and the alerts page: every
picture tests/screenshots.py takes is committed and shown, and nothing else."""

from __future__ import annotations

import re

from tests.prometheus_server import REPO
from tests.screenshots import OUT, shots


def test_every_screenshot_is_committed_and_shown() -> None:
    expected = {f"{shot.name}.png" for shot in shots(3)}
    assert {p.name for p in OUT.glob("*.png")} == expected
    shown = set(
        re.findall(r"\]\(screenshots/([\w.-]+\.png)\)", (REPO / "docs/monitoring.md").read_text())
    )
    assert shown == expected


def test_screenshots_stay_small() -> None:
    for path in OUT.glob("*.png"):
        assert path.stat().st_size < 80_000, path.name
