# %% [markdown]
# # 6. The protections the article leaves out
#
# **What this shows.** The article's caveat (注意): its server has no authentication, authorization, CORS, transport
# protection, input validation or rate limiting, and must not be exposed as is. chatlab's service has each of them as
# configuration. With none switched on it behaves exactly as in notebooks 1 to 5. Here they are all on at once, and
# each one is asked what it answers. Then two safeguards that need no switch: versions (`ETag` / `If-Match`) for safe
# concurrent updates and `Idempotency-Key` for safe retries. At the end, the agent runs against the hardened service.
#
# **What it needs.** `chatlab` installed with the `dev` extra (for `trustme`, which makes a throw-away certificate
# authority). An LLM is optional, as in [notebook 3](03_running_the_agent.ipynb). Every option is listed in
# [docs/protections.md](../docs/protections.md).
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
# A certificate for `127.0.0.1`, signed by a certificate authority made just now (in production: your real
# certificate), and API keys for three namespaces: `alice`, `bob` and `carol`.

# %%
import tempfile
from pathlib import Path

import trustme

workdir = Path(tempfile.mkdtemp(prefix="chatlab-tls-"))
authority = trustme.CA()
certificate = authority.issue_cert("127.0.0.1", "localhost")
certificate.private_key_pem.write_to_path(workdir / "key.pem")
certificate.cert_chain_pems[0].write_to_path(workdir / "cert.pem")
authority.cert_pem.write_to_path(workdir / "ca.pem")

# %%
import chatlab
from chatlab.service.security import ApiKeys, RateLimit, new_api_key
from chatlab.service import ServiceSettings, start_service

alice, bob, carol = new_api_key(), new_api_key(), new_api_key()
settings = ServiceSettings(
    api_keys=ApiKeys({alice: "alice", bob: "bob", carol: "carol"}),
    cors_origins=("https://app.example",),
    max_message_bytes=4096,
    rate_limit=RateLimit.parse("6/min", burst=30),  # 30 at once, then one every 10 seconds
)
service = start_service(settings=settings, tls_cert=workdir / "cert.pem", tls_key=workdir / "key.pem")
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
# The service speaks HTTPS only; a client that does not trust its certificate refuses to talk to it.

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
# Alice writes a conversation. Bob can't see it: for him it does not exist, exactly as a key nobody ever used (same
# body, same `ETag: "0"`), so he can't even learn that it exists.

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
# Always on, with or without keys: a web page the user visits must not reach the service through the user's browser.
# A request whose `Host` names another site (DNS rebinding: `evil.example` made to resolve to `127.0.0.1`) gets `421`,
# before anything else, authentication included; a write that is not JSON (what a cross-site form or a `fetch`
# without a preflight sends) gets `415`. `--allowed-host NAME` adds a name the service answers for.

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
# Every read carries the conversation's version. A read-modify-write sends it back in `If-Match`; if someone else
# wrote meanwhile, the write is refused with `412` instead of silently overwriting their messages.

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
# When the answer to an append is lost, the client can't know whether it was stored. Retrying with the same
# `Idempotency-Key` (a quoted string, as the IETF draft defines the header) is safe: the service answers as the
# first time and stores nothing again. The provider sends one
# with every append and retries transient failures by itself.

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
# The provider sends its API key (`api_key=`, or `CHAT_HISTORY_SERVICE_API_KEY`) and checks the certificate
# (`verify=`); everything else is as before. Its conversations live in alice's namespace.

# %% tags=["real-llm-varies"]
llm = await chatlab.connect_llm()
provider = chatlab.RemoteChatHistoryProvider(service.url, api_key=alice, verify=ca)
agent = chatlab.create_agent(llm.client, provider)
session = agent.create_session()
chatlab.print_agent_response(await agent.run("現在時刻を教えてください", session=session))
await chatlab.print_external_store(provider)

# %% [markdown]
# Stop what this notebook started and remove its files:

# %%
import shutil

for client in (anonymous, as_alice, as_bob, provider, llm):
    await client.aclose()
for server in (service, llm.offline_server):
    if server is not None:
        server.stop()
shutil.rmtree(workdir)

# %% [markdown]
# Next: [7. What incremental reads buy](07_what_incremental_reads_buy.ipynb): the provider's time and bytes per turn, measured and plotted.
