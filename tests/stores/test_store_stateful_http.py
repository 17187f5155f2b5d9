"""A stateful property test across every store at once (hypothesis): random sequences of the documented operations
(appends, replaces, deletes, reads, ``HEAD``, forks, ``PATCH``, listings), with retries that reuse idempotency keys,
stale and fresh ``If-Match``, metadata at its limits and hostile parameters, sent to five live services (memory,
SQLite, PostgreSQL, Redis, Redis Cluster). No answer may be a 5xx, and the five must answer alike: the same status,
body and headers, once what is each store's own (a version's generation, timestamps) is set aside.

Bounded so that the whole run stays within about a minute: a few short sequences, derandomized."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, start_service
from tests.stores.conftest import BACKENDS

KEYS = st.sampled_from(["a", "b", "fork-x", "日本"])
IDEMPOTENCY_KEYS = st.sampled_from([None, "k1", "k2"])
#: ``If-Match``: none, the conversation's current version (each store's own), one never current, ``*``, absent.
IF_MATCH = st.sampled_from([None, "fresh", '"9f.1"', "*", '"0"'])
TEXTS = st.sampled_from(["hi", "京都", "a\\u0085b", "x" * 50])
TITLES = st.sampled_from([None, "trip", "t" * 200, "t" * 201, "bad\n", "a\u0085b"])
TAGS = st.dictionaries(
    st.sampled_from(["user", "lang", "chatlab.forkOf", "bad:name", *(f"t{n}" for n in range(32))]),
    st.sampled_from([None, "u1", "v" * 200, "v" * 201, "x\u0085"]),
    max_size=33,
)
READ_QUERIES = st.sampled_from(
    [
        "",
        "limit=1",
        "after=1&limit=2",
        "view=summary",
        "view=bogus",
        "afer=1",
        "limit=1&limit=2",
        "limit=+1",
        "after=-0",
    ]
)
LIST_QUERIES = st.sampled_from(
    ["", "limit=1", "limit=2&after=a", "tag=user:u1", "limit=1.0", "limit=%201", "after=", "tag=bad", "limit=1&limit=1"]
)
#: Where a store's own values show: a version's generation (``"<generation>.<count>"``) and timestamps.
_VERSION = re.compile(r'"[^".]*\.(\d+)"')


def _normal(response: httpx.Response) -> tuple[Any, ...]:
    """The answer with each store's own values set aside: a version keeps its count, timestamps go."""
    headers = {
        name: _VERSION.sub(r'"*.\1"', response.headers.get(name, ""))
        for name in ("etag", "x-message-count", "link", "location", "idempotent-replayed", "content-type")
    }
    body: Any = response.content
    if response.headers.get("content-type", "").endswith("json") and response.content:
        body = _without_times(response.json())
    return response.status_code, headers, body


def _without_times(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_times(item) for item in value]
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in ("createdAt", "updatedAt")}
    return value


