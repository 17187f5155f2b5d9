"""The provider's history window: the model gets the end of the conversation, the service keeps it all."""

from __future__ import annotations

import pytest
from agent_framework import Content, Message

from chatlab.client.provider import KEY_FIELD, RemoteChatHistoryProvider
from chatlab.runner import BackgroundServer

pytestmark = pytest.mark.anyio


def turn(i: int) -> list[Message]:
    return [
        Message("user", [f"question {i}"]),
        Message("assistant", [Content.from_function_call(f"call_{i}", "GetDateTime", arguments="{}")]),
        Message("tool", [Content.from_function_result(f"call_{i}", result=f"time {i}")]),
        Message("assistant", [f"answer {i}"]),
    ]


async def test_the_model_gets_a_window_and_the_service_keeps_everything(service: BackgroundServer) -> None:
    async with RemoteChatHistoryProvider(service.url, max_history_messages=6) as provider:
        state = {KEY_FIELD: "windowed"}
        for i in range(5):
            await provider.get_messages(None, state=state)
            await provider.save_messages(None, turn(i), state=state)
        window = await provider.get_messages(None, state=state)
        # the 6 newest would start at turn 3's tool result, cut from its call: the window is the 5 newest
        assert [m.text for m in window] == ["answer 3", "question 4", "", "", "answer 4"]
        assert window[2].contents[0].call_id == "call_4"
        assert await provider.get_stored_message_count("windowed") == 20
    async with RemoteChatHistoryProvider(service.url, max_history_tokens=1_000_000) as provider:
        assert len(await provider.get_messages(None, state=state)) == 20


async def test_window_limits_are_checked() -> None:
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError):
            RemoteChatHistoryProvider("http://unused", max_history_messages=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            RemoteChatHistoryProvider("http://unused", max_history_tokens=bad)  # type: ignore[arg-type]
