"""ITCH 5.0 encoder: message dicts -> bytes, BinaryFILE framing, a file writer.

Every layout comes from :mod:`lobreplay.itch.spec` (``HEADER`` and ``LAYOUTS``);
nothing here restates an offset or a length.

A message dict has ``"type"`` (one character, case-sensitive: ``"h"`` is not
``"H"``), the header fields ``stock_locate``, ``tracking`` (0 if absent) and
``timestamp`` (ns since midnight), then every field of its layout under the
spec's names: ints for ``u*``/``p4``/``p8`` (prices stay integers), a
one-character str for ``c``, and a str of at most N ASCII characters for
``aN`` (right-padded with spaces on the wire). Bytes are accepted wherever a
str is. Anything else raises :class:`ValueError` naming the message type and
the field.

>>> from lobreplay.itch.writer import encode, frame
>>> frame(encode({"type": "S", "stock_locate": 0, "timestamp": 11_072_057_543_747, "event_code": "O"}))[:3]
b'\\x00\\x0cS'
"""
from __future__ import annotations

import gzip as _gzip
import operator
import os
import struct
from typing import BinaryIO

from lobreplay.itch.spec import HEADER, LAYOUTS, Layout, field_size

__all__ = ["encode", "frame", "unpack", "framed_struct", "ItchWriter", "MAX_FRAME"]

MAX_FRAME = 0xFFFF  # the 2-byte length prefix


def _struct_code(kind: str) -> str:
    """struct code(s) for one field kind; a 6-byte integer is packed as H (high) + I (low)."""
    if kind == "c":
        return "c"
    if kind[0] == "a":
        return f"{int(kind[1:])}s"
    size = field_size(kind)
    if size == 6:
        return "HI"
    return {1: "B", 2: "H", 4: "I", 8: "Q"}[size]


class _Codec:
    """One message type: the compiled struct and the field list (header first)."""

    __slots__ = ("layout", "type_byte", "fields", "struct", "framed")

    def __init__(self, layout: Layout):
        self.layout = layout
        self.type_byte = layout.type.encode("ascii")
        self.fields = HEADER + layout.fields
        body = "".join(_struct_code(k) for _, k in self.fields)
        self.struct = struct.Struct(">c" + body)
        self.framed = struct.Struct(">Hc" + body)
        if self.struct.size != layout.length:  # the spec table checks itself too; belt and braces
            raise AssertionError(f"{layout.type}: struct size {self.struct.size} != {layout.length}")


_CODECS: dict[str, _Codec] = {t: _Codec(lay) for t, lay in LAYOUTS.items()}


def framed_struct(msg_type: str) -> struct.Struct:
    """The compiled struct of one framed message, for bulk writers that do their own validation.

    ``pack`` takes: the length (``LAYOUTS[t].length``), the type byte, then each
    header and layout field in spec order, with the timestamp split into
    ``ts >> 32`` and ``ts & 0xFFFFFFFF``, one-byte ``bytes`` for ``c`` fields and
    ``bytes`` already padded with spaces to N for ``aN`` fields (struct pads with
    NUL, which ITCH never uses). No checks: use :func:`encode` unless speed matters.
    """
    return _CODECS[msg_type].framed


def _int_field(t: str, name: str, kind: str, v) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise ValueError(f"{t} message: field {name!r} ({kind}) must be an int, got {v!r}")
    v = operator.index(v)
    bits = 8 * field_size(kind)
    if not 0 <= v < (1 << bits):
        raise ValueError(f"{t} message: field {name!r} ({kind}) = {v} is outside 0..{(1 << bits) - 1}")
    return v


def _ascii(t: str, name: str, v) -> bytes:
    if isinstance(v, str):
        try:
            return v.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError(f"{t} message: field {name!r} must be ASCII, got {v!r}") from None
    if isinstance(v, (bytes, bytearray)):
        if any(b > 0x7F for b in v):
            raise ValueError(f"{t} message: field {name!r} must be ASCII, got {bytes(v)!r}")
        return bytes(v)
    raise ValueError(f"{t} message: field {name!r} must be a str, got {v!r}")