class AllStoresAlike(RuleBasedStateMachine):
    """Each rule sends one request to every service; the answers must be no 5xx and alike."""

    clients: ClassVar[list[httpx.Client]] = []

    @initialize()
    def start_empty(self) -> None:
        for client in self.clients:
            for summary in client.get("/chat-history").json():
                client.delete(f"/chat-history/{summary['conversationKey']}")

    def send(
        self,
        method: str,
        target: str,
        if_match: str | None = None,
        headers: dict[str, str] | None = None,
        json: Any = None,
    ) -> None:
        answers = []
        for client in self.clients:
            sent = dict(headers or {})
            if if_match == "fresh":  # each store's own current version
                key = target.split("?")[0].removeprefix("/chat-history/").removesuffix("/fork")
                sent["If-Match"] = client.head(f"/chat-history/{key}").headers["etag"]
            elif if_match is not None:
                sent["If-Match"] = if_match
            response = client.request(method, target, headers=sent, json=json)
            assert response.status_code < 500, (method, target, response.status_code, response.text)
            if response.status_code >= 400:
                assert response.headers["content-type"] == "application/problem+json", response.text
            answers.append(_normal(response))
        first = answers[0]
        for backend, answer in zip(BACKENDS, answers, strict=True):
            assert answer == first, (method, target, backend, answer, first)

    def _append(self, key: str, texts: list[str], idem: str | None, if_match: str | None) -> None:
        body = {"messages": [{"role": "user", "contents": [{"$type": "text", "text": t}]} for t in texts]}
        headers = {} if idem is None else {"Idempotency-Key": idem}
        self.send("POST", f"/chat-history/{key}", if_match, headers=headers, json=body)

    @rule(key=KEYS, texts=st.lists(TEXTS, min_size=0, max_size=3), idem=IDEMPOTENCY_KEYS, if_match=IF_MATCH)
    def append(self, key: str, texts: list[str], idem: str | None, if_match: str | None) -> None:
        self._append(key, texts, idem, if_match)

    @rule(key=KEYS, texts=st.lists(TEXTS, min_size=1, max_size=3))
    def append_plain(self, key: str, texts: list[str]) -> None:
        """The article's append, more often than the others: the conversations the other rules need."""
        self._append(key, texts, None, None)

    @rule(key=KEYS, texts=st.lists(TEXTS, max_size=2), if_match=IF_MATCH)
    def replace(self, key: str, texts: list[str], if_match: str | None) -> None:
        body = {"messages": [{"role": "assistant", "contents": [{"$type": "text", "text": t}]} for t in texts]}
        self.send("PUT", f"/chat-history/{key}", if_match, json=body)

    @rule(key=KEYS, if_match=IF_MATCH)
    def delete(self, key: str, if_match: str | None) -> None:
        self.send("DELETE", f"/chat-history/{key}", if_match)

    @rule(key=KEYS, query=READ_QUERIES, method=st.sampled_from(["GET", "HEAD"]))
    def read(self, key: str, query: str, method: str) -> None:
        self.send(method, f"/chat-history/{key}?{query}")

    @rule(
        key=KEYS,
        through=st.sampled_from([None, None, "1", "2", "9", "0", "1&through=2"]),
        name=st.sampled_from([None, None, "fork-x", "a", "bad key"]),
        idem=IDEMPOTENCY_KEYS,
        if_match=st.sampled_from([None, None, "fresh", '"9f.1"', "*"]),
    )
    def fork(self, key: str, through: str | None, name: str | None, idem: str | None, if_match: str | None) -> None:
        if name is None and idem is None:
            idem = "k3"  # a key the service makes from the idempotency key is the same on every store
        query = "&".join(part for part in (through and f"through={through}", name and f"key={name}") if part)
        headers = {} if idem is None else {"Idempotency-Key": idem}
        self.send("POST", f"/chat-history/{key}/fork?{query}", if_match, headers=headers)

    @rule(key=KEYS, title=TITLES, tags=TAGS, sets_title=st.booleans(), if_match=IF_MATCH)
    def patch(
        self, key: str, title: str | None, tags: dict[str, str | None], sets_title: bool, if_match: str | None
    ) -> None:
        body: dict[str, Any] = {"tags": tags}
        if sets_title:
            body["title"] = title
        self.send("PATCH", f"/chat-history/{key}", if_match, json=body)

    @rule(query=LIST_QUERIES)
    def listing(self, query: str) -> None:
        self.send("GET", f"/chat-history?{query}")


@pytest.fixture
def services(
    sqlite_url: str, postgres_url: str, redis_url: str, redis_cluster_url: str
) -> Iterator[list[BackgroundServer]]:
    """One service per store, in :data:`BACKENDS` order, with ``^\\w+$`` keys (so ``日本`` is one)."""
    urls = {"memory": "memory://", "sqlite": sqlite_url, "postgres": postgres_url}
    urls |= {"redis": redis_url, "redis-cluster": redis_cluster_url}
    servers = [start_service(store=urls[b], settings=ServiceSettings(key_pattern=r"^[\w-]+$")) for b in BACKENDS]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


def test_every_store_answers_every_sequence_alike_and_never_5xx(services: list[BackgroundServer]) -> None:
    clients = [httpx.Client(base_url=server.url, timeout=30) for server in services]
    AllStoresAlike.clients = clients
    try:
        run_state_machine_as_test(
            AllStoresAlike,
            settings=settings(
                max_examples=20,
                stateful_step_count=40,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        for client in clients:
            client.close()
