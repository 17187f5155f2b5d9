# %% [markdown]
# # 1. The chat history service
#
# **What this shows.** The first half of the article: a small HTTP *chat history service* whose only job is to keep a
# list of chat messages (`ChatMessage`) per conversation key. The article writes it as an ASP.NET Core Minimal API with an
# `InMemoryChatHistoryStore`. This notebook writes the same store and routes in Python, in its cells, as a small FastAPI
# app, starts it in a background thread and calls every endpoint. Then it makes the same calls to `chatlab.service`, the
# package's hardened version of that app, and compares the answers.
#
# **What it needs.** `chatlab` installed (see the README). No LLM.
#
# Next: [2. The RemoteChatHistoryProvider](02_remote_chat_history_provider.ipynb)
#
# > **注意 / Caveat (from the article).** This server is a minimal implementation for trying things out: it has no
# > authentication, authorization, CORS, transport protection, input validation or rate limiting, and is not meant to be
# > exposed as is. The servers here listen on loopback (`127.0.0.1`) only. The protections are added, as options, in
# > [notebook 6](06_protections.ipynb).

# %% [markdown]
# ## The API
#
# | endpoint | role (役割) |
# |---|---|
# | `GET /` | service name and description |
# | `GET /chat-history` | stored conversations and their message counts (保存済みの会話一覧と件数を取得する) |
# | `GET /chat-history/{conversationKey}` | the history of one conversation (指定した会話の履歴を取得する) |
# | `POST /chat-history/{conversationKey}` | append messages (指定した会話にメッセージを追記する), `202 Accepted` |
# | `PUT /chat-history/{conversationKey}` | replace the history (指定した会話の履歴を置き換える), `204` |
# | `DELETE /chat-history/{conversationKey}` | delete the history (指定した会話の履歴を削除する), `204` |
#
# ## The contracts and the store (`ChatHistoryContracts.cs`, `InMemoryChatHistoryStore.cs`)
#
# The article's contracts are three C# records: the bodies of `POST` and `PUT` (`{"messages": [...]}`) and one line of
# the conversation list (`{"conversationKey": "...", "messageCount": N}`; ASP.NET writes property names in camelCase).
# Here they are pydantic models, which FastAPI reads and writes the same way.
#
# The C# store is a `ConcurrentDictionary` of conversation key -> bucket, each bucket a `List<ChatMessage>` with its own
# lock. `GetMessages` returns a copy (`[]` for an unknown key), `AppendMessages` ignores an empty batch and creates the
# conversation on first use, `SetMessages` replaces (and creates), `ClearMessages` removes, `GetSummaries` lists every
# conversation **ordered by key** with its count. The Python store below does the same with one dict and one
# `threading.Lock`: FastAPI runs plain `def` endpoints in a thread pool, so two requests can touch the store at the same
# time, and the lock keeps each batch whole. One difference: the C# server parses each message into a `ChatMessage`
# object; this one keeps the JSON objects it received as they are (plain dicts).

# %%
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class AppendChatMessagesRequest(BaseModel):
    """C#: record AppendChatMessagesRequest(IReadOnlyList<ChatMessage> Messages)."""

    messages: list[dict[str, Any]]


class ReplaceChatMessagesRequest(BaseModel):
    """C#: record ReplaceChatMessagesRequest(IReadOnlyList<ChatMessage> Messages)."""

    messages: list[dict[str, Any]]


class ChatHistorySummary(BaseModel):
    """C#: record ChatHistorySummary(string ConversationKey, int MessageCount), written in camelCase."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    conversation_key: str
    message_count: int


class InMemoryChatHistoryStore:
    """The article's store: the messages of each conversation, in memory, by conversation key."""

    def __init__(self) -> None:
        self._store: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()  # C#: ConcurrentDictionary + a lock per bucket

    def get_messages(self, conversation_key: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._store.get(conversation_key, []))

    def append_messages(self, conversation_key: str, messages: list[dict[str, Any]]) -> None:
        if not messages:
            return
        with self._lock:
            self._store.setdefault(conversation_key, []).extend(messages)

    def set_messages(self, conversation_key: str, messages: list[dict[str, Any]]) -> None:
        with self._lock:
            self._store[conversation_key] = list(messages)

    def clear_messages(self, conversation_key: str) -> None:
        with self._lock:
            self._store.pop(conversation_key, None)

    def get_summaries(self) -> list[ChatHistorySummary]:
        with self._lock:
            return [
                ChatHistorySummary(conversation_key=key, message_count=len(messages))
                for key, messages in sorted(self._store.items())
            ]


