"""What the article's server leaves out (docs/protections.md): API keys scoped to a namespace (:mod:`.auth`), a
per-key rate limit (:mod:`.ratelimit`), versions and idempotent retries (:mod:`.conditions`), DNS-rebinding and
cross-site write checks (:mod:`.browser`). CORS and TLS are Starlette's and uvicorn's own.
"""

from .auth import ApiKeys, Caller, new_api_key
from .ratelimit import RateLimit, RateLimiter

__all__ = ["ApiKeys", "Caller", "RateLimit", "RateLimiter", "new_api_key"]
