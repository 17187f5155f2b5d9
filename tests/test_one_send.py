"""The connection's transport sends an answer's head and body in one write, holding none past the loop's turn."""

from __future__ import annotations

import asyncio
from typing import Any

from chatlab.service.connections import OneSend


class Counting:
    """A real transport, its writes counted on the way."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer  # kept: a stream writer closes its transport when collected
        self.transport = writer.transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


async def _pair() -> tuple[Counting, OneSend, asyncio.StreamReader, asyncio.AbstractServer]:
    """A loopback TCP connection: our end's transport (counted, then wrapped) and the peer's reader."""
    accepted: asyncio.Future[asyncio.StreamReader] = asyncio.get_running_loop().create_future()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(reader)

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    counting = Counting(writer)
    sending = OneSend(counting, asyncio.get_running_loop())  # type: ignore[arg-type]
    return counting, sending, await accepted, server


def test_head_and_body_leave_in_one_write() -> None:
    async def main() -> None:
        counting, sending, peer, server = await _pair()
        sending.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
        sending.write(b"hello")
        assert counting.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"]
        assert await peer.readexactly(43) == b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
        sending.close()
        server.close()

    asyncio.run(main())


def test_a_lone_write_goes_out_when_the_loops_turn_ends() -> None:
    """A streamed answer's head is not held until its first chunk: it leaves at the end of the turn."""

    async def main() -> None:
        counting, sending, peer, server = await _pair()
        sending.write(b"head")
        assert counting.writes == []
        assert await asyncio.wait_for(peer.readexactly(4), 2) == b"head"
        assert counting.writes == [b"head"]
        sending.write(b"chunk")  # the next write is held again, then sent alone
        await asyncio.sleep(0)
        assert counting.writes == [b"head", b"chunk"]
        sending.close()
        server.close()

    asyncio.run(main())


def test_close_sends_what_is_held_and_abort_drops_it() -> None:
    async def main() -> None:
        _, sending, peer, server = await _pair()
        sending.write(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
        sending.close()  # as the header deadline writes its 408 and closes at once
        assert await peer.read() == b"HTTP/1.1 408 Request Timeout\r\n\r\n"
        other, sending2, peer2, server2 = await _pair()
        sending2.write(b"never")
        sending2.abort()
        assert await peer2.read() == b"" and other.writes == []
        server.close()
        server2.close()

    asyncio.run(main())


def test_a_large_body_is_not_copied_onto_the_head() -> None:
    async def main() -> None:
        counting, sending, peer, server = await _pair()
        body = b"x" * (OneSend.JOIN_LIMIT + 1)
        sending.write(b"head")
        sending.write(body)
        assert counting.writes == [b"head", body]
        assert await peer.readexactly(4 + len(body)) == b"head" + body
        assert sending.get_extra_info("peername") is not None  # everything else is the transport's
        sending.close()
        server.close()

    asyncio.run(main())


def test_is_closing_is_the_transports() -> None:
    """uvicorn asks it on every answer: the transport's own answer, before and after closing."""

    async def main() -> None:
        _, sending, peer, server = await _pair()
        assert sending.is_closing() is False
        sending.close()
        assert sending.is_closing() is True
        assert await peer.read() == b""
        server.close()

    asyncio.run(main())


def test_a_head_without_a_body_goes_at_once_and_an_empty_write_is_none() -> None:
    """An append's 202 says ``content-length: 0``: nothing follows, so nothing is held for the loop's turn; uvicorn's
    empty body after it sends nothing. A head whose body is to come is still held."""

    async def main() -> None:
        counting, sending, peer, server = await _pair()
        head = b"HTTP/1.1 202 Accepted\r\nlocation: /chat-history/a\r\ncontent-length: 0\r\n\r\n"
        sending.write(head)
        assert counting.writes == [head]  # at once, before the loop's turn ends
        sending.write(b"")
        assert counting.writes == [head]
        assert await peer.readexactly(len(head)) == head
        sending.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n")  # 10, not 0: its body is to come
        assert counting.writes == [head]
        sending.write(b"0123456789")
        assert counting.writes == [head, b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n0123456789"]
        sending.close()
        server.close()

    asyncio.run(main())


def test_answers_over_http_are_whole_with_and_without_a_body() -> None:
    """Through uvicorn and the service: 202s without a body and GETs with one, in turn on one keep-alive connection."""
    import httpx

    from chatlab.service import start_service
    from chatlab.stores import InMemoryChatHistoryStore

    message = {"role": "user", "contents": [{"$type": "text", "text": "hello"}]}
    server = start_service(store=InMemoryChatHistoryStore())
    try:
        with httpx.Client(base_url=server.url) as client:
            for i in range(3):
                answer = client.post(
                    "/chat-history/one-send", json={"messages": [message]}, headers={"Idempotency-Key": f'"k{i}"'}
                )
                assert answer.status_code == 202 and answer.content == b""
                assert answer.headers["content-length"] == "0" and answer.headers["etag"].endswith(f'.{i + 1}"')
                read = client.get("/chat-history/one-send")
                assert read.status_code == 200 and read.json() == [message] * (i + 1)
    finally:
        server.stop()
