"""Turns for client work: a burst of sends and parses must not hold the event loop away from the network."""

from __future__ import annotations

import asyncio
import time

from llmsweep.client.interpreter import Pacer


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _burst(
    pacer: Pacer, jobs: list[int], *, work_s: float = 0.0005, kinds: list[list[int]] | None = None
) -> tuple[list[int], list[int]]:
    """Run `jobs` (their kind: 0 send, 1 parse) at once; return how many ran per loop iteration and the order.
    `kinds`, when given, receives per loop iteration the kinds of the jobs that ran in it."""
    loop = asyncio.get_running_loop()
    iteration = 0
    per_iteration: dict[int, list[int]] = {}
    order: list[int] = []
    done = False

    def tick() -> None:  # once per loop iteration, as a socket's read callback would run
        nonlocal iteration
        iteration += 1
        if not done:
            loop.call_soon(tick)

    async def job(i: int, kind: int) -> None:
        await pacer.turn(kind)
        per_iteration.setdefault(iteration, []).append(kind)
        order.append(i)
        _busy(work_s)

    loop.call_soon(tick)
    await asyncio.gather(*(job(i, kind) for i, kind in enumerate(jobs)))
    done = True
    if kinds is not None:
        kinds.extend(per_iteration.values())
    return [len(ran) for ran in per_iteration.values()], order


def test_turns_spread_a_burst_over_loop_iterations() -> None:
    counts, order = asyncio.run(_burst(Pacer(0.002), [0] * 200))
    # 0.5 ms each against a 2 ms budget: a handful per iteration (fewer when the machine is busy), never all of them
    assert max(counts) <= 20
    assert sum(counts) == 200
    assert order == sorted(order)  # first come, first served


def test_without_a_budget_the_whole_burst_runs_in_one_iteration() -> None:
    counts, _ = asyncio.run(_burst(Pacer(None), [0] * 200))
    assert max(counts) == 200


def test_sends_take_their_turns_before_parses() -> None:
    jobs = [1] * 50 + [0] * 50  # parses asked first
    kinds: list[list[int]] = []
    asyncio.run(_burst(Pacer(0.002), jobs, kinds=kinds))
    last_send = max(i for i, ran in enumerate(kinds) if 0 in ran)
    assert last_send > 0  # the burst did not fit one iteration's budget: the sends queued
    # the first iteration runs whatever came before the budget ran out; once turns queue, an iteration lets through
    # its batch of sends and one parse (so the record writer is never starved), until no send waits
    assert all(ran.count(1) <= 1 for ran in kinds[1:last_send])


def test_a_cancelled_wait_leaves_the_queue() -> None:
    async def main() -> int:
        pacer = Pacer(0.0001)
        await pacer.turn()
        _busy(0.001)  # the iteration's budget is spent: the next turn queues
        waiter = asyncio.ensure_future(pacer.turn())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        return sum(len(q) for q in pacer.queues)

    assert asyncio.run(main()) == 0


def test_parses_are_not_starved_by_a_steady_stream_of_sends() -> None:
    async def main() -> int:
        pacer = Pacer(0.001)
        parsed = 0
        stop = False

        async def sender() -> None:
            while not stop:
                await pacer.turn(0)
                _busy(0.0005)

        async def parser() -> None:
            nonlocal parsed
            while not stop:
                await pacer.turn(1)
                parsed += 1

        tasks = [asyncio.ensure_future(sender()) for _ in range(50)] + [asyncio.ensure_future(parser())]
        await asyncio.sleep(0.3)
        stop = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return parsed

    assert asyncio.run(main()) >= 5
