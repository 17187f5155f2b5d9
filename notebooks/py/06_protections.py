# %% [markdown]
# # 6. The protections the article leaves out
#
# The article ends with a caveat (注意): its server has no authentication, authorization, CORS, transport
# protection, input validation or rate limiting, so it must not be exposed as is. chatlab's service has each of them
# as a setting. With none switched on, it behaves as in notebooks 1 to 5.
#
# **What you'll learn**
#
# - How to start the service with TLS, API keys, CORS, limits and a rate limit, all at once.
# - What each protection answers when a request breaks its rule.
# - How versions (`ETag` / `If-Match`) make concurrent updates safe, and `Idempotency-Key` makes retries safe.
# - How the provider and the agent work against the hardened service.
#
# **What you'll need**
#
# - Notebooks 1 to 5.
# - `chatlab` installed with the `notebooks` extra (it brings `trustme`, which makes a throwaway certificate
#   authority).
# - An LLM is optional, as in [notebook 3](03_running_the_agent.ipynb).
# - Every option is listed in [docs/protections.md](../docs/protections.md).
#
# Previous: [5. Swapping the store](05_swapping_the_store.ipynb) ·
# Next: [7. What incremental reads buy](07_what_incremental_reads_buy.ipynb)
#
# | protection | `python -m chatlab serve` option | refuses with |
# |---|---|---|
# | authentication (API keys) | `--api-keys-file keys.txt` (`namespace:key` lines) | `401` + `WWW-Authenticate` |
# | authorization (a namespace per key) | the same file | another namespace's conversation looks like a missing one |
# | CORS | `--cors-origin https://app.example` | preflight `400` for other origins |
# | transport protection (TLS) | `--tls-cert cert.pem --tls-key key.pem` | plain HTTP is not served |
# | input validation and limits | `--max-body-bytes`, `--max-messages`, `--max-message-bytes`, `--key-pattern`, `--key-max-length` | `400`, `413` |
# | rate limit | `--rate-limit 300/min --rate-burst 20` | `429` + `Retry-After` |

# %% [markdown]
# ## A hardened service
#
# First a certificate for `127.0.0.1`, signed by a certificate authority made just now. In production you use your
# real certificate. The files go in a temporary folder, deleted when the kernel stops.
#
# The list `started` remembers the servers this notebook starts, so the last cell can stop them. Run this cell
# again and it first stops what the earlier run started.

# %%
import tempfile
from pathlib import Path

import trustme

for server in globals().get("started", []):  # this cell ran before: stop what that run started
    server.stop()
started = []

scratch = tempfile.TemporaryDirectory(prefix="chatlab-06-")
workdir = Path(scratch.name)
authority = trustme.CA()
certificate = authority.issue_cert("127.0.0.1", "localhost")
certificate.private_key_pem.write_to_path(workdir / "key.pem")
certificate.cert_chain_pems[0].write_to_path(workdir / "cert.pem")
authority.cert_pem.write_to_path(workdir / "ca.pem")

# %% [markdown]
# Then API keys for three namespaces, `alice`, `bob` and `carol`, and the service with every protection on.

# %%
import chatlab
from chatlab.service import ServiceSettings, start_service
from chatlab.service.security import ApiKeys, RateLimit, new_api_key

alice, bob, carol = new_api_key(), new_api_key(), new_api_key()
settings = ServiceSettings(
    api_keys=ApiKeys({alice: "alice", bob: "bob", carol: "carol"}),
    cors_origins=("https://app.example",),
    max_message_bytes=4096,
    rate_limit=RateLimit.parse("6/min", burst=30),  # 30 at once, then one every 10 seconds
)
service = start_service(settings=settings, tls_cert=workdir / "cert.pem", tls_key=workdir / "key.pem")
started.append(service)
print(service.url)

# %% [markdown]
# Three clients that trust the new certificate authority: one without a key, one as alice, one as bob.

# %%
import httpx

from chatlab.tutorial.display import print_response

ca = str(workdir / "ca.pem")
anonymous = httpx.AsyncClient(base_url=service.url, verify=ca)
as_alice = httpx.AsyncClient(base_url=service.url, verify=ca, headers={"Authorization": f"Bearer {alice}"})
as_bob = httpx.AsyncClient(base_url=service.url, verify=ca, headers={"Authorization": f"Bearer {bob}"})

# %% [markdown]
# ## Transport protection
#
# The service speaks HTTPS only. A client that does not trust its certificate refuses to talk to it.

# %%
try:
    async with httpx.AsyncClient(base_url=service.url) as untrusting:  # the system's CAs only
        await untrusting.get("/")
except httpx.ConnectError as error:
    print("refused:", "CERTIFICATE_VERIFY_FAILED" in str(error))

# %% [markdown]
# ## Authentication
#
# No key, or a key the service does not know: `401`, and nothing else is revealed.

# %%
print_response(await anonymous.get("/chat-history"))
print_response(await anonymous.get("/chat-history", headers={"Authorization": "Bearer not-a-key-of-this-service"}))

# %% [markdown]
# ## Authorization: a namespace per key
#
# Alice writes a conversation. Bob can't see it. For him it looks exactly like a key nobody ever used: same body,
# same `ETag: "0"`. So he can't even learn that it exists.

# %%
message = {"role": "user", "contents": [{"$type": "text", "text": "現在時刻を教えてください"}]}
print_response(await as_alice.post("/chat-history/alice-conversation", json={"messages": [message]}))
print_response(await as_alice.get("/chat-history"))

