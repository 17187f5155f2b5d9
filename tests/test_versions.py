"""ETag / If-Match and Idempotency-Key over real HTTP: safe concurrent updates and safe retries."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from chatlab.runner import BackgroundServer

KEY = "286d2f0b7b7a43688ad32556e3610f54"
URL = f"/chat-history/{KEY}"


def text(role: str, value: str) -> dict:
    return {"role": role, "contents": [{"$type": "text", "text": value}]}


def texts(response: httpx.Response) -> list[str]:
    return [m["contents"][0]["text"] for m in response.json()]


def test_get_answers_the_version_and_writes_answer_the_new_one(http: httpx.Client) -> None:
    unknown = http.get(URL)
    assert unknown.json() == [] and unknown.headers["etag"] == '"0"'
    appended = http.post(URL, json={"messages": [text("user", "a")]})
    assert appended.status_code == 202 and appended.headers["etag"] not in ('"0"', None)
    read = http.get(URL)
    assert read.headers["etag"] == appended.headers["etag"]
    replaced = http.put(URL, json={"messages": [text("user", "b")]})
    assert replaced.status_code == 204 and replaced.headers["etag"] != read.headers["etag"]
    assert http.get(URL).headers["etag"] == replaced.headers["etag"]
    http.delete(URL)
    assert http.get(URL).headers["etag"] == '"0"'


@pytest.mark.parametrize("method", ["put", "post", "delete"])
def test_a_stale_if_match_gets_412_and_changes_nothing(http: httpx.Client, method: str) -> None:
    http.post(URL, json={"messages": [text("user", "a")]})
    stale = http.get(URL).headers["etag"]
    current = http.post(URL, json={"messages": [text("user", "b")]}).headers["etag"]
    refused = http.request(method.upper(), URL, json={"messages": [text("user", "c")]}, headers={"If-Match": stale})
    assert refused.status_code == 412
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["etag"] == current
    assert "GET it again" in refused.json()["detail"]
    assert texts(http.get(URL)) == ["a", "b"]
    ok = http.request(method.upper(), URL, json={"messages": [text("user", "c")]}, headers={"If-Match": current})
    assert ok.is_success


def test_if_match_star_and_zero_and_lists(http: httpx.Client) -> None:
    body = {"messages": [text("user", "a")]}
    assert http.put(URL, json=body, headers={"If-Match": "*"}).status_code == 412  # * needs it to exist
    created = http.put(URL, json=body, headers={"If-Match": '"0"'})  # "0": only if it does not exist
    assert created.status_code == 204
    assert http.post(URL, json=body, headers={"If-Match": '"0"'}).status_code == 412
    assert http.post(URL, json=body, headers={"If-Match": "*"}).status_code == 202
    now = http.get(URL).headers["etag"]
    assert http.post(URL, json=body, headers={"If-Match": f'"other", {now}'}).status_code == 202
    weak = http.post(URL, json=body, headers={"If-Match": f"W/{http.get(URL).headers['etag']}"})
    assert weak.status_code == 412  # strong comparison: a weak tag never matches
    assert http.post(URL, json=body, headers={"If-Match": 'a"b, "'}).status_code == 412  # malformed: never matches
    assert len(http.get(URL).json()) == 3


def test_delete_reads_if_match_as_put_does(http: httpx.Client) -> None:
    """``*`` needs the conversation to exist, ``"0"`` that it does not; weak and malformed tags never match."""
    body = {"messages": [text("user", "a")]}
    star = http.delete(URL, headers={"If-Match": "*"})
    assert star.status_code == 412 and star.headers["etag"] == '"0"'
    assert http.delete(URL, headers={"If-Match": '"0"'}).status_code == 204  # nothing there, nothing deleted
    assert http.get("/chat-history").json() == []
    now = http.post(URL, json=body).headers["etag"]
    for refused in ('"0"', f"W/{now}", 'a"b, "'):
        answer = http.delete(URL, headers={"If-Match": refused})
        assert answer.status_code == 412 and answer.headers["etag"] == now, refused
    assert texts(http.get(URL)) == ["a"]
    assert http.delete(URL, headers={"If-Match": f'"other", {now}'}).status_code == 204
    assert http.get(URL).headers["etag"] == '"0"'
    http.post(URL, json=body)
    assert http.delete(URL, headers={"If-Match": "*"}).status_code == 204
    assert http.get(URL).json() == []


def test_delete_without_if_match_is_the_articles(http: httpx.Client) -> None:
    assert http.delete(URL).status_code == 204  # also for an unknown key
    http.post(URL, json={"messages": [text("user", "a")]})
    deleted = http.delete(URL)
    assert deleted.status_code == 204 and deleted.content == b""
    assert http.get(URL).json() == [] and http.get("/chat-history").json() == []


def test_two_read_modify_write_clients_one_wins_one_gets_412_nothing_lost(
    service: BackgroundServer, http: httpx.Client
) -> None:
    http.put(URL, json={"messages": [text("user", "original")]})
    both_read = threading.Barrier(2, timeout=30)
    outcomes: list[tuple[str, int]] = []

    def client(name: str) -> None:
        with httpx.Client(base_url=service.url, timeout=30) as c:
            for attempt in range(5):
                read = c.get(URL)
                if attempt == 0:
                    both_read.wait()  # both clients now hold the same version; then both write at once
                changed = c.put(
                    URL,
                    json={"messages": [*read.json(), text("user", name)]},
                    headers={"If-Match": read.headers["etag"]},
                )
                outcomes.append((name, changed.status_code))
                if changed.status_code == 204:
                    return
                assert changed.status_code == 412, changed.text

    threads = [threading.Thread(target=client, args=(name,)) for name in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_client = {name: [status for n, status in outcomes if n == name] for name in ("first", "second")}
    # one wins at once; the other is refused with 412, re-reads and then succeeds
    assert sorted(by_client.values()) == [[204], [412, 204]]
    winner = next(name for name, statuses in by_client.items() if statuses == [204])
    loser = "second" if winner == "first" else "first"
    assert texts(http.get(URL)) == ["original", winner, loser]  # nothing lost


def test_unconditional_writes_still_race_as_in_the_article(http: httpx.Client) -> None:
    """Without If-Match the last PUT wins (why read-modify-write clients should send it)."""
    http.put(URL, json={"messages": [text("user", "original")]})
    a, b = http.get(URL).json(), http.get(URL).json()
    http.put(URL, json={"messages": [*a, text("user", "first")]})
    http.put(URL, json={"messages": [*b, text("user", "second")]})
    assert texts(http.get(URL)) == ["original", "second"]


def test_a_retried_post_with_the_same_idempotency_key_is_applied_once(http: httpx.Client) -> None:
    body = {"messages": [text("user", "q"), text("assistant", "a")]}
    first = http.post(URL, json=body, headers={"Idempotency-Key": '"8e03978e-40d5-43e8-bc93-6894a57f9324"'})
    assert first.status_code == 202 and "idempotent-replayed" not in first.headers
    # the retry may be spelled differently (other whitespace, a parameter the draft does not define): same key,
    # same messages
    raw = json.dumps(body, indent=2).encode()
    retry = http.post(
        URL,
        content=raw,
        headers={
            "Idempotency-Key": '"8e03978e-40d5-43e8-bc93-6894a57f9324";attempt=2',
            "content-type": "application/json",
        },
    )
    assert retry.status_code == 202
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.headers["etag"] == first.headers["etag"]
    assert retry.headers["location"] == first.headers["location"]
    assert texts(http.get(URL)) == ["q", "a"]

    other = http.post(
        URL,
        json={"messages": [text("user", "x")]},
        headers={"Idempotency-Key": '"8e03978e-40d5-43e8-bc93-6894a57f9324"'},
    )
    assert other.status_code == 422
    assert other.headers["content-type"] == "application/problem+json"
    assert "new key" in other.json()["detail"]
    assert texts(http.get(URL)) == ["q", "a"]

    fresh = http.post(URL, json=body, headers={"Idempotency-Key": '"another"'})
    assert fresh.status_code == 202 and "idempotent-replayed" not in fresh.headers
    assert texts(http.get(URL)) == ["q", "a", "q", "a"]


MALFORMED_KEYS = {
    "empty": "",
    "an empty string": '""',
    "too long": '"' + "x" * 256 + '"',
    "not ASCII": '"caf\u00e9"',
    "unescaped quote": '"a"b"',
    "a tab": '"tab\there"',
    "unquoted with a space": "8e03978e 40d5",
    "unquoted with a backslash": "8e03978e\\40d5",
    "unquoted, too long": "x" * 256,
    "unknown escape": '"a\\qb"',
    "unclosed": '"abc',
    "a list": '"a", "b"',
}


@pytest.mark.parametrize("case", list(MALFORMED_KEYS))
def test_a_malformed_idempotency_key_gets_400(http: httpx.Client, case: str) -> None:
    """The header is an RFC 8941 String (draft-ietf-httpapi-idempotency-key-header); anything else is refused."""
    key = MALFORMED_KEYS[case]
    response = http.post(
        URL, json={"messages": [text("user", "x")]}, headers=[("Idempotency-Key", key.encode("utf-8"))]
    )
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["detail"]
    assert http.get("/chat-history").json() == []


def test_an_unquoted_idempotency_key_is_the_same_key_as_quoted(http: httpx.Client) -> None:
    """Most clients (Stripe's among them) send the key unquoted: it is honoured, and is the quoted key's twin."""
    body = {"messages": [text("user", "once")]}
    first = http.post(URL, json=body, headers={"Idempotency-Key": "8e03978e40d543e8"})
    assert first.status_code == 202 and "idempotent-replayed" not in first.headers
    again = http.post(URL, json=body, headers={"Idempotency-Key": '"8e03978e40d543e8"'})
    assert again.status_code == 202 and again.headers["idempotent-replayed"] == "true"
    assert again.headers["etag"] == first.headers["etag"]
    assert len(http.get(URL).json()) == 1
    other = http.post(URL, json={"messages": [text("user", "other")]}, headers={"Idempotency-Key": "8e03978e40d543e8"})
    assert other.status_code == 422


def test_longest_idempotency_key_is_accepted(http: httpx.Client) -> None:
    key = '"' + "k" * 254 + '\\""'  # 255 characters, the last an escaped quote
    response = http.post(URL, json={"messages": [text("user", "x")]}, headers={"Idempotency-Key": key})
    assert response.status_code == 202


def test_two_idempotency_key_fields_are_refused(http: httpx.Client) -> None:
    """Two header lines make a list (RFC 9110 section 5.3), not the one String the header holds."""
    headers = [("Idempotency-Key", b'"a"'), ("Idempotency-Key", b'"b"')]
    response = http.post(URL, json={"messages": [text("user", "x")]}, headers=headers)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["detail"]
    assert http.get("/chat-history").json() == []


def test_concurrent_retries_of_one_append_store_it_once(service: BackgroundServer, http: httpx.Client) -> None:
    body = {"messages": [text("user", f"m{i}") for i in range(5)]}
    start = threading.Barrier(6, timeout=30)
    statuses: list[int] = []

    def send() -> None:
        with httpx.Client(base_url=service.url, timeout=30) as c:
            start.wait()
            statuses.append(c.post(URL, json=body, headers={"Idempotency-Key": '"same"'}).status_code)

    threads = [threading.Thread(target=send) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [202] * 6
    assert texts(http.get(URL)) == [f"m{i}" for i in range(5)]


def test_the_request_fingerprint_is_the_one_stored_records_hold() -> None:
    """Idempotency records outlive a restart (database stores): a retry after an upgrade must still match the
    fingerprint the record was written with (sha256 of the operation, then each message after its 8-byte length)."""
    from chatlab.service.security.conditions import fingerprint

    messages = [b'{"role":"user"}', '{"role":"assistant","text":"é"}'.encode()]
    assert fingerprint("append", messages) == "9c55ee5e9b689e0d5b85db3e18673cfbf944fcf1e6fd82768d32d4427a162727"


@pytest.mark.parametrize(
    ("version", "tag"),
    [
        ("0", '"0"'),
        ("5f0c.4", '"5f0c.4"'),
        ("5f0c.10", '"5f0c.10"'),
        ("5f0c.0", '"5f0c.0"'),
        ("5f0c.007", '"5f0c.7"'),
        ("a.b.00", '"a.b.0"'),
        ("legacy-token", '"legacy-token"'),
        ("x.0y", '"x.0y"'),
        (".01", '".01"'),
    ],
)
def test_an_etag_is_the_version_its_count_without_leading_zeros(version: str, tag: str) -> None:
    from chatlab.service.security.conditions import etag

    assert etag(version) == tag
