"""Bad security settings stop ``eos worker`` at start-up with exit status 2 and one
``error:`` line naming the setting: a wrong password (with the broker's answer), an unknown
SASL mechanism, a missing CA file, a ``${file:…}`` naming a missing file or key, an unknown
config provider. The workers run side by side (each is a process start)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.integration.secured import REPO, Secured
from tests.integration.worker_harness import worker_props, write_properties

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def jaas(user: str, password: str) -> str:
    return f'{SCRAM} required username="{user}" password="{password}";'


async def test_each_bad_setting_is_one_line_naming_it(
    secured_kafka: Callable[[str], Secured],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    secured = secured_kafka("sasl-scram")
    user = await secured.user("bad")
    login = secured.client_properties(user)
    secret = tmp_path / "secret.properties"
    secret.write_text("password=x\n")
    providers = {
        "config.providers": "file",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
    }
    cases = {
        "wrong password": (
            {**login, "sasl.jaas.config": jaas(user, "wrong")},
            ["'sasl.jaas.config'", "[hidden]", "the brokers refused the login", "SCRAM-SHA-512",
             "Authentication failed"],
        ),
        "unknown mechanism": (
            {**login, "sasl.mechanism": "SCRAM-SHA-1"},
            ["'sasl.mechanism'", "'SCRAM-SHA-1'", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"],
        ),
        "missing CA file": (
            {**login, "security.protocol": "SASL_SSL",
             "ssl.truststore.location": str(tmp_path / "ca.pem")},
            ["'ssl.truststore.location'", "must name an existing, readable PEM file"],
        ),
        "missing file": (
            {**login, **providers,
             "sasl.jaas.config": jaas(user, f"${{file:{tmp_path}/none.properties:password}}")},
            ["'sasl.jaas.config'", f"the file {tmp_path}/none.properties does not exist"],
        ),
        "missing key": (
            {**login, **providers, "sasl.jaas.config": jaas(user, f"${{file:{secret}:pass}}")},
            ["'sasl.jaas.config'", f"the file {secret} has no key pass"],
        ),
        "unknown provider": (
            {**login, **providers, "sasl.jaas.config": jaas(user, "${vault:kv/eos:password}")},
            ["'sasl.jaas.config'", "unknown config provider 'vault' (config.providers: file)"],
        ),
    }  # fmt: skip
    results: dict[str, tuple[int, str]] = {}

    async def start(name: str, settings: dict[str, str]) -> None:
        props = {**worker_props(secured.bootstrap, unique_name("bad")), **settings}
        path = write_properties(tmp_path / f"{name.replace(' ', '-')}.properties", props)
        done = await anyio.run_process(
            [sys.executable, "-m", "services.cli", "worker", str(path)], cwd=REPO, check=False
        )
        results[name] = (done.returncode, done.stderr.decode())

    async with anyio.create_task_group() as tg:
        for name, (settings, _) in cases.items():
            tg.start_soon(start, name, settings)
    for name, (_, says) in cases.items():
        code, stderr = results[name]
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert code == 2, (name, stderr[-2000:])
        assert len(errors) == 1, (name, stderr[-2000:])
        for text in says:
            assert text in errors[0], (name, errors[0])
        assert "wrong" not in errors[0] or name != "wrong password"  # the password stays hidden
