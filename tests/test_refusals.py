"""What the service refuses (4xx problem JSON, never a 500), and large bodies, over real HTTP."""

from __future__ import annotations

import json

import httpx
import pytest

from chatlab.service import ServiceSettings
from chatlab.service.bodies import BodyReader
from chatlab.service.heads import MAX_HEADER_BYTES, MAX_URL_BYTES
from chatlab.service.schema import MAX_ERRORS

URL = "/chat-history/k"
GOOD = {"role": "user", "contents": [{"$type": "text", "text": "kept"}]}


def text(value: str) -> dict:
    return {"role": "user", "contents": [{"$type": "text", "text": value}]}


def send(http: httpx.Client, method: str, body: bytes) -> httpx.Response:
    return http.request(method, URL, content=body, headers={"content-type": "application/json"})


def assert_problem(response: httpx.Response, status: int, hint: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status
    assert hint in problem["detail"], problem["detail"]


@pytest.fixture
def seeded(http: httpx.Client) -> httpx.Client:
    """The service with one message at ``URL``, which a refused request must leave as it is."""
    assert http.post(URL, json={"messages": [GOOD]}).status_code == 202
    return http


def assert_unchanged(http: httpx.Client) -> None:
    assert http.get(URL).json() == [GOOD]


# -- bodies --------------------------------------------------------------------------------------

MESSAGE = '{"role": "tool", "contents": [{"$type": "functionResult", "callId": "c", "result": %s}]}'
REFUSED_BODIES = {
    "NaN": ((b'{"messages": [%s]}' % (MESSAGE % "NaN").encode()), "NaN is not a JSON number"),
    "Infinity": ((b'{"messages": [%s]}' % (MESSAGE % "Infinity").encode()), "Infinity is not a JSON number"),
    "-Infinity": ((b'{"messages": [%s]}' % (MESSAGE % "[-Infinity]").encode()), "-Infinity is not a JSON number"),
    "a repeated $type": (
        b'{"messages": [{"role": "user", "contents": [{"$type": "text", "$type": "functionCall", "callId": "c",'
        b' "name": "f"}]}]}',
        'repeats the key "$type"',
    ),
    "a repeated role": (b'{"messages": [{"role": "user", "role": "system", "contents": []}]}', '"role"'),
    "a repeated messages": (b'{"messages": [], "messages": [{"role": "user", "contents": []}]}', '"messages"'),
    "a repeated key deep in a result": (b'{"messages": [%s]}' % (MESSAGE % '{"a": {"b": 1, "b": 2}}').encode(), '"b"'),
    "UTF-16 with a BOM": (json.dumps({"messages": [GOOD]}).encode("utf-16"), "UTF-16"),
    "UTF-16 without a BOM": (json.dumps({"messages": [GOOD]}).encode("utf-16-le"), "UTF-16-LE"),
    "UTF-32": (json.dumps({"messages": [GOOD]}).encode("utf-32"), "UTF-32"),
    "Latin-1": (
        '{"messages": [{"role": "user", "contents": [{"$type": "text", "text": "café"}]}]}'.encode("latin-1"),
        "UTF-8",
    ),
    "a UTF-8-encoded surrogate": (b'{"messages": [{"role": "user", "contents": [], "x": "\xed\xa0\x80"}]}', "UTF-8"),
    "an escaped lone surrogate": (b'{"messages": [{"role": "user", "contents": [], "x": "\\ud800"}]}', "surrogate"),
}


@pytest.mark.parametrize("method", ["POST", "PUT"])
@pytest.mark.parametrize("case", list(REFUSED_BODIES))
def test_bodies_json_readers_disagree_on_are_refused(seeded: httpx.Client, method: str, case: str) -> None:
    """NaN/Infinity (not JSON), repeated keys (readers keep the first or the last), and text that is not UTF-8."""
    body, hint = REFUSED_BODIES[case]
    assert_problem(send(seeded, method, body), 400, hint)
    assert_unchanged(seeded)


def test_a_utf8_byte_order_mark_is_tolerated(http: httpx.Client) -> None:
    """RFC 8259 lets a reader ignore it; the service always has, and stores the message without it."""
    assert send(http, "POST", b"\xef\xbb\xbf" + json.dumps({"messages": [GOOD]}).encode()).status_code == 202
    assert http.get(URL).json() == [GOOD]


def test_an_integer_of_thousands_of_digits_is_kept_not_a_500(http: httpx.Client) -> None:
    digits = "7" * 4301
    body = b'{"messages": [%s]}' % (MESSAGE % digits).encode()
    assert send(http, "POST", body).status_code == 202
    assert http.get(URL).content.count(digits.encode()) == 1


# -- after and limit -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["after", "limit"])
@pytest.mark.parametrize("value", ["1" * 4301, "-" + "1" * 4301, "0" * 5000 + "1", "9007199254740993"])
def test_after_and_limit_of_many_digits_get_400(seeded: httpx.Client, name: str, value: str) -> None:
    assert_problem(seeded.get(URL, params={name: value}), 400, f"query parameter {name}=")


@pytest.mark.parametrize("query", ["afer=3", "=false", "after=1&x=2"])
def test_an_unknown_query_parameter_gets_400(seeded: httpx.Client, query: str) -> None:
    """A misspelt ``after`` would otherwise read the whole conversation."""
    assert_problem(seeded.get(f"{URL}?{query}"), 400, "unknown query parameter")


# -- the order of the checks, and large bodies -----------------------------------------------------


class TestLargeBodies:
    @pytest.fixture
    def settings(self) -> ServiceSettings:
        return ServiceSettings(max_message_bytes=1000)

    def test_the_message_size_limit_is_checked_before_the_schema(self, http: httpx.Client) -> None:
        """A message over --max-message-bytes is refused for its size without validating it."""
        invalid_and_big = {"role": "user", "contents": [{"$type": "nosuch"}] * 100}
        response = http.post(URL, json={"messages": [invalid_and_big]})
        assert_problem(response, 413, "messages[0] is")

    def test_a_body_decoded_off_the_loop_is_kept_exactly(self, http: httpx.Client) -> None:
        messages = [text(f"message {i} é") for i in range(2000)]
        body = json.dumps({"messages": messages}, ensure_ascii=False).encode()
        assert len(body) > BodyReader(ServiceSettings(max_message_bytes=1000)).inline_bytes
        assert send(http, "PUT", body).status_code == 204
        expected = json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode()
        assert http.get(URL).content == expected


def test_errors_deep_in_a_large_message_are_located(http: httpx.Client) -> None:
    """Validation goes in pieces (so the loop runs between them); every error still names its place."""
    contents = [{"$type": "text", "text": "ok"}] * 5000
    contents[3001] = {"$type": "nosuch"}
    messages = [GOOD, {"role": "user", "contents": contents}, {"role": 7, "contents": []}]
    response = http.post(URL, json={"messages": messages})
    assert_problem(response, 400, "messages[1].contents[3001]: unknown $type 'nosuch'")
    assert [e["path"] for e in response.json()["errors"]] == ["messages[1].contents[3001]", "messages[2].role"]
    assert http.get(URL).json() == []


def test_at_most_max_errors_are_listed(http: httpx.Client) -> None:
    contents = [{"$type": "nosuch"}] * 50_000
    response = http.post(URL, json={"messages": [{"role": "user", "contents": contents}]})
    assert_problem(response, 400, f"checking stopped after {MAX_ERRORS} errors")
    errors = response.json()["errors"]
    assert len(errors) == MAX_ERRORS
    assert errors[-1]["path"] == f"messages[0].contents[{MAX_ERRORS - 1}]"


# -- request heads -------------------------------------------------------------------------------


def test_a_url_over_the_limit_gets_414_problem_json(http: httpx.Client) -> None:
    assert http.get("/", params={"pad": "x" * (MAX_URL_BYTES - 100)}).status_code == 200
    assert_problem(http.get("/", params={"pad": "x" * MAX_URL_BYTES}), 414, f"the limit is {MAX_URL_BYTES}")


def test_header_fields_over_the_limit_get_431_problem_json(http: httpx.Client) -> None:
    assert http.get(URL, headers={"X-Pad": "x" * (MAX_HEADER_BYTES - 500)}).status_code == 200
    response = http.get(URL, headers={"X-Pad": "x" * MAX_HEADER_BYTES})
    assert_problem(response, 431, f"the limit is {MAX_HEADER_BYTES}")
