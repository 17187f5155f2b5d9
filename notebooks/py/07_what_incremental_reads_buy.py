# %% [markdown]
# # 7. What incremental reads buy
#
# The article's provider downloads the whole conversation before every agent run. So a turn costs more the longer
# the conversation is. chatlab's provider keeps what it loaded and asks the service only for what is new
# (`GET /chat-history/{key}?after=N`). This notebook measures both, live, for histories of 10 to 5,000 messages.
#
# **What you'll learn**
#
# - What a turn costs the provider in time and in bytes over HTTP, with and without incremental reads.
# - How that cost grows with the length of the conversation.
#
# **What you'll need**
#
# - Notebooks 1 to 3: the service and the provider's two hooks.
# - `chatlab` installed with the `notebooks` extra (it brings matplotlib and tqdm).
# - No LLM. A turn here is what the provider does around a run: load the history, then append the run's 4 messages.
# - About half a minute: the measurement shows a progress bar.
#
# Previous: [6. The protections the article leaves out](06_protections.ipynb)
#
# | mode | before each run | after each run | cost of a turn |
# |---|---|---|---|
# | full load (the article's, `incremental=False`) | `GET /chat-history/{key}`: every message | `POST` the run's messages | grows with the history |
# | incremental (chatlab's default) | `GET /chat-history/{key}?after=N`: only what is new | `POST`; the answer's `ETag` proves nobody else wrote, so the provider adds its own messages to what it holds | flat |

# %% [markdown]
# ## Start the service
#
# The list `started` remembers the servers this notebook starts, so the last cell can stop them. Run this cell again
# and it first stops what the earlier run started.

# %%
import gc
import statistics
import time

import httpx
import matplotlib.pyplot as plt
from tqdm.auto import tqdm

import chatlab
from chatlab.tutorial.samples import sample_messages, sample_turn
from chatlab.client.provider import KEY_FIELD
from chatlab.service import start_service
from chatlab.tutorial.views import show_conversation, show_summaries

for server in globals().get("started", []):  # this cell ran before: stop what that run started
    server.stop()
started = []

service = start_service()
started.append(service)
print("chat history service:", service.url)

# %% [markdown]
# ## Counting what crosses the wire
#
# A small httpx transport counts the bytes of every request and response body. It counts bodies only: the history
# travels in the bodies, and headers carry a date and a port that change from run to run.
# (`python -m benchmarks` counts headers too.)

# %%
class CountingTransport(httpx.AsyncBaseTransport):
    """Passes requests on and adds up the bytes of the request and response bodies."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bytes = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        self.bytes += len(request.content) + len(body)
        return httpx.Response(response.status_code, headers=response.headers, content=body, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


counter = CountingTransport()
http = httpx.AsyncClient(transport=counter, timeout=120)

# %% [markdown]
# ## One turn, measured
#
# `fill` writes a conversation of `length` messages, made of the article's turns: question, tool call, tool result,
# answer. A conversation left by an earlier run of these cells is deleted first, so every measurement starts from
# the same history.
#
# `measure` then plays a session with a provider. Its first run loads the history once, as any session must. Each
# measured turn is what the agent framework asks of the provider around a run:
#
# - `get_messages` before the run (the article's `ProvideChatHistoryAsync`),
# - `save_messages` with the run's 4 new messages after it (`StoreChatHistoryAsync`).
#
# The time is the median of several turns. Each turn starts after a garbage collection, so that a collection does
# not land inside one turn by chance.

# %%
TURNS = {True: 15, False: 5}  # incremental turns are cheap: take more of them, for a steadier median


async def fill(key: str, length: int) -> None:
    """Write `length` messages of the article's turns to a new conversation, 1,000 per request."""
    (await http.delete(f"{service.url}/chat-history/{key}")).raise_for_status()  # what an earlier run left
    messages = sample_messages(length)
    for start in range(0, length, 1_000):
        response = await http.post(f"{service.url}/chat-history/{key}", json={"messages": messages[start : start + 1_000]})
        response.raise_for_status()


