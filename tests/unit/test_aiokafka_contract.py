"""The contract between eos and aiokafka's private surface.

:mod:`eos.kafka.aiokafka_private` ends transactions with aiokafka's own sender handlers and
transaction manager, and :mod:`eos.kafka.transactions_v2` plugs its codecs into aiokafka's
request machinery. Neither is aiokafka's public API: an upgrade may rename an attribute,
change a handler's signature or the shape of a response its handler reads. Each test here
fails naming what changed, so that moving the aiokafka pin starts from a list, not from a
stuck transaction. The recorded surface is what aiokafka 0.14.0 has; the last two tests
keep it complete (every private name the module uses is recorded) and keep it in one place
(no other module of eos touches aiokafka's private names, and the task loop imports
nothing of aiokafka).
"""

from __future__ import annotations

import ast
import enum
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiokafka
from aiokafka import errors as kerrors
from aiokafka.client import AIOKafkaClient, ConnectionGroup, CoordinationType
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.producer.transaction_manager import PidAndEpoch, TransactionResult
from aiokafka.structs import TopicPartition

from eos.errors import TransactionAbortable
from eos.kafka import aiokafka_private as private
from eos.kafka import transactions_v2 as v2

REPO = Path(__file__).resolve().parents[2]
PRIVATE_MODULE = REPO / "eos/kafka/aiokafka_private.py"

METHODS: dict[str, str] = {
    "aiokafka.producer.sender.Sender.start": "self",
    "aiokafka.producer.sender.Sender._maybe_wait_for_pid": "self",
    "aiokafka.producer.sender.Sender._find_coordinator": "self, coordinator_type, coordinator_key",
    "aiokafka.producer.sender.Sender._do_add_partitions_to_txn": "self, tps",
    "aiokafka.producer.sender.Sender._send_produce_req": "self, node_id, batches",
    "aiokafka.producer.sender.Sender._do_txn_commit": "self, commit_result",
    "aiokafka.producer.sender.BaseHandler.do": "self, node_id",
    "aiokafka.producer.sender.AddPartitionsToTxnHandler.__init__": "self, sender, topic_partitions",
    "aiokafka.producer.sender.EndTxnHandler.__init__": "self, sender, commit_result",
    "aiokafka.producer.sender.EndTxnHandler.create_request": "self",
    "aiokafka.producer.sender.EndTxnHandler.handle_response": "self, resp",
    "aiokafka.producer.sender.SendProduceReqHandler.__init__": "self, sender, batches",
    "aiokafka.producer.sender.SendProduceReqHandler.create_request": "self",
    "aiokafka.producer.sender.SendProduceReqHandler.handle_response": "self, response",
    "aiokafka.producer.sender.SendProduceReqHandler._can_retry": "self, error, batch",
    "aiokafka.producer.transaction_manager.TransactionManager.has_pid": "self",
    "aiokafka.producer.transaction_manager.TransactionManager.begin_transaction": "self",
    "aiokafka.producer.transaction_manager.TransactionManager.partitions_to_add": "self",
    "aiokafka.producer.transaction_manager.TransactionManager.partition_added": "self, tp",
    "aiokafka.producer.transaction_manager.TransactionManager.wait_for_transaction_end": "self",
    "aiokafka.producer.transaction_manager.TransactionManager.committing_transaction": "self",
    "aiokafka.producer.transaction_manager.TransactionManager.aborting_transaction": "self",
    "aiokafka.producer.transaction_manager.TransactionManager.is_empty_transaction": "self",
    "aiokafka.producer.transaction_manager.TransactionManager.complete_transaction": "self",
    "aiokafka.producer.message_accumulator.MessageAccumulator.drain_by_nodes": (
        "self, ignore_nodes, muted_partitions"
    ),
    "aiokafka.producer.message_accumulator.MessageAccumulator.flush_for_commit": "self",
    "aiokafka.producer.message_accumulator.MessageAccumulator.waiter": "self",
    "aiokafka.producer.message_accumulator.MessageBatch.get_data_buffer": "self",
    "aiokafka.producer.message_accumulator.MessageBatch.failure": "self, exception",
    "aiokafka.producer.message_accumulator.BatchBuilder.close": "self",
    "aiokafka.record._crecords.default_records.DefaultRecordBatchBuilder.append": (
        "self, offset, timestamp, key, value, headers"
    ),
    "aiokafka.client.AIOKafkaClient.bootstrap": "self",
    "aiokafka.client.AIOKafkaClient.send": "self, node_id, request, *, group",
    "aiokafka.client.AIOKafkaClient.force_metadata_update": "self",
    "aiokafka.client.AIOKafkaClient.fetch_all_metadata": "self",
    # the request machinery the codecs of transactions_v2 plug into
    "aiokafka.protocol.api.Request.prepare": "self, versions",
    "aiokafka.protocol.api.Request.build": "self, request_struct_class",
    "aiokafka.protocol.api.RequestStruct.build_request_header": "self, correlation_id, client_id",
    "aiokafka.protocol.api.RequestStruct.parse_response_header": "self, read_buffer",
    "aiokafka.protocol.api.Response.decode": "cls, data",
}
"""Methods eos calls or overrides: dotted path → parameters (names and kinds)."""

