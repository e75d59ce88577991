"""The next chunks of a file read on a thread while the caller works on the one before.

`src` is anything whose `chunks(buffers=k)` yields chunks from k buffers in turn (an
ITCH file, a .lobc ChunkReader): each chunk stays valid until k more are read.
"""
from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from typing import Callable, Iterator


def read_ahead(src, work: Callable[[object, int], object] | None = None, *,
               slots: int = 2, thread: bool = True) -> Iterator[tuple[object, object]]:
    """(chunk, work(chunk, slot)) for every chunk of src, read, framed and worked on
    a thread up to slots - 1 chunks ahead of the caller: the caller's processing of
    one chunk (the core, C calls without the GIL) overlaps the reading of the next.
    thread=False does the same in the caller's thread, one chunk at a time (when
    every core already has a replay of its own, a reader thread only competes).

    An item stays valid until the caller asks for the next one (then the reader may
    fill its buffer): the reader turns over `slots` buffers, and work gets the slot
    (0 .. slots-1) whose output arrays it may reuse. An error of the reader (a
    truncated or corrupt file) reaches the caller after every chunk before it, as
    without the thread."""
    if not thread:
        with contextlib.closing(src.chunks()) as chunks:
            for turn, chunk in enumerate(chunks):
                yield chunk, (work(chunk, turn % slots) if work else None)
        return
    free = threading.Semaphore(slots)
    items: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            with contextlib.closing(src.chunks(buffers=slots)) as chunks:
                for turn in itertools.count():
                    free.acquire()  # the item `slots` places back is done with
                    if stop.is_set():
                        return
                    chunk = next(chunks, None)
                    if chunk is None:
                        break
                    items.put((chunk, work(chunk, turn % slots) if work else None))
        except BaseException as e:  # noqa: BLE001 -- handed to the caller, raised there
            items.put(e)
            return
        items.put(done)

    thread = threading.Thread(target=produce, name="lobreplay-read", daemon=True)
    thread.start()
    try:
        while (item := items.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
            free.release()
    finally:
        stop.set()
        free.release()  # a reader waiting for a slot wakes and stops
        thread.join()
