"""Several agents on one conversation: one transcript with authors, a view per agent, each turn stored once.

The real framework (agents and its orchestrations), the offline model playing a planner and a worker, a real service
over HTTP. A chat middleware records what each model is sent, so a test sees both sides.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from agent_framework import ChatContext, Content, Message, SessionContext, WorkflowBuilder, chat_middleware
from agent_framework_orchestrations import ConcurrentBuilder, GroupChatBuilder, GroupChatState, SequentialBuilder

from chatlab.client.claims import claim_inputs
from chatlab.client.codec import messages_from_meai
from chatlab.client.http import AsyncChatHistoryClient
from chatlab.client.operations import MessagesPage
from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.client.views import View, name_the_author, others_as_input, own_turns, owners, whole_transcript
from chatlab.runner import BackgroundServer
from chatlab.tutorial.llm import LLMConnection
from chatlab.tutorial.team import PLANNER_NAME, WORKER_NAME, create_planner, create_worker

pytestmark = pytest.mark.anyio
KEY = "team-conversation"


def _transcript() -> list[Message]:
    """A user's question, the planner's tool step and plan, the worker's answer (the tool result left unsigned)."""
    call = Content.from_function_call(call_id="c1", name="GetDateTime", arguments="{}")
    result = Content.from_function_result(call_id="c1", result="2026-04-16 01:30:52")
    return [
        Message("system", ["shared instructions"]),
        Message("user", ["What time is it?"]),
        Message("assistant", [call], author_name=PLANNER_NAME),
        Message("tool", [result]),
        Message("assistant", ["Plan: answer 01:30"], author_name=PLANNER_NAME),
        Message("assistant", ["It is 01:30."], author_name=WORKER_NAME),
    ]


def test_a_tool_result_belongs_to_the_author_of_its_call() -> None:
    assert owners(_transcript()) == [None, None, PLANNER_NAME, PLANNER_NAME, PLANNER_NAME, WORKER_NAME]


def test_the_whole_transcript_is_the_cached_sequence_itself() -> None:
    transcript = _transcript()
    assert whole_transcript(transcript, WORKER_NAME) is transcript


def test_own_turns_keep_the_users_messages_and_the_agents_own_with_its_tool_steps() -> None:
    transcript = _transcript()
    assert own_turns(transcript, WORKER_NAME) == [transcript[0], transcript[1], transcript[5]]
    assert own_turns(transcript, PLANNER_NAME) == transcript[:5]


def test_others_as_input_attributes_other_agents_answers_and_leaves_out_their_tool_steps() -> None:
    shown = others_as_input(_transcript(), WORKER_NAME)
    assert [(m.role, m.text) for m in shown] == [
        ("system", "shared instructions"),
        ("user", "What time is it?"),
        ("user", f"[{PLANNER_NAME}] Plan: answer 01:30"),
        ("assistant", "It is 01:30."),
    ]


def test_unsigned_assistant_and_tool_messages_are_signed_and_others_left_alone() -> None:
    messages = [Message("user", ["hi"]), Message("assistant", ["a"]), Message("assistant", ["b"], author_name="X")]
    name_the_author(messages, "Worker")
    assert [m.author_name for m in messages] == [None, "Worker", "X"]