# %% [markdown]
# ## The routes (`Program.cs`)
#
# The article registers the store as a singleton and maps one lambda per endpoint (`app.MapGet(...)`,
# `app.MapPost(...)`, ...); `WriteIndented = true` makes it write indented JSON. In FastAPI each endpoint is a decorated
# function, the store is one object the functions share, and `IndentedJSONResponse` writes indented JSON.
# `Results.Accepted(location)` is a `202` with a `Location` header and no body; `Results.NoContent()` a `204`.

# %%
import json

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse


class IndentedJSONResponse(JSONResponse):
    """C#: options.SerializerOptions.WriteIndented = true."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, indent=2).encode()


store = InMemoryChatHistoryStore()  # C#: builder.Services.AddSingleton<InMemoryChatHistoryStore>()
app = FastAPI(default_response_class=IndentedJSONResponse)


@app.get("/")
def root() -> dict[str, str]:
    return {
        "service": "chat-history-service",
        "description": "Chat history is stored in memory and exposed over HTTP.",
    }


@app.get("/chat-history")
def get_summaries() -> list[ChatHistorySummary]:
    return store.get_summaries()


@app.get("/chat-history/{conversationKey}")
def get_messages(conversationKey: str) -> list[dict[str, Any]]:
    return store.get_messages(conversationKey)


@app.post("/chat-history/{conversationKey}", status_code=202)
def append_messages(conversationKey: str, request: AppendChatMessagesRequest) -> Response:
    store.append_messages(conversationKey, request.messages)
    return Response(status_code=202, headers={"Location": f"/chat-history/{conversationKey}"})


@app.put("/chat-history/{conversationKey}", status_code=204)
def replace_messages(conversationKey: str, request: ReplaceChatMessagesRequest) -> Response:
    store.set_messages(conversationKey, request.messages)
    return Response(status_code=204)


@app.delete("/chat-history/{conversationKey}", status_code=204)
def delete_messages(conversationKey: str) -> Response:
    store.clear_messages(conversationKey)
    return Response(status_code=204)


# %% [markdown]
# ## Start it in a background thread
#
# The article starts its server as its own process (`dotnet run`, at `http://localhost:5000`). A notebook cannot run a
# server in the foreground and keep working, so `chatlab.runner.BackgroundServer` runs uvicorn for this app in a daemon
# thread of the kernel, on a free loopback port (`port=5000` for the article's).

# %%
from chatlab.runner import BackgroundServer

article_server = BackgroundServer(app, name="article-chat-history-service").start()
print(article_server.url)

# %% [markdown]
# Talk to it with an asynchronous HTTP client (`httpx.AsyncClient`): notebook cells can `await`, and nothing blocks the
# kernel's event loop. The server writes indented JSON, as the article's does:

# %%
import httpx

http = httpx.AsyncClient(base_url=article_server.url)
response = await http.get("/")
print(response.status_code, response.headers["content-type"])
print(response.text)

# %% [markdown]
# `print_response` (from `chatlab.tutorial.display`) shows each exchange in one block: the request, the status, the
# headers that matter and the JSON. No conversation is stored yet:

# %%
from chatlab.tutorial.display import print_response

print_response(await http.get("/chat-history"))

# %% [markdown]
# ## Append: `POST /chat-history/{conversationKey}`
#
# The body is `{"messages": [...]}`, each message in the JSON that .NET's Microsoft.Extensions.AI writes for a
# `ChatMessage`: a `role`, and `contents` whose items start with a `$type` (`text`, `functionCall`, `functionResult`,
# ...). The provider of the next notebook produces exactly this from the Python framework's `Message`.
#
# The conversation key is any string. The article's provider makes one per session with `Guid.NewGuid().ToString("N")`:
# a random GUID written as 32 hex digits without dashes, which is `uuid.uuid4().hex` in Python.

# %%
import uuid

key = uuid.uuid4().hex  # C#: Guid.NewGuid().ToString("N")
question = {"role": "user", "contents": [{"$type": "text", "text": "現在時刻を教えてください"}]}
print_response(await http.post(f"/chat-history/{key}", json={"messages": [question]}))

# %% [markdown]
# A run that used the `GetDateTime` tool adds three response messages: the assistant's tool call, the tool's result and
# the assistant's answer.

# %%
answer = [
    {"authorName": "SampleAgent", "role": "assistant",
     "contents": [{"$type": "functionCall", "callId": "call_1", "name": "GetDateTime", "arguments": {}}]},
    {"role": "tool", "contents": [{"$type": "functionResult", "callId": "call_1", "result": "2026-04-16 01:30:52"}]},
    {"authorName": "SampleAgent", "role": "assistant",
     "contents": [{"$type": "text", "text": "現在の日時は **2026-04-16 01:30:52** です。"}]},
]
print_response(await http.post(f"/chat-history/{key}", json={"messages": answer}))

# %% [markdown]
# ## Read: `GET /chat-history/{conversationKey}` and `GET /chat-history`

# %%
print_response(await http.get(f"/chat-history/{key}"))

# %%
print_response(await http.get("/chat-history"))

# %% [markdown]
# An unknown key is not an error: it reads as an empty history, which is what a brand-new session sees.

# %%
print_response(await http.get(f"/chat-history/{uuid.uuid4().hex}"))

# %% [markdown]
# ## Replace: `PUT /chat-history/{conversationKey}`
#
# Replaces the whole history, for example to keep only the question.

# %%
print_response(await http.put(f"/chat-history/{key}", json={"messages": [question]}))
print_response(await http.get("/chat-history"))

# %% [markdown]
# ## Delete: `DELETE /chat-history/{conversationKey}`

# %%
print_response(await http.delete(f"/chat-history/{key}"))
print_response(await http.get("/chat-history"))

# %% [markdown]
# ## The same calls against `chatlab.service`
#
# `chatlab.service` is this app made reusable: the same endpoints over four stores (memory, SQLite, PostgreSQL, Redis),
# input checks, the protections of notebook 6, an OpenAPI description. On the article's contract it must answer exactly
# as the app above. The next cell starts it (empty, in memory; the app above is empty again since the `DELETE`) and send both servers the same
# requests, one after the other: every endpoint, an unknown key, an empty append (stores nothing), an empty replace
# (creates an empty conversation, as the C# `SetMessages` does). For each answer the table shows the status, the
# `Location` header and the JSON body, and whether the two servers answered alike on the article's contract.

# %%
from chatlab.service import start_service

service = start_service()  # chatlab's service, in memory, in a background thread


FIRST, SECOND, UNKNOWN = "0" * 31 + "1", "0" * 31 + "2", "f" * 32  # the same keys for both servers
CALLS = [
    ("GET", "/", None),
    ("GET", "/chat-history", None),
    ("POST", "/chat-history/{FIRST}", {"messages": [question]}),
    ("POST", "/chat-history/{FIRST}", {"messages": answer}),
    ("POST", "/chat-history/{SECOND}", {"messages": []}),
    ("GET", "/chat-history/{FIRST}", None),
    ("GET", "/chat-history/{UNKNOWN}", None),
    ("GET", "/chat-history", None),
    ("PUT", "/chat-history/{FIRST}", {"messages": [question]}),
    ("PUT", "/chat-history/{SECOND}", {"messages": []}),
    ("GET", "/chat-history", None),
    ("DELETE", "/chat-history/{FIRST}", None),
    ("DELETE", "/chat-history/{UNKNOWN}", None),
    ("GET", "/chat-history", None),
]


SUMMARY_FIELDS = ("conversationKey", "messageCount")  # the article's ChatHistorySummary
added_fields: set[str] = set()  # what a server adds to a summary beyond them


def on_the_contract(body: Any) -> Any:
    """A JSON body as the article's contract has it: a summary with the article's fields only."""
    if isinstance(body, list) and body and isinstance(body[0], dict) and "messageCount" in body[0]:
        added_fields.update(*(summary.keys() - set(SUMMARY_FIELDS) for summary in body))
        return [{field: summary[field] for field in SUMMARY_FIELDS} for summary in body]
    return body


async def article_calls(base_url: str) -> list[tuple[int, str | None, Any]]:
    """CALLS in order; each answer as (status, Location, JSON body on the article's contract, or None)."""
    answers = []
    async with httpx.AsyncClient(base_url=base_url) as client:
        for method, path, body in CALLS:
            reply = await client.request(method, path.format(FIRST=FIRST, SECOND=SECOND, UNKNOWN=UNKNOWN), json=body)
            json_body = on_the_contract(reply.json()) if reply.content else None
            answers.append((reply.status_code, reply.headers.get("location"), json_body))
    return answers


def brief(status: int, location: str | None, body: Any) -> str:
    """An answer in a table cell: status, Location, body (a list of summaries as key: count, messages counted)."""
    if isinstance(body, list) and body and "conversationKey" in body[0]:
        text = "[" + ", ".join(f"{s['conversationKey']}: {s['messageCount']}" for s in body) + "]"
    elif isinstance(body, list) and body:
        text = f"[{len(body)} messages]"
    else:
        text = "" if body is None else json.dumps(body, ensure_ascii=False)
    cell = " ".join(part for part in (str(status), location, text) if part)
    for name in ("FIRST", "SECOND", "UNKNOWN"):
        cell = cell.replace(globals()[name], "{" + name + "}")
    return cell[:42]


article, hardened = await article_calls(article_server.url), await article_calls(service.url)
print(f"{'request':<30} {'the notebook app':<42} {'chatlab.service':<42} same")
for (method, path, _), a, h in zip(CALLS, article, hardened):
    print(f"{method + ' ' + path:<30} {brief(*a):<42} {brief(*h):<42} {'yes' if a == h else 'NO'}")
print("added to each summary by chatlab.service:", ", ".join(sorted(added_fields)) or "nothing")
print("every answer alike:", article == hardened)

# %% [markdown]
# Both servers got the same keys (`FIRST` is `000...1`). Alike on the contract does not mean
# byte for byte: chatlab writes compact JSON (clients parse both alike), adds headers of its own, such as `ETag`, and adds
# fields to each summary (above: when the conversation began and last changed). The article's client reads the fields it
# knows and ignores the rest, so the table compares each summary on the article's two fields.
#
# ## Where chatlab's service goes further: bad input
#
# The article's server leaves input validation out (its `ChatMessage` deserializer still refuses JSON it cannot read);
# the notebook app above keeps any JSON object. chatlab's service checks what it relies on and answers with a
# [problem JSON](https://www.rfc-editor.org/rfc/rfc9457) that says what is wrong; a refused request changes nothing.

# %%
typo = {"messages": [{"role": "user", "contents": [{"$type": "txt", "text": "typo in $type"}]}]}
print("the notebook app:", (await http.post(f"/chat-history/{key}", json=typo)).status_code)
async with httpx.AsyncClient(base_url=service.url) as hardened_http:
    print_response(await hardened_http.post(f"/chat-history/{key}", json=typo))
    print_response(await hardened_http.get(f"/chat-history/{key}"))


# %% [markdown]
# ## The keys chatlab's provider makes
#
# The article's keys are random (GUID version 4), so `GET /chat-history`, which lists conversations ordered by key,
# lists them in random order: in the article's second run `7bf9...` comes between `286d...` and `8c0b...`. chatlab's
# provider makes its keys in the same "N" format (32 lowercase hex digits) but as **UUID version 7** (RFC 9562): the
# first 12 hex digits are the creation time in milliseconds since 1970, the 13th is the version, `7`, and the rest is
# random (and, within one process, counts up). Keys of the same length and alphabet sort as text in the order of their
# numbers, so a later key sorts after an earlier one, and the service lists conversations **in the order they began**;
# database stores also insert each new key at the end of their index instead of at a random place.
#
# The provider makes a key the first time a session needs one (`conversation_key(session)`, no request is sent):

# %%
from datetime import datetime, timezone

import chatlab
from agent_framework import AgentSession

async with chatlab.RemoteChatHistoryProvider(service.url) as provider:
    keys = [provider.conversation_key(AgentSession()) for _ in range(3)]
print("keys:", *keys, sep="\n  ")
print("version digit:", {k[12] for k in keys})
print("sorted as text = order made:", sorted(keys) == keys)
print("time in the first key:", datetime.fromtimestamp(int(keys[0][:12], 16) / 1000, timezone.utc).isoformat())

# %% [markdown]
# ## What differs from the C# article
#
# - **FastAPI instead of ASP.NET Core Minimal API**, and plain dicts instead of `ChatMessage` objects in the notebook's
#   store. The same six endpoints and status codes; the article's own C# client works against either.
# - **A background thread instead of a separate process.** Handy in a notebook; `python -m chatlab serve --port 5000`
#   runs `chatlab.service` as its own process, as the article runs its server.
# - **`chatlab.service`** answers the article's requests alike (the table above) and adds what the article leaves out:
#   other stores ([notebook 5](05_swapping_the_store.ipynb)), input checks, and the protections
#   ([notebook 6](06_protections.ipynb)).
#
# Stop what this notebook started:

# %%
await http.aclose()
article_server.stop()
service.stop()