def encode(msg: dict) -> bytes:
    """One message as ITCH bytes (no length prefix). Validates every field.

    Raises ValueError for an unknown type, a missing or unexpected field, an int
    out of range for its width, a char that is not exactly one ASCII character,
    or text longer than its field.
    """
    if not isinstance(msg, dict):
        raise ValueError(f"a message must be a dict, got {type(msg).__name__}")
    t = msg.get("type")
    if isinstance(t, (bytes, bytearray)) and len(t) == 1:
        t = t.decode("ascii", "replace")
    codec = _CODECS.get(t) if isinstance(t, str) else None
    if codec is None:
        raise ValueError(f"field 'type': unknown ITCH 5.0 message type {t!r} (known: {''.join(LAYOUTS)})")
    known = {"type"}
    args: list = [codec.type_byte]
    for name, kind in codec.fields:
        known.add(name)
        if name in msg:
            v = msg[name]
        elif name == "tracking":
            v = 0
        else:
            raise ValueError(f"{t} message: missing field {name!r}")
        if kind == "c":
            b = _ascii(t, name, v)
            if len(b) != 1:
                raise ValueError(f"{t} message: field {name!r} must be exactly one character, got {v!r}")
            args.append(b)
        elif kind[0] == "a":
            n = int(kind[1:])
            b = _ascii(t, name, v)
            if len(b) > n:
                raise ValueError(f"{t} message: field {name!r} holds at most {n} characters, got {v!r}")
            args.append(b.ljust(n, b" "))
        else:
            v = _int_field(t, name, kind, v)
            if field_size(kind) == 6:
                args.extend((v >> 32, v & 0xFFFFFFFF))
            else:
                args.append(v)
    extra = set(msg) - known
    if extra:
        raise ValueError(f"{t} message: unexpected field(s) {sorted(extra)} (the {codec.layout.name} layout "
                         f"has {[n for n, _ in codec.fields]})")
    return codec.struct.pack(*args)


def frame(payload: bytes) -> bytes:
    """BinaryFILE framing: 2-byte big-endian length, then the payload.

    An empty payload gives ``b"\\x00\\x00"``, the end-of-session marker."""
    n = len(payload)
    if n > MAX_FRAME:
        raise ValueError(f"payload of {n} bytes does not fit a 2-byte length prefix (max {MAX_FRAME})")
    return n.to_bytes(2, "big") + bytes(payload)


def unpack(payload: bytes) -> dict:
    """The inverse of :func:`encode` for one known message (tools, fault injection).

    Not the project's decoder (that is vectorised, in reader.py/decode.py) and
    not the tests' reference (tests/itch_ref.py, written independently)."""
    t = chr(payload[0]) if payload else ""
    codec = _CODECS.get(t)
    if codec is None:
        raise ValueError(f"unknown message type {payload[:1]!r}")
    if len(payload) != codec.layout.length:
        raise ValueError(f"{t} message of {len(payload)} bytes, expected {codec.layout.length}")
    vals = codec.struct.unpack(payload)
    out: dict = {"type": t}
    i = 1
    for name, kind in codec.fields:
        v = vals[i]
        i += 1
        if kind == "c":
            out[name] = v.decode("ascii")
        elif kind[0] == "a":
            out[name] = v.decode("ascii").rstrip(" ")
        elif field_size(kind) == 6:
            out[name] = (v << 32) | vals[i]
            i += 1
        else:
            out[name] = v
    return out


class ItchWriter:
    """Writes framed messages to a path or a binary file object, optionally gzip-compressed.

    >>> import io
    >>> buf = io.BytesIO()
    >>> with ItchWriter(buf) as w:
    ...     w.write({"type": "S", "stock_locate": 0, "timestamp": 1, "event_code": "O"})
    >>> w.count, len(buf.getvalue())
    (1, 14)

    The gzip output is reproducible (mtime 0, no file name in the header).
    ``end_of_session=True`` writes the zero-length frame on close; the public
    sample day files do not have it, so the default is False. A file object
    passed in is flushed but not closed.
    """

    def __init__(self, path_or_fileobj, gzip: bool = False, *, compresslevel: int = 6,
                 end_of_session: bool = False, buffer_bytes: int = 1 << 20):
        self.count = 0
        self._end = end_of_session
        self._limit = buffer_bytes
        self._buf: list[bytes] = []
        self._nbuf = 0
        if isinstance(path_or_fileobj, (str, os.PathLike)):
            self.path = os.fspath(path_or_fileobj)
            self._raw: BinaryIO = open(self.path, "wb")
            self._own_raw = True
        else:
            self.path = getattr(path_or_fileobj, "name", None)
            self._raw = path_or_fileobj
            self._own_raw = False
        if gzip:
            self._fh = _gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0,
                                      compresslevel=compresslevel)
        else:
            self._fh = self._raw
        self._closed = False

    def write(self, msg: dict) -> None:
        """Encode (validating) and frame one message."""
        self.write_raw(encode(msg))

    def write_raw(self, payload: bytes) -> None:
        """Frame and write one already-encoded message (not validated: faults and tests use this)."""
        self._put(frame(payload), 1)

    def write_framed(self, data: bytes, count: int) -> None:
        """Write bytes that already hold ``count`` complete frames (bulk writers)."""
        self._put(data, count)

    def _put(self, data: bytes, count: int) -> None:
        if self._closed:
            raise ValueError("write to a closed ItchWriter")
        self._buf.append(data)
        self._nbuf += len(data)
        self.count += count
        if self._nbuf >= self._limit:
            self.flush()

    def flush(self) -> None:
        if self._buf:
            self._fh.write(b"".join(self._buf))
            self._buf.clear()
            self._nbuf = 0

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._end:
                self._buf.append(b"\x00\x00")
            self.flush()
            if self._fh is not self._raw:
                self._fh.close()
            if self._own_raw:
                self._raw.close()
            else:
                self._raw.flush()
        finally:
            self._closed = True

    def __enter__(self) -> "ItchWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

