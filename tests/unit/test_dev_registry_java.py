"""How `eos dev-registry` finds its Java: fake JVMs (a ``bin/java`` script printing what a
real one prints, or a JDK's ``release`` file), never the machine's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from services import cli, dev_registry
from services.dev_registry import VERSION, DevRegistryError, find_java, java_version

JAVA_17 = 'openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6)'
JAVA_8 = 'java version "1.8.0_392"\nJava(TM) SE Runtime Environment (build 1.8.0_392-b08)'


def fake_jvm(home: Path, *, says: str = "", release: str = "") -> Path:
    """A JVM home whose ``bin/java -version`` prints ``says`` on stderr (as Java does), and
    with a ``release`` file when ``release`` is given; its ``bin/java``."""
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{says}\nEOF\n")
    java.chmod(0o755)
    if release:
        (home / "release").write_text(release)
    return java


Installed = Callable[..., None]


@pytest.fixture
def only(monkeypatch: pytest.MonkeyPatch) -> Installed:
    """``only(a, b)``: the machine's JVMs are these and no others."""

    def installed(*javas: Path) -> None:
        monkeypatch.setattr(dev_registry, "_candidates", lambda: [j.resolve() for j in javas])

    return installed


def test_java_version_reads_what_java_prints(tmp_path: Path) -> None:
    assert java_version(fake_jvm(tmp_path / "17", says=JAVA_17)) == 17
    assert java_version(fake_jvm(tmp_path / "8", says=JAVA_8)) == 8
    assert java_version(fake_jvm(tmp_path / "25", says='openjdk version "25" 2025-09-16')) == 25


def test_java_version_prefers_the_release_file(tmp_path: Path) -> None:
    java = fake_jvm(tmp_path / "jdk", says=JAVA_17, release='JAVA_VERSION="21.0.4"\n')
    assert java_version(java) == 21


def test_java_version_of_something_else_is_none(tmp_path: Path) -> None:
    assert java_version(fake_jvm(tmp_path / "odd", says="command not understood")) is None
    assert java_version(tmp_path / "missing" / "bin" / "java") is None


def test_only_java_17_is_one_line_naming_java_21_and_what_was_found(
    tmp_path: Path, only: Installed
) -> None:
    java17 = fake_jvm(tmp_path / "jdk-17", says=JAVA_17)
    only(java17)
    with pytest.raises(DevRegistryError) as refused:
        find_java()
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"Apicurio Registry {VERSION} needs Java 21 or newer;")
    assert f"installed: 17 ({java17.resolve()})" in message
    assert "openjdk-21-jre-headless" in message
    assert "JAVA_HOME" in message


def test_no_java_at_all_says_none(only: Installed) -> None:
    only()
    with pytest.raises(DevRegistryError, match=r"needs Java 21 or newer; installed: none\. "):
        find_java()


def test_the_newest_java_of_at_least_21_is_picked(tmp_path: Path, only: Installed) -> None:
    java17 = fake_jvm(tmp_path / "jdk-17", says=JAVA_17)
    java21 = fake_jvm(tmp_path / "jdk-21", says='openjdk version "21.0.2" 2024-01-16')
    java25 = fake_jvm(tmp_path / "jdk-25", release='JAVA_VERSION="25"\n')
    unknown = fake_jvm(tmp_path / "odd", says="no version here")
    only(java17, java21, unknown)
    assert find_java() == java21.resolve()
    only(java25, java17, java21)
    assert find_java() == java25.resolve()


def test_java_home_and_the_path_are_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_jvm(tmp_path / "home-jdk", says='openjdk version "21.0.2"')
    on_path = fake_jvm(tmp_path / "path-jdk", says=JAVA_17)
    monkeypatch.setenv("JAVA_HOME", str(home.parent.parent))
    monkeypatch.setenv("PATH", str(on_path.parent))
    candidates = dev_registry._candidates()
    assert candidates[0] == home.resolve()
    assert candidates[-1] == on_path.resolve()


def test_the_command_with_only_java_17_ends_with_that_line_and_exit_2(
    tmp_path: Path, only: Installed, capsys: pytest.CaptureFixture[str]
) -> None:
    """No download, no process: the Java is looked for before either."""
    java17 = fake_jvm(tmp_path / "jdk-17", says=JAVA_17)
    only(java17)
    data = tmp_path / "registry"
    code = cli.main(["dev-registry", "start", "--port", "0", "--data-dir", str(data)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        f"error: Apicurio Registry {VERSION} needs Java 21 or newer; installed: 17 "
        f"({java17.resolve()}). Install one (Debian: apt-get install "
        "openjdk-21-jre-headless) or set JAVA_HOME to it"
    ]
    assert not data.exists()