async def measure(length: int, incremental: bool) -> tuple[float, int]:
    """Median milliseconds and bytes of one turn on a conversation of `length` messages."""
    key = f"history-{length}-{'incremental' if incremental else 'full'}"
    await fill(key, length)
    provider = chatlab.RemoteChatHistoryProvider(service.url, http_client=http, incremental=incremental)
    state = {KEY_FIELD: key}  # what the session's state holds: only the key
    await provider.get_messages(state=state)  # the session's first run: everything, once
    times, sizes = [], []
    for turn in range(TURNS[incremental]):
        new = chatlab.messages_from_meai(sample_turn(50_000 + turn))
        gc.collect()
        counter.bytes = 0
        start = time.perf_counter()
        history = await provider.get_messages(state=state)
        await provider.save_messages(None, new, state=state)
        times.append(time.perf_counter() - start)
        sizes.append(counter.bytes)
        assert len(history) == length + 4 * turn, "the provider must see the whole history either way"
    return statistics.median(times) * 1000, sorted(sizes)[len(sizes) // 2]


# %% [markdown]
# ## From 10 to 5,000 messages
#
# Both modes at each length. This takes about half a minute: the bar shows how far it is.
#
# The table shows the bytes, which are the same on every run (the same messages make the same bodies), and the
# time, which varies from run to run and from machine to machine.

# %%
LENGTHS = [10, 250, 500, 1_000, 2_000, 3_000, 4_000, 5_000]
results = {True: {}, False: {}}
for length in tqdm(LENGTHS, desc="histories measured"):
    for incremental in (True, False):
        results[incremental][length] = await measure(length, incremental)

print(f"{'history':>8}  {'incremental bytes/turn':>22}  {'full bytes/turn':>15}  incremental ms/turn, full ms/turn")
for length in LENGTHS:
    (inc_ms, inc_bytes), (full_ms, full_bytes) = results[True][length], results[False][length]
    print(f"{length:>8,}  {inc_bytes:>22,}  {full_bytes:>15,}  {inc_ms:.1f} ms, {full_ms:.1f} ms")

# %% [markdown]
# ## The picture
#
# Left, the bytes a turn moves. Right, the time it takes.
#
# The full load's line climbs with the history: every turn sends the whole conversation over HTTP and decodes every
# message again. The incremental line stays on the floor. After its first load, the provider asks for `?after=N`.
# After its own appends, it already holds what it wrote. So each turn moves the run's 4 new messages, and an empty
# list comes back.

# %%
figure, (bytes_axis, time_axis) = plt.subplots(1, 2, figsize=(11, 4))
for incremental, label, style in ((False, "full load (the article's)", "o-"), (True, "incremental (?after=N)", "s-")):
    series = results[incremental]
    bytes_axis.plot(LENGTHS, [series[n][1] / 1000 for n in LENGTHS], style, label=label)
    time_axis.plot(LENGTHS, [series[n][0] for n in LENGTHS], style, label=label)
bytes_axis.set(title="HTTP body bytes per turn", xlabel="messages in the history", ylabel="kB per turn")
time_axis.set(title="provider time per turn", xlabel="messages in the history", ylabel="ms per turn")
for axis in (bytes_axis, time_axis):
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend()
figure.tight_layout()
plt.show()


# %% [markdown]
# ## The conclusion, from the numbers
#
# A series is *flat* when its median over the three longest histories is less than three times its median over the
# three shortest. Otherwise it *grows with the history*. Times are noisy on a busy machine; the medians and the
# margin of three absorb that.

# %%
def shape(series: dict[int, tuple[float, int]], measure: int) -> str:
    values = [series[n][measure] for n in LENGTHS]
    shortest, longest = statistics.median(values[:3]), statistics.median(values[-3:])
    return "flat" if longest < 3 * shortest else "grows with the history"


shortest, longest = LENGTHS[0], LENGTHS[-1]
for name, index in (("bytes", 1), ("time", 0)):
    print(f"{name} per turn, {shortest:,} -> {longest:,} messages: "
          f"incremental {shape(results[True], index)}, full load {shape(results[False], index)}")
inc, full = results[True], results[False]
print(f"bytes per turn at {longest:,} messages: incremental {inc[longest][1]:,}, full load {full[longest][1]:,} "
      f"({full[longest][1] / inc[longest][1]:.0f} times as many)")

# %% [markdown]
# ## The conversations it wrote
#
# The store's summaries as a table, and the start of the shortest conversation as a chat. Each conversation holds
# its starting history plus the 4 messages of each measured turn. (`chatlab.tutorial.views` draws these HTML views.)

# %%
provider = chatlab.RemoteChatHistoryProvider(service.url)
show_summaries(await provider.get_conversation_summaries())

# %%
messages = (await http.get(f"{service.url}/chat-history/history-10-incremental?limit=4")).json()
show_conversation(messages, title="history-10-incremental, messages 1 to 4")

# %% [markdown]
# ## Stop what this notebook started
#
# The clients close and every server in `started` stops.

# %%
await provider.aclose()
await http.aclose()
for server in started:
    server.stop()

# %% [markdown]
# ## Recap
#
# - With a full load, a turn costs in proportion to the history: at 5,000 messages, each turn moves the whole
#   conversation, and its time grows with it.
# - With incremental reads, a turn costs the same at 10 and at 5,000 messages: the same bytes, about the same time.
# - The provider does this by itself. `incremental=False` gives the article's behaviour back.
# - `python -m benchmarks` measures the same on every store, up to 10,000 messages (README, Performance).
