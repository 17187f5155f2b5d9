"""API keys and namespaces over real HTTP: every endpoint x (no key, wrong key, other namespace's key, right key)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.service.security import ApiKeys
from chatlab.stores import InMemoryChatHistoryStore
from tests.summaries import article

ALICE_KEY = "alice-0123456789abcdef-key"
BOB_KEY = "bob-0123456789abcdef-key"
WRONG_KEY = "nobody-0123456789abcdef-key"
KEY = "286d2f0b7b7a43688ad32556e3610f54"
NEVER = "never-written-conversation"

ENDPOINTS = [
    ("GET", "/"),
    ("GET", "/chat-history"),
    ("GET", "/chat-history?limit=1"),
    ("GET", f"/chat-history/{KEY}"),
    ("PATCH", f"/chat-history/{KEY}"),
    ("POST", f"/chat-history/{KEY}"),
    ("PUT", f"/chat-history/{KEY}"),
    ("DELETE", f"/chat-history/{KEY}"),
]
CREDENTIALS = {
    "no key": {},
    "wrong key": {"Authorization": f"Bearer {WRONG_KEY}"},
    "wrong scheme": {"Authorization": f"Basic {ALICE_KEY}"},
    "other namespace's key": {"Authorization": f"Bearer {BOB_KEY}"},
    "right key": {"Authorization": f"Bearer {ALICE_KEY}"},
}
ALICE = CREDENTIALS["right key"]
BOB = CREDENTIALS["other namespace's key"]
SEED = [{"role": "user", "contents": [{"$type": "text", "text": "alice's"}]}]
NEW = [{"role": "user", "contents": [{"$type": "text", "text": "new"}]}]


@pytest.fixture(scope="module")
def keyed_service() -> Iterator[BackgroundServer]:
    settings = ServiceSettings(api_keys={ALICE_KEY: "alice", BOB_KEY: "bob"})
    with BackgroundServer(create_app(InMemoryChatHistoryStore(), settings), name="keyed") as server:
        yield server


@pytest.fixture
def client(keyed_service: BackgroundServer) -> Iterator[httpx.Client]:
    """A client on the keyed service, with alice's conversation KEY holding SEED and nothing else."""
    with httpx.Client(base_url=keyed_service.url, timeout=10) as c:
        for who in (ALICE, BOB):
            for summary in c.get("/chat-history", headers=who).json():
                c.delete(f"/chat-history/{summary['conversationKey']}", headers=who)
        assert c.put(f"/chat-history/{KEY}", json={"messages": SEED}, headers=ALICE).status_code == 204
        yield c


def _state(c: httpx.Client) -> tuple:
    return (
        c.get("/chat-history", headers=ALICE).json(),
        c.get(f"/chat-history/{KEY}", headers=ALICE).json(),
        c.get("/chat-history", headers=BOB).json(),
    )


