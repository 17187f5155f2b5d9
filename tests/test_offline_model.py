"""The offline tutorial model, through real HTTP with the ``openai`` SDK (JSON and streaming)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI

from chatlab.runner import BackgroundServer
from chatlab.tutorial.offline_model import (
    LABEL_EN,
    LABEL_JA,
    NO_TOOLS_MODEL_ID,
    OFFLINE_MODEL_ID,
    create_offline_app,
)

TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "GetDateTime",
        "description": "現在の日時を取得します。",
        "parameters": {"type": "object", "properties": {}},
    },
}
OTHER_TOOL = {
    "type": "function",
    "function": {
        "name": "GetWeather",
        "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {}},
    },
}


@pytest.fixture(scope="module")
def model() -> Iterator[BackgroundServer]:
    with BackgroundServer(create_offline_app(), name="test-offline-model") as server:
        yield server


@pytest.fixture(scope="module")
def client(model: BackgroundServer) -> OpenAI:
    return OpenAI(base_url=f"{model.url}/v1", api_key="sk-dummy")


def ask(
    client: OpenAI, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, stream: bool = False
) -> tuple[str | None, list[tuple[str, str, str]], str]:
    """(text, [(call id, tool name, arguments)], finish_reason) of one completion."""
    kwargs: dict[str, Any] = {"model": "openai/gpt-oss-20b", "messages": messages}
    if tools:
        kwargs["tools"] = tools
    if not stream:
        choice = client.chat.completions.create(**kwargs).choices[0]
        calls = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
        return choice.message.content, calls, choice.finish_reason
    text, calls, finish = "", {}, ""
    for chunk in client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, ["", "", ""])
                entry[0] = call.id or entry[0]
                entry[1] = (call.function.name or entry[1]) if call.function else entry[1]
                entry[2] += (call.function.arguments or "") if call.function else ""
            finish = choice.finish_reason or finish
    return text or None, [tuple(c) for c in calls.values()], finish  # type: ignore[misc]


def tool_turn(call_id: str, value: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "GetDateTime", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": value},
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("question", ["現在時刻を教えてください", "What time is it now?"])
def test_asks_for_the_time_calls_the_offered_tool(client: OpenAI, question: str, stream: bool) -> None:
    text, calls, finish = ask(client, [{"role": "user", "content": question}], [OTHER_TOOL, TIME_TOOL], stream)
    assert calls == [("call_1", "GetDateTime", "{}")]
    assert finish == "tool_calls" and not text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_answers_with_the_tool_result_in_the_users_language(client: OpenAI, stream: bool) -> None:
    ja = [{"role": "user", "content": "現在時刻を教えてください"}, *tool_turn("call_1", "2026-04-16 01:30:52")]
    en = [{"role": "user", "content": "What time is it?"}, *tool_turn("call_1", "2026-04-16 01:30:52")]
    assert ask(client, ja, [TIME_TOOL], stream) == ("現在の日時は **2026-04-16 01:30:52** です。", [], "stop")
    assert ask(client, en, [TIME_TOOL], stream)[0] == "The current date and time is **2026-04-16 01:30:52**."


def test_asking_again_calls_the_tool_again_with_a_new_call_id(client: OpenAI) -> None:
    messages = [
        {"role": "user", "content": "現在時刻を教えてください"},
        *tool_turn("call_1", "2026-04-16 01:30:52"),
        {"role": "assistant", "content": "現在の日時は **2026-04-16 01:30:52** です。"},
        {"role": "user", "content": "もう一度現在時刻を取得してください"},
    ]
    assert ask(client, messages, [TIME_TOOL])[1] == [("call_2", "GetDateTime", "{}")]


def test_elapsed_time_comes_from_the_tool_results_it_was_sent(client: OpenAI) -> None:
    messages = [
        {"role": "user", "content": "現在時刻を教えてください"},
        *tool_turn("call_1", "2026-04-16 01:30:52"),
        {"role": "assistant", "content": "…"},
        {"role": "user", "content": "もう一度現在時刻を取得してください"},
        *tool_turn("call_2", "2026-04-16 01:31:05"),
        {"role": "assistant", "content": "…"},
        {"role": "user", "content": "最初の時刻からどれくらい経過していますか?"},
    ]
    text, calls, finish = ask(client, messages, [TIME_TOOL])
    assert (calls, finish) == ([], "stop")
    assert text == (
        "最初に取得した時刻（2026-04-16 01:30:52）から、今回の取得時刻（2026-04-16 01:31:05）まで **13 秒** "
        "が経過しています。"
    )
    messages[-1] = {"role": "user", "content": "How long since the first time?"}
    assert "**13 seconds**" in (ask(client, messages, [TIME_TOOL])[0] or "")


def test_elapsed_time_without_history_says_it_has_none(client: OpenAI) -> None:
    text, calls, _ = ask(
        client, [{"role": "user", "content": "最初の時刻からどれくらい経過していますか?"}], [TIME_TOOL]
    )
    assert calls == []
    assert text is not None and text.startswith(LABEL_JA) and "見つからない" in text and "秒**" not in text
    one = [
        {"role": "user", "content": "what time?"},
        *tool_turn("call_1", "2026-04-16 01:30:52"),
        {"role": "user", "content": "How long since the first time?"},
    ]
    text = ask(client, one, [TIME_TOOL])[0] or ""
    assert text.startswith(LABEL_EN) and "only one time (2026-04-16 01:30:52)" in text


def test_no_time_tool_offered_no_tool_call(client: OpenAI) -> None:
    text, calls, _ = ask(client, [{"role": "user", "content": "現在時刻を教えてください"}], [OTHER_TOOL])
    assert calls == [] and text is not None and text.startswith(LABEL_JA)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        (
            "現在時刻を教えてください",
            LABEL_JA + "このモデルはツールを呼び出せないため、GetDateTimeで現在の日時を取得できません。",
        ),
        (
            "What time is it now?",
            LABEL_EN + " This model cannot call tools, so it cannot ask GetDateTime for the time.",
        ),
    ],
)
def test_the_notools_model_never_calls_the_tool_offered(model: BackgroundServer, question: str, answer: str) -> None:
    client = OpenAI(base_url=f"{model.url}/v1", api_key="sk-dummy")
    messages: Any = [{"role": "user", "content": question}]
    tools: Any = [TIME_TOOL]
    choice = client.chat.completions.create(model=NO_TOOLS_MODEL_ID, messages=messages, tools=tools).choices[0]
    assert (choice.message.content, choice.message.tool_calls, choice.finish_reason) == (answer, None, "stop")


def test_anything_else_gets_a_labelled_deterministic_reply(client: OpenAI) -> None:
    first = ask(client, [{"role": "user", "content": "Tell me a joke"}], [TIME_TOOL])
    assert first == ask(client, [{"role": "user", "content": "Tell me a joke"}], [TIME_TOOL])
    assert first[0] is not None and first[0].startswith(LABEL_EN) and first[1] == []


def test_models_and_bad_requests(model: BackgroundServer) -> None:
    listed = httpx.get(f"{model.url}/v1/models").json()
    assert [m["id"] for m in listed["data"]] == [OFFLINE_MODEL_ID, NO_TOOLS_MODEL_ID]
    bad = httpx.post(f"{model.url}/v1/chat/completions", json={"messages": "hi"})
    assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]


PLANNER = {"role": "system", "content": "You are the planner: write a short plan."}
WORKER = {"role": "system", "content": "You are the worker: follow the newest plan."}


def test_a_planner_plans_the_users_newest_question_numbered_by_the_plans_it_was_sent(client: OpenAI) -> None:
    first = [PLANNER, {"role": "user", "content": "What time is it?"}]
    text, calls, _ = ask(client, first, tools=[TIME_TOOL])
    assert (text, calls) == ('Plan for "What time is it?" (plan 1): 1. look it up 2. answer in one line', [])
    later = [*first, {"role": "assistant", "content": text}, {"role": "user", "content": "[Worker] Done."}]
    assert ask(client, [*later, {"role": "user", "content": "Next?"}])[0].startswith('Plan for "Next?" (plan 2)')
    assert ask(client, later)[0].startswith('Plan for "What time is it?" (plan 2)')  # "[Worker] ..." is not the user


def test_a_worker_says_where_the_plan_it_follows_came_from(client: OpenAI) -> None:
    question = {"role": "user", "content": "Q?"}
    plan = 'Plan for "Q?" (plan 1): 1. look it up'
    attributed = ask(client, [WORKER, question, {"role": "user", "content": f"[Planner] {plan}"}])[0]
    assert attributed == 'Done: "Q?", following the plan Planner gave me.'
    as_own = ask(client, [WORKER, question, {"role": "assistant", "content": plan}])[0]
    assert as_own == 'Done: "Q?", following a plan I was sent as an assistant turn (my own?).'
    assert ask(client, [WORKER, question])[0] == 'Done: "Q?", without a plan: none was in what I was sent.'
