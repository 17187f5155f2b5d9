"""Property-based fuzz of the live service from its own OpenAPI document (schemathesis).

Every operation gets a bounded number of generated requests (valid and invalid bodies, keys
and headers); every response must be documented and match its schema, and none may be a 5xx.
Runs against the hardened configuration (API keys, limits, rate limit, CORS) with a key, and
against the article's open configuration (no key; only the limit of messages per request is
lowered from 10,000, which would make the boundary cases 10,000-message bodies).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.service.security.conditions import IDEMPOTENCY_KEY_PATTERN
from chatlab.stores import InMemoryChatHistoryStore

KEY = "fuzz-0123456789abcdef-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_EXAMPLES = 30


HARDENED = dict(
    api_keys={KEY: "fuzz"},
    rate_limit="100000/s",
    max_body_bytes=64 * 1024,
    max_messages=20,
    max_message_bytes=16 * 1024,
    cors_origins=("https://app.example",),
)

OPEN = dict(max_messages=20, api_keys=None, cors_origins=(), rate_limit=None)


def _serve(settings_: ServiceSettings, name: str) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(InMemoryChatHistoryStore(), settings_), name=name) as server:
        yield server


@pytest.fixture(scope="module")
def hardened_service() -> Iterator[BackgroundServer]:
    yield from _serve(ServiceSettings(**HARDENED), "fuzz-hardened")


@pytest.fixture(scope="module")
def open_service() -> Iterator[BackgroundServer]:
    yield from _serve(ServiceSettings(**OPEN), "fuzz-open")


# The document is the one the live service serves (the same app and settings build it); cases
# are generated from it and sent over real HTTP to the service started by the fixtures.
# Every check of schemathesis runs, with two documented adjustments. A schema-valid request may
# still be refused, for reasons a schema cannot express: 412 (If-Match names another version than
# the conversation's), 422 (an Idempotency-Key reused with other messages), 413 (over the byte
# limits). And a request over `maxItems` of `messages` is refused with 413 (too many messages), not 400.
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
CHECKS = {
    "positive_data_acceptance": {"expected-statuses": ["2xx", "401", "404", "409", "412", "413", "422", "429"]},
    "negative_data_rejection": {"expected-statuses": REFUSALS},
}
# The hardened run has every phase, including schemathesis's deterministic boundary cases (the
# "coverage" phase: some 1,500 requests per write operation); the open run has the bounded ones only.
HARDENED_CONFIG = schemathesis.Config.from_dict({"checks": CHECKS})
OPEN_CONFIG = schemathesis.Config.from_dict({"checks": CHECKS, "phases": {"coverage": {"enabled": False}}})


def _type_first(body: Any) -> Any:
    """Put ``$type`` first in every content object: the documented rule that JSON Schema cannot express."""
    if isinstance(body, dict):
        moved = {k: _type_first(v) for k, v in body.items()}
        return {"$type": moved.pop("$type"), **moved} if "$type" in moved else moved
    if isinstance(body, list):
        return [_type_first(item) for item in body]
    return body


def _schema(settings_: ServiceSettings, config: schemathesis.Config):
    schema = schemathesis.openapi.from_dict(create_app(InMemoryChatHistoryStore(), settings_).openapi(), config=config)

    @schema.hook("map_body")
    def type_first(context, body):
        return _type_first(body)

    return schema


hardened = _schema(ServiceSettings(**HARDENED), HARDENED_CONFIG)
open_ = _schema(ServiceSettings(**OPEN), OPEN_CONFIG)
FUZZ = settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _valid_idempotency_key(case: Any) -> None:
    """A third adjustment: schemathesis's coverage phase fills an optional header of a valid case with a string
    that ignores the header's ``pattern`` (``''``, ``'000'``); such an ``Idempotency-Key`` is made a valid one, so
    the case tests what it claims to. Invalid keys stay in the negative cases, which must be refused."""
    key = (case.headers or {}).get("Idempotency-Key")
    positive = case.meta is None or case.meta.generation.mode == GenerationMode.POSITIVE
    if positive and key is not None and not re.fullmatch(IDEMPOTENCY_KEY_PATTERN, key):
        case.headers["Idempotency-Key"] = '"fuzz-idempotency-key"'


def _sent_as_generated(case: Any) -> bool:
    """A fourth: a query parameter whose value is ``null`` or a list of nothing (``[]``, ``[[]]``, ``[null]``) is not
    sent at all, so a negative case whose only flaw is such an unknown parameter sends a valid request
    (``?after=000&limit=1``), rightly answered 200. Such a case is left out; an unknown parameter that is sent stays
    in, and must be refused."""
    negative = case.meta is not None and case.meta.generation.mode == GenerationMode.NEGATIVE
    return not (negative and any(_sends_nothing(value) for value in (case.query or {}).values()))


def _sends_nothing(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(_sends_nothing(item) for item in value))


@hardened.parametrize()
@FUZZ
def test_hardened_service_conforms_to_its_openapi(case, hardened_service: BackgroundServer) -> None:
    _valid_idempotency_key(case)
    if _sent_as_generated(case):
        case.call_and_validate(base_url=hardened_service.url, headers=AUTH)


@open_.parametrize()
@FUZZ
def test_open_service_conforms_to_its_openapi(case, open_service: BackgroundServer) -> None:
    _valid_idempotency_key(case)
    if _sent_as_generated(case):
        case.call_and_validate(base_url=open_service.url)
