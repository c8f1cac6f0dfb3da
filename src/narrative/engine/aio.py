"""``AsyncMemory``: the engine from asyncio (agent frameworks, async web servers).

Every public method of :class:`~narrative.engine.facade.Memory` is here as a coroutine with the same name,
arguments and result, run on one worker thread of its own, so the event loop never waits on the database or
the embedding model, and the calls of one ``AsyncMemory`` reach the engine one at a time, in the order they
were awaited (the engine's connection is used from that one thread only).  Properties (``user``,
``settings``, ``store``…) are read directly.  Several ``AsyncMemory`` objects over one database work side by
side as several ``Memory`` objects do.

>>> async with AsyncMemory("notes.db", user="maya") as mem:            # doctest: +SKIP
...     await mem.remember("We chose SQLite because it works offline.")
...     hits = await mem.search("why SQLite?", filters={"stream": "decision"})
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

from narrative.engine.facade import Memory


class AsyncMemory:
    """A :class:`Memory` driven from asyncio: ``await mem.search(...)``; ``sync`` is the Memory itself."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="narrative")
        try:  # opened on the worker thread, where every call will run
            self.sync: Memory = self._worker.submit(lambda: Memory(*args, **kwargs)).result()
        except BaseException:
            self._worker.shutdown(wait=False)
            raise

    async def _run(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, functools.partial(method, *args, **kwargs))

    async def aclose(self) -> None:
        """Close the database connection and stop the worker thread."""
        await self._run(self.sync.close)
        self._worker.shutdown(wait=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        """Properties of the Memory (``user``, ``settings``, ``store``…), read as they are."""
        if name.startswith("_") or name == "sync":
            raise AttributeError(name)
        return getattr(self.sync, name)


def _coroutine(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def call(self: AsyncMemory, *args: Any, **kwargs: Any) -> Any:
        return await self._run(getattr(self.sync, name), *args, **kwargs)

    call.__doc__ = f"``await`` form of :meth:`Memory.{name}`. {method.__doc__ or ''}".strip()
    return call


#: The methods made coroutines: every public method of Memory except ``close`` (``aclose`` here).
ASYNC_METHODS = tuple(
    name
    for name, member in inspect.getmembers(Memory, inspect.isfunction)
    if not name.startswith("_") and name != "close"
)
for _name in ASYNC_METHODS:
    setattr(AsyncMemory, _name, _coroutine(_name, getattr(Memory, _name)))

__all__ = ["ASYNC_METHODS", "AsyncMemory"]
