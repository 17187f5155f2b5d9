"""What the stress probes share: isolated loopback stores, service processes to start and kill, and the tally.

Only chatlab's public pieces are used (``python -m chatlab serve``/``import``/``migrate``, HTTP, the
``ChatHistoryStore`` interface), so the probes keep working while the stores' insides change.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = ("127.0.0.1", "localhost", "::1")
SERVERS = {
    "postgres": ("CHATLAB_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    "redis": ("CHATLAB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
}


@dataclass
class Tally:
    """What a probe counts: writes sent, acknowledged (the service said done), lost (acknowledged, not stored),
    duplicated (stored more than once)."""

    probe: str
    sent: int = 0
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    notes: dict[str, object] = field(default_factory=dict)

    def bump(self, note: str) -> None:
        """Count one more of ``note``."""
        self.notes[note] = int(str(self.notes.get(note, 0))) + 1

    def report(self) -> int:
        """Print the tally (a line of text, then a line of JSON); the exit status: 1 if anything was lost or doubled."""
        extra = "".join(f", {name} {value}" for name, value in self.notes.items())
        print(
            f"{self.probe}: sent {self.sent}, acknowledged {self.acknowledged}, lost {self.lost}, "
            f"duplicated {self.duplicated}{extra}",
            flush=True,
        )
        print(json.dumps(asdict(self)), flush=True)
        return 1 if self.lost or self.duplicated else 0


def message(text: str) -> bytes:
    """A chat message whose text identifies it."""
    return json.dumps({"role": "user", "contents": [{"$type": "text", "text": text}]}, separators=(",", ":")).encode()


def texts(messages: Iterable[object]) -> list[str]:
    """The text of each message (as :func:`message` writes them)."""
    return [str(m["contents"][0]["text"]) for m in messages if isinstance(m, dict) and m.get("contents")]


def stored_texts(url: str, client: httpx.Client | None = None) -> dict[str, list[str]]:
    """Every conversation of the service at ``url`` and its messages' texts."""
    http = client or httpx.Client(base_url=url, timeout=60)
    try:
        keys = [item["conversationKey"] for item in http.get("/chat-history").raise_for_status().json()]
        return {key: texts(http.get(f"/chat-history/{key}").raise_for_status().json()) for key in keys}
    finally:
        if client is None:
            http.close()


def count(stored: dict[str, list[str]]) -> Counter[str]:
    return Counter(text for messages in stored.values() for text in messages)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def store_url(kind: str, workdir: Path) -> str:
    """A fresh store of ``kind`` (sqlite, postgres, redis, or a URL) on loopback, isolated by schema or prefix."""
    name = f"chatlab_stress_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    if kind == "sqlite":
        return f"sqlite:///{workdir / (name + '.db')}"
    if kind in SERVERS:
        variable, default = SERVERS[kind]
        base = os.environ.get(variable, default)
        return _with_query(base, schema=name) if kind == "postgres" else _with_query(base, prefix=name + ":")
    return kind


def check_loopback(url: str) -> None:
    """The probes only ever hit this machine."""
    host = urlsplit(url).hostname
    if url.startswith(("postgresql", "postgres", "redis")) and host not in LOOPBACK:
        raise SystemExit(f"error: {url.split('@')[-1]} is not on loopback: the stress probes only run locally")


def drop(url: str) -> None:
    """Remove what a probe left in a server store (a PostgreSQL schema, Redis keys under the prefix)."""
    query = dict(parse_qsl(urlsplit(url).query))
    base = urlunsplit(urlsplit(url)._replace(query=""))
    try:
        if "schema" in query:
            import psycopg
            from psycopg import sql

            with psycopg.connect(base, autocommit=True, connect_timeout=5) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(query["schema"])))
        elif "prefix" in query:
            import redis

            client = redis.Redis.from_url(base, socket_timeout=5)
            keys = list(client.scan_iter(match=query["prefix"] + "*", count=1000))
            for i in range(0, len(keys), 500):
                client.delete(*keys[i : i + 500])
            client.close()
    except Exception as exc:  # cleaning up is a courtesy: say so, don't fail the probe
        print(f"note: could not clean up {base}: {exc}", file=sys.stderr)


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


def chatlab_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "chatlab", *args]


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


class Service:
    """``python -m chatlab serve`` as a process on a loopback port, to be killed and started again."""

    def __init__(self, store: str, port: int | None = None, *flags: str) -> None:
        self.store, self.port, self.flags = store, port or free_port(), flags
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - the log lives as long as the service

    def start(self, timeout: float = 30.0) -> Service:
        command = chatlab_command("serve", "--store", self.store, "--port", str(self.port), "--log-level", "error")
        self.process = subprocess.Popen(
            [*command, *self.flags],
            stdout=self.log,
            stderr=self.log,
            env=environment(CHATLAB_IDEMPOTENCY_TTL="3600"),
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise SystemExit(f"error: the service exited: {self.log.read().decode(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"error: the service at {self.url} did not start within {timeout} s")

    def kill(self) -> None:
        """``kill -9``: no goodbye, whatever it was doing."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
