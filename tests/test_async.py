"""``AsyncMemory``: the engine from asyncio, every public method a coroutine on one worker thread, on both
stores; the event loop keeps running while the engine works."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import narrative
from conftest import FakeClock
from narrative.engine.aio import ASYNC_METHODS


def test_every_public_method_is_a_coroutine_with_the_same_signature() -> None:
    public = {n for n, m in inspect.getmembers(narrative.Memory, inspect.isfunction) if not n.startswith("_")}
    assert set(ASYNC_METHODS) == public - {"close"}
    for name in ASYNC_METHODS:
        method = getattr(narrative.AsyncMemory, name)
        assert inspect.iscoroutinefunction(method), name
        assert inspect.signature(method) == inspect.signature(getattr(narrative.Memory, name)), name


def test_remember_search_and_filters_from_asyncio(db: str, clock: FakeClock) -> None:
    async def scenario() -> None:
        ticks = 0
        stop = asyncio.Event()

        async def heartbeat() -> None:  # runs while the engine works on its own thread
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.create_task(heartbeat())
        async with narrative.AsyncMemory(db, user="maya", embedder="none", clock=clock, env={}) as mem:
            assert mem.user == "maya"
            result = await mem.remember("We decided to use SQLite because it works offline.", meta={"channel": "x"})
            assert result.memories
            await mem.add_memory("The shed key is under the pot.", metadata={"place": "shed"})
            hits = await mem.search("SQLite offline", filters={"stream": "decision"})
            assert hits and hits[0].memory.stream.value == "decision"
            listed = await mem.list_memories(filters={"metadata.place": "shed"})
            assert [m.content for m in listed] == ["The shed key is under the pot."]
            both = await asyncio.gather(mem.search("shed key"), mem.count_memories())
            assert both[0] and both[1] == len(await mem.list_memories(limit=100))
            assert mem.sync.store is mem.store  # the Memory itself, for what needs no await
        stop.set()
        await beat
        assert ticks > 0

    asyncio.run(scenario())


def test_calls_run_on_one_worker_thread(db: str, clock: FakeClock) -> None:
    seen: set[str] = set()

    async def scenario() -> None:
        mem = narrative.AsyncMemory(db, user="maya", embedder="none", clock=clock, env={})
        original = mem.sync.describe

        def spy(*args: Any, **kwargs: Any) -> Any:
            seen.add(threading.current_thread().name)
            return original(*args, **kwargs)

        mem.sync.describe = spy  # type: ignore[method-assign]
        await asyncio.gather(*(mem.describe() for _ in range(5)))
        await mem.aclose()

    asyncio.run(scenario())
    assert len(seen) == 1 and next(iter(seen)).startswith("narrative")
