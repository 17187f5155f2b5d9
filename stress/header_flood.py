"""Header floods against a service of its own: huge heads, then slow connections that reconnect.

Run from a clone's root: ``python -m stress.header_flood`` (``--stack asyncio`` for asyncio + h11;
``--help`` for the bounds). Loopback only; every phase is bounded in time and in bytes or connections.

The service does not bound a request head's time, nor its size on httptools (docs/protections.md, "Connections
and the store are bounded": a reverse proxy in front does); this probe shows what a service without one does.

1. **Huge heads**: ``--connections`` sockets each stream a header that never ends, up to ``--head-mib``
   MiB, while ``/healthz`` is probed. Printed: how many were cut off (and the status they got), the bytes
   each sent before that, the service's memory before and at its peak, and the probes' latency. On h11
   (``--stack asyncio``) each head is cut at 64 KiB; on httptools the service holds each head as it grows.
2. **Slow connections**: ``--slow`` sockets send a head a byte at a time and reconnect when closed, for
   ``--seconds``, while a probe client opens a fresh connection for ``GET /chat-history`` every 0.1 s.
   Printed: probes sent, answered 200, answered 503 and failed. With more slow connections than
   ``--max-connections``, the probes get ``503``: what a proxy's per-client limit and header timeout prevent.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from stress._service import HOST, Service, median, running_service

REQUEST_LINE = b"GET /chat-history HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Flood: "


async def probe(port: int, path: str) -> tuple[int, float]:
    """One request on a fresh connection: its status (0: failed) and how long it took."""
    start = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 10)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        line = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        status = int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else 0
    except (OSError, TimeoutError, ValueError, IndexError):
        status = 0
    return status, time.perf_counter() - start


async def huge_head(port: int, limit: int) -> tuple[int, int]:
    """Stream one endless header up to ``limit`` bytes: (bytes sent, status answered; 0 if none, -1 if not cut)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(REQUEST_LINE)
    chunk = b"a" * 65536
    sent = 0
    try:
        while sent < limit:
            writer.write(chunk)
            await asyncio.wait_for(writer.drain(), 10)
            sent += len(chunk)
            if reader.at_eof() or writer.is_closing():
                break
        else:
            return sent, -1
    except (OSError, TimeoutError):
        pass
    try:
        line = await asyncio.wait_for(reader.readline(), 5)
        status = int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else 0
    except (OSError, TimeoutError, ValueError, IndexError):
        status = 0
    writer.close()
    return sent, status


async def flood_heads(service: Service, connections: int, head_mib: int) -> None:
    """Phase 1: ``connections`` endless heads of up to ``head_mib`` MiB each while ``/healthz`` is probed; prints."""
    before = service.rss_mib()
    peak = before or 0.0
    latencies: list[float] = []
    floods = [asyncio.ensure_future(huge_head(service.port, head_mib * 1024 * 1024)) for _ in range(connections)]
    deadline = time.monotonic() + 120
    while not all(f.done() for f in floods) and time.monotonic() < deadline:
        status, took = await probe(service.port, "/healthz")
        latencies.append(took if status == 200 else float("inf"))
        peak = max(peak, service.rss_mib() or 0.0)
        await asyncio.sleep(0.05)
    results = [f.result() if f.done() else (0, -1) for f in floods]
    for f in floods:
        f.cancel()
    cut = [r for r in results if r[1] != -1]
    print(f"huge heads: {connections} connections, each up to {head_mib} MiB")
    print(f"  cut off: {len(cut)} of {connections}; statuses {sorted({r[1] for r in cut})} (0: closed without one)")
    print(f"  bytes sent before the cut: max {max((r[0] for r in results), default=0):,}")
    print(f"  service memory: {before or float('nan'):.0f} MiB before, {peak:.0f} MiB at the peak")
    print(
        f"  /healthz probes: {len(latencies)}, median {median(latencies) * 1000:.1f} ms, "
        f"max {max(latencies, default=0) * 1000:.1f} ms"
    )


async def slow_client(port: int, stop: float, opened: list[int]) -> None:
    """Keep a connection that sends a head a byte at a time; reconnect whenever it is closed, until ``stop``."""
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        opened[0] += 1
        try:
            writer.write(REQUEST_LINE)
            while time.monotonic() < stop and not reader.at_eof():
                writer.write(b"a")
                await writer.drain()
                await asyncio.sleep(0.5)
        except OSError:
            pass
        finally:
            writer.close()


async def flood_slow(service: Service, slow: int, seconds: float) -> None:
    """Phase 2: ``slow`` connections trickling heads for ``seconds`` while a client probes; prints."""
    stop = time.monotonic() + seconds
    opened = [0]
    clients = [asyncio.ensure_future(slow_client(service.port, stop, opened)) for _ in range(slow)]
    await asyncio.sleep(min(2.0, seconds / 4))  # let them take the slots
    statuses: dict[int, int] = {}
    while time.monotonic() < stop:
        status, _ = await probe(service.port, "/chat-history")
        statuses[status] = statuses.get(status, 0) + 1
        await asyncio.sleep(0.1)
    await asyncio.gather(*clients, return_exceptions=True)
    sent = sum(statuses.values())
    print(f"slow connections: {slow} held, {opened[0]} opened in all over {seconds:g} s")
    print(
        f"  probes: {sent} sent, {statuses.get(200, 0)} answered 200, {statuses.get(503, 0)} answered 503, "
        f"{statuses.get(0, 0)} failed"
    )


def main() -> None:
    """Both phases against a service of their own."""
    parser = argparse.ArgumentParser(prog="python -m stress.header_flood", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", choices=["fast", "asyncio"], default=None, help="the server stack (default fast)")
    parser.add_argument("--connections", type=int, default=8, help="huge-head connections (default 8)")
    parser.add_argument("--head-mib", type=int, default=8, help="MiB each tries to send (default 8)")
    parser.add_argument("--slow", type=int, default=600, help="slow connections (default 600)")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long the slow phase lasts (default 15)")
    args = parser.parse_args()
    flags = ["--max-connections", str(max(2, args.slow - 100))]
    with running_service(flags, args.stack) as service:
        asyncio.run(flood_heads(service, args.connections, args.head_mib))
        asyncio.run(flood_slow(service, args.slow, args.seconds))


if __name__ == "__main__":
    main()
