"""Connector and offsets files of the CLI client, and its tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.client import render
from services.client.files import BadFiles, ConnectorFile, read_connectors, read_offsets

CONFIG = {"name": "files", "connector.class": "FileSource", "topic": "lines", "tasks.max": "2"}


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("c.properties", "name=files\nconnector.class=FileSource\ntopic=lines\ntasks.max=2\n"),
        ("c.conf", "name: files\nconnector.class FileSource\ntopic=lines\ntasks.max=2\n"),
        ("c.yaml", "name: files\nconnector.class: FileSource\ntopic: lines\ntasks:\n  max: 2\n"),
        ("c.yml", "name: files\nconnector.class: FileSource\ntopic: lines\ntasks.max: 2\n"),
        ("c.json", json.dumps(CONFIG)),
        ("c.json", json.dumps({"name": "files", "config": {k: v for k, v in CONFIG.items()
                                                           if k != "name"}})),
        ("c.yaml", "name: files\nconfig:\n  connector.class: FileSource\n  topic: lines\n"
                   "  tasks.max: 2\n  name: files\n"),
    ],
)  # fmt: skip
def test_every_format_gives_the_same_connector(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path, name, text)
    (found,), problems = read_connectors([path])
    assert problems == []
    assert found.name == "files"
    assert found.config == CONFIG  # with the name, even where a create body's config has none


def test_a_create_body_and_the_describe_output_apply_as_they_are(tmp_path: Path) -> None:
    body = {"name": "files", "config": CONFIG, "initial_state": "stopped"}
    described = {
        "name": "files", "config": CONFIG, "type": "source",
        "tasks": [{"connector": "files", "task": 0}],
        "task_configs": [{"id": {"connector": "files", "task": 0}, "config": {"a": "b"}}],
        "status": {"name": "files", "connector": {"state": "RUNNING"}, "tasks": []},
    }  # fmt: skip
    paths = [write(tmp_path, "body.json", json.dumps(body)),
             write(tmp_path, "described.json", json.dumps(described))]  # fmt: skip
    first, problems = read_connectors(paths[:1])
    assert (first, problems) == ([ConnectorFile(paths[0], "files", CONFIG, "STOPPED")], [])
    second, problems = read_connectors(paths[1:])
    assert (second, problems) == ([ConnectorFile(paths[1], "files", CONFIG, None)], [])


def test_problems_of_connector_files(tmp_path: Path) -> None:
    mismatch = write(tmp_path, "m.json", json.dumps({"name": "a", "config": {"name": "b"}}))
    odd = write(tmp_path, "c.txt", "name=a\n")
    escape = write(tmp_path, "e.properties", "name=a\\u12\n")
    top = write(tmp_path, "t.yaml", "- a\n- b\n")
    found, problems = read_connectors([mismatch, odd, escape, top])
    assert found == []
    assert problems == [
        f"{mismatch}: 'name' is 'a' but config.name is 'b'",
        f"{odd}: a settings file's name must end in one of .properties, .conf, .yaml, .yml, .json",
        f"{escape}: line 1: malformed \\uXXXX escape: \\u12",
        f"{top}: a mapping of setting names to values at the top",
    ]


def test_an_offsets_file_in_the_shape_offsets_get_prints(tmp_path: Path) -> None:
    body = {"offsets": [{"partition": {"p": 1}, "offset": {"n": 5}},
                        {"partition": {"p": 2}, "offset": None}]}  # fmt: skip
    assert read_offsets(write(tmp_path, "o.json", json.dumps(body))) == body
    assert read_offsets(write(tmp_path, "o.yaml", json.dumps(body))) == body  # YAML reads JSON
    with pytest.raises(BadFiles) as bad:
        read_offsets(write(tmp_path, "list.json", "[1, 2]"))
    assert len(bad.value.problems) == 1


def test_table_pads_columns_and_marks_nothing() -> None:
    assert render.table(("A", "LONGER"), [["x", None], ["yyyy", ""], ["z", {"k": 1}]]) == (
        'A     LONGER\nx     -\nyyyy  -\nz     {"k": 1}'
    )


def test_first_line_of_a_trace() -> None:
    assert render.first_line("\n  boom: it broke  \n\nTraceback ...") == "boom: it broke"
    assert render.first_line("x" * 150) == "x" * 99 + "…"
    assert render.first_line(None) == ""
