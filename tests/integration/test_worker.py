"""A worker (in this process) against the real broker: what a user sees through
the REST API and in the topics."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from eos.converters import JsonConverter
from eos.errors import TopicError
from eos.kafka import ClientConfig, fence_producers, read_to_end
from eos.storage.config_log import decode_record
from eos.storage.offset_log import decode_offset_record, encode_offset_key, encode_offset_value
from services.connectors.verifiable import aborted_records, record_value
from services.verify import verify
from tests.conftest import TopicFactory
from tests.integration.helpers import key_partition, producer
from tests.integration.worker_harness import running_worker, worker_props

pytestmark = pytest.mark.integration


def verifiable(name: str, topic: str, **settings: object) -> dict[str, str]:
    props = {
        "name": name,
        "connector.class": "VerifiableSource",
        "tasks.max": "2",
        "topic": topic,
        "partitions.per.task": "2",
        "records.per.partition": "500",
    }
    props.update({k.replace("_", "."): str(v) for k, v in settings.items()})
    return props


async def run_briefly(wprops: dict[str, str], props: dict[str, str], tasks: int) -> None:
    """Run the connector ``vs`` in a new worker for 2 s once its ``tasks`` run (a restart)."""
    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("vs", "RUNNING", tasks)
        await anyio.sleep(2)


async def test_create_run_and_status_over_rest(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    producer_client: str,
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    async with running_worker(worker_props(bootstrap, group, producer_client=producer_client)) as w:
        assert (await w.http.get("/")).json()["version"]
        props = verifiable("vs", topic)
        created = await w.http.post("/connectors", json={"name": "vs", "config": props})
        assert created.status_code == 201, created.text
        assert created.json()["name"] == "vs"
        again = await w.http.post("/connectors", json={"name": "vs", "config": props})
        assert again.status_code == 409
        assert again.json() == {"error_code": 409, "message": "Connector vs already exists"}
        assert (await w.http.get("/connectors")).json() == ["vs"]

        status = await w.wait_for_tasks("vs", "RUNNING", 2)
        assert status["connector"]["state"] == "RUNNING"
        assert status["type"] == "source"
        result = await verify(client_config, topic, 2000, 60, {})
        assert (result.records, result.duplicates, result.gaps) == (2000, 0, 0)

        assert (await w.http.get("/connectors/missing/status")).status_code == 404
        assert (await w.http.delete("/connectors/vs")).status_code == 204
        assert (await w.http.get("/connectors")).json() == []
        assert (await w.http.delete("/connectors/vs")).status_code == 404


async def test_invalid_config_is_rejected_naming_the_setting(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        bad = verifiable("vs", "t", transaction_boundary="sometimes")
        response = await w.http.post("/connectors", json={"name": "vs", "config": bad})
        assert response.status_code == 400
        assert "transaction.boundary" in response.json()["message"]
        unknown = {"name": "x", "connector.class": "NoSuchSource"}
        response = await w.http.post("/connectors", json={"name": "x", "config": unknown})
        assert response.status_code == 400
        assert "NoSuchSource" in response.json()["message"]


async def test_conversion_failure_fails_task_and_hides_open_transaction(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    producer_client: str,
) -> None:
    topic = unique_name("out")
    bad = {
        "name": "bad",
        "connector.class": "tests.integration.connectors:BadRecordSource",
        "topic": topic,
    }
    async with running_worker(
        worker_props(bootstrap, unique_name("g"), producer_client=producer_client), [bad]
    ) as w:
        status = await w.wait_for_tasks("bad", "FAILED", 1)
    trace = status["tasks"][0]["trace"]
    assert "could not be converted" in trace
    assert "{'p': 'only'}" in trace
    assert "{'n': 6}" in trace
    values = [json.loads(r.value) for r in await read_to_end(client_config, topic)]
    assert values == [{"n": 0}, {"n": 1}, {"n": 2}]


@pytest.mark.parametrize("output", ["records", "blocks"])
async def test_connector_requested_aborts(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    producer_client: str,
    output: str,
) -> None:
    """The same records are aborted with output=blocks as with records (a transaction's
    last block carries the request)."""
    group, topic = unique_name("g"), unique_name("out")
    props = verifiable(
        "vs",
        topic,
        records_per_partition=300,
        transaction_boundary="connector",
        commit_every_records=20,
        abort_every_transactions=3,
        output=output,
    )
    aborted: dict[str, set[int]] = {}
    for task in range(2):
        aborted.update(aborted_records(2, 20, 3, task, 300))
    expected = 4 * 300 - sum(len(s) for s in aborted.values())
    assert 0 < expected < 1200

    async with running_worker(
        worker_props(bootstrap, group, producer_client=producer_client), [props]
    ) as w:
        await w.wait_for_tasks("vs", "RUNNING", 2)
        result = await verify(client_config, topic, expected, 60, aborted)
    assert (result.records, result.duplicates, result.gaps, result.unexpected) == (
        expected,
        0,
        0,
        0,
    )
    # A restart resumes after the aborted records: they never come back.
    await run_briefly(worker_props(bootstrap, group, producer_client=producer_client), props, 2)
    result = await verify(client_config, topic, expected, 10, aborted)
    assert (result.records, result.duplicates, result.unexpected) == (expected, 0, 0)


async def test_verifiable_blocks_exactly_once_same_bytes_and_resume(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: TopicFactory,
    producer_client: str,
) -> None:
    """VerifiableSource with output=blocks, exactly-once (interval 500 ms): every record
    once, in its key's partition, with the bytes the json converters write for
    output=records; a restart resumes from the offsets and writes nothing again."""
    group = unique_name("g")
    topic = await topic_factory(partitions=3)
    props = verifiable(
        "vs",
        topic,
        output="blocks",
        record_bytes=100,
        batch_size=70,
        transaction_boundary="interval",
        transaction_boundary_interval_ms=500,
    )
    wprops = worker_props(bootstrap, group, producer_client=producer_client)
    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("vs", "RUNNING", 2)
        result = await verify(client_config, topic, 2000, 60, {})
    assert (result.records, result.duplicates, result.gaps, result.unexpected) == (2000, 0, 0, 0)

    json_ = JsonConverter()
    records = await read_to_end(client_config, topic)
    for record in records:
        value = json.loads(record.value)
        expected = record_value(value["partition"], value["seqno"], value["task"], 100)
        assert record.value == json_.convert(topic, expected)
        assert record.key == json_.convert(topic, value["partition"])
        assert record.partition == key_partition(record.key, 3)

    await run_briefly(wprops, props, 2)
    assert len(await read_to_end(client_config, topic)) == 2000


async def _reconfigure(
    bootstrap: str, group: str, props: dict[str, str], producer_client: str
) -> None:
    wprops = worker_props(bootstrap, group, producer_client=producer_client)
    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("vs", "RUNNING", 2)
        await anyio.sleep(2)
        response = await w.http.put("/connectors/vs/config", json={**props, "tasks.max": "3"})
        assert response.status_code == 200, response.text
        await w.wait_for_tasks("vs", "RUNNING", 3)
        await anyio.sleep(2)


async def test_reconfiguration_fences_old_generation_first(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    producer_client: str,
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    configs = f"{group}-configs"
    props = verifiable("vs", topic, records_per_partition=0, throughput=400)
    with capture_logs() as logs:
        await _reconfigure(bootstrap, group, props, producer_client)

    decoded = [decode_record(r.key, r.value) for r in await read_to_end(client_config, configs)]
    history = [
        (type(d).__name__, getattr(d, "tasks", None))
        for d in decoded
        if d is not None and getattr(d, "name", "") == "vs" and hasattr(d, "tasks")
    ]
    # Each generation's commit record is followed by its task count record; the
    # count 3 came only after the fencing round over the old ids 0 and 1.
    assert history == [
        ("TaskCommitRecord", 2),
        ("TaskCountRecord", 2),
        ("TaskCommitRecord", 3),
        ("TaskCountRecord", 3),
    ]
    rounds = [e for e in logs if e["event"] == "fencing round done" and e["connector"] == "vs"]
    assert [(e["fenced"], e["tasks"]) for e in rounds] == [(0, 2), (2, 3)]
    result = await verify(client_config, topic, 1, 30, {})
    assert (result.duplicates, result.gaps) == (0, 0)
    assert result.partitions == 6


async def test_separate_offsets_topic_combined_view_and_mirror(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    transactional_id: Callable[[], str],
) -> None:
    group, topic, own = unique_name("g"), unique_name("out"), unique_name("own-offsets")
    wprops = worker_props(bootstrap, group)
    global_topic = wprops["offset.storage.topic"]
    props = verifiable(
        "vs", topic, tasks_max=1, records_per_partition=200, offsets_storage_topic=own
    )
    async with running_worker(wprops) as w:  # creates the worker's topics
        pass

    def offset(partition: str, seqno: int) -> tuple[bytes, bytes | None]:
        part = {"partition": partition}
        return encode_offset_key("vs", part), encode_offset_value({"seqno": seqno})

    async with producer(client_config, transactional_id=transactional_id()) as p:
        async with p.transaction():
            for key, value in (offset("0-0", 100), offset("0-1", 30)):
                await p.send(global_topic, value, key=key)
        async with p.transaction():
            key, value = offset("0-1", 50)
            await p.send(own, value, key=key)

    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("vs", "RUNNING", 1)
        with anyio.fail_after(60):
            while True:
                seen = [json.loads(r.value) for r in await read_to_end(client_config, topic)]
                if len(seen) >= 100 + 150:
                    break
                await anyio.sleep(0.5)
        # The mirror copies the final offsets into the global topic.
        with anyio.fail_after(30):
            while True:
                mirrored = {
                    e[1]["partition"]: e[2]
                    for r in await read_to_end(client_config, global_topic)
                    if (e := decode_offset_record(r.key, r.value)) is not None
                }
                if mirrored == {"0-0": {"seqno": 200}, "0-1": {"seqno": 200}}:
                    break
                await anyio.sleep(0.5)

    by_partition: dict[str, list[int]] = {}
    for value in seen:
        by_partition.setdefault(value["partition"], []).append(value["seqno"])
    assert by_partition["0-0"] == list(range(100, 200))  # only in the global topic
    assert by_partition["0-1"] == list(range(50, 200))  # own topic wins over global's 30

    # A restart resumes from the stored offsets: nothing new is written.
    await run_briefly(wprops, props, 1)
    assert len(await read_to_end(client_config, topic)) == 250


async def test_a_hard_downgrade_resumes_from_the_global_offsets_topic(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    """KIP-618's hard downgrade: a release without exactly-once knows no connector offsets
    topic and reads only the workers' global one, where the mirror copied the connector's
    committed offsets. Played by an at-least-once worker given the connector without its
    ``offsets.storage.topic``: it resumes from those copies (no partition starts over) and
    nothing is lost; duplicates are allowed."""
    group, topic, own = unique_name("g"), unique_name("out"), unique_name("own-offsets")
    props = verifiable("vs", topic, records_per_partition=0, throughput=400)
    props["offsets.storage.topic"] = own
    await run_briefly(worker_props(bootstrap, group), props, 2)
    first = len(await read_to_end(client_config, topic))
    assert first > 0

    older = {k: v for k, v in props.items() if k != "offsets.storage.topic"}
    at_least_once = worker_props(bootstrap, group, exactly_once_source_support="disabled")
    await run_briefly(at_least_once, older, 2)
    result = await verify(client_config, topic, first + 1, 30, {})
    assert result.gaps == 0, result.summary()
    starts = Counter(
        value["partition"]
        for record in await read_to_end(client_config, topic)
        if (value := json.loads(record.value))["seqno"] == 0
    )
    assert starts == dict.fromkeys(starts, 1)
    assert len(starts) == 4, starts


async def test_at_least_once_mode_runs_and_resumes(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    producer_client: str,
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    wprops = worker_props(
        bootstrap, group, exactly_once_source_support="disabled", producer_client=producer_client
    )
    props = verifiable("vs", topic, records_per_partition=0, throughput=500)
    await run_briefly(wprops, props, 2)
    first = len(await read_to_end(client_config, topic))
    assert first > 0
    await run_briefly(wprops, props, 2)
    result = await verify(client_config, topic, first + 1, 30, {})
    assert result.gaps == 0
    assert result.records > first


async def test_transaction_timeout_fails_task_with_remedies(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    producer_client: str,
) -> None:
    topic = unique_name("out")
    never = {
        "name": "never",
        "connector.class": "tests.integration.connectors:NeverCommitSource",
        "topic": topic,
        "transaction.boundary": "connector",
        "producer.override.transaction.timeout.ms": "2000",
    }
    async with running_worker(
        worker_props(bootstrap, unique_name("g"), producer_client=producer_client), [never]
    ) as w:
        status = await w.wait_for_tasks("never", "FAILED", 1, timeout=60)
    trace = status["tasks"][0]["trace"]
    assert "transaction.timeout.ms=2000" in trace
    assert "transaction.boundary=poll" in trace
    assert await read_to_end(client_config, topic) == []


@pytest.mark.parametrize(
    ("partitions", "compacted", "expected"),
    [(2, True, "2 partition(s) but eos needs 1"), (1, False, "cleanup.policy")],
)
async def test_wrong_internal_topic_layout_is_a_clear_startup_error(
    partitions: int,
    compacted: bool,
    expected: str,
    bootstrap: str,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
) -> None:
    group = unique_name("g")
    await topic_factory(partitions, compacted=compacted, name=f"{group}-configs")
    with pytest.raises(BaseExceptionGroup) as caught:
        async with running_worker(worker_props(bootstrap, group)):
            pass
    errors = [e for e in _leaves(caught.value) if isinstance(e, TopicError)]
    assert errors, caught.value
    assert f"{group}-configs" in str(errors[0])
    assert expected in str(errors[0])


def _leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for e in group.exceptions for leaf in _leaves(e)]
    return [group]


async def test_file_source_exactly_once_and_new_lines(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    producer_client: str,
) -> None:
    group, topic = unique_name("g"), unique_name("lines")
    (tmp_path / "a.log").write_text("a1\na2\n")
    (tmp_path / "b.log").write_text("b1\npartial")
    props = {
        "name": "files",
        "connector.class": "FileSource",
        "tasks.max": "2",
        "topic": topic,
        "path": str(tmp_path / "*.log"),
        "poll.interval.ms": "200",
    }

    async def lines(count: int) -> list[str]:
        with anyio.fail_after(30):
            while True:
                got = [json.loads(r.value) for r in await read_to_end(client_config, topic)]
                if len(got) >= count:
                    return sorted(got)
                await anyio.sleep(0.3)

    async with running_worker(
        worker_props(bootstrap, group, producer_client=producer_client), [props]
    ) as w:
        await w.wait_for_tasks("files", "RUNNING", 2)
        assert await lines(3) == ["a1", "a2", "b1"]
        with (tmp_path / "b.log").open("a") as f:
            f.write(" line\n")
        (tmp_path / "c.log").write_text("c1\n")
        assert await lines(5) == ["a1", "a2", "b1", "c1", "partial line"]
    async with running_worker(
        worker_props(bootstrap, group, producer_client=producer_client), [props]
    ) as w:
        await w.wait_for_tasks("files", "RUNNING", 2)
        await anyio.sleep(1.5)
    assert await lines(5) == ["a1", "a2", "b1", "c1", "partial line"]


async def test_file_source_lines_through_the_file_source_example_chain(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """Kafka's documentation's file-source example (HoistField$Value ``line``, then
    InsertField$Value ``data_source``) and a RegexRouter on FileSource's lines, which stay
    a block: each line read back, once, as that documentation shows it (a struct of the
    line and the static field, Connect's JSON with its schema), from the renamed topic."""
    group, topic = unique_name("g"), unique_name("lines")
    plain = [f"line {n}" for n in range(300)]  # a block written with one join
    escaped = ['a "quoted" line', "é", "tab\there"]  # one written from its Arrow column
    (tmp_path / "a.log").write_text("".join(t + "\n" for t in plain))
    (tmp_path / "b.log").write_text("".join(t + "\n" for t in escaped))
    texts = plain + escaped
    smt = "org.apache.kafka.connect.transforms."
    props = {
        "name": "files", "connector.class": "FileSource", "topic": topic,
        "path": str(tmp_path / "*.log"), "poll.interval.ms": "200",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "transforms": "MakeMap,InsertSource,Route",
        "transforms.MakeMap.type": smt + "HoistField$Value",
        "transforms.MakeMap.field": "line",
        "transforms.InsertSource.type": smt + "InsertField$Value",
        "transforms.InsertSource.static.field": "data_source",
        "transforms.InsertSource.static.value": "test-file-source",
        "transforms.Route.type": smt + "RegexRouter",
        "transforms.Route.regex": "(.*)",
        "transforms.Route.replacement": "$1-lines",
    }  # fmt: skip
    async with running_worker(worker_props(bootstrap, group), [props]) as w:
        await w.wait_for_tasks("files", "RUNNING", 1)
        with anyio.fail_after(30):
            while True:
                got = await read_to_end(client_config, topic + "-lines")
                if len(got) >= len(texts):
                    break
                await anyio.sleep(0.3)
    values = [json.loads(r.value) for r in got]
    line = itemgetter("line")  # the two files' blocks come in either order
    assert sorted((v["payload"] for v in values), key=line) == sorted(
        ({"line": t, "data_source": "test-file-source"} for t in texts), key=line
    )
    assert values[0]["schema"] == {
        "type": "struct",
        "fields": [
            {"type": "string", "optional": False, "field": "line"},
            {"type": "string", "optional": True, "field": "data_source"},
        ],
        "optional": False,
    }


async def test_at_least_once_flushes_offsets_of_any_task(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """FileSource keeps the default commit_record: its offsets must still be flushed, so
    a graceful restart in at-least-once mode re-reads nothing."""
    group, topic = unique_name("g"), unique_name("lines")
    (tmp_path / "a.log").write_text("".join(f"line {n}\n" for n in range(50)))
    wprops = worker_props(bootstrap, group, exactly_once_source_support="disabled")
    props = {"name": "files", "connector.class": "FileSource", "topic": topic,
             "path": str(tmp_path / "*.log"), "poll.interval.ms": "200"}  # fmt: skip
    for _ in range(2):
        async with running_worker(wprops, [props]) as w:
            await w.wait_for_tasks("files", "RUNNING", 1)
            await anyio.sleep(2)
    assert len(await read_to_end(client_config, topic)) == 50


async def test_a_task_fenced_while_its_generation_is_current_starts_again(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    """KIP-618's worker lag: a worker behind on the config topic starts an instance of an
    older generation, whose producer fences the current task's (here: its transactional
    id fenced from outside). The fenced task stops, its worker rejoins, and the rebalance
    leaves it here: it starts again from its committed offsets, RUNNING truthfully, and
    the output stays exact."""
    group, topic = unique_name("g"), unique_name("out")
    props = verifiable("vs", topic, tasks_max=1, records_per_partition=0, throughput=300)
    with capture_logs() as logs:
        async with running_worker(worker_props(bootstrap, group), [props]) as w:
            await w.wait_for_tasks("vs", "RUNNING", 1)
            await anyio.sleep(1)
            await fence_producers(client_config, [f"{group}-vs-0"])
            with anyio.fail_after(30):
                while sum(e["event"] == "task starting" for e in logs) < 2:  # noqa: ASYNC110 - logs
                    await anyio.sleep(0.1)
            await w.wait_for_tasks("vs", "RUNNING", 1)
            restarted = len(await read_to_end(client_config, topic))
            with anyio.fail_after(30):  # the restarted task commits more (no count guessed)
                while len(await read_to_end(client_config, topic)) <= restarted:  # noqa: ASYNC110
                    await anyio.sleep(0.2)
    fenced = [e for e in logs if e["event"].startswith("task fenced")]
    assert len(fenced) == 1
    assert any(e["event"] == "rejoining the group" and "fenced" in e["reason"] for e in logs)
    result = await verify(client_config, topic, 1, 30, {})
    assert (result.duplicates, result.gaps, result.partitions) == (0, 0, 2)
