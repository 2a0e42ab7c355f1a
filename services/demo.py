"""The small transactional produce/consume demo that ``eos run`` shows on a local Kafka."""

from __future__ import annotations

import json
import time

import anyio

from eos.kafka import ClientConfig, fence_producers, make_producer, read_to_end
from eos.kafka.admin import ensure_topic


async def transactional_demo(bootstrap: str, topic: str = "eos-demo") -> dict[str, int]:
    """Commit one transaction, abort one, fence a zombie; read back with read_committed."""
    config = ClientConfig({"bootstrap.servers": bootstrap})
    await ensure_topic(config, topic, partitions=1)
    run = int(time.time())
    before = len(await read_to_end(config, topic))
    producer = make_producer(config, transactional_id=f"eos-demo-{run}")
    await producer.start()
    try:
        async with producer.transaction():
            for n in range(10):
                await producer.send(
                    topic, json.dumps({"run": run, "n": n, "txn": "commit"}).encode()
                )
        await producer.begin_transaction()
        for n in range(5):
            await producer.send(topic, json.dumps({"run": run, "n": n, "txn": "abort"}).encode())
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.send_and_wait(topic, json.dumps({"run": run, "txn": "zombie"}).encode())
        await fence_producers(config, [f"eos-demo-{run}"])
    finally:
        await producer.stop()
    records = (await read_to_end(config, topic))[before:]
    kinds = [json.loads(r.value)["txn"] for r in records]
    return {
        "committed_visible": kinds.count("commit"),
        "aborted_visible": kinds.count("abort"),
        "zombie_visible": kinds.count("zombie"),
    }


def run_demo(bootstrap: str, topic: str = "eos-demo") -> bool:
    seen = anyio.run(transactional_demo, bootstrap, topic)
    print(
        f"demo on topic {topic!r} at {bootstrap} (read back with isolation.level=read_committed):"
    )
    print(f"  committed transaction: 10 records sent, {seen['committed_visible']} visible")
    print(f"  aborted transaction:    5 records sent, {seen['aborted_visible']} visible")
    print(f"  fenced zombie:          1 record sent,  {seen['zombie_visible']} visible")
    ok = seen == {"committed_visible": 10, "aborted_visible": 0, "zombie_visible": 0}
    print("  result: " + ("exactly the committed records are visible" if ok else "UNEXPECTED"))
    return ok