@pytest.mark.parametrize("credentials", list(CREDENTIALS))
@pytest.mark.parametrize(("method", "path"), ENDPOINTS, ids=[f"{m} {p.replace(KEY, '{key}')}" for m, p in ENDPOINTS])
def test_matrix(client: httpx.Client, method: str, path: str, credentials: str) -> None:
    headers = CREDENTIALS[credentials]
    body = {"json": {"messages": NEW}} if method in ("POST", "PUT") else {}
    if method == "PATCH":
        body = {"json": {"title": "new title", "tags": {"t": "v"}}}
    before = _state(client)
    response = client.request(method, path, headers=headers, **body)

    if credentials in ("no key", "wrong key", "wrong scheme"):
        assert response.status_code == 401
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["status"] == 401 and problem["title"] == "Unauthorized"
        assert "Authorization: Bearer" in problem["detail"]
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith('Bearer realm="chat-history"')
        assert ('error="invalid_token"' in challenge) == (credentials != "no key")
        assert ALICE_KEY not in response.text and WRONG_KEY not in response.text
        assert _state(client) == before
        return

    if credentials == "other namespace's key":
        # bob sees alice's conversation exactly as one that does not exist
        twin = client.request(method, path.replace(KEY, NEVER), headers=headers, **body)
        assert response.status_code == twin.status_code
        assert response.content == twin.content
        if method == "GET" and path.endswith(KEY):
            assert response.json() == [] and response.headers["etag"] == twin.headers["etag"] == '"0"'
        if path.startswith("/chat-history?") or path == "/chat-history":
            assert response.json() == []
        if method in ("POST", "PUT"):  # bob wrote his own conversation of that name
            assert client.get(f"/chat-history/{KEY}", headers=BOB).json() == NEW
        assert _state(client)[:2] == before[:2]  # alice's conversations untouched
        return

    # the right key: the article's behaviour, in alice's namespace
    expected = {"GET": 200, "POST": 202, "PUT": 204, "DELETE": 204, "PATCH": 200}[method]
    assert response.status_code == expected
    listing = client.get("/chat-history", headers=ALICE).json()
    if method == "GET" and path.startswith("/chat-history?"):
        assert article(response.json()) == [{"conversationKey": KEY, "messageCount": 1}]
    elif method == "PATCH":
        assert response.json()["conversationKey"] == KEY  # no namespace shown
        assert (listing[0]["title"], listing[0]["tags"]) == ("new title", {"t": "v"})
    elif method == "GET" and path == "/chat-history":
        assert article(response.json()) == [{"conversationKey": KEY, "messageCount": 1}]  # no namespace shown
    elif method == "GET" and path.endswith(KEY):
        assert response.json() == SEED
    elif method == "POST":
        assert response.headers["location"] == f"/chat-history/{KEY}"
        assert client.get(path, headers=ALICE).json() == SEED + NEW
    elif method == "PUT":
        assert client.get(path, headers=ALICE).json() == NEW
    elif method == "DELETE":
        assert listing == []
    assert client.get("/chat-history", headers=BOB).json() == before[2]


def test_if_match_star_cannot_probe_another_namespace(client: httpx.Client) -> None:
    probe = client.put(f"/chat-history/{KEY}", json={"messages": NEW}, headers={**BOB, "If-Match": "*"})
    twin = client.put(f"/chat-history/{NEVER}", json={"messages": NEW}, headers={**BOB, "If-Match": "*"})
    assert probe.status_code == twin.status_code == 412
    assert probe.headers["etag"] == twin.headers["etag"] == '"0"'
    alice_etag = client.get(f"/chat-history/{KEY}", headers=ALICE).headers["etag"]
    guess = client.put(f"/chat-history/{KEY}", json={"messages": NEW}, headers={**BOB, "If-Match": alice_etag})
    assert guess.status_code == 412
    deleting = client.delete(f"/chat-history/{KEY}", headers={**BOB, "If-Match": alice_etag})
    assert deleting.status_code == 412 and deleting.headers["etag"] == '"0"'  # bob's own, absent KEY
    assert client.get(f"/chat-history/{KEY}", headers=ALICE).json() == SEED


def test_idempotency_keys_are_per_namespace(client: httpx.Client) -> None:
    headers = {"Idempotency-Key": '"shared-key"'}
    assert client.post(f"/chat-history/{KEY}", json={"messages": NEW}, headers={**ALICE, **headers}).status_code == 202
    bob = client.post(f"/chat-history/{KEY}", json={"messages": SEED}, headers={**BOB, **headers})
    assert bob.status_code == 202 and "idempotent-replayed" not in bob.headers  # not alice's record
    assert client.get(f"/chat-history/{KEY}", headers=BOB).json() == SEED


def test_openapi_and_docs_stay_public_and_document_the_scheme(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["ApiKey"]["description"],
    }
    get = spec["paths"]["/chat-history/{conversationKey}"]["get"]
    assert get["security"] == [{"ApiKey": []}]
    assert "WWW-Authenticate" in get["responses"]["401"]["headers"]


