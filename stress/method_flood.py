"""A flood of made-up methods and paths against a service with ``--metrics``: the metrics must not grow.

Run from a clone's root: ``python -m stress.method_flood`` (``--stack asyncio`` for asyncio + h11, where
the parser lets any method token through to the app; ``--help`` for the bounds). Loopback only, bounded by
``--requests`` and ``--seconds``. Printed: requests sent and answered (by status), the number of
``chatlab_http_requests_total`` series and the size of ``/metrics`` before and after, the time a scrape
took, and the service's memory before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import string
import time

from stress._service import HOST, Service, running_service


async def request(port: int, head: bytes) -> tuple[int, bytes]:
    """One request on a fresh connection: its status (0: none) and body."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(head)
        data = await asyncio.wait_for(reader.read(), 30)
    except (OSError, TimeoutError):
        return 0, b""
    finally:
        writer.close()
    status_line, _, rest = data.partition(b"\r\n")
    try:
        status = int(status_line.split()[1])
    except (ValueError, IndexError):
        status = 0
    return status, rest.partition(b"\r\n\r\n")[2]


async def scrape(service: Service) -> tuple[int, int, float]:
    """(series of chatlab_http_requests_total, bytes of /metrics, seconds the scrape took)."""
    start = time.perf_counter()
    _, body = await request(service.port, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    took = time.perf_counter() - start
    series = sum(1 for line in body.splitlines() if line.startswith(b"chatlab_http_requests_total{"))
    return series, len(body), took


async def flood(service: Service, count: int, seconds: float, workers: int) -> None:
    """``count`` requests of made-up methods from ``workers`` clients, for at most ``seconds``; prints the metrics
    series, ``/metrics``' size and the service's memory before and after."""
    before_series, before_bytes, _ = await scrape(service)
    before_rss = service.rss_mib()
    statuses: dict[int, int] = {}
    stop = time.monotonic() + seconds
    sent = 0

    async def worker() -> None:
        nonlocal sent
        while sent < count and time.monotonic() < stop:
            sent += 1
            method = "".join(random.choices(string.ascii_uppercase, k=8))
            path = random.choice(["/chat-history/k", "/chat-history", f"/nosuch/{sent}"])
            head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
            status, _ = await request(service.port, head)
            statuses[status] = statuses.get(status, 0) + 1

    await asyncio.gather(*(worker() for _ in range(workers)))
    after_series, after_bytes, took = await scrape(service)
    print(f"method flood: {sent} requests sent; answered by status {dict(sorted(statuses.items()))} (0: none)")
    print(f"  request series: {before_series} before, {after_series} after")
    print(
        f"  /metrics: {before_bytes:,} bytes before, {after_bytes:,} after; the last scrape took {took * 1000:.1f} ms"
    )
    rss = service.rss_mib()
    print(f"  service memory: {before_rss or float('nan'):.0f} MiB before, {rss or float('nan'):.0f} MiB after")


def main() -> None:
    """The probe from the command line."""
    parser = argparse.ArgumentParser(prog="python -m stress.method_flood", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", choices=["fast", "asyncio"], default=None, help="the server stack (default fast)")
    parser.add_argument("--requests", type=int, default=20_000, help="requests to send (default 20,000)")
    parser.add_argument("--seconds", type=float, default=60.0, help="at most this long (default 60)")
    parser.add_argument("--workers", type=int, default=16, help="concurrent clients (default 16)")
    args = parser.parse_args()
    with running_service(["--metrics"], args.stack) as service:
        asyncio.run(flood(service, args.requests, args.seconds, args.workers))


if __name__ == "__main__":
    main()
