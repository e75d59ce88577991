"""Reading gzip: python-isal (Intel ISA-L's inflate), about twice as fast as the standard
library's zlib on this project's files (benchmarks/RESULTS.md), the same streams and results.

`open_read(f)` wraps a binary file object; `thread=True` inflates on a background thread
(ISA-L releases the GIL), so that a reader that does work between reads overlaps the two.
`ERRORS` are what a corrupt or truncated stream raises: the callers turn them into an
InputError that names the file and where it went wrong.
"""
from __future__ import annotations

import gzip
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
