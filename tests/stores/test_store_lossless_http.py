"""Every store serves each message as the compact JSON of what was sent, every number's text kept (over HTTP)."""

from __future__ import annotations

import json

import httpx
import pytest

BIG_INTEGER = "9" * 5000  # past Python's 4,300-digit int-string limit
# (what a client sends, what the service keeps): numbers Python's json would rewrite or break
NUMBERS = [
    ("1.10", "1.10"),  # json: 1.1
    ("1E2", "1E2"),  # json: 100.0
    ("-0", "-0"),  # json: 0
    ("-0.0", "-0.0"),
    ("2.5e-400", "2.5e-400"),  # json: 0.0
    ("1e400", "1e400"),  # json: Infinity, which no strict reader (the article's C# one included) reads
    ("-1E+400", "-1E+400"),  # json: -Infinity
    ("12345678901234567890.5", "12345678901234567890.5"),  # json: 1.2345678901234567e+19
    ("123456789012345678901234567890", "123456789012345678901234567890"),
    (BIG_INTEGER, BIG_INTEGER),  # json: ValueError, a 500
    ("0.1", "0.1"),
    ("42", "42"),
]
NUMBER_LIST = ", ".join(sent for sent, _ in NUMBERS)
KEPT_LIST = ",".join(kept for _, kept in NUMBERS)
# as a client may send it: spaces, new lines, escapes in strings
SENT = f"""{{ "messages" : [
  {{ "role" : "tool",
     "contents" : [ {{ "$type" : "functionResult", "callId" : "c1", "result" : [ {NUMBER_LIST} ] }} ],
     "additionalProperties" : {{ "score" : 0.50, "\\u00e9t\\u00e9" : "\\u00e9\\n" }} }},
  {{ "role" : "assistant",
     "contents" : [ {{ "$type" : "usage", "details" : {{ "inputTokenCount" : 1e1, "outputTokenCount" : 7 }} }} ] }}
] }}""".encode()
# what every store must give back: compact JSON, numbers as sent, strings as UTF-8 with only the needed escapes
KEPT = [
    f'{{"role":"tool","contents":[{{"$type":"functionResult","callId":"c1","result":[{KEPT_LIST}]}}],'
    '"additionalProperties":{"score":0.50,"été":"é\\n"}}'.encode(),
    b'{"role":"assistant","contents":[{"$type":"usage","details":{"inputTokenCount":1e1,"outputTokenCount":7}}]}',
]


def _strict(body: bytes) -> object:
    """Parse as a strict reader does: NaN, Infinity and -Infinity are not JSON (numbers of any size are)."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(body, parse_constant=refuse, parse_int=str, parse_float=str)


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_numbers_come_back_as_sent(http: httpx.Client, method: str) -> None:
    response = http.request(method, "/chat-history/numbers", content=SENT, headers={"content-type": "application/json"})
    assert response.status_code in (202, 204), response.text
    whole = http.get("/chat-history/numbers")
    assert whole.content == b"[" + b",".join(KEPT) + b"]"
    _strict(whole.content)
    assert http.get("/chat-history/numbers?after=1").content == b"[" + KEPT[1] + b"]"
    assert http.get("/chat-history/numbers?limit=1").content == b"[" + KEPT[0] + b"]"


def test_the_read_modify_write_recipe_round_trips_big_numbers(http: httpx.Client) -> None:
    """What a client read, it can PUT back (the docs' recipe): nothing the service served is refused."""
    assert http.post("/chat-history/rmw", content=SENT, headers={"content-type": "application/json"}).status_code == 202
    served = http.get("/chat-history/rmw")
    assert served.content == b"[" + b",".join(KEPT) + b"]"
    back = b'{"messages":' + served.content + b"}"
    response = http.put(
        "/chat-history/rmw",
        content=back,
        headers={"content-type": "application/json", "If-Match": served.headers["etag"]},
    )
    assert response.status_code == 204, response.text
    assert http.get("/chat-history/rmw").content == served.content
