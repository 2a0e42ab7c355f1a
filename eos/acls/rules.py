"""The ACLs an eos cluster needs, defined once: :data:`RULES` makes both the table in
docs/security.md (:func:`docs_table`) and ``eos acls plan`` (:func:`plan`).

Each rule says which client needs which operation on which resource, and why. The
principal of a rule is that client's: the workers' producer, consumer or admin settings
(``producer.*``, ``consumer.*``, ``admin.*`` over the common ones) or a connector's
(``producer.override.*`` … over those), so a cluster whose clients log in as several
principals gets each one exactly what it uses. For one principal the plan of a cluster
with ``group.id=G``, connector C writing topic T and the default internal topics reads:
Write on TransactionalId ``G-C-`` (prefixed) and ``eos-cluster-G``, Write on T, Read,
Write, DescribeConfigs and Create on the three internal topics, Read on Group G
(Describe is implied by Read and Write).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, replace
from typing import Final, Literal

from eos.config.connector import ConnectorConfig, writes_elsewhere
from eos.config.worker import WorkerConfig
from eos.kafka.acls import CLUSTER_NAME, Acl, without_implied
from eos.kafka.clients import ClientConfig
from eos.kafka.principals import principal_of

Scope = Literal["workers", "connector"]
Layer = Literal["producer", "consumer", "admin"]
OutputTopics = Callable[[Mapping[str, str]], list[str] | None]
"""A connector config → the topics it writes (None: it cannot tell)."""


@dataclass(frozen=True)
class Rule:
    """``who`` (the ``layer`` client of ``scope``) needs ``operations`` on ``resource``."""

    who: str
    scope: Scope
    layer: Layer
    resource: str
    name: str
    """A template: ``{group}``, ``{connector}``, ``{config}``, ``{offsets}`` (the worker's
    offsets topic), ``{status}``, ``{own_offsets}`` (the connector's own), ``{task_offsets}``
    (the offsets topic its tasks write), ``{output}`` (each output topic)."""
    pattern: str
    operations: tuple[str, ...]
    why: str
    when: str = ""
    """When the rule applies (empty: always); see :data:`CONDITIONS`."""

    def resource_text(self) -> str:
        text = _DOC_NAMES.get(self.name, self.name)
        for key, shown in (("{group}", "G"), ("{connector}", "<connector>")):
            text = text.replace(key, shown)
        if self.resource == "Cluster":
            return "Cluster"
        return f"{self.resource} {text}" + (" (prefixed)" if self.pattern == "PREFIXED" else "")


_DOC_NAMES: Final = {
    "{config}": "the config topic",
    "{offsets}": "the offsets topic (`offset.storage.topic`)",
    "{status}": "the status topic",
    "{own_offsets}": "the connector's own offsets topic",
    "{task_offsets}": "the offsets topic of the connector's tasks",
    "{output}": "each output topic",
    "{group}-{connector}-": "`G-<connector>-`",
    "eos-cluster-{group}": "`eos-cluster-G`",
    "{group}": "G",
}

_TASK_IDS = "{group}-{connector}-"
_MISSING = "topic missing"
_OWN_MISSING = "own offsets topic missing"
RULES: Final = (
    Rule("task producers", "connector", "producer", "TransactionalId", _TASK_IDS, "PREFIXED",
         ("Write",), "each task's transactional producer `G-<connector>-<task>`"),
    Rule("task producers", "connector", "producer", "Topic", "{output}", "LITERAL",
         ("Write",), "the records"),
    Rule("task producers", "connector", "producer", "Topic", "{output}", "LITERAL",
         ("Create",), "the broker creating it on the first write", _MISSING),
    Rule("task producers", "connector", "producer", "Topic", "{task_offsets}", "LITERAL",
         ("Write",), "offsets, in the same transaction as the records"),
    Rule("tasks", "connector", "consumer", "Topic", "{own_offsets}", "LITERAL", ("Read",),
         "resuming from the connector's own offsets topic", "own offsets topic"),
    Rule("tasks", "connector", "admin", "Topic", "{own_offsets}", "LITERAL", ("Create",),
         "creating the connector's own offsets topic", _OWN_MISSING),
    Rule("the leader", "workers", "producer", "TransactionalId", "eos-cluster-{group}",
         "LITERAL", ("Write",), "the config topic's transactional writer"),
    Rule("the leader", "workers", "producer", "Topic", "{config}", "LITERAL", ("Write",),
         "connector configs, task configs, task counts, session keys"),
    Rule("the leader", "connector", "admin", "TransactionalId", _TASK_IDS, "PREFIXED",
         ("Write",), "fencing older task generations (InitProducerId, on the cluster the "
         "task producers write to)"),
    Rule("workers", "workers", "admin", "Group", "{group}", "LITERAL", ("Read",),
         "membership and rebalances"),
    Rule("workers", "workers", "consumer", "Topic", "{config}", "LITERAL", ("Read",),
         "reading the configs to their end"),
    Rule("workers", "workers", "consumer", "Topic", "{offsets}", "LITERAL", ("Read",),
         "resuming tasks; `GET /connectors/<name>/offsets`"),
    Rule("workers", "workers", "consumer", "Topic", "{status}", "LITERAL", ("Read",),
         "statuses and active topics"),
    Rule("workers", "workers", "producer", "Topic", "{status}", "LITERAL", ("Write",),
         "statuses and active topics"),
    Rule("workers", "workers", "producer", "Topic", "{offsets}", "LITERAL", ("Write",),
         "copies of own-topic offsets; offsets altered through REST"),
    Rule("workers", "workers", "producer", "TransactionalId", _TASK_IDS, "PREFIXED",
         ("Write",), "offsets altered or reset through REST (`G-<connector>-offsets`)"),
    *(
        Rule("workers", "workers", "admin", "Topic", topic, "LITERAL", (operation,), why, when)
        for topic in ("{config}", "{offsets}", "{status}")
        for operation, why, when in (
            ("DescribeConfigs", "checking `cleanup.policy=compact`", ""),
            ("Create", "creating it", _MISSING),
        )
    ),
    Rule("workers", "workers", "admin", "Cluster", CLUSTER_NAME, "LITERAL",
         ("DescribeConfigs",), "reading the brokers' `default.replication.factor`",
         "a replication factor of -1"),
    Rule("workers", "workers", "consumer", "Topic", "{output}", "LITERAL", ("Describe",),
         "the last-stable-offset metric of output partitions", "output here"),
)  # fmt: skip
"""Every ACL an eos cluster needs, one row of docs/security.md's table each."""

CONDITIONS: Final = {
    "own offsets topic": "only for a connector with an offsets topic of its own",
    _OWN_MISSING: "only for a connector with an offsets topic of its own, until it exists",
    _MISSING: "only until the topic exists",
    "a replication factor of -1": "only when a `*.storage.replication.factor` is -1",
    "output here": "not for a connector writing to another cluster",
}


@dataclass(frozen=True)
class Planned:
    """An ACL of the plan, the rule it comes from and the settings of the client that
    needs it."""

    acl: Acl
    rule: Rule
    client: Mapping[str, str]

    @property
    def cluster(self) -> str:
        """The cluster the ACL is granted on: its client's ``bootstrap.servers`` (a
        connector's other cluster for its own clients, as :meth:`ConnectorConfig.
        output_cluster_config` connects them)."""
        return cluster_of(self.client.get("bootstrap.servers", ""))


def cluster_of(bootstrap_servers: str) -> str:
    """``bootstrap.servers`` written one way, so that two spellings of a cluster match."""
    return ",".join(sorted({s.strip() for s in bootstrap_servers.split(",") if s.strip()}))


def client_config_of(planned: Planned) -> ClientConfig:
    """Client settings that log in as ``planned``'s principal."""
    return ClientConfig(dict(planned.client))


@dataclass
class Plan:
    acls: list[Planned]
    notes: list[str]
    """Things the plan cannot know (a connector that cannot tell its output topics)."""

    def until_existing(self, missing: Set[str]) -> Plan:
        """Without the Create ACLs of topics that exist (all but ``missing``)."""
        kept = [
            p for p in self.acls
            if not (p.acl.operation == "Create" and p.acl.resource == "Topic"
                    and p.acl.name not in missing)
        ]  # fmt: skip
        return Plan(kept, self.notes)

    def clusters(self) -> dict[str, Plan]:
        """The plan split by the cluster each ACL is granted on, the workers' first (a
        connector writing to another cluster has its own clients' ACLs there)."""
        split: dict[str, Plan] = {}
        for planned in self.acls:
            split.setdefault(planned.cluster, Plan([], self.notes)).acls.append(planned)
        return split

    def least(self) -> list[Acl]:
        """The ACLs to grant: without duplicates and implied ones (each with every reason);
        of one cluster (:meth:`clusters`)."""
        whys: dict[tuple[str, ...], list[str]] = {}
        for planned in self.acls:
            reasons = whys.setdefault(planned.acl.key, [])
            if planned.acl.why not in reasons:
                reasons.append(planned.acl.why)
        return [
            replace(acl, why="; ".join(whys[acl.key]))
            for acl in without_implied(p.acl for p in self.acls)
        ]


def plan(
    worker: WorkerConfig,
    connectors: Mapping[str, Mapping[str, str]],
    output_topics: OutputTopics,
) -> Plan:
    """The ACLs of a cluster with ``worker``'s settings running ``connectors``."""
    found = Plan([], [])
    rf_default = -1 in (
        worker.config_replication_factor,
        worker.offsets_replication_factor,
        worker.status_replication_factor,
    )
    for rule in RULES:
        if not _per_connector(rule):
            if rule.when == "a replication factor of -1" and not rf_default:
                continue
            found.acls += _expand(rule, worker, None, _names(rule, worker, None, []))
    for name, props in sorted(connectors.items()):
        config = ConnectorConfig.from_properties({**props, "name": name}, worker)
        outputs = output_topics(props)
        if outputs is None:
            found.notes.append(
                f"connector {name}: its output topics cannot be told from its settings; "
                "grant its task producers Write on each topic it writes"
            )
        for rule in RULES:
            if _per_connector(rule):
                own = config.offsets_topic_for(worker)
                if rule.when.startswith("own offsets topic") and own is None:
                    continue
                if rule.when == "output here" and writes_elsewhere(props, worker):
                    continue
                names = _names(rule, worker, config, outputs or [])
                found.acls += _expand(rule, worker, config, names)
    return found


def _per_connector(rule: Rule) -> bool:
    return rule.scope == "connector" or "{connector}" in rule.name or rule.name == "{output}"


def _names(
    rule: Rule, worker: WorkerConfig, config: ConnectorConfig | None, outputs: list[str]
) -> list[str]:
    if rule.name == "{output}":
        return outputs
    own = config.offsets_topic_for(worker) if config else None
    values = {
        "group": worker.group_id,
        "connector": config.name if config else "",
        "config": worker.config_topic,
        "offsets": worker.offsets_topic,
        "status": worker.status_topic,
        "own_offsets": own or "",
        "task_offsets": own or worker.offsets_topic,
    }
    return [rule.name.format(**values)]


def _expand(
    rule: Rule, worker: WorkerConfig, config: ConnectorConfig | None, names: Iterable[str]
) -> list[Planned]:
    props = client_props(worker, config, rule)
    principal = principal_of(props)
    return [
        Planned(Acl(principal, rule.resource, name, rule.pattern, op, rule.why), rule, props)
        for name in names
        for op in rule.operations
    ]


def output_topics(props: Mapping[str, str]) -> list[str] | None:
    """What a connector says it writes (``SourceConnector.output_topics``)."""
    from eos.runtime.plugins import connector_class

    try:
        connector = connector_class(props.get("connector.class", ""))()
    except Exception:
        return None
    return connector.output_topics(props)


def client_props(
    worker: WorkerConfig, config: ConnectorConfig | None, rule: Rule
) -> dict[str, str]:
    """The settings of the client a rule is about (common, then its layer)."""
    client: ClientConfig = worker.client_config
    if config is not None and rule.scope == "connector":
        client = config.output_cluster_config(worker)
    return {**client.common, **getattr(client, rule.layer)}


def docs_table() -> str:
    """The ACL table of docs/security.md."""
    rows = [
        "| who | resource | operations | why |",
        "|---|---|---|---|",
    ]
    for rule in RULES:
        why = rule.why + (f" ({CONDITIONS[rule.when]})" if rule.when else "")
        rows.append(
            f"| {rule.who} ({_LAYER_TEXT[rule.scope][rule.layer]}) | {rule.resource_text()} | "
            f"{', '.join(rule.operations)} | {why} |"
        )
    return "\n".join(rows) + "\n"


_LAYER_TEXT: Final = {
    "workers": {"producer": "`producer.*`", "consumer": "`consumer.*`", "admin": "`admin.*`"},
    "connector": {
        "producer": "`producer.override.*`",
        "consumer": "`consumer.override.*`",
        "admin": "`admin.override.*`",
    },
}
