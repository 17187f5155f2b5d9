"""Memory per message under the provider's real traffic: 4-message appends, each with an
``Idempotency-Key``, over many conversations, sent to ``chatlab serve`` on the in-memory store.

The figure is the growth of the service process's resident memory (RSS) over the messages' own
JSON: what the machine pays for each byte of history, idempotency records and allocator slack included.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import httpx

from .config import BenchConfig
from .servers import ServerProcess
from .workload import APPEND_KEYS, APPEND_MESSAGES, body, json_size, sample_messages

WARM_UP_APPENDS = 200
CLIENTS = 8


@dataclass
class StorageRow:
    """Bytes of RSS growth per stored message, next to the message's own JSON."""

    messages: int
    per_message: float
    json_per_message: float

    @property
    def ratio(self) -> float:
        """RSS growth over the JSON's size."""
        return self.per_message / self.json_per_message


def traffic(messages: int) -> list[bytes]:
    """The bodies of the provider's appends that store ``messages`` messages: 4 new messages each."""
    return [body(sample_messages(APPEND_MESSAGES, start=i)) for i in range(messages // APPEND_MESSAGES)]


def bench_storage(config: BenchConfig) -> StorageRow:
    """The in-memory service's RSS growth per message under the traffic; prints it."""
    bodies = traffic(config.memory_messages)
    n = len(bodies) * APPEND_MESSAGES
    with ServerProcess("service", config.stack) as service:
        asyncio.run(send(service.url, traffic(WARM_UP_APPENDS * APPEND_MESSAGES), "warm-up"))
        before = service.rss()
        asyncio.run(send(service.url, bodies, "bench-memory"))
        grown = service.rss() - before
    row = StorageRow(n, grown / n, json_size(bodies) / n)
    print_storage_row(row)
    return row


def print_storage_row(row: StorageRow) -> None:
    """The memory figure, as a sentence."""
    print(
        f"\nMemory: {row.messages:,} messages sent as the provider sends them ({APPEND_MESSAGES} per append, each "
        f"with an Idempotency-Key) to `chatlab serve` on the in-memory store: RSS growth {row.per_message:,.0f} bytes "
        f"per message, {row.json_per_message:,.0f} bytes of JSON: {row.ratio:.2f}x",
        flush=True,
    )


async def send(url: str, bodies: list[bytes], prefix: str) -> None:
    """The appends, from a few clients at once, each with an ``Idempotency-Key`` as the provider sends."""
    queue = list(enumerate(bodies))
    run = uuid.uuid4().hex[:8]

    async def client_loop(client: httpx.AsyncClient) -> None:
        while queue:
            i, raw = queue.pop()
            headers = {"content-type": "application/json", "idempotency-key": f'"{uuid.uuid4()}"'}
            response = await client.post(
                f"/chat-history/{prefix}-{run}-{i % APPEND_KEYS}", content=raw, headers=headers
            )
            response.raise_for_status()

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(CLIENTS)))
