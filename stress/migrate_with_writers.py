"""A migration while clients write to the target through a service on it, the first run killed with -9: no
acknowledged write and no source message may be lost or stored twice.

A SQLite source is filled with conversations; a service runs on the target store; clients append (each with an
``Idempotency-Key``, retried until acknowledged) to conversations not copied yet, already copied, and new ones.
``python -m chatlab migrate`` is started and killed with SIGKILL once it copied part of them (``--kill-at``), then
run again, the same command, until it is done.

    python -m stress.migrate_with_writers                        # into SQLite, PostgreSQL and Redis (~1-2 min)
    python -m stress.migrate_with_writers --to postgres --conversations 5000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from chatlab.stores import open_store
from chatlab.stores.base import ConversationRecord, new_version
from stress._probe import (
    Service,
    Tally,
    chatlab_command,
    check_loopback,
    count,
    drop,
    environment,
    message,
    store_url,
    stored_texts,
)


async def _fill(url: str, conversations: int) -> dict[str, list[str]]:
    held = {f"conv{i:05d}": [f"s{i}-{j}" for j in range(1 + i % 4)] for i in range(conversations)}
    store = open_store(url)
    try:
        records = [
            ConversationRecord(key, [message(t) for t in texts], new_version(len(texts)), 1.7e9, 1.7e9)
            for key, texts in held.items()
        ]
        for start in range(0, len(records), 500):
            await store.restore(records[start : start + 500])
    finally:
        await store.close()
    return held


async def _writer(
    number: int, url: str, keys: list[str], stop: asyncio.Event, tally: Tally, acked: list[tuple[str, str]]
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        n = 0
        while not stop.is_set():
            key = random.choice(keys) if n % 4 else f"new{number}-{n}"
            text = f"w{number}-{n}"
            n += 1
            body = b'{"messages":[' + message(text) + b"]}"
            headers = {"Content-Type": "application/json", "Idempotency-Key": f'"{uuid.uuid4()}"'}
            tally.sent += 1
            for _ in range(100):
                try:
                    answer = await http.post(f"/chat-history/{key}", content=body, headers=headers)
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)
                    continue
                if answer.status_code in (429, 503):
                    await asyncio.sleep(0.05)
                    continue
                if answer.is_success:
                    tally.acknowledged += 1
                    acked.append((key, text))
                break
            await asyncio.sleep(0.005)


def _copied(url: str) -> int:
    """How many of the source's conversations the target holds now."""
    listing = httpx.get(f"{url}/chat-history", timeout=30).json()
    return sum(1 for item in listing if str(item["conversationKey"]).startswith("conv"))


def _migrate(source: str, target: str, kill_at: int | None, service: str) -> tuple[int, int, str]:
    """Run ``chatlab migrate`` (killed with SIGKILL once the target holds ``kill_at`` conversations, if given):
    its exit status, how many of the source's conversations the target held after it, and its report."""
    command = chatlab_command("migrate", "--from", source, "--to", target, "--batch", "50")
    process = subprocess.Popen(command, stderr=subprocess.PIPE, env=environment())
    deadline = time.monotonic() + 60
    while kill_at is not None and process.poll() is None and time.monotonic() < deadline:
        if _copied(service) >= kill_at:
            process.kill()
            break
        time.sleep(0.05)
    _, said = process.communicate()
    lines = said.decode(errors="replace").splitlines()
    report = next((line for line in reversed(lines) if line.startswith("migrate: ") and "conversations:" in line), "")
    return process.returncode, _copied(service), report.removeprefix("migrate: ")


async def probe(kind: str, conversations: int, writers: int, kill_at: float) -> Tally:
    """A migration into ``kind`` with writers on the target, killed once at ``kill_at`` of the copy and run again."""
    with tempfile.TemporaryDirectory() as workdir:
        source = store_url("sqlite", Path(workdir))
        target = store_url(kind, Path(workdir))
        check_loopback(target)
        tally = Tally(f"migration with writers on the target (sqlite -> {kind})")
        held = await _fill(source, conversations)
        service = Service(target)
        try:
            await asyncio.to_thread(service.start)
            stop = asyncio.Event()
            acked: list[tuple[str, str]] = []
            tasks: list[asyncio.Task[None]] = []
            runs: list[str] = []
            kill: int | None = int(conversations * kill_at)
            for _ in range(6):
                run = asyncio.create_task(asyncio.to_thread(_migrate, source, target, kill, service.url))
                while not tasks and not run.done():  # the writers start once the copy has begun
                    if await asyncio.to_thread(_copied, service.url):
                        tasks = [
                            asyncio.create_task(_writer(i, service.url, list(held), stop, tally, acked))
                            for i in range(writers)
                        ]
                    await asyncio.sleep(0.02)
                status, held_now, said = await run
                tally.notes["last report"] = said or "none"
                killed = f" (killed with {held_now} of {conversations} copied)" if status < 0 else ""
                runs.append(f"{status}{killed}")
                kill = None
                if status == 0:
                    break
            stop.set()
            await asyncio.gather(*tasks)
            tally.notes["migrate runs (exit status)"] = " ".join(runs)
            stored = await asyncio.to_thread(stored_texts, service.url)
        finally:
            service.stop()
            drop(target)
    held_count = count(stored)
    tally.lost = sum(1 for key, text in acked if text not in stored.get(key, []))
    tally.duplicated = sum(times - 1 for times in held_count.values() if times > 1)
    tally.notes["source messages lost"] = sum(
        1 for key, texts in held.items() for text in texts if text not in stored.get(key, [])
    )
    return tally


def main() -> int:
    """The probe from the command line; 1 when anything was lost or went against the documented behaviour."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--to", default="sqlite,postgres,redis", help="comma-separated target stores")
    parser.add_argument("--conversations", type=int, default=600, help="conversations in the source (default 600)")
    parser.add_argument("--writers", type=int, default=4, help="clients writing to the target (default 4)")
    parser.add_argument(
        "--kill-at", type=float, default=0.3, help="share copied when the first migrate is killed (default 0.3)"
    )
    args = parser.parse_args()
    status = 0
    started = time.monotonic()
    for kind in args.to.split(","):
        tally = asyncio.run(probe(kind, args.conversations, args.writers, args.kill_at))
        status |= tally.report()
        status |= 1 if tally.notes["source messages lost"] else 0
    print(f"took {time.monotonic() - started:.0f} s", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