ATTRIBUTES: dict[str, list[str]] = {
    "aiokafka.producer.producer.AIOKafkaProducer": [
        "_sender", "_txn_manager", "_message_accumulator", "client",
    ],
    "aiokafka.producer.sender.Sender": [
        "sender_task", "client", "_txn_manager", "_in_flight", "_muted_partitions", "_acks",
        "_request_timeout_ms", "_retry_backoff",
    ],
    "aiokafka.producer.sender.BaseHandler": ["_sender"],
    "aiokafka.producer.sender.SendProduceReqHandler": ["_batches"],
    "aiokafka.producer.sender.EndTxnHandler": ["_commit_result"],
    "aiokafka.producer.transaction_manager.TransactionManager": [
        "transactional_id", "producer_id", "producer_epoch", "_pid_and_epoch",
        "_sequence_numbers",
    ],
    "aiokafka.producer.message_accumulator.MessageAccumulator": ["_batches", "_batch_size"],
    "aiokafka.producer.message_accumulator.MessageBatch": ["_builder"],
    "aiokafka.producer.message_accumulator.BatchBuilder": [
        "_builder", "_relative_offset", "_closed", "_key_serializer", "_value_serializer",
    ],
    "aiokafka.consumer.consumer.AIOKafkaConsumer": ["_client"],
    "aiokafka.protocol.api.Request": ["ALLOW_UNKNOWN_API_VERSION"],
    "aiokafka.protocol.api.RequestStruct": ["FLEXIBLE_VERSION"],
}  # fmt: skip
"""Attributes eos reads or replaces, by class (instance attributes included)."""


def _resolve(dotted: str) -> Any:
    module_name, _, rest = dotted.partition(".")
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = __import__(".".join(parts[:split]), fromlist=["_"])
        except ImportError:
            continue
        for name in parts[split:]:
            found = inspect.getattr_static(found, name)
        return found
    raise ImportError(module_name + rest)


def _parameters(func: Any) -> str:
    if isinstance(func, classmethod | staticmethod):
        func = func.__func__
    shown, star = [], False
    for parameter in inspect.signature(func).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and not star:
            shown.append("*")
            star = True
        shown.append(parameter.name)
    return ", ".join(shown)


def _instance_attributes(cls: type) -> set[str]:
    """Names a class (or an aiokafka base) assigns on ``self``, and what it defines."""
    names = set(dir(cls))
    for klass in cls.__mro__:
        if not klass.__module__.startswith("aiokafka"):
            continue
        tree = ast.parse(inspect.getsource(klass))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and isinstance(node.ctx, ast.Store)
            ):
                names.add(node.attr)
    return names


