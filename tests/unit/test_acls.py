"""The least-privilege plan of a cluster (one source for `eos acls` and docs/security.md),
ACL matching as Kafka's authorizer does it, and authorization errors recognised."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from aiokafka import errors as kerrors

from eos.acls.denied import refused
from eos.acls.rules import docs_table, plan
from eos.config.worker import WorkerConfig
from eos.errors import ConfigError, ConflictError, ConversionError, FencingError, NotFoundError
from eos.kafka.acls import Acl, denied, kafka_acls_command, without_implied

REPO = Path(__file__).resolve().parents[2]
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def jaas(user: str) -> str:
    return f'{SCRAM} required username="{user}" password="pw";'


def worker(**extra: str) -> WorkerConfig:
    return WorkerConfig.from_properties(
        {
            "bootstrap.servers": "k:9092",
            "group.id": "G",
            "config.storage.topic": "G-configs",
            "offset.storage.topic": "G-offsets",
            "status.storage.topic": "G-status",
            "config.storage.replication.factor": "3",
            "offset.storage.replication.factor": "3",
            "status.storage.replication.factor": "3",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas("eos"),
            **extra,
        }
    )


def topic_setting(props: Mapping[str, str]) -> list[str] | None:
    return [props["topic"]] if "topic" in props else None


def rows(acls: list[Acl]) -> set[tuple[str, str, str, str, str]]:
    return {acl.key for acl in acls}


def test_one_principal_gets_exactly_what_it_uses() -> None:
    orders = {"connector.class": "X", "topic": "orders"}
    found = plan(worker(), {"orders": orders}, topic_setting)
    u = "User:eos"
    internal = {
        (u, "Topic", t, "LITERAL", op)
        for t in ("G-configs", "G-offsets", "G-status")
        for op in ("Read", "Write", "DescribeConfigs", "Create")
    }
    assert rows(found.least()) == internal | {
        (u, "Group", "G", "LITERAL", "Read"),
        (u, "TransactionalId", "eos-cluster-G", "LITERAL", "Write"),
        (u, "TransactionalId", "G-orders-", "PREFIXED", "Write"),
        (u, "Topic", "orders", "LITERAL", "Write"),
        (u, "Topic", "orders", "LITERAL", "Create"),
    }
    # Create only while a topic is missing: with every topic there, none is left
    assert not [a for a in found.until_existing(set()).least() if a.operation == "Create"]
    assert found.notes == []


def test_a_connector_of_its_own_principal_and_offsets_topic() -> None:
    props = {
        "connector.class": "X",
        "topic": "t",
        "offsets.storage.topic": "own",
        "producer.override.sasl.jaas.config": jaas("conn"),
        "consumer.override.sasl.jaas.config": jaas("reader"),
    }
    found = plan(worker(**{"config.storage.replication.factor": "-1"}), {"c": props}, topic_setting)
    acls = rows(found.least())
    assert ("User:conn", "TransactionalId", "G-c-", "PREFIXED", "Write") in acls
    assert ("User:conn", "Topic", "own", "LITERAL", "Write") in acls
    assert ("User:conn", "Topic", "t", "LITERAL", "Write") in acls
    assert ("User:reader", "Topic", "own", "LITERAL", "Read") in acls
    assert ("User:eos", "Topic", "own", "LITERAL", "Create") in acls  # the worker's admin
    assert ("User:eos", "Topic", "t", "LITERAL", "Describe") in acls  # the LSO metric
    assert ("User:eos", "TransactionalId", "G-c-", "PREFIXED", "Write") in acls  # fencing
    assert ("User:eos", "Cluster", "kafka-cluster", "LITERAL", "DescribeConfigs") in acls
    assert not any(a[0] == "User:conn" and a[2] == "G-offsets" for a in acls)


def test_a_connector_on_another_cluster_gets_its_clients_acls_there() -> None:
    props = {
        "connector.class": "X",
        "topic": "t",
        "producer.override.bootstrap.servers": "other:9092",
        "producer.override.sasl.jaas.config": jaas("conn"),
        "admin.override.sasl.jaas.config": jaas("fencer"),
    }
    clusters = plan(worker(), {"c": props}, topic_setting).clusters()
    assert list(clusters) == ["k:9092", "other:9092"]
    assert rows(clusters["other:9092"].least()) == {
        ("User:conn", "TransactionalId", "G-c-", "PREFIXED", "Write"),
        ("User:conn", "Topic", "t", "LITERAL", "Write"),
        ("User:conn", "Topic", "t", "LITERAL", "Create"),
        ("User:conn", "Topic", "G-offsets", "LITERAL", "Write"),  # its offsets, over there
        ("User:eos", "Topic", "G-offsets", "LITERAL", "Read"),
        ("User:fencer", "Topic", "G-offsets", "LITERAL", "Create"),
        ("User:fencer", "TransactionalId", "G-c-", "PREFIXED", "Write"),  # fencing there
    }
    here = rows(clusters["k:9092"].least())
    # the workers' cluster: what the workers do there (the REST offset writes' id), and
    # nothing of the connector's output, which is not on it
    assert ("User:eos", "TransactionalId", "G-c-", "PREFIXED", "Write") in here
    assert not any(a[2] == "t" for a in here)
    # one cluster written two ways is one cluster
    same = {**props, "producer.override.bootstrap.servers": " k:9092"}
    assert list(plan(worker(), {"c": same}, topic_setting).clusters()) == ["k:9092"]


def test_a_connector_that_cannot_tell_its_topics_is_noted() -> None:
    found = plan(worker(), {"s": {"connector.class": "X"}}, topic_setting)
    assert found.notes == [
        "connector s: its output topics cannot be told from its settings; grant its task "
        "producers Write on each topic it writes"
    ]


def test_implied_operations_and_matching() -> None:
    read = Acl("User:a", "Topic", "t", "LITERAL", "Read")
    describe = Acl("User:a", "Topic", "t", "LITERAL", "Describe")
    assert without_implied([read, describe, read]) == [read]
    wanted = Acl("User:a", "TransactionalId", "G-c-", "PREFIXED", "Write")
    assert wanted.covers(Acl("User:a", "TransactionalId", "G-", "PREFIXED", "Write"))
    assert wanted.covers(Acl("User:*", "TransactionalId", "*", "LITERAL", "All"))
    assert not wanted.covers(Acl("User:a", "TransactionalId", "G-c-0", "LITERAL", "Write"))
    assert not wanted.covers(Acl("User:b", "TransactionalId", "G-", "PREFIXED", "Write"))
    assert describe.covers(Acl("User:a", "Topic", "t", "LITERAL", "Write"))
    assert kafka_acls_command(wanted, "k:9092") == (
        "kafka-acls.sh --bootstrap-server k:9092 --command-config admin.properties --add "
        "--allow-principal User:a --operation Write --transactional-id G-c- "
        "--resource-pattern-type prefixed"
    )


def test_authorization_errors_are_recognised_wherever_they_hide() -> None:
    sent = ConversionError("the record could not be sent")
    sent.__cause__ = kerrors.TopicAuthorizationFailedError("orders")
    assert refused(ExceptionGroup("x", [sent])) == {"Topic": {"orders"}}
    fenced = FencingError({"G-c-0": "not authorized: grant …"})
    assert refused(fenced) == {"TransactionalId": {"G-c-0"}, "fencing": set()}
    assert refused(kerrors.GroupAuthorizationFailedError()) == {"Group": set()}
    assert refused(ValueError("no")) == {}


def test_a_name_in_a_request_error_is_not_an_authorization_error() -> None:
    """The REST fuzzer asked to restart a connector named ``ClusterAuthorization``: its 404
    was answered 403 with a made-up missing ACL."""
    for name in ("ClusterAuthorization", "TOPIC_AUTHORIZATION_FAILED"):
        assert refused(NotFoundError(f"connector {name} not found")) == {}
        assert refused(ConflictError(f"connector {name} is being restarted")) == {}
        assert refused(ConfigError("name", name, "no such thing")) == {}
    assert refused(ConversionError("TopicAuthorizationFailedError: orders")) == {"Topic": set()}


def test_a_missing_acl_is_one_line_with_the_fix() -> None:
    acl = Acl("User:a", "Topic", "orders", "LITERAL", "Write", "the records")
    error = denied([acl, acl], "k:9092")
    assert str(error).count("\n") == 0
    assert str(error).startswith(
        "not authorized: User:a needs Write on Topic 'orders' (literal) (the records); "
        "grant it with `eos acls grant <worker file>"
    )
    assert "--operation Write --topic orders`" in str(error)


def test_docs_table_is_generated_from_the_rules() -> None:
    """docs/security.md's ACL table is docs_table(): change RULES, then paste the table."""
    assert docs_table() in (REPO / "docs" / "security.md").read_text()


