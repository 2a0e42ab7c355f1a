"""Settings files: Java .properties, YAML and JSON all become flat string maps."""

from __future__ import annotations

from pathlib import Path

import pytest

from eos.config import load_config_file, load_json, load_properties, load_yaml
from eos.config.files import FILE_KEY, parse_properties
from eos.errors import ConfigError


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_properties_separators_comments_and_trimming(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "worker.properties",
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \n"
        "group.id=workers\n"
        "  bootstrap.servers : a:1,b:2  \n"
        "client.id eos-1\n"
        "empty=\n"
        "only.key\n"
        "\tindented\t=\tvalue\t\n"
        "equals==x\n"
        "group.id=later-wins\n",
    )
    assert load_properties(path) == {
        "group.id": "later-wins",
        "bootstrap.servers": "a:1,b:2",
        "client.id": "eos-1",
        "empty": "",
        "only.key": "",
        "indented": "value",
        "equals": "=x",
    }


def test_properties_continuation_lines() -> None:
    text = (
        "listeners=http://a:1,\\\n"
        "          http://b:2\n"
        "three=one \\\n"
        "  two \\\n"
        "  three\n"
        "# a comment ending in a backslash does not continue \\\n"
        "after.comment=yes\n"
        "even.backslashes=a\\\\\n"
        "next=line\n"
        "last=dangling\\"
    )
    assert parse_properties(text) == {
        "listeners": "http://a:1,http://b:2",
        "three": "one two three",
        "after.comment": "yes",
        "even.backslashes": "a\\",
        "next": "line",
        "last": "dangling",
    }


def test_properties_escapes() -> None:
    text = (
        "tab=a\\tb\n"
        "newline=a\\nb\n"
        "unicode=caf\\u00e9 \\u4e2d\n"
        "backslash=C:\\\\dir\\\\file\n"
        "key\\ with\\=separators\\:=v\n"
        "kept.trailing=x\\ \n"
        "other=\\q\n"
        "raw.utf8=中文\n"
        "windows=line\r\n"
    )
    assert parse_properties(text) == {
        "tab": "a\tb",
        "newline": "a\nb",
        "unicode": "café 中",
        "backslash": "C:\\dir\\file",
        "key with=separators:": "v",
        "kept.trailing": "x ",
        "other": "q",
        "raw.utf8": "中文",
        "windows": "line",
    }


def test_properties_malformed_unicode_escape_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.properties", "a=1\nb=\\u12G4\n")
    with pytest.raises(ConfigError, match=r"line 2: malformed") as info:
        load_properties(path)
    assert info.value.key == FILE_KEY
    assert info.value.value == str(path)


def test_yaml_flattened_and_stringified(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "worker.yaml",
        "group.id: workers\n"
        "producer:\n"
        "  linger.ms: 5\n"
        "  enable.idempotence: true\n"
        "offset:\n"
        "  storage:\n"
        "    topic: offsets\n"
        "listeners:\n"
        "  - http://a:1\n"
        "  - http://b:2\n"
        "ratio: 0.5\n"
        "flag: off\n"
        "nothing:\n",
    )
    assert load_yaml(path) == {
        "group.id": "workers",
        "producer.linger.ms": "5",
        "producer.enable.idempotence": "true",
        "offset.storage.topic": "offsets",
        "listeners": "http://a:1,http://b:2",
        "ratio": "0.5",
        "flag": "false",  # YAML 1.1: off is a boolean
        "nothing": "",
    }


def test_json_flattened(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "c.json",
        '{"name": "c", "tasks.max": 3, "producer": {"override": {"linger.ms": 1}},'
        ' "flag": true, "list": [1, "x"], "none": null}',
    )
    assert load_json(path) == {
        "name": "c",
        "tasks.max": "3",
        "producer.override.linger.ms": "1",
        "flag": "true",
        "list": "1,x",
        "none": "",
    }


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("w.properties", "group.id=g\n"),
        ("w.conf", "group.id = g\n"),
        ("w.yaml", "group: {id: g}\n"),
        ("W.YML", "group.id: g\n"),
        ("w.json", '{"group.id": "g"}'),
    ],
)
def test_format_chosen_by_extension(tmp_path: Path, name: str, text: str) -> None:
    assert load_config_file(_write(tmp_path, name, text)) == {"group.id": "g"}


def test_empty_yaml_is_no_settings(tmp_path: Path) -> None:
    assert load_config_file(_write(tmp_path, "empty.yaml", "")) == {}


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("w.txt", "a=1", r"must end in one of \.properties"),
        ("w.yaml", "- a\n- b\n", "a mapping"),
        ("w.yaml", "a: [1\n", "valid YAML"),
        ("w.json", "[1, 2]", "a mapping"),
        ("w.json", "{nope", "valid JSON"),
        ("w.yaml", "a.b: 1\na: {b: 2}\n", "'a.b' is given twice"),
        ("w.yaml", "a: [[1, 2]]\n", "a list may hold only plain values"),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, name: str, text: str, match: str) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(ConfigError, match=match) as info:
        load_config_file(path)
    assert (info.value.key, info.value.value) == (FILE_KEY, str(path))


@pytest.mark.parametrize("name", ["missing.properties", "missing.yaml", "missing.json"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="an existing readable file") as info:
        load_config_file(tmp_path / name)
    assert info.value.value == str(tmp_path / name)