def test_keys_are_never_logged(keyed_service: BackgroundServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with httpx.Client(base_url=keyed_service.url, timeout=10) as c:
        c.get("/chat-history", headers=ALICE)
        c.get("/chat-history", headers={"Authorization": f"Bearer {WRONG_KEY}"})
    logged = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    assert ALICE_KEY not in logged and WRONG_KEY not in logged


# -- the key file format ---------------------------------------------------------------------------


def test_parse_the_documented_format(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "keys.txt"
    path.write_text(
        "# namespace:key, one per line\n"
        f"alice:{ALICE_KEY}\n"
        "\n"
        f"alice:{'rotated-' + ALICE_KEY}   # the new key while clients move\n"
        f"bob:{BOB_KEY},carol:{'carol-' + BOB_KEY}\n"
    )
    keys = ApiKeys.from_file(path)
    assert len(keys) == 4 and keys.namespaces == ["alice", "bob", "carol"]
    assert keys.namespace_of(ALICE_KEY) == (0, "alice")
    assert keys.namespace_of("rotated-" + ALICE_KEY)[1] == "alice"
    assert keys.namespace_of(WRONG_KEY) is None
    assert ALICE_KEY not in repr(keys)
    monkeypatch.delenv("CHATLAB_API_KEYS", raising=False)
    monkeypatch.delenv("CHATLAB_API_KEYS_FILE", raising=False)
    assert ServiceSettings().api_keys is None
    monkeypatch.setenv("CHATLAB_API_KEYS", f"dave:{WRONG_KEY}")
    monkeypatch.setenv("CHATLAB_API_KEYS_FILE", str(path))
    env = ServiceSettings().api_keys
    assert env is not None and env.namespaces == ["alice", "bob", "carol", "dave"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{ALICE_KEY}", "NAMESPACE:KEY"),
        (f"al ice:{ALICE_KEY}", "namespace"),
        ("alice:short", "shorter than 16"),
        (f"alice:{ALICE_KEY} extra", "bearer token"),
        (f"alice:{ALICE_KEY}\nbob:{ALICE_KEY}", "one namespace"),
        ("# nothing\n", "no NAMESPACE:KEY"),
    ],
)
def test_bad_key_files_are_refused_without_showing_the_key(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        ApiKeys.parse(text)
    assert message in str(error.value)
    assert ALICE_KEY not in str(error.value)


def test_pages_stay_in_the_callers_namespace(client: httpx.Client) -> None:
    for who, names in ((ALICE, ["a1", "a2", "a3", "zz"]), (BOB, ["a0", "b1", "zz"])):
        for name in names:
            assert client.put(f"/chat-history/{name}", json={"messages": NEW}, headers=who).status_code == 204
    keys, url = [], "/chat-history?limit=2"
    while url:
        response = client.get(url, headers=ALICE)
        keys += [s["conversationKey"] for s in response.json()]
        url = response.links.get("next", {}).get("url")
        assert "alice" not in (url or "")  # the next page names the caller's own key
    assert keys == sorted(["a1", "a2", "a3", "zz", KEY])
    assert [s["conversationKey"] for s in client.get("/chat-history?after=a3", headers=BOB).json()] == ["b1", "zz"]


def test_pages_without_keys_skip_namespaced_conversations() -> None:
    """Conversations written while keys were on (``alice/...``) stay hidden from a page, which reads on past them."""
    import asyncio

    store = InMemoryChatHistoryStore()
    for key in ("a", "alice/1", "alice/2", "alice/3", "b"):
        asyncio.run(store.append(key, [b'{"role":"user","contents":[]}']))
    with BackgroundServer(create_app(store, ServiceSettings()), name="open") as server:
        first = httpx.get(f"{server.url}/chat-history?limit=1")
        assert [s["conversationKey"] for s in first.json()] == ["a"]
        second = httpx.get(server.url + first.links["next"]["url"])
        assert [s["conversationKey"] for s in second.json()] == ["b"] and "link" not in second.headers
