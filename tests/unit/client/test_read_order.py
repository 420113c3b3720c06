"""Each event-loop iteration reads the sockets still waiting for their first body byte before the others."""

from __future__ import annotations

import asyncio
import socket

from llmsweep.client.transport import AWAITING_FIRST, first_tokens_first


def _order_of_reads(prioritise: bool) -> list[int]:
    """Eight sockets become readable together; the two marked as awaiting a first byte are the last ones registered.
    Returns the order in which one loop iteration ran their read callbacks."""
    loop = asyncio.new_event_loop()
    pairs = [socket.socketpair() for _ in range(8)]
    order: list[int] = []
    try:
        def read(i: int, s: socket.socket) -> None:
            order.append(i)
            s.recv(10)

        for i, (ours, _) in enumerate(pairs):
            loop.add_reader(ours.fileno(), read, i, ours)
        for _, theirs in pairs:
            theirs.send(b"x")
        marked = {pairs[6][0].fileno(), pairs[7][0].fileno()}
        AWAITING_FIRST.update(marked)
        undo = first_tokens_first(loop) if prioritise else None
        loop.run_until_complete(asyncio.sleep(0.05))
        if undo is not None:
            undo()
        AWAITING_FIRST.difference_update(marked)
        return order[:8]
    finally:
        for a, b in pairs:
            loop.remove_reader(a.fileno())
            a.close()
            b.close()
        loop.close()


def test_sockets_awaiting_their_first_byte_are_read_first_and_the_order_is_undone() -> None:
    assert sorted(_order_of_reads(True)[:2]) == [6, 7]
    assert sorted(_order_of_reads(False)[:2]) != [6, 7]  # the selector's own order: registration order
    loop = asyncio.new_event_loop()
    try:
        selector = loop._selector  # type: ignore[attr-defined]
        undo = first_tokens_first(loop)
        assert undo is not None and "select" in vars(selector)
        undo()
        assert "select" not in vars(selector)
    finally:
        loop.close()
