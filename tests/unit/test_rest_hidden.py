"""Password settings in REST answers: [hidden], by the connector's PASSWORD type or as a
client secret; a [hidden] put back keeps the stored value."""

from __future__ import annotations

from eos.api import ConfigDef, Importance, SourceConnector, Type
from services.rest.hidden import hidden, kept

PLUGIN = f"{__name__}:Database"


class Database(SourceConnector):
    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "db.password", Type.PASSWORD, None, None, Importance.HIGH, "The database's password."
        )

    async def start(self, config: object) -> None: ...

    def task_class(self) -> type:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []


def test_passwords_are_hidden_and_kept_when_put_back() -> None:
    stored = {
        "connector.class": PLUGIN,
        "db.password": "s3cret",
        "producer.override.sasl.jaas.config": 'X required username="u" password="p";',
        "topic": "${file:/etc/eos/s.properties:topic}",
    }
    shown = hidden(stored)
    assert shown == {
        "connector.class": PLUGIN,
        "db.password": "[hidden]",
        "producer.override.sasl.jaas.config": "[hidden]",
        "topic": "${file:/etc/eos/s.properties:topic}",
    }
    assert kept({**shown, "topic": "t2"}, stored) == {**stored, "topic": "t2"}
    assert kept({**shown, "db.password": "new"}, stored)["db.password"] == "new"
    assert kept(shown, None) == shown  # nothing stored: [hidden] is what was sent
