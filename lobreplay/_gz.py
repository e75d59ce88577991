"""Reading gzip: python-isal (Intel ISA-L's inflate), about twice as fast as the standard
library's zlib on this project's files (benchmarks/RESULTS.md), the same streams and results.

`open_read(f)` wraps a binary file object; `thread=True` inflates on a background thread
(ISA-L releases the GIL), so that a reader that does work between reads overlaps the two.
`ERRORS` are what a corrupt or truncated stream raises: the callers turn them into an
InputError that names the file and where it went wrong.
"""
from __future__ import annotations

import gzip
import io
import zlib
from typing import BinaryIO

from isal import igzip, igzip_threaded, isal_zlib

ERRORS = (gzip.BadGzipFile, isal_zlib.error, zlib.error, EOFError, OSError)


def open_read(f: BinaryIO, *, thread: bool = False, block_size: int = 1 << 20) -> BinaryIO:
    """A binary reader of the decompressed bytes of the gzip stream in f (all members)."""
    if thread:
        return igzip_threaded.open(f, "rb", threads=1, block_size=block_size)
    return igzip.IGzipFile(fileobj=f, mode="rb")


def decompress(data: bytes) -> bytes:
    """The decompressed bytes of a whole gzip file in memory (all members), in one call."""
    return igzip.decompress(data)


def open_path(path, *, thread: bool = False) -> BinaryIO:
    """open_read of a file by its path (closed with the reader)."""
    return igzip_threaded.open(path, "rb", threads=1) if thread else igzip.open(path, "rb")


class SalvageReader(io.RawIOBase):
    """The decompressed bytes of a gzip file (all members) up to where its stream breaks off
    or turns corrupt, without an exception: the reader then ends and `broken` says why (None
    while the stream is whole). A gzip file whose writer was killed (no end-of-stream marker)
    gives every byte that was flushed before; the usual readers raise at the end and lose what
    they had decompressed in that read. It inflates with the standard library's zlib, about
    half ISA-L's speed here, because ISA-L holds back the last byte or so of a stream that
    is cut short (so that a message ending there would be lost): callers read with ISA-L
    and come here only at a break (salvage_from)."""

    def __init__(self, src, block: int = 1 << 16):
        """src: a path, or a binary file object of the compressed bytes (closed with this)."""
        super().__init__()
        self._f = src if hasattr(src, "read") else open(src, "rb")
        self._block = block
        self._d = zlib.decompressobj(31)
        self._mid = False  # inside a member: input given to self._d, its end not seen
        self._out = memoryview(b"")
        self._done = False
        self.broken: str | None = None

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._f.close()
        super().close()

    def readinto(self, b) -> int:
        while not len(self._out) and not self._done:
            self._fill()
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def _fill(self) -> None:
        data = self._f.read(self._block)
        if not data:
            if self._mid:
                self.broken = "cut short: the gzip stream ends without its end-of-stream marker"
                try:  # what the inflater still holds
                    self._out = memoryview(self._d.flush())
                except zlib.error:
                    pass
            self._done = True
            return
        out = []
        try:
            while data:
                out.append(self._d.decompress(data))
                self._mid = not self._d.eof
                if not self._d.eof:
                    break
                data = self._d.unused_data  # a member ended: what follows starts the next one
                self._d = zlib.decompressobj(31)
        except zlib.error as e:
            self.broken = f"corrupt: {e}"
            self._done = True
        self._out = memoryview(b"".join(out))


def salvage_from(src, skip: int, buffer: int = 1 << 20) -> tuple[io.BufferedReader, SalvageReader]:
    """A buffered SalvageReader of src (a path or a file object of the compressed bytes)
    positioned `skip` decompressed bytes in (those are inflated and dropped): where a fast
    reader that raised at a cut had got to. Returns (reader, its SalvageReader)."""
    raw = SalvageReader(src)
    f = io.BufferedReader(raw, buffer)
    scratch = bytearray(min(max(skip, 1), 1 << 20))
    while skip:
        n = f.readinto(memoryview(scratch)[:min(skip, len(scratch))])
        if not n:
            break
        skip -= n
    return f, raw
