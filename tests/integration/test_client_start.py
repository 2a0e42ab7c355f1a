"""A Kafka client whose start is cancelled half-way leaves no connection open.

aiokafka's bootstrap holds its first connection in a local variable while it asks for
metadata; cancelled there (a worker stopping while its clients start, a timeout around a
start), it left the socket to the garbage collector, with a ResourceWarning that failed
whichever test the collector happened to run in. The broker here is a loopback server that
answers ApiVersions and never answers Metadata, so every start stops at that point; the
test sees its connection closed from the other end.
"""

from __future__ import annotations

import asyncio
import gc
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from eos.kafka.clients import ClientConfig, make_admin, make_client, make_producer, started

API_VERSIONS, METADATA = 18, 3


class SilentBroker:
    """Answers ApiVersions (v0: ApiVersions and Metadata v0 to v1), then nothing."""

    def __init__(self) -> None:
        self.connections = 0
        self.closed = 0
        self.all_closed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                body = await reader.readexactly(size)
                key, _version, correlation = struct.unpack(">hhi", body[:8])
                if key == API_VERSIONS:
                    answer = struct.pack(">ihi", correlation, 0, 2)
                    answer += struct.pack(">hhh", API_VERSIONS, 0, 0)
                    answer += struct.pack(">hhh", METADATA, 0, 1)
                    writer.write(struct.pack(">i", len(answer)) + answer)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed += 1
            if self.closed == self.connections:
                self.all_closed.set()
        finally:
            writer.close()


@asynccontextmanager
async def silent_broker() -> AsyncIterator[tuple[SilentBroker, ClientConfig]]:
    broker = SilentBroker()
    server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield broker, ClientConfig({"bootstrap.servers": f"127.0.0.1:{port}"})
    finally:
        server.close()
        await server.wait_closed()


STARTS: dict[str, Callable[[ClientConfig], Awaitable[Any]]] = {
    "bare client": lambda c: started(make_client(c)),
    "producer": lambda c: started(make_producer(c, transactional_id="t-0")),
    "admin": lambda c: started(make_admin(c)),
    "bootstrap itself": lambda c: make_client(c).bootstrap(),
}


@pytest.mark.parametrize("start", STARTS)
async def test_a_start_cancelled_while_bootstrapping_closes_its_connection(start: str) -> None:
    async with silent_broker() as (broker, config):
        with anyio.move_on_after(1) as scope:
            await STARTS[start](config)
        assert scope.cancelled_caught, "the silent broker let the start finish"
        with anyio.fail_after(5):
            await broker.all_closed.wait()
        assert broker.connections >= 1
        gc.collect()  # an unclosed connection would warn here (the suite turns it into an error)