def test_the_methods_eos_relies_on_keep_their_signatures() -> None:
    changed = []
    for dotted, recorded in METHODS.items():
        try:
            now = _parameters(_resolve(dotted))
        except (ImportError, AttributeError) as exc:
            changed.append(f"{dotted}: gone ({exc!r})")
            continue
        if now != recorded:
            changed.append(f"{dotted}: recorded ({recorded}), now ({now})")
    assert changed == [], f"aiokafka {aiokafka.__version__} changed:\n" + "\n".join(changed)


def test_the_attributes_eos_relies_on_are_still_there() -> None:
    missing = []
    for dotted, names in ATTRIBUTES.items():
        cls = _resolve(dotted)
        found = _instance_attributes(cls)
        missing += [f"{dotted}.{name}" for name in names if name not in found]
    assert missing == [], f"aiokafka {aiokafka.__version__} lost: {missing}"


def test_the_values_eos_relies_on() -> None:
    assert PidAndEpoch._fields == ("pid", "epoch")
    assert {TransactionResult.ABORT, TransactionResult.COMMIT} == set(TransactionResult)
    assert isinstance(ConnectionGroup.COORDINATION, enum.Enum)
    assert isinstance(CoordinationType.TRANSACTION, enum.Enum)
    assert kerrors.InvalidProducerEpoch.errno == 47  # what a v12 PRODUCER_FENCED becomes
    assert private.PRODUCER_FENCED not in kerrors.kafka_errors, "aiokafka knows code 90 now"
    assert private.TRANSACTION_ABORTABLE not in kerrors.kafka_errors, "aiokafka knows 120 now"


def test_the_codecs_prepare_into_their_request_structs() -> None:
    """aiokafka picks the struct class from the Request's generic base; ALLOW_UNKNOWN lets
    ApiVersions go out before the broker's versions are known."""
    produce = v2.ProduceV12("txn", -1, 1000, [("t", [(0, b"")])]).prepare({0: (3, 12)})
    assert type(produce) is v2.ProduceRequest_v12
    end = v2.EndTxnV5("txn", 1, 2, True).prepare({26: (0, 5)})
    assert type(end) is v2.EndTxnRequest_v5
    assert type(v2.ApiVersionsV3().prepare({})) is v2.ApiVersionsRequest_v3


class _Batch:
    def __init__(self) -> None:
        self.outcome: Any = None

    def done(self, offset: int, timestamp: int, log_start_offset: int) -> None:
        self.outcome = ("done", offset, timestamp, log_start_offset)

    def failure(self, exception: BaseException) -> None:
        self.outcome = exception


class _Sender:  # what the handler reads of aiokafka's sender
    _retry_backoff = 0.1
    client = None
    _txn_manager = object()


def test_the_produce_handler_reads_a_version_12_answer_as_aiokafka_reads_version_8() -> None:
    """Each partition's outcome: acknowledged, fenced (the version 2 code mapped to the one
    aiokafka knows), TRANSACTION_ABORTABLE (eos's own error), any other error as aiokafka
    maps it."""
    batches = {TopicPartition("t", p): _Batch() for p in range(4)}
    handler = private._ProduceV2Handler(_Sender(), batches)
    part: list[tuple[Any, ...]] = [
        (p, code, 41, -1, 5, [], None, {}) for p, code in enumerate([0, 90, 120, 10])
    ]
    handler.handle_response(v2.ProduceResponse_v12([("t", part, {})], 0, {}))
    outcomes = [batches[TopicPartition("t", p)].outcome for p in range(4)]
    assert outcomes[0] == ("done", 41, -1, 5)
    assert isinstance(outcomes[1], kerrors.ProducerFenced)
    assert isinstance(outcomes[2], TransactionAbortable)
    assert "TRANSACTION_ABORTABLE to the Produce to t-2" in str(outcomes[2])
    assert isinstance(outcomes[3], kerrors.MessageSizeTooLargeError)


def _private_accesses(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``x._name`` attributes (not dunders), except on our own ``super()``."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Call) and ast.unparse(node.value) == "super()")
        ):
            yield node.lineno, node.attr


