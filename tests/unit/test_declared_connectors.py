"""connectors.dir: the plan (create, update only what changed, state, prune) and the
directory as kubelet writes a ConfigMap (symlinks into a ``..data`` directory swapped
atomically), with a file that does not parse."""

from __future__ import annotations

import json
import os
from pathlib import Path

from eos.config.connector_files import ConnectorFile
from eos.config.connector_plan import Change, plan
from eos.runtime.declared_connectors import read_directory

RUNNING, PAUSED, STOPPED = "RUNNING", "PAUSED", "STOPPED"


def declared(name: str, state: str | None = None, **settings: str) -> ConnectorFile:
    config = {"name": name, "connector.class": "FileSource", **settings}
    return ConnectorFile(f"/d/{name}.yaml", name, config, None, state)


def test_create_update_state_and_nothing_when_it_matches() -> None:
    files = [declared("a"), declared("b", "PAUSED", topic="t2"), declared("c", "STOPPED")]
    current = {
        "b": {"name": "b", "connector.class": "FileSource", "topic": "t1"},
        "c": {"name": "c", "connector.class": "FileSource"},
    }
    changes = plan(files, current, {"b": RUNNING, "c": STOPPED}, prune=False)
    assert [(c.action, c.connector, c.state) for c in changes] == [
        ("create", "a", RUNNING),
        ("update", "b", None),
        ("state", "b", PAUSED),
    ]
    assert changes[0].describe() == "create a (RUNNING) from a.yaml"
    matching = {f.name: f.config for f in files}
    states = {"a": RUNNING, "b": PAUSED, "c": STOPPED}
    assert plan(files, matching, states, prune=True) == []


def test_a_connector_without_a_state_is_kept_running() -> None:
    files = [declared("a")]
    changes = plan(files, {"a": files[0].config}, {"a": PAUSED}, prune=False)
    assert changes == [Change("state", "a", "/d/a.yaml", state=RUNNING)]


def test_prune_deletes_what_no_file_declares_but_never_with_an_unreadable_file() -> None:
    current = {"a": declared("a").config, "gone": {"name": "gone"}}
    assert plan([declared("a")], current, {}, prune=False) == []
    assert plan([declared("a")], current, {}, prune=True) == [Change("delete", "gone")]
    assert plan([declared("a")], current, {}, prune=True, unreadable=True) == []


def write_configmap(mount: Path, files: dict[str, str], version: int) -> None:
    """What kubelet does: the files in a timestamped directory, ``..data`` swapped to it
    with a rename, and a symlink per file through ``..data``."""
    version_dir = mount / f"..2026_12_05_{version}"
    version_dir.mkdir()
    for name, text in files.items():
        (version_dir / name).write_text(text)
    (mount / "..data_tmp").symlink_to(version_dir.name)
    os.replace(mount / "..data_tmp", mount / "..data")
    for name in files:
        link = mount / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")
    for link in mount.iterdir():  # then the links of files no longer in it go
        if link.is_symlink() and not link.name.startswith(".") and not link.exists():
            link.unlink()


def test_a_configmap_mount_and_its_atomic_swap(tmp_path: Path) -> None:
    settings = {"connector.class": "FileSource", "topic": "o"}
    orders = {"name": "orders", "config": settings}
    write_configmap(tmp_path, {"orders.json": json.dumps(orders)}, 1)
    found, problems = read_directory(tmp_path)
    assert ([f.name for f in found], problems) == (["orders"], {})
    paused = {**orders, "state": "PAUSED", "config": {**settings, "topic": "o2"}}
    write_configmap(tmp_path, {"orders.json": json.dumps(paused)}, 2)
    found, _ = read_directory(tmp_path)
    assert (found[0].state, found[0].config["topic"]) == ("PAUSED", "o2")


def test_a_link_left_dangling_by_the_swap_is_no_file(tmp_path: Path) -> None:
    (tmp_path / "gone.json").symlink_to("..data/gone.json")
    assert read_directory(tmp_path) == ([], {})


def test_a_file_that_does_not_parse_is_named_and_the_others_are_read(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text("name: good\nconnector.class: FileSource\n")
    (tmp_path / "half.yaml").write_text("name: half\nconnector.class: [File")
    (tmp_path / "twice.properties").write_text("name=good\nconnector.class=FileSource\n")
    (tmp_path / "bad-state.json").write_text('{"name": "x", "state": "RUN", "config": '
                                             '{"connector.class": "FileSource"}}')  # fmt: skip
    (tmp_path / "notes.txt").write_text("not a connector")
    found, problems = read_directory(tmp_path)
    assert [f.name for f in found] == ["good"]
    assert sorted(Path(p).name for p in problems) == [
        "bad-state.json", "half.yaml", "twice.properties",
    ]  # fmt: skip
    assert "not valid YAML" in problems[str(tmp_path / "half.yaml")]
    assert "also in good.yaml" in problems[str(tmp_path / "twice.properties")]
    assert "state 'RUN' is not one of" in problems[str(tmp_path / "bad-state.json")]


def test_a_raised_restart_number_restarts_once() -> None:
    """Strimzi's strimzi.io/restart as a number in the file: a new number restarts the
    connector and its tasks once, and is kept in the connector's declared.restart, so the
    next reconcile (or a new leader) does not restart it again; a new connector starts
    anyway, with its number kept."""
    base = {"name": "a", "connector.class": "FileSource"}
    wanted = ConnectorFile("/d/a.yaml", "a", base, None, None, 1)
    changes = plan([wanted], {"a": base}, {"a": RUNNING}, prune=False)
    kept = {**base, "declared.restart": "1"}
    assert [(c.action, c.props) for c in changes] == [("update", kept), ("restart", None)]
    assert plan([wanted], {"a": kept}, {"a": RUNNING}, prune=False) == []
    (created,) = plan([wanted], {}, {}, prune=False)
    assert (created.action, created.props) == ("create", kept)
    # resumed first, then restarted
    paused = plan([ConnectorFile("/d/a.yaml", "a", base, None, None, 2)], {"a": kept},
                  {"a": PAUSED}, prune=False)  # fmt: skip
    assert [c.action for c in paused] == ["update", "state", "restart"]


def test_a_restart_that_is_not_a_whole_number_is_a_problem_of_its_file(tmp_path: Path) -> None:
    from eos.config.connector_files import read_connector

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    body = {"name": "a", "config": {"connector.class": "FileSource"}}
    good.write_text(json.dumps({**body, "restart": 3}))
    bad.write_text(json.dumps({**body, "restart": "soon"}))
    connector, problems = read_connector(str(good))
    assert (connector and connector.restart, problems) == (3, [])
    connector, problems = read_connector(str(bad))
    assert connector is None
    assert problems == [f"{bad}: restart 'soon' is not a whole number of 0 or more"]
