"""Worker settings that plugins and services reserve: SparkSource declares ``spark.``,
the worker service ``metrics.``; reading the declarations imports no PySpark."""

from __future__ import annotations

import subprocess
import sys

from structlog.testing import capture_logs

from eos.api import SourceConnector
from eos.runtime.plugins import reserved_worker_prefixes
from services.connectors.spark import SparkSource
from services.worker_service import worker_settings

BASE = {
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
}


def test_a_connector_reserves_nothing_unless_it_says_so() -> None:
    assert SourceConnector.worker_settings == ()
    assert SparkSource.worker_settings == ("spark.",)


def test_installed_plugins_declare_their_prefixes() -> None:
    assert "spark." in reserved_worker_prefixes()


def test_the_service_passes_the_reserved_prefixes_to_the_worker_config() -> None:
    with capture_logs() as logs:
        worker_settings({**BASE, "spark.master": "local[1]", "metrics.listeners": "http://x:1"})
    assert [e for e in logs if e["event"] == "unknown worker setting, ignored"] == []


def test_reading_the_declarations_does_not_import_pyspark() -> None:
    code = (
        "import sys\n"
        "from eos.runtime.plugins import reserved_worker_prefixes\n"
        "assert 'spark.' in reserved_worker_prefixes()\n"
        "assert 'pyspark' not in sys.modules, 'pyspark imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
