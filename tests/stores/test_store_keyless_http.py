"""A service without API keys over a store written with keys shows none of the namespaces' conversations."""

from __future__ import annotations

import httpx

from chatlab.service import ServiceSettings, start_service
from chatlab.stores import InMemoryChatHistoryStore

ALICE = "alice-key-0123456789abcdef"
MESSAGE = {"role": "user", "contents": [{"$type": "text", "text": "private"}]}


def keys_and_counts(listing: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(entry["conversationKey"], entry["messageCount"]) for entry in listing]


def test_a_keyless_service_lists_and_reads_no_namespaced_conversation(store_url: str) -> None:
    store = InMemoryChatHistoryStore() if store_url == "memory://" else store_url  # both services share it
    keyed = start_service(store=store, settings=ServiceSettings(api_keys={ALICE: "alice"}))
    keyless = start_service(store=store, settings=ServiceSettings(api_keys=None))
    try:
        assert keyed is not keyless
        alice = {"Authorization": f"Bearer {ALICE}"}
        assert httpx.post(f"{keyed.url}/chat-history/secret", json={"messages": [MESSAGE]}, headers=alice).is_success
        assert httpx.post(f"{keyless.url}/chat-history/open", json={"messages": [MESSAGE]}).is_success
        # the keyless service lists its own conversations only, never alice/secret
        assert keys_and_counts(httpx.get(f"{keyless.url}/chat-history").json()) == [("open", 1)]
        for path in ("/chat-history/secret", "/chat-history/alice%2Fsecret"):
            response = httpx.get(f"{keyless.url}{path}")
            assert response.status_code in (200, 404) and "private" not in response.text
        # and alice still sees hers, not the keyless one
        assert keys_and_counts(httpx.get(f"{keyed.url}/chat-history", headers=alice).json()) == [("secret", 1)]
    finally:
        keyless.stop()
        keyed.stop()
