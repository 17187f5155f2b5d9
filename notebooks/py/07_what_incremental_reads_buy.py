# %% [markdown]
# # 7. What incremental reads buy
#
# **What this shows.** The article's provider downloads the whole conversation before every agent run: a turn costs
# more the longer the conversation is. chatlab's provider keeps what it loaded and asks the service only for what is
# new (`GET /chat-history/{key}?after=N`), so a turn costs the same at 10 messages and at 5,000. Here both are measured
# live, on this machine, for histories of 10 to 5,000 messages: the provider's time and HTTP bytes per turn, plotted
# against the history's length. The printed conclusion is computed from the measurements, so a change that made the
# incremental turn grow again would change this notebook's output.
#
# **What it needs.** `chatlab` installed with the `notebooks` extra (for matplotlib). No LLM: a turn here is what the
# provider does around a run (load the history, then append the run's 4 messages), without the model in between.
# It takes a few seconds.
#
# Previous: [6. The protections the article leaves out](06_protections.ipynb)
#
# | mode | before each run | after each run | cost of a turn |
# |---|---|---|---|
# | full load (the article's, `incremental=False`) | `GET /chat-history/{key}`: every message | `POST` the run's messages | grows with the history |
# | incremental (chatlab's default) | `GET /chat-history/{key}?after=N`: only what is new | `POST`; the answer's `ETag` proves nobody else wrote, so the provider adds its own messages to what it holds | flat |

# %%
import gc
import statistics
import time

import httpx
import matplotlib.pyplot as plt

import chatlab
from chatlab.bench import sample_messages, sample_turn
from chatlab.client.provider import KEY_FIELD
from chatlab.service import start_service
from chatlab.tutorial.views import show_conversation, show_summaries

service = start_service()
print("chat history service:", service.url)


# %% [markdown]
# ## Counting what crosses the wire
#
# A small httpx transport counts the bytes of every request and response body. Bodies only: headers carry a date and
# a port that change from run to run, and the bodies are where the history travels. (`python -m chatlab bench` counts
# headers too.)

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
# A conversation of `length` messages is written to the service (the article's turns: question, tool call, tool
# result, answer). Then a provider plays the session: its first run loads the history once, as any session must; each
# measured turn is what the agent framework asks of the provider around a run: `get_messages` before it (the article's
# `ProvideChatHistoryAsync`) and `save_messages` with the run's 4 new messages after it (`StoreChatHistoryAsync`). The
# time is the median of several turns (more of the cheap incremental ones), each started after a garbage collection so
# that a collection does not land inside one turn by chance; the bytes are those of the median turn.

# %%
TURNS = {True: 15, False: 5}  # incremental turns are cheap: take more of them, for a steadier median


async def fill(key: str, length: int) -> None:
    """Write `length` messages of the article's turns to a new conversation, 1,000 per request."""
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
# Both modes at each length; the table prints the time (which varies from run to run and machine to machine) and the
# bytes (which do not: the same messages always make the same bodies).

# %%
LENGTHS = [10, 250, 500, 1_000, 2_000, 3_000, 4_000, 5_000]
results = {True: {}, False: {}}
print(f"{'history':>8}  {'incremental bytes/turn':>22}  {'full bytes/turn':>15}  incremental ms/turn, full ms/turn")
for length in LENGTHS:
    for incremental in (True, False):
        results[incremental][length] = await measure(length, incremental)
    (inc_ms, inc_bytes), (full_ms, full_bytes) = results[True][length], results[False][length]
    print(f"{length:>8,}  {inc_bytes:>22,}  {full_bytes:>15,}  {inc_ms:.1f} ms, {full_ms:.1f} ms")

# %% [markdown]
# ## The picture
#
# Left, the bytes a turn moves; right, the time it takes. The full load's line climbs with the history: every turn
# sends the whole conversation over HTTP and decodes every message again. The incremental line stays on the floor:
# after its first load the provider asks for `?after=N`, and after each of its own appends it already holds what it
# wrote, so each turn moves the run's 4 new messages and an empty list back.

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
# ## The conclusion, computed
#
# A series is *flat* when its typical value at the three longest histories (their median) is less than three times its
# typical value at the three shortest, and *grows with the history* otherwise. The bytes are exact, so their shape is
# certain; the times are noisy on a shared machine, which the medians and the margin absorb: a full load of 5,000
# messages takes tens of times a load of 10, far beyond it.

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
# The store's summaries as a table, and the start of the shortest conversation as a chat (`chatlab.tutorial.views`:
# HTML views for cells where a picture helps; every value is escaped). Each conversation holds its starting history
# plus the 4 messages of each measured turn.

# %%
provider = chatlab.RemoteChatHistoryProvider(service.url)
show_summaries(await provider.get_conversation_summaries())

# %%
messages = (await http.get(f"{service.url}/chat-history/history-10-incremental?limit=4")).json()
show_conversation(messages, title="history-10-incremental, messages 1 to 4")

# %% [markdown]
# Stop what this notebook started:

# %%
await provider.aclose()
await http.aclose()
service.stop()

# %% [markdown]
# **What the numbers say.** A full load costs a turn in proportion to the history: at 5,000 messages each turn
# moves the whole conversation, and its time grows with it. The incremental provider's turn is flat: the same bytes at
# 10 and 5,000 messages, and about the same time. `python -m chatlab bench` measures the same on every store up to
# 10,000 messages (README, Performance).
