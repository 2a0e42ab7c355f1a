"""docs/configuration.md shows every setting as it is defined."""

from services.config_docs import DOC, render


def test_settings_tables_are_up_to_date() -> None:
    text = DOC.read_text()
    assert render(text) == text, "run: .venv/bin/python -m services.config_docs"
    assert "`thread.pool.size`" in text
    assert "`transaction.boundary.interval.ms`" in text