# %%
print_response(await as_bob.get("/chat-history"))
print_response(await as_bob.get("/chat-history/alice-conversation"))
print_response(await as_bob.get("/chat-history/never-used"))


# %% [markdown]
# ## CORS
#
# A browser page may call the service only from an allowed origin. The preflight request carries no key.

# %%
def cors(response):
    print(response.status_code, response.headers.get("access-control-allow-origin"))

preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
cors(await anonymous.options("/chat-history/x", headers={"Origin": "https://app.example", **preflight}))
cors(await anonymous.options("/chat-history/x", headers={"Origin": "https://evil.example", **preflight}))

# %% [markdown]
# ## Loopback is for loopback
#
# Always on, with or without keys. A web page the user visits must not reach the service through their browser.
#
# - A request whose `Host` names another site gets `421`, before anything else. This stops DNS rebinding, where
#   `evil.example` is made to resolve to `127.0.0.1`.
# - A write that is not JSON gets `415`. That is what a cross-site form sends.
#
# `--allowed-host NAME` adds a name the service answers for.

# %%
print_response(await anonymous.get("/chat-history", headers={"Host": "evil.example"}))
print_response(await as_alice.post("/chat-history/alice-conversation", content=b"{}", headers={"Content-Type": "text/plain"}))

# %% [markdown]
# ## Input validation and limits
#
# A message larger than `max_message_bytes`, and a conversation key outside the allowed pattern:

# %%
huge = {"role": "user", "contents": [{"$type": "text", "text": "x" * 5000}]}
print_response(await as_alice.post("/chat-history/alice-conversation", json={"messages": [huge]}))
print_response(await as_alice.get("/chat-history/not a key"))

# %% [markdown]
# ## Safe concurrent updates: `ETag` and `If-Match`
#
# Every read carries the conversation's version. A read-modify-write sends it back in `If-Match`. If someone else
# wrote in the meantime, the write is refused with `412`, instead of silently overwriting their messages.

# %%
read = await as_alice.get("/chat-history/alice-conversation")
print("read at", read.headers["etag"])

await as_alice.post("/chat-history/alice-conversation", json={"messages": [message]})  # another writer
changed = [*read.json(), {"role": "assistant", "contents": [{"$type": "text", "text": "edited"}]}]
print_response(await as_alice.put("/chat-history/alice-conversation", json={"messages": changed},
                                  headers={"If-Match": read.headers["etag"]}))

# %% [markdown]
# ## Safe retries: `Idempotency-Key`
#
# When the answer to an append is lost, the client can't know whether it was stored. A retry with the same
# `Idempotency-Key` is safe: the service answers as the first time and stores nothing again. The key is a quoted
# string, as the IETF draft defines the header. The provider sends one with every append and retries by itself.

# %%
body = {"messages": [{"role": "user", "contents": [{"$type": "text", "text": "once"}]}]}
for attempt in (1, 2):
    answer = await as_alice.post("/chat-history/retried", json=body, headers={"Idempotency-Key": '"append-1"'})
    print(attempt, answer.status_code, "replayed:", answer.headers.get("idempotent-replayed"))
print("stored:", len((await as_alice.get("/chat-history/retried")).json()), "message")
other = {"messages": [{"role": "user", "contents": [{"$type": "text", "text": "something else"}]}]}
print_response(await as_alice.post("/chat-history/retried", json=other, headers={"Idempotency-Key": '"append-1"'}))

# %% [markdown]
# ## Rate limit
#
# Each key has its own bucket: 30 requests at once, then one every 10 seconds. Carol sends 35 at once:

# %%
from collections import Counter

async with httpx.AsyncClient(base_url=service.url, verify=ca, headers={"Authorization": f"Bearer {carol}"}) as as_carol:
    statuses = Counter([(await as_carol.get("/chat-history")).status_code for _ in range(35)])
    print(dict(statuses))
    print_response(await as_carol.get("/chat-history"))


# %% [markdown]
# ## The agent against the hardened service
#
# The provider sends its API key (`api_key=`, or the variable `CHAT_HISTORY_SERVICE_API_KEY`) and checks the
# certificate (`verify=`). Everything else is as before. Its conversations live in alice's namespace.

# %% tags=["real-llm-varies"]
llm = await chatlab.connect_llm()
if llm.offline_server is not None:  # the offline model runs in this kernel: stop it at the end too
    started.append(llm.offline_server)
provider = chatlab.RemoteChatHistoryProvider(service.url, api_key=alice, verify=ca)
agent = chatlab.create_agent(llm.client, provider)
session = agent.create_session()
chatlab.print_agent_response(await agent.run("現在時刻を教えてください", session=session))
await chatlab.print_external_store(provider)

# %% [markdown]
# ## Stop what this notebook started
#
# The clients close and every server in `started` stops.

# %%
for client in (anonymous, as_alice, as_bob, provider, llm):
    await client.aclose()
for server in started:
    server.stop()

# %% [markdown]
# ## Recap
#
# - Each protection the article leaves out is a setting of the service: TLS, API keys with a namespace each, CORS,
#   limits on what a request may carry, and a rate limit.
# - A refused request gets a status and a message that says what to do. Nothing is written.
# - `If-Match` turns a lost update into a `412`. `Idempotency-Key` makes a retried append safe.
# - The provider needs only its key and the certificate authority. The agent does not change.
#
# Next: [7. What incremental reads buy](07_what_incremental_reads_buy.ipynb), the provider's time and bytes per turn.
