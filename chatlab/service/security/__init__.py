"""What the article's server leaves out, one module per idea, each switched on by a ``ServiceSettings`` field.

API keys scoped to a namespace (:mod:`.auth`), a per-key rate limit (:mod:`.ratelimit`), versions and idempotent
retries (:mod:`.conditions`), DNS-rebinding and cross-site write checks (:mod:`.browser`). CORS and TLS are
Starlette's and uvicorn's own. See docs/protections.md.
"""

from .auth import ApiKeys, Caller, new_api_key
from .ratelimit import RateLimit, RateLimiter

__all__ = ["ApiKeys", "Caller", "RateLimit", "RateLimiter", "new_api_key"]