def recording(seen: list[list[tuple[str, str]]]) -> Callable[..., Awaitable[None]]:
    """A chat middleware keeping what the model is sent: (role, text) of each message but the instructions."""

    @chat_middleware
    async def record(context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        seen.append([(m.role, m.text) for m in context.messages if m.role != "system"])
        await call_next()

    return record


def provider(service: BackgroundServer, view: View = whole_transcript, key: str = KEY) -> RemoteChatHistoryProvider:
    """A provider whose every session continues the shared conversation ``key``."""
    return RemoteChatHistoryProvider(service.url, state_initializer=lambda _: key, view=view)


async def stored(service: BackgroundServer, key: str = KEY) -> list[tuple[str, str | None, str]]:
    """(role, author, text) of each stored message, as the service returns them."""
    async with RemoteChatHistoryProvider(service.url) as reader:
        page = await reader.client.read(key)
    return [(m["role"], m.get("authorName"), " ".join(c.get("text", "") for c in m["contents"])) for m in page.messages]


async def take_turns(service: BackgroundServer, llm: LLMConnection, view: View) -> tuple[str, list[tuple[str, str]]]:
    """The planner plans a question, then the worker (with ``view``) runs on the same key: its answer, what it saw."""
    seen: list[list[tuple[str, str]]] = []
    async with provider(service) as planner_history, provider(service, view) as worker_history:
        planner = create_planner(llm.client, planner_history)
        worker = create_worker(llm.client, worker_history, middleware=[recording(seen)])
        await planner.run("What time is it?", session=planner.create_session())
        answer = await worker.run([], session=worker.create_session())
    return answer.text, seen[-1]


PLAN = 'Plan for "What time is it?" (plan 1): 1. look it up 2. answer in one line'


async def test_two_agents_take_turns_on_one_key_each_turn_stored_once_with_its_author(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    answer, seen = await take_turns(service, llm, others_as_input)
    assert seen == [("user", "What time is it?"), ("user", f"[{PLANNER_NAME}] {PLAN}")]
    assert answer == 'Done: "What time is it?", following the plan Planner gave me.'
    assert await stored(service) == [
        ("user", None, "What time is it?"),
        ("assistant", PLANNER_NAME, PLAN),
        ("assistant", WORKER_NAME, answer),
    ]


async def test_the_whole_transcript_shows_another_agents_words_as_assistant_turns(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    answer, seen = await take_turns(service, llm, whole_transcript)
    assert seen == [("user", "What time is it?"), ("assistant", PLAN)]
    assert "as an assistant turn" in answer


async def test_own_turns_hide_the_other_agents_words(service: BackgroundServer, llm: LLMConnection) -> None:
    answer, seen = await take_turns(service, llm, own_turns)
    assert seen == [("user", "What time is it?")]
    assert "without a plan" in answer


def _turns(question: str, number: int) -> list[tuple[str, str | None, str]]:
    return [
        ("user", None, question),
        ("assistant", PLANNER_NAME, f'Plan for "{question}" (plan {number}): 1. look it up 2. answer in one line'),
        ("assistant", WORKER_NAME, f'Done: "{question}", following the plan Planner gave me.'),
    ]


async def run_workflow(
    service: BackgroundServer, llm: LLMConnection, build: Callable[[Any, Any], Any], questions: Sequence[str]
) -> None:
    """Each question through a workflow that ``build`` makes of the planner and the worker, both on one key."""
    async with provider(service) as planner_history, provider(service, others_as_input) as worker_history:
        planner = create_planner(llm.client, planner_history)
        worker = create_worker(llm.client, worker_history)
        for question in questions:
            await build(planner, worker).run(question)


async def test_a_sequential_workflow_stores_each_turn_once_with_its_author(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    """The worker's input repeats the question and the plan, which are stored already (framework issue #7756)."""
    await run_workflow(service, llm, lambda p, w: SequentialBuilder(participants=[p, w]).build(), ["A?", "B?"])
    assert await stored(service) == [*_turns("A?", 1), *_turns("B?", 2)]


def _planner_then_worker(state: GroupChatState) -> str:
    return [PLANNER_NAME, WORKER_NAME][state.current_round % 2]


async def test_a_group_chat_stores_each_turn_once_with_its_author(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    """Each participant is sent what others said since its last turn, which is stored already (issue #4695)."""

    def build(planner: Any, worker: Any) -> Any:
        return GroupChatBuilder(participants=[planner, worker], selection_func=_planner_then_worker, max_rounds=2)

    await run_workflow(service, llm, lambda p, w: build(p, w).build(), ["A?", "B?"])
    assert await stored(service) == [*_turns("A?", 1), *_turns("B?", 2)]


async def test_a_workflow_graph_stores_each_turn_once_with_its_author(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    await run_workflow(
        service, llm, lambda p, w: WorkflowBuilder(start_executor=p).add_edge(p, w).build(), ["A?", "B?"]
    )
    assert await stored(service) == [*_turns("A?", 1), *_turns("B?", 2)]


async def test_a_fan_out_keeps_both_answers_and_the_question_once(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    """The concurrent orchestration hands both agents the same question: the first to save stores it."""
    await run_workflow(service, llm, lambda p, w: ConcurrentBuilder(participants=[p, w]).build(), ["A?"])
    transcript = await stored(service)
    assert sorted(transcript) == sorted(
        [
            ("user", None, "A?"),
            ("assistant", PLANNER_NAME, 'Plan for "A?" (plan 1): 1. look it up 2. answer in one line'),
            ("assistant", WORKER_NAME, 'Done: "A?", without a plan: none was in what I was sent.'),
        ]
    )
    assert transcript[0] == ("user", None, "A?")


async def test_two_agents_answering_at_once_each_keep_their_answer_once(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    """Two runs overlapping on one key, each with a question of its own: nothing lost, nothing twice."""
    async with provider(service) as planner_history, provider(service, others_as_input) as worker_history:
        planner = create_planner(llm.client, planner_history)
        worker = create_worker(llm.client, worker_history)
        await asyncio.gather(
            *(planner.run(f"P{i}?", session=planner.create_session()) for i in range(3)),
            *(worker.run(f"W{i}?", session=worker.create_session()) for i in range(3)),
        )
    transcript = await stored(service)
    assert len(transcript) == 12
    for author, prefix in ((PLANNER_NAME, "P"), (WORKER_NAME, "W")):
        for i in range(3):
            question = transcript.index(("user", None, f"{prefix}{i}?"))
            assert transcript[question + 1][1] == author  # each run's batch stays together, in order


async def test_saving_per_model_call_signs_what_the_framework_leaves_unsigned(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    """Per model call, the framework saves the model's answer before it names the author: the provider names it."""
    async with provider(service) as history:
        planner = create_planner(llm.client, history, require_per_service_call_history_persistence=True)
        await planner.run("What time is it?", session=planner.create_session())
    assert await stored(service) == [("user", None, "What time is it?"), ("assistant", PLANNER_NAME, PLAN)]


class CountingClient(AsyncChatHistoryClient):
    """The real client, counting its full and incremental reads."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.reads: list[str] = []

    async def read(self, key: str) -> MessagesPage:
        self.reads.append("full")
        return await super().read(key)

    async def read_after(self, key: str, after: int, limit: int | None = None) -> MessagesPage:
        self.reads.append(f"after {after}")
        return await super().read_after(key, after, limit)


@pytest.mark.parametrize("view", [whole_transcript, own_turns, others_as_input])
async def test_every_view_is_computed_from_the_cache_read_incrementally(
    service: BackgroundServer, llm: LLMConnection, view: View
) -> None:
    client = CountingClient(service.url)
    async with client, provider(service) as planner_history:
        worker_history = RemoteChatHistoryProvider(client=client, state_initializer=lambda _: KEY, view=view)
        planner = create_planner(llm.client, planner_history)
        worker = create_worker(llm.client, worker_history)
        for question in ("A?", "B?"):
            await planner.run(question, session=planner.create_session())
            await worker.run([], session=worker.create_session())
    assert client.reads == ["full", "after 3"]  # the second turn reads only the planner's question and plan


def test_a_claimed_message_is_freed_with_its_claims() -> None:
    """The claims hold a message weakly: once nobody else holds it, it is gone, and so are its claims."""
    message = Message("user", ["once"])
    context = SessionContext(input_messages=[message])
    with claim_inputs(context, "service conversation"):
        pass
    second = SessionContext(input_messages=[message])
    with claim_inputs(second, "service conversation"):
        assert second.input_messages == []  # claimed already: another run stores it
    alive = weakref.ref(message)
    del message, context, second
    gc.collect()
    assert alive() is None


async def test_three_agents_each_see_the_others_as_input_and_the_service_lists_them(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    seen: list[list[tuple[str, str]]] = []
    async with provider(service) as first, provider(service, others_as_input) as second:
        third = provider(service, others_as_input)
        planner = create_planner(llm.client, first)
        worker = create_worker(llm.client, second)
        checker = create_worker(llm.client, third, name="Checker", middleware=[recording(seen)])
        await planner.run("What time is it?", session=planner.create_session())
        await worker.run([], session=worker.create_session())
        answer = await checker.run([], session=checker.create_session())
        participants = await third.client.participants(KEY)
        await third.aclose()
    assert seen[-1][1:] == [
        ("user", f"[{PLANNER_NAME}] {PLAN}"),
        ("user", f'[{WORKER_NAME}] Done: "What time is it?", following the plan Planner gave me.'),
    ]
    assert answer.text == 'Done: "What time is it?", following the plan Planner gave me.'
    assert participants == {PLANNER_NAME: 1, WORKER_NAME: 1, "Checker": 1}


async def test_a_transcript_resent_through_a_workflow_is_stored_once(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    """A chat UI sends the workflow everything it showed so far and the new question: only the new turn is stored."""
    await run_workflow(service, llm, lambda p, w: SequentialBuilder(participants=[p, w]).build(), ["A?"])
    async with RemoteChatHistoryProvider(service.url) as reader:
        shown = messages_from_meai((await reader.client.read(KEY)).messages)
    async with provider(service) as planner_history, provider(service, others_as_input) as worker_history:
        team = [create_planner(llm.client, planner_history), create_worker(llm.client, worker_history)]
        await SequentialBuilder(participants=team).build().run([*shown, Message("user", ["B?"])])
    assert await stored(service) == [*_turns("A?", 1), *_turns("B?", 2)]