def test_a_certificate_file_names_the_principal_before_inline_pem(tmp_path: Path) -> None:
    from eos.kafka.principals import principal_of
    from tests.tls_certs import CertificateAuthority

    ca = CertificateAuthority(tmp_path)
    worker, connector = ca.issue("worker"), ca.issue("connector")
    inline = {
        "security.protocol": "SSL",
        "ssl.keystore.certificate.chain": worker.certfile.read_text(),
        "ssl.keystore.key": worker.keyfile.read_text(),
    }
    assert principal_of(inline) == "User:worker"
    files = {"ssl.certfile": str(connector.certfile), "ssl.keyfile": str(connector.keyfile)}
    assert principal_of({**inline, **files}) == "User:connector"  # as the clients load it
    assert principal_of({"security.protocol": "PLAINTEXT"}) == "User:ANONYMOUS"


def test_the_plan_of_a_connector_on_another_cluster_is_printed_per_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from services.cli import parser

    workers = tmp_path / "worker.properties"
    workers.write_text(
        "bootstrap.servers=k:9092\ngroup.id=G\nconfig.storage.topic=G-configs\n"
        "offset.storage.topic=G-offsets\nstatus.storage.topic=G-status\n"
    )
    conn = tmp_path / "c.properties"
    conn.write_text(
        "name=c\nconnector.class=FileSource\ntopic=t\nfile=/tmp/x\n"
        "producer.override.bootstrap.servers=other:9092\n"
    )
    args = parser().parse_args(["acls", "plan", str(workers), "--connector-config", str(conn)])
    assert args.func(args) == 0  # not cli.main: its logging set-up would outlive the test
    out = capsys.readouterr().out
    workers_part, other_part = out.split("# on the cluster at other:9092\n")
    assert workers_part.startswith("# on the cluster at k:9092\n")
    assert "Topic t " in other_part
    assert "Topic t " not in workers_part
    assert "TransactionalId eos-cluster-G" in workers_part
