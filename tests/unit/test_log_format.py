"""Logs a pipeline can take (services/log_setup.py): ``--log-format json``,
``EOS_LOG_FORMAT`` or a worker file's ``log.format`` give one JSON object per line with
Connect-like fields; a bad value is one error line and exit 2."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from eos.config import WorkerConfig
from eos.errors import ConfigError
from services import cli, log_setup
from services.env_settings import settings_from_env
from tests.unit.test_config_connector import WORKER


@pytest.fixture
def restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    saved = structlog.get_config()
    yield
    structlog.contextvars.clear_contextvars()
    structlog.configure(**saved)
    root.handlers[:], root.level = handlers, level


def test_json_lines_carry_time_level_logger_message_context_and_exception(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    log_setup.configure("info", json=True)
    structlog.contextvars.bind_contextvars(connector="orders", task=2, generation=7)
    structlog.get_logger("eos.runtime.task.source_task").info("task started", attempts=1)
    try:
        raise ValueError("broken")
    except ValueError:
        structlog.get_logger("eos.x").exception("task failed")
    logging.getLogger("aiokafka.conn").error("from %s", "aiokafka")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    first, failed, foreign = lines
    assert list(first)[:4] == ["time", "level", "logger", "message"]
    assert first["time"].endswith("Z")
    assert (first["level"], first["logger"], first["message"]) == (
        "info",
        "eos.runtime.task.source_task",
        "task started",
    )
    assert (first["connector"], first["task"], first["generation"], first["attempts"]) == (
        "orders",
        2,
        7,
        1,
    )
    assert failed["level"] == "error"
    assert "ValueError: broken" in failed["exception"]
    assert (foreign["logger"], foreign["message"]) == ("aiokafka.conn", "from aiokafka")


def test_text_stays_the_default(restored: None, capsys: pytest.CaptureFixture[str]) -> None:
    log_setup.configure("info")
    structlog.get_logger("eos.z").info("hello", n=1)
    line = capsys.readouterr().err.strip()
    assert "hello" in line
    assert "n=1" in line
    assert not line.startswith("{")


def test_the_format_comes_from_the_flag_then_the_environment() -> None:
    assert log_setup.log_format(None, {}) is None
    assert log_setup.log_format(None, {"EOS_LOG_FORMAT": "JSON"}) == "json"
    assert log_setup.log_format("text", {"EOS_LOG_FORMAT": "json"}) == "text"
    with pytest.raises(ConfigError, match=r"log\.format.*must be text or json"):
        log_setup.log_format("xml", {})


def test_eos_log_format_is_not_a_worker_setting_but_log_format_in_a_file_is() -> None:
    assert settings_from_env({"EOS_LOG_FORMAT": "json"}) == {}
    assert WorkerConfig.from_properties({**WORKER, "log.format": "JSON"}).log_format == "json"
    with pytest.raises(ConfigError, match=r"log\.format"):
        WorkerConfig.from_properties({**WORKER, "log.format": "yaml"})


def test_a_bad_log_format_is_one_error_line_and_exit_2(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--log-format", "xml", "worker", "missing.properties"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "log.format" in err
    assert err.count("\n") == 1
