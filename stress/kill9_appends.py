"""kill -9 a service process while clients append, on SQLite, PostgreSQL and Redis, with one replica and with two
sharing the store: no acknowledged append may be lost, none stored twice.

Each client appends messages with unique texts, each with its own ``Idempotency-Key``, retrying the same request
(same key) on another replica or after a restart until it is acknowledged (a 2xx). Meanwhile a service process is
killed with SIGKILL and started again, over and over. At the end every conversation is read back over HTTP.

    python -m stress.kill9_appends                               # every store, 1 and 2 replicas (~1-2 min)
    python -m stress.kill9_appends --stores sqlite --replicas 2 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from stress._probe import Service, Tally, check_loopback, count, drop, message, store_url, stored_texts


async def _client(
    number: int, services: list[Service], keys: list[str], until: float, grace: float, tally: Tally, acked: list[str]
) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        n = 0
        while time.monotonic() < until:
            text = f"c{number}-{n}"
            key = random.choice(keys)
            n += 1
            body = b'{"messages":[' + message(text) + b"]}"
            headers = {"Content-Type": "application/json", "Idempotency-Key": f'"{uuid.uuid4()}"'}
            tally.sent += 1
            while time.monotonic() < until + grace:  # the same request, the same key, until it is acknowledged
                service = random.choice(services)
                try:
                    answer = await http.post(f"{service.url}/chat-history/{key}", content=body, headers=headers)
                except httpx.HTTPError:
                    tally.bump("retried")
                    await asyncio.sleep(0.05)
                    continue
                if answer.is_success:
                    tally.acknowledged += 1
                    acked.append(text)
                    break
                if answer.status_code in (429, 503) or answer.status_code >= 500:
                    tally.bump("retried")
                    await asyncio.sleep(0.05)
                    continue
                tally.bump(f"answered {answer.status_code}")
                break


async def _killer(services: list[Service], until: float, every: float, tally: Tally) -> None:
    kills = 0
    while time.monotonic() + every < until:
        await asyncio.sleep(random.uniform(every / 2, every * 1.5))
        victim = random.choice(services)
        victim.kill()
        kills += 1
        await asyncio.to_thread(victim.start)
    tally.notes["kills"] = kills


async def probe(store: str, replicas: int, seconds: float, clients: int, conversations: int, every: float) -> Tally:
    """Appends while services on ``store`` are killed every ``every`` s and restarted; what was lost or duplicated."""
    with tempfile.TemporaryDirectory() as workdir:
        url = store_url(store, Path(workdir))
        check_loopback(url)
        tally = Tally(f"kill -9 during appends ({store}, {replicas} replica{'s' if replicas > 1 else ''})")
        services = [Service(url) for _ in range(replicas)]
        try:
            for service in services:
                await asyncio.to_thread(service.start)
            keys = [f"conv{i:03d}" for i in range(conversations)]
            acked: list[str] = []
            until = time.monotonic() + seconds
            await asyncio.gather(
                _killer(services, until, every, tally),
                *(_client(i, services, keys, until, 15.0, tally, acked) for i in range(clients)),
            )
            for service in services:
                if service.process is None or service.process.poll() is not None:
                    await asyncio.to_thread(service.start)
            held = count(await asyncio.to_thread(stored_texts, services[0].url))
            tally.lost = sum(1 for text in acked if held[text] == 0)
            tally.duplicated = sum(times - 1 for times in held.values() if times > 1)
        finally:
            for service in services:
                service.stop()
            drop(url)
    return tally


def main() -> int:
    """The probe from the command line; 1 when anything was lost or duplicated."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="sqlite,postgres,redis", help="comma-separated: sqlite, postgres, redis")
    parser.add_argument("--replicas", default="1,2", help="comma-separated replica counts (default 1,2)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of appends per run (default 10)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--conversations", type=int, default=16, help="conversations written to (default 16)")
    parser.add_argument("--kill-every", type=float, default=2.0, help="seconds between kills, on average (default 2)")
    args = parser.parse_args()
    status = 0
    for store in args.stores.split(","):
        for replicas in map(int, args.replicas.split(",")):
            tally = asyncio.run(probe(store, replicas, args.seconds, args.clients, args.conversations, args.kill_every))
            status |= tally.report()
    return status


if __name__ == "__main__":
    sys.exit(main())