def test_append_rows_builds_the_batch_that_batch_builder_append_builds() -> None:
    """Row by row the same bytes as the public ``append``; a full batch hands back the
    row that did not fit and takes no more."""
    rows: list[private.Row] = [
        (1700000000000 + n, b"k%d" % n if n % 3 else None, b"v" * n, [("h", b"x")] if n % 2 else [])
        for n in range(40)
    ]  # fmt: skip
    public, direct = _builder(), _builder()
    expected = 0
    for stamp, key, value, headers in rows:
        if public.append(timestamp=stamp, key=key, value=value, headers=headers) is None:
            break
        expected += 1
    assert 0 < expected < len(rows)
    it = iter(rows)
    count, left = private.append_rows(direct, it)
    assert (count, left) == (expected, rows[expected])
    assert next(it) == rows[expected + 1]  # the rest stays for the next batch
    assert private.append_rows(direct, iter(rows)) == (0, rows[0])  # full: closed
    assert direct.record_count() == public.record_count() == expected
    assert bytes(direct._build()) == bytes(public._build())
    fresh = _builder()
    assert private.append_rows(fresh, iter(rows[:3])) == (3, None)
    assert fresh.record_count() == 3


def _builder() -> BatchBuilder:
    return BatchBuilder(600, 0, is_transactional=True)


def test_bootstrap_still_opens_its_connection_through_the_module_s_create_conn() -> None:
    """What :func:`close_what_a_cancelled_bootstrap_opened` wraps: the bootstrap connection
    comes from ``aiokafka.client.create_conn``, looked up when bootstrap runs."""
    import aiokafka.client

    import eos.kafka.clients  # noqa: F401  (installs the wrapper)

    source = inspect.getsource(AIOKafkaClient.bootstrap.__wrapped__)
    assert "= await create_conn(" in source
    assert inspect.iscoroutinefunction(aiokafka.client.create_conn)


def test_every_private_name_the_module_uses_is_recorded() -> None:
    tree = ast.parse(PRIVATE_MODULE.read_text())
    recorded = {dotted.rsplit(".", 1)[1] for dotted in METHODS}
    recorded |= {name for names in ATTRIBUTES.values() for name in names}
    recorded |= {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    unrecorded = sorted(
        {f"line {line}: {name}" for line, name in _private_accesses(tree) if name not in recorded}
    )
    assert unrecorded == [], "record these in METHODS/ATTRIBUTES: " + ", ".join(unrecorded)


def _aiokafka_private_names() -> set[str]:
    """Every ``_name`` aiokafka assigns on an object or defines in a class."""
    names: set[str] = set()
    for path in Path(aiokafka.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def test_no_other_module_touches_aiokafka_s_private_names() -> None:
    theirs = _aiokafka_private_names()
    found = []
    for path in sorted((REPO / "eos").rglob("*.py")):
        if path == PRIVATE_MODULE:
            continue
        for line, name in _private_accesses(ast.parse(path.read_text())):
            if name in theirs and not _on_self(path, line, name):
                found.append(f"{path.relative_to(REPO)}:{line} {name}")
    assert found == [], "aiokafka's private names belong in aiokafka_private.py: " + str(found)


def _on_self(path: Path, line: int, name: str) -> bool:
    """``self._name`` / ``cls._name``: our own attribute that shares aiokafka's name."""
    text = path.read_text().splitlines()[line - 1]
    return f"self.{name}" in text or f"cls.{name}" in text


TASK_LOOP = ["source_task", "exactly_once_task", "at_least_once_task", "task_deps"]


def test_the_task_loop_imports_nothing_of_aiokafka() -> None:
    """The loop talks to the producer port; which client runs is the factory's business."""
    clients = (
        "aiokafka",
        "confluent_kafka",
        "eos.kafka.aiokafka_private",
        "eos.kafka.transactions_v2",
        "eos.runtime.task.producers.aiokafka",
        "eos.runtime.task.producers.librdkafka",
    )
    found = []
    for module in TASK_LOOP:
        path = REPO / "eos/runtime/task" / f"{module}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [f"{module} imports {n}" for n in names if n.startswith(clients)]
    assert found == []
