"""The .lobc capture format, version 1 (docs/lobc.md is the contract).

A .lobc file is a header (magic, version, JSON metadata; 512 bytes, or more in
64-byte units when the metadata needs it) followed by
checksummed blocks of 64-byte records. A writer appends one whole block per
write() call and never rewrites earlier bytes, so a crash or kill -9 leaves
every completed block readable; a reader checks every block and reports a
torn tail instead of raising (and tells it from damage inside the file).

Prices and quantities are scaled integers converted from the exchange's
decimal strings by parse_decimal, with integer arithmetic only.
"""
from __future__ import annotations

import bisect
import contextlib
import json
import operator
import os
import re
import struct
import time
from dataclasses import dataclass, field

import numpy as np
from isal.isal_zlib import crc32  # zlib's CRC-32, about 5x faster (ISA-L; a dependency already, for gzip)

from lobreplay.core._coreapi import L2_RECORD_DTYPE
from lobreplay.errors import InputError

__all__ = [
    "RECORD_DTYPE", "BLOCK_DTYPE", "DEFAULT_SCALE", "KIND_NAMES", "GAP_REASONS",
    "SNAPSHOT_BEGIN", "SNAPSHOT_LEVEL", "SNAPSHOT_END", "DIFF_BEGIN", "DIFF_LEVEL", "DIFF_END", "TRADE", "GAP",
    "RESYNC", "TICKER_BID", "TICKER_ASK",
    "GAP_SEQUENCE", "GAP_DISCONNECT", "GAP_24H", "GAP_SHUTDOWN", "GAP_STALE_SNAPSHOT", "GAP_RATE_LIMIT",
    "GAP_MALFORMED", "GAP_ROTATE", "GAP_DAMAGED",
    "parse_decimal", "format_decimal", "LobcWriter", "LobcData", "Torn", "Block", "read", "verify_crc",
    "iter_blocks", "ChunkReader", "check", "torn_text", "damage_text", "repair",
]

MAGIC = b"LOBC"
BLOCK_MAGIC = b"BLK1"
VERSION = 1
HEADER_LEN = 512          # the header's length unless the metadata needs more
UNIT = 64
HEADER_MAX = 65535 // UNIT * UNIT  # the header length is a uint16, a multiple of UNIT
META_MAX = HEADER_MAX - 12
DEFAULT_SCALE = 10**8
INT64_MAX = (1 << 63) - 1

# The record is lob_l2_record of csrc/feeds/l2.h, the one definition of its layout: this dtype is built
# from the C struct (its fields, offsets and size), as the C replay reads the records in place.
RECORD_DTYPE = L2_RECORD_DTYPE
assert RECORD_DTYPE.itemsize == UNIT

BLOCK_DTYPE = np.dtype([("magic", "S4"), ("n", "<u4"), ("crc", "<u4"), ("reserved0", "<u4"), ("seq", "<u8"),
                        ("recv_ns", "<i8"), ("reserved", "V32")])
assert BLOCK_DTYPE.itemsize == UNIT


def _packer(dt: np.dtype) -> struct.Struct:
    """A struct.Struct of a little-endian numpy record dtype: its fields in offset order, its
    padding as pad bytes (add() packs one record with it; add_many copies arrays)."""
    codes = {"<i8": "q", "<u8": "Q", "<i4": "i", "<u4": "I", "<i2": "h", "<u2": "H", "|i1": "b", "|u1": "B"}
    fmt, at = "<", 0
    for name in sorted(dt.names, key=lambda n: dt.fields[n][1]):
        t, off = dt.fields[name][:2]
        fmt += "x" * (off - at) + codes[t.str]
        at = off + t.itemsize
    return struct.Struct(fmt + "x" * (dt.itemsize - at))


_REC = _packer(RECORD_DTYPE)
_REC_ORDER = tuple(sorted(RECORD_DTYPE.names, key=lambda n: RECORD_DTYPE.fields[n][1]))
# add()'s values in its own order, picked into the record's (a field add() does not know fails here).
_ADD_ORDER = ("recv_ns", "exch_ns", "first_id", "last_id", "prev_id", "price", "qty", "kind", "side", "symbol", "flags")
_TO_RECORD = operator.itemgetter(*[_ADD_ORDER.index(name) for name in _REC_ORDER])
_BLK = struct.Struct("<4sIII Qq32x".replace(" ", ""))
_HDR = struct.Struct("<4sHHI")
assert _REC.size == UNIT and _BLK.size == UNIT

SNAPSHOT_BEGIN, SNAPSHOT_LEVEL, SNAPSHOT_END = 1, 2, 3
DIFF_BEGIN, DIFF_LEVEL, DIFF_END = 4, 5, 6
TRADE, GAP, RESYNC, TICKER_BID, TICKER_ASK = 7, 8, 9, 10, 11
KIND_NAMES = {1: "SNAPSHOT_BEGIN", 2: "SNAPSHOT_LEVEL", 3: "SNAPSHOT_END", 4: "DIFF_BEGIN", 5: "DIFF_LEVEL",
              6: "DIFF_END", 7: "TRADE", 8: "GAP", 9: "RESYNC", 10: "TICKER_BID", 11: "TICKER_ASK"}

GAP_SEQUENCE, GAP_DISCONNECT, GAP_24H, GAP_SHUTDOWN = 1, 2, 3, 4
GAP_STALE_SNAPSHOT, GAP_RATE_LIMIT, GAP_MALFORMED, GAP_ROTATE = 5, 6, 7, 8
GAP_DAMAGED = 9  # not a capture's: a reader's mark where it skipped damaged blocks (ChunkReader past_damage;
#                  written only by repair)
GAP_REASONS = {1: "sequence", 2: "disconnect", 3: "24h", 4: "shutdown", 5: "stale_snapshot", 6: "rate_limit",
               7: "malformed", 8: "rotate", 9: "damaged"}

SIDE_BID, SIDE_ASK = ord("B"), ord("S")


# ---------------------------------------------------------------- decimals

_DECIMAL = re.compile(r"([0-9]+)(?:\.([0-9]+))?")


def _scale_digits(scale: int) -> int:
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be a power of ten >= 1, got {scale!r}")
    d = len(str(scale)) - 1
    if 10**d != scale:
        raise ValueError(f"scale must be a power of ten >= 1, got {scale!r}")
    return d


def parse_decimal(text: str, scale: int) -> int:
    """An exchange decimal string ("0.00100000", "64123.45") as an integer in
    units of 1/scale, exactly. Rejected (ValueError naming the value and the
    scale): signs, exponents, blanks or anything but digits and one point;
    more significant decimals than the scale holds (trailing zeros are fine);
    values that do not fit int64."""
    d = _scale_digits(scale)
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("ascii", "replace")
    if not isinstance(text, str):
        raise ValueError(f"decimal {text!r}: expected a string (scale {scale})")
    m = _DECIMAL.fullmatch(text)
    if m is None:
        raise ValueError(f"decimal {text!r}: not an unsigned plain decimal (digits and at most one point; "
                         f"no sign or exponent) at scale {scale}")
    whole, frac = m.group(1).lstrip("0"), (m.group(2) or "").rstrip("0")
    if len(frac) > d:
        raise ValueError(f"decimal {text!r}: {len(frac)} significant decimals, more than scale {scale} holds "
                         f"({d}); refusing to round")
    if len(whole) > 19:
        raise ValueError(f"decimal {text!r}: does not fit int64 at scale {scale}")
    value = int(whole or "0") * scale + int((frac or "0") + "0" * (d - len(frac)))
    if value > INT64_MAX:
        raise ValueError(f"decimal {text!r}: does not fit int64 at scale {scale}")
    return value


def format_decimal(value: int, scale: int) -> str:
    """The decimal string of value/scale with all the scale's decimals
    (the inverse of parse_decimal: parse_decimal(format_decimal(v, s), s) == v
    for v >= 0)."""
    d = _scale_digits(scale)
    value = int(value)
    sign = "-" if value < 0 else ""
    q, r = divmod(abs(value), scale)
    return f"{sign}{q}.{r:0{d}d}" if d else f"{sign}{q}"


# ---------------------------------------------------------------- writing

def _side(side) -> int:
    if side in (0, None, "", b""):
        return 0
    if isinstance(side, (bytes, bytearray)):
        side = side.decode("ascii", "replace")
    if isinstance(side, str):
        if side in ("B", "S"):
            return ord(side)
    elif isinstance(side, (int, np.integer)) and int(side) in (SIDE_BID, SIDE_ASK):
        return int(side)
    raise ValueError(f"side: expected 'B', 'S', b'B', b'S', 66, 83 or 0, got {side!r}")


_ARG_META = {"venue", "market", "symbols", "price_scale", "qty_scale", "streams", "source"}  # LobcWriter's arguments


class LobcWriter:
    """Writes a .lobc file: the header at once, then one block per flush.

    add() buffers one record; the pending records are written as one block
    (one write() call, then the file is flushed to the OS) every
    `flush_records` records, when `flush_seconds` have passed since the first
    pending record (checked on add), on flush() and on close(). Earlier bytes
    are never rewritten, so whatever was flushed survives a kill -9."""

    def __init__(self, path, *, venue: str, market: str, symbols, price_scale: int = DEFAULT_SCALE,
                 qty_scale: int = DEFAULT_SCALE, streams=(), source=None, flush_records: int = 4096,
                 flush_seconds: float = 1.0, extra_meta: dict | None = None):
        """extra_meta: more metadata keys (JSON values), or ones to keep from another file
        (`created_ns`, `tool`); not the keys the arguments above set."""
        from lobreplay import __version__
        _scale_digits(price_scale)
        _scale_digits(qty_scale)
        symbols = [str(s).upper() for s in symbols]
        if len(symbols) > 65536:
            raise ValueError(f"{len(symbols)} symbols: at most 65536 fit the record's uint16 index")
        if flush_records < 1:
            raise ValueError("flush_records must be >= 1")
        self.path = os.fspath(path)
        self.meta = {"venue": venue, "market": market, "symbols": symbols, "price_scale": int(price_scale),
                     "qty_scale": int(qty_scale), "created_ns": time.time_ns(), "tool": f"lobreplay {__version__}",
                     "streams": list(streams)}
        if source is not None:
            self.meta["source"] = str(source)
        clash = set(extra_meta or ()) & _ARG_META
        if clash:
            raise ValueError(f"extra_meta: {', '.join(sorted(clash))} are set by their own arguments")
        self.meta.update(extra_meta or {})
        blob = json.dumps(self.meta, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(blob) > META_MAX:
            raise ValueError(f"{self.path}: metadata is {len(blob)} bytes of JSON; the header holds {META_MAX} "
                             "(fewer symbols or streams per file)")
        hlen = header_length(len(blob))
        self.n_symbols = len(symbols)
        self.flush_records = int(flush_records)
        self.flush_seconds = float(flush_seconds)
        self.records = 0      # records written to the file
        self.blocks = 0
        self._buf = bytearray(UNIT)  # the pending block: room for its header, then its records
        self._pending = 0
        self._first_recv = 0
        self._t_first = 0.0
        header = _HDR.pack(MAGIC, VERSION, hlen, len(blob)) + blob
        header += b"\0" * (hlen - len(header))
        self._f = open(self.path, "wb", buffering=0)
        try:
            self._write(header)
        except BaseException:
            self._f.close()
            raise
        self.bytes = hlen

    @property
    def pending(self) -> int:
        return self._pending

    def _write(self, data) -> None:
        view = memoryview(data)
        while view:  # a raw write may be partial; one call in the normal case
            n = self._f.write(view)
            view = view[n:]

    def _open_or_raise(self) -> None:
        if self._f is None:
            raise ValueError(f"{self.path}: the writer is closed (a record added now would never be written)")

    def add(self, *, kind: int, recv_ns: int, exch_ns: int = 0, first_id: int = 0, last_id: int = 0,
            prev_id: int = 0, price: int = 0, qty: int = 0, side=0, symbol: int = 0, flags: int = 0) -> None:
        self._open_or_raise()
        if kind not in KIND_NAMES:
            raise ValueError(f"kind: expected 1..11, got {kind!r}")
        if not 0 <= symbol < self.n_symbols:
            raise ValueError(f"symbol index {symbol} out of range (metadata has {self.n_symbols} symbols)")
        try:
            rec = _REC.pack(*_TO_RECORD((recv_ns, exch_ns, first_id, last_id, prev_id, price, qty, kind, _side(side),
                                         symbol, flags)))
        except struct.error as e:
            raise ValueError(f"record field out of range: {e}") from None
        if not self._pending:
            self._first_recv = recv_ns
            self._t_first = time.monotonic()
        self._buf += rec
        self._pending += 1
        if self._pending >= self.flush_records or time.monotonic() - self._t_first >= self.flush_seconds:
            self.flush()

    def add_many(self, records: np.ndarray) -> None:
        """Append an array of RECORD_DTYPE records (split into blocks of at most flush_records)."""
        if not isinstance(records, np.ndarray) or records.dtype != RECORD_DTYPE:
            raise ValueError("add_many: expected a numpy array of RECORD_DTYPE")
        self._open_or_raise()
        records = np.ascontiguousarray(records)
        from lobreplay.core._coreapi import l2_records_check  # (one pass in C: numpy's gathers of two fields took 4x longer)
        bad_symbol, bad = l2_records_check(records, self.n_symbols)
        if bad_symbol < len(records):
            raise ValueError(f"add_many: a symbol index is out of range (metadata has {self.n_symbols} symbols)")
        if bad < len(records):
            raise ValueError(f"add_many: record {bad}: kind {int(records['kind'][bad])} / side "
                             f"{int(records['side'][bad])}: expected a kind of 1..11 and a side of B, S or 0 "
                             "(docs/lobc.md)")
        i = 0
        while i < len(records):
            take = min(len(records) - i, self.flush_records - self._pending)
            part = records[i:i + take]
            if not self._pending:
                self._first_recv = int(part["recv_ns"][0])
                self._t_first = time.monotonic()
            self._buf += memoryview(part.view(np.uint8))
            self._pending += take
            i += take
            if self._pending >= self.flush_records:
                self.flush()
        if self._pending and time.monotonic() - self._t_first >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        """Write the pending records as one block (one write() call); nothing if none are pending."""
        if not self._pending or self._f is None:
            return
        data = self._buf
        data[:UNIT] = _BLK.pack(BLOCK_MAGIC, self._pending, crc32(memoryview(data)[UNIT:]), 0, self.blocks,
                                self._first_recv)
        self._write(data)
        self._f.flush()
        self.records += self._pending
        self.blocks += 1
        self.bytes += len(data)
        self._buf = bytearray(UNIT)
        self._pending = 0

    def fsync(self) -> None:
        """Flush, then ask the OS to put the file on disk (for power loss; not needed for kill -9)."""
        self._open_or_raise()
        self.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is None:
            return
        try:
            self.flush()
        finally:
            self._f.close()
            self._f = None

    @property
    def closed(self) -> bool:
        return self._f is None

    def __enter__(self) -> "LobcWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------- reading

@dataclass
class Torn:
    """Where reading stopped before the end of the file: the offset of the first
    bad or partial block, the bytes from there to the end, and why. `next_block`: the
    offset of a sound block after it, if there is one; the file is then corrupt inside
    (`corrupt`), not cut short, since a crash or kill -9 only ever leaves the last block
    partial."""
    offset: int
    bytes: int
    reason: str
    next_block: int | None = None

    @property
    def corrupt(self) -> bool:
        return self.next_block is not None

    def as_dict(self) -> dict:
        return {"offset": self.offset, "bytes": self.bytes, "reason": self.reason, "corrupt": self.corrupt,
                "next_block": self.next_block}

    @classmethod
    def from_dict(cls, d: dict) -> Torn:
        """The Torn whose as_dict() d is (a sizing cache entry keeps them so)."""
        return cls(int(d["offset"]), int(d["bytes"]), str(d["reason"]),
                   None if d["next_block"] is None else int(d["next_block"]))


def torn_text(t: dict) -> str:
    """A Torn's as_dict() (as summaries hold it) in one line for a person: where, how much,
    why, and whether it is a torn tail or damage inside the file."""
    if t.get("next_block") is not None:
        return (f"corrupt block at offset {t['offset']:,} ({t['reason']}); sound blocks follow from offset "
                f"{t['next_block']:,}: the file is damaged inside, not cut short; {t['bytes']:,} byte(s) "
                "from the bad block on not read")
    return f"torn tail: {t['bytes']:,} byte(s) from offset {t['offset']:,} not read ({t['reason']})"


def damage_text(t: dict) -> str:
    """A stretch of damage a reader skipped (ChunkReader(past_damage=True).damage, as_dict())
    in words for a person."""
    return (f"skipped {t['bytes']:,} damaged byte(s) at offset {t['offset']:,} ({t['reason']}), read on from "
            f"offset {t['next_block']:,}")


def _header_fault(h, off: int, size: int, seq: int) -> str | None:
    """Why the block header h (a BLOCK_DTYPE row) at offset off is not sound as block number
    seq of a file of size bytes, or None."""
    n = int(h["n"])
    magic = h.tobytes()[:4]  # (not h["magic"]: numpy drops an S4's trailing NULs)
    if magic != BLOCK_MAGIC:
        return f"bad block magic {magic!r}"
    if n == 0:
        return "block of 0 records"
    if off + UNIT + n * UNIT > size:
        return f"partial block: {n} records need {n * UNIT + UNIT} bytes, {size - off} present"
    if int(h["seq"]) != seq:
        return f"block sequence {int(h['seq'])}, expected {seq}"
    if int(h["reserved0"]) or any(bytes(h["reserved"])):
        return "block header's reserved bytes are not zero"
    return None


def _body_fault(body: np.ndarray, crc: int, recv_ns: int, seq: int) -> str | None:
    """Why block seq's records (body: their bytes) do not match its header's CRC and receive
    time, or None."""
    if crc32(body) != crc:
        return f"CRC mismatch in block {seq}"
    first = int(body[:8].view("<i8")[0])
    if first != recv_ns:
        return f"block {seq}: its header's receive time {recv_ns} is not its first record's {first}"
    return None


_SCAN = 1 << 22  # bytes per read while looking for a sound block after a bad one


def _sound_at(fd: int, off: int, size: int, seq: int) -> bool:
    """Whether a sound block numbered above seq starts at offset off: its header is sound
    (_header_fault, with its own number) and its records match the header's CRC and
    receive time. Nothing a header says is trusted before its CRC has matched."""
    raw = os.pread(fd, UNIT, off)
    if len(raw) < UNIT:
        return False
    h = np.frombuffer(raw, BLOCK_DTYPE)[0]
    own = int(h["seq"])
    if own <= seq or _header_fault(h, off, size, own) is not None:
        return False
    n = int(h["n"])
    body = np.frombuffer(os.pread(fd, n * UNIT, off + UNIT), np.uint8)
    return len(body) == n * UNIT and _body_fault(body, int(h["crc"]), int(h["recv_ns"]), own) is None


def _next_block(fd: int, start: int, size: int, seq: int) -> int | None:
    """The offset of the first sound block numbered above seq at or after start, or None:
    the block magic looked for byte by byte (not on 64-byte units from a header whose
    record count may be the damaged field), each candidate taken only if its header is
    sound and its records match its CRC (_sound_at). Read only after a bad block was found,
    to tell a torn tail (nothing sound after it) from damage inside the file, and to find
    where the sound blocks resume."""
    pos = start
    while pos + UNIT <= size:
        raw = os.pread(fd, min(_SCAN + len(BLOCK_MAGIC) - 1, size - pos), pos)
        if not raw:
            return None  # (the file shrank since it was opened)
        k = raw.find(BLOCK_MAGIC)
        while 0 <= k < _SCAN:
            if pos + k + UNIT <= size and _sound_at(fd, pos + k, size, seq):
                return pos + k
            k = raw.find(BLOCK_MAGIC, k + 1)
        pos += _SCAN
    return None


def _torn(fd: int, off: int, size: int, seq: int, reason: str) -> Torn:
    """Block seq at offset off is bad: a Torn that says whether sound blocks follow."""
    return Torn(off, size - off, reason, _next_block(fd, off + UNIT, size, seq))


def _torn_at(path: str, off: int, size: int, seq: int, reason: str) -> Torn:
    """_torn for a file by name."""
    try:
        with open(path, "rb", buffering=0) as f:
            return _torn(f.fileno(), off, size, seq, reason)
    except OSError:
        return Torn(off, size - off, reason)


@dataclass
class Block:
    seq: int
    offset: int       # of the block header
    recv_ns: int      # the header's receive time of the first record
    records: np.ndarray


@dataclass
class LobcData:
    path: str
    meta: dict
    records: np.ndarray
    blocks: int
    torn: Torn | None
    size: int = 0
    # read(verify=False): (first record, records, CRC, offset, seq, receive time) of each block, not checked yet
    unverified: list | None = None
    damage: list = field(default_factory=list)  # read(past_damage=True): the stretches skipped (Torn)

    @property
    def whole(self) -> bool:
        return self.torn is None and not self.damage


def _looks_like(head: bytes) -> str:
    """For a file that is not .lobc: what its first bytes look like, and the command that
    reads that ("" if nothing known). The gzip and pcap magics are the ITCH reader's own."""
    from lobreplay.itch.reader import GZIP_MAGIC, PCAP_MAGICS
    from lobreplay.itch.spec import LENGTHS
    itch = "; it looks like {}: `lobreplay itch replay` reads it"
    if head[:2] == GZIP_MAGIC:
        return ("; it is gzip: an ITCH day (`lobreplay itch replay`) or a recording to convert first "
                "(`lobreplay capture binance --from-jsonl FILE -o X.lobc`)?")
    if head[:4] in PCAP_MAGICS:
        return itch.format("a pcap capture (MoldUDP64 ITCH?)")
    if len(head) >= 3 and LENGTHS.get(chr(head[2])) == int.from_bytes(head[:2], "big"):
        return itch.format("ITCH 5.0 (a length and a message type)")
    if re.match(rb"\s*(\d+ )?[{\[]", head[:64]):
        return "; it looks like JSON lines: convert it first (`lobreplay capture binance --from-jsonl FILE -o X.lobc`)"
    return ""


def _open(path) -> tuple[int, dict, int]:
    """The file's size, its metadata and its header length (where the blocks start). Read
    with pread, not through a memory map: a file cut meanwhile is an error, not a SIGBUS."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    if os.path.isdir(path):
        raise InputError(f"{path}: a directory, not a .lobc file")
    if not os.path.isfile(path):  # a pipe or a device: a replay reads the file twice
        raise InputError(f"{path}: not a regular file (a pipe or a device?); a .lobc file is read from disk")
    if size == 0:
        raise InputError(f"{path}: empty file, not a .lobc file")
    try:
        with open(path, "rb", buffering=0) as f:
            head = os.pread(f.fileno(), HEADER_MAX, 0)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(head) < min(size, HEADER_MAX):  # cut since its size was taken
        size = len(head)
    if head[:4] != MAGIC:
        raise InputError(f"{path}: offset 0: not a .lobc file (magic {head[:4]!r}, expected {MAGIC!r})"
                         + _looks_like(head))
    if size < HEADER_LEN:
        raise InputError(f"{path}: offset {size}: file header cut short ({size} of {HEADER_LEN} bytes)")
    _, version, hlen, mlen = _HDR.unpack_from(head)
    if version != VERSION:
        raise InputError(f"{path}: offset 4: .lobc format version {version}; this reader knows version {VERSION}")
    if hlen < HEADER_LEN or hlen % UNIT:
        raise InputError(f"{path}: offset 6: header length {hlen}, expected {HEADER_LEN} or more in "
                         f"{UNIT}-byte units")
    if mlen > hlen - 12:
        raise InputError(f"{path}: offset 8: metadata length {mlen} exceeds the header's {hlen - 12}")
    if size < hlen:
        raise InputError(f"{path}: offset {size}: file header cut short ({size} of {hlen} bytes)")
    head = head[:hlen]
    try:
        meta = json.loads(head[12:12 + mlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: offset 12: metadata is not UTF-8 JSON ({e})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("symbols"), list) \
            or not all(isinstance(x, str) for x in meta["symbols"]):
        raise InputError(f"{path}: offset 12: metadata must be a JSON object with a 'symbols' list of names")
    if any(head[12 + mlen:]):
        raise InputError(f"{path}: offset {12 + mlen}: header padding after the metadata is not zero")
    meta.setdefault("price_scale", DEFAULT_SCALE)
    meta.setdefault("qty_scale", DEFAULT_SCALE)
    for k in ("price_scale", "qty_scale"):  # (every report's prices are read with them)
        try:
            if _scale_digits(meta[k]) > 18:
                raise ValueError
        except ValueError:
            raise InputError(f"{path}: offset 12: metadata {k} must be a power of ten from 1 to 10**18, "
                             f"got {meta[k]!r}") from None
    return size, meta, hlen


def header_length(meta_bytes: int) -> int:
    """The header length for metadata of meta_bytes: 512, or the next multiple of 64 that holds it."""
    return max(HEADER_LEN, -(-(12 + meta_bytes) // UNIT) * UNIT)


class BlockReader:
    """Iterates over the whole blocks of a .lobc file, each read with pread (its
    records: a read-only array of their own); after the iteration, `torn` says
    where and why it stopped early (None: the file is whole)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.size, self.meta, self.header_length = _open(self.path)
        self.torn: Torn | None = None
        self.blocks = 0
        self.records = 0

    def headers(self, start: int | None = None, seq: int = 0):
        """(seq, offset, n, crc, recv_ns) of each block whose header and length are sound, in
        order, up to the first that is not (then `torn` is set); the CRCs are not checked.
        Read with pread: a file cut while it is read ends the walk there (a torn tail).
        start, seq: walk from the block at offset start, numbered seq (default: the first)."""
        size = self.size
        off = self.header_length if start is None else start
        with open(self.path, "rb", buffering=0) as f:
            while off < size:
                if size - off < UNIT:
                    self.torn = Torn(off, size - off, f"partial block header ({size - off} of {UNIT} bytes)")
                    return
                raw = os.pread(f.fileno(), UNIT, off)
                if len(raw) < UNIT:
                    self.torn = Torn(off, size - off, f"partial block header: the file ended at offset "
                                                      f"{off + len(raw)} while reading (it changed since it "
                                                      "was opened)")
                    return
                h = np.frombuffer(raw, BLOCK_DTYPE)[0]
                fault = _header_fault(h, off, size, seq)
                if fault:
                    self.torn = _torn(f.fileno(), off, size, seq, fault)
                    return
                n = int(h["n"])
                yield seq, off, n, int(h["crc"]), int(h["recv_ns"])
                seq += 1
                off += UNIT + n * UNIT

    def __iter__(self):
        size = self.size
        with open(self.path, "rb", buffering=0) as f:
            for seq, off, n, crc, recv_ns in self.headers():
                body = np.frombuffer(os.pread(f.fileno(), n * UNIT, off + UNIT), np.uint8)
                if len(body) < n * UNIT:
                    self.torn = Torn(off, size - off, f"partial block: the file ended at offset "
                                                      f"{off + UNIT + len(body)} while reading (it changed "
                                                      "since it was opened)")
                    return
                fault = _body_fault(body, crc, recv_ns, seq)
                if fault:
                    self.torn = _torn(f.fileno(), off, size, seq, fault)
                    return
                self.blocks += 1
                self.records += n
                yield Block(seq, off, recv_ns, body.view(RECORD_DTYPE))


MARK = -1  # the offset of a ChunkReader head that stands for its GAP records at damage (past_damage)


class ChunkReader:
    """The records of a .lobc file's whole blocks in chunks of about `chunk_records` (runs of
    consecutive blocks; a bigger block is a chunk of its own), each read with one `preadv`
    into a buffer that every chunk reuses, so memory stays bounded however long the file.

    The block headers are read when it opens (`torn`: where they stop being sound).
    `chunks(verify=True)` also checks each block's CRC and ends the file at the first that
    does not match (`torn` then names it; later passes read only the blocks before it).
    Each chunk is a view of the buffer, valid until the next one is read (with
    `chunks(buffers=k)`, k buffers in turn: valid until k more are read; lobreplay's
    read_ahead keeps chunks in flight so).

    past_damage=True reads on across damage inside the file (a bad block with sound blocks
    after it): the bad bytes are skipped (`damage`: a Torn for each stretch, its `bytes` the
    ones skipped, `next_block` where reading resumed) and the records read there are a GAP
    record (reason GAP_DAMAGED, at the receive time of the record before) for every symbol
    of the metadata, since no book is known across records that are lost. `torn` is then
    only a torn tail. Records are numbered as read, these GAP records included."""

    def __init__(self, path, chunk_records: int = 1 << 18, *, past_damage: bool = False):
        r = self._blocks = BlockReader(path)
        self.path, self.meta, self.size = r.path, r.meta, r.size
        self.heads: list = []  # (seq, offset, n, crc, recv_ns); offset MARK: GAP records
        self.torn: Torn | None = None
        self.damage: list[Torn] = []
        self.past_damage = past_damage
        self._nsym = len(self.meta["symbols"])
        self._walk(None, 0)
        self.chunk_records = max(1, int(chunk_records))
        self._bufs: list[np.ndarray] = []

    def _walk(self, start: int | None, seq: int) -> None:
        """Append the heads of the blocks from offset start (None: the first), numbered seq,
        up to the first bad header (then `torn`); with past_damage, on across bad headers to
        the sound blocks after them. The record counts are trusted here: chunks(verify=True)
        walks again from where the CRCs show that one was not to be."""
        r = self._blocks
        r.torn = None
        self.heads += list(r.headers(start, seq))
        self.torn = r.torn
        while self.past_damage and self.torn is not None and self.torn.corrupt:
            self._skip(len(self.heads), self.torn)
            with open(self.path, "rb", buffering=0) as f:
                seq = int(np.frombuffer(os.pread(f.fileno(), UNIT, self.torn.next_block), BLOCK_DTYPE)[0]["seq"])
            r.torn = None
            self.heads += list(r.headers(self.torn.next_block, seq))
            self.torn = r.torn

    @property
    def blocks(self) -> int:
        """Sound blocks (those still to be read included)."""
        return sum(h[1] != MARK for h in self.heads)

    @property
    def records(self) -> int:
        return sum(h[2] for h in self.heads)

    def _skip(self, at: int, torn: Torn) -> None:
        """The bad bytes torn names sit just before heads[at] (a sound block, or the end):
        note them (what is skipped: up to torn.next_block), and put the GAP records there,
        one mark for damage that follows damage."""
        d = sorted(self.damage + [Torn(torn.offset, torn.next_block - torn.offset, torn.reason, torn.next_block)],
                   key=lambda t: t.offset)
        self.damage = d[:1]
        for t in d[1:]:  # (stretches side by side: one, with both reasons)
            if self.damage[-1].next_block == t.offset:
                a = self.damage.pop()
                t = Torn(a.offset, t.next_block - a.offset, f"{a.reason}; {t.reason}", t.next_block)
            self.damage.append(t)
        self.heads.insert(at, (-1, MARK, self._nsym, 0, 0))  # (also of 0 records: runs break at marks)
        for k in (at + 1, at):  # (marks side by side: one is enough)
            if 0 < k < len(self.heads) and self.heads[k][1] == MARK == self.heads[k - 1][1]:
                del self.heads[k]

    def _marks(self, at: int, last_recv: int | None) -> np.ndarray:
        """The GAP records of the mark heads[at]: one per symbol, at the receive time of the
        record before them (last_recv; at the file's start, its creation time)."""
        g = np.zeros(self.heads[at][2], RECORD_DTYPE)
        g["kind"], g["flags"], g["symbol"] = GAP, GAP_DAMAGED, np.arange(len(g))
        g["recv_ns"] = last_recv if last_recv is not None else int(self.meta.get("created_ns") or 0)
        return g

    def verify(self, start: int = 0) -> "ChunkReader":
        """One pass that checks every block's CRC, as chunks(verify=True) does, and keeps no
        records: afterwards `torn` (and with past_damage `damage`) say everything. start: the
        blocks before heads[start] are taken as checked already (a reader that checked them
        found them sound). Returns self."""
        for _ in self.chunks(verify=True, start=start):
            pass
        return self

    def chunks(self, *, verify: bool = False, buffers: int = 1, start: int = 0):
        heads = self.heads
        if len(heads) <= start:
            return
        room = max(max(h[2] for h in heads), min(self.chunk_records, self.records),
                   self._nsym if self.past_damage else 0)  # (a mark found on the way fits)
        self._bufs = [b for b in self._bufs if len(b) >= room][:buffers]
        self._bufs += [np.empty(room, RECORD_DTYPE) for _ in range(buffers - len(self._bufs))]
        turn, last_recv = 0, None
        scratch = bytearray(UNIT)  # the block headers land here
        with open(self.path, "rb", buffering=0) as f:
            i = start
            while i < len(heads):
                # (the buffers turn over as chunks are handed out: a pass that yields nothing, a
                # run whose first block is bad, leaves the next one to the same buffer)
                buf = self._bufs[turn % buffers]
                raw = buf.view(np.uint8)
                if heads[i][1] == MARK:
                    g = self._marks(i, last_recv)
                    if len(g):
                        buf[:len(g)] = g
                        turn += 1
                        yield buf[:len(g)]
                    i += 1
                    continue
                # a run of blocks that follow one another in the file (a mark sits at every break)
                j, n = i + 1, heads[i][2]
                while j < len(heads) and heads[j][1] != MARK and n + heads[j][2] <= self.chunk_records:
                    n += heads[j][2]
                    j += 1
                if len(buf) < n:  # (blocks found by a walk after damage: bigger than any before)
                    buf = self._bufs[turn % buffers] = np.empty(n, RECORD_DTYPE)
                    raw = buf.view(np.uint8)
                iov, lo = [], 0
                for h in heads[i:j]:
                    iov += [scratch, raw[lo * UNIT:(lo + h[2]) * UNIT]]
                    lo += h[2]
                got = _preadv_all(f.fileno(), iov, heads[i][1])
                want = (j - i) * UNIT + n * UNIT
                keep, lo, stop = i, 0, False
                for seq, off, k, crc, recv_ns in heads[i:j]:
                    end = off - heads[i][1] + UNIT + k * UNIT  # this block's end, from the run's start
                    if end > got:
                        self._ended(keep, heads[i][1] + got)
                        stop = True
                        break
                    fault = verify and _body_fault(raw[lo * UNIT:(lo + k) * UNIT], crc, recv_ns, seq)
                    if fault:
                        # the header is not sound, its record count included: the blocks the walk
                        # found after it (from its count) are not to be trusted either, and the next
                        # sound block is looked for from just after this header
                        torn = _torn(f.fileno(), off, self.size, seq, fault)
                        self.damage = [d for d in self.damage if d.offset < off]
                        if self.past_damage and torn.corrupt:
                            del heads[keep:]
                            self._skip(keep, torn)
                            self._walk(torn.next_block, int(np.frombuffer(
                                os.pread(f.fileno(), UNIT, torn.next_block), BLOCK_DTYPE)[0]["seq"]))
                            j = keep  # (the next run starts at its mark)
                            break
                        self._stop(keep, torn)
                        stop = True
                        break
                    keep += 1
                    lo += k
                if lo:
                    last_recv = int(buf[lo - 1]["recv_ns"])
                    turn += 1
                    yield buf[:lo]
                if stop:
                    return
                i = j

    def _stop(self, keep: int, torn: Torn) -> None:
        del self.heads[keep:]
        self.torn = torn

    def _ended(self, keep: int, at: int) -> None:
        """The file ended at byte `at`, inside block `keep`, while it was read."""
        off = self.heads[keep][1]
        self._stop(keep, Torn(off, self.size - off, f"partial block: the file ended at offset {at} while "
                                                    "reading (it changed since it was opened)"))

    def reader(self):
        """A function read(out) that fills `out` (a RECORD_DTYPE array) with the next records
        of the blocks kept, from the first, with one preadv straight into it per run of blocks
        that follow one another in the file (block headers to a scratch buffer, runs cut
        anywhere inside a block); it returns how many it read: fewer than len(out) only at
        the end of the blocks, or where the file ended early (then `torn` says so and the
        blocks after are dropped)."""
        heads = self.heads
        starts = np.cumsum([0] + [h[2] for h in heads]).tolist()
        scratch = bytearray(UNIT)
        pos, last_recv = 0, None  # records read so far, the receive time of the last

        def run(out: np.ndarray, b: int) -> tuple[int, bool]:
            """Read from block b on (not a mark) into out: (records read, whether the file
            ended early)."""
            raw = out.view(np.uint8)
            offset = heads[b][1] + UNIT + (pos - starts[b]) * UNIT
            iov, sizes, n = [], [], 0
            while n < len(out) and b < len(heads) and heads[b][1] != MARK:
                k = min(len(out) - n, starts[b + 1] - pos - n)
                if iov:
                    iov.append(scratch)
                iov.append(raw[n * UNIT:(n + k) * UNIT])
                sizes.append((b, k))
                n += k
                b += 1
            with open(self.path, "rb", buffering=0) as f:
                got = _preadv_all(f.fileno(), iov, offset)
            if got < n * UNIT + (len(sizes) - 1) * UNIT:  # the file ended early: keep the whole blocks
                done = 0
                for i, (b, k) in enumerate(sizes):
                    end = done * UNIT + i * UNIT + k * UNIT
                    if end > got:
                        self._ended(b, offset + got)
                        return max(0, starts[b] - pos), True
                    done += k
            return n, False

        def read(out: np.ndarray) -> int:
            nonlocal pos, last_recv
            n = 0
            while n < len(out):
                b = bisect.bisect_right(starts, pos) - 1
                if b >= len(heads):
                    break
                if heads[b][1] == MARK:
                    k = min(len(out) - n, starts[b + 1] - pos)
                    out[n:n + k] = self._marks(b, last_recv)[pos - starts[b]:pos - starts[b] + k]
                    ended = False
                else:
                    k, ended = run(out[n:], b)
                n += k
                pos += k
                if k:
                    last_recv = int(out[n - 1]["recv_ns"])
                if ended:
                    break
            return n

        return read


def _preadv_all(fd: int, bufs: list, offset: int) -> int:
    """Fill bufs in order from offset (os.preadv, again after a short read); the bytes read,
    fewer only where the file ends."""
    views = [memoryview(b).cast("B") for b in bufs]
    total, k = 0, 0
    while k < len(views):
        got = os.preadv(fd, views[k:k + 1024], offset + total)
        if got <= 0:
            break
        total += got
        while k < len(views) and got >= len(views[k]):
            got -= len(views[k])
            k += 1
        if got:
            views[k] = views[k][got:]
    return total


def iter_blocks(path) -> BlockReader:
    """Stream a .lobc file block by block: `for b in (r := iter_blocks(p)): ...`, then `r.torn`."""
    return BlockReader(path)


def read(path, *, verify: bool = True, past_damage: bool = False) -> LobcData:
    """Read a whole .lobc file: metadata, every record of its whole blocks (read
    once, straight into one array, in order), the block count, and the torn
    tail (None if whole). Raises InputError for a file that is not .lobc
    (empty, bad magic, version or header); a torn or corrupt tail is reported,
    never raised. verify=False leaves the CRCs to verify(data) (which can run
    in another thread: zlib releases the GIL); the records are then those of
    every block whose header is sound. past_damage=True reads on across damage
    inside the file as ChunkReader(past_damage=True) does (a GAP record of reason
    GAP_DAMAGED for every symbol where it skipped a stretch: `damage`)."""
    if past_damage:
        if not verify:
            raise ValueError("read: past_damage needs verify (damage is found by the CRCs too)")
        c = ChunkReader(path, past_damage=True)
        parts = [x.copy() for x in c.chunks(verify=True)]
        records = np.concatenate(parts) if parts else np.empty(0, RECORD_DTYPE)
        return LobcData(c.path, c.meta, records, c.blocks, c.torn, c.size, damage=list(c.damage))
    r = BlockReader(path)
    heads = list(r.headers())
    total = sum(h[2] for h in heads)
    records = np.empty(total, RECORD_DTYPE)
    raw = records.view(np.uint8)
    blocks = []
    lo = 0
    with open(r.path, "rb", buffering=0) as f:
        for seq, off, n, crc, recv_ns in heads:
            f.seek(off + UNIT)
            got, want = 0, n * UNIT
            while got < want:  # the file may have shrunk since the headers were read
                k = f.readinto(raw[lo * UNIT + got:lo * UNIT + want])
                if not k:
                    break
                got += k
            if got < want:
                r.torn = Torn(off, r.size - off, f"partial block: {n} records need {want + UNIT} bytes, "
                                                 f"{got + UNIT} present")
                break
            blocks.append((lo, n, crc, off, seq, recv_ns))
            lo += n
    data = LobcData(r.path, r.meta, records[:lo], len(blocks), r.torn, r.size, blocks)
    return verify_crc(data) if verify else data


def verify_crc(data: LobcData) -> LobcData:
    """Check the CRCs of a read(verify=False). Returns data itself when every block matches,
    else the records before the first block that does not, with that block as the torn tail."""
    blocks = data.unverified or []
    for i, (lo, n, crc, off, seq, recv_ns) in enumerate(blocks):
        fault = _body_fault(data.records[lo:lo + n].view(np.uint8), crc, recv_ns, seq)
        if fault:
            return LobcData(data.path, data.meta, data.records[:lo], i,
                            _torn_at(data.path, off, data.size, seq, fault), data.size, None)
    data.unverified = None
    return data


# ---------------------------------------------------------------- repair

def repair(src, dst, *, flush_records: int = 65536) -> dict | None:
    """Write dst: the records a reader takes from src past its damage (ChunkReader with
    past_damage=True: every sound block's records in order, a GAP record of reason
    GAP_DAMAGED for every symbol where a stretch was skipped, nothing of a torn tail), as a
    whole file that any reader takes to the end. Its metadata is src's (`created_ns` and
    `tool` kept) with `repaired_from` (src's name) and `repaired` (the stretches skipped and
    the torn tail dropped, as Torn.as_dict()). src is read twice (its CRCs, then its
    records), in bounded memory; dst appears only when whole (written as dst + '.partial',
    then renamed). Returns what was done, or None (dst not written) for a whole src."""
    r = ChunkReader(src, past_damage=True).verify()  # (before the header is written)
    if r.torn is None and not r.damage:
        return None
    from lobreplay.errors import same_file
    if same_file(dst, r.path) or same_file(os.fspath(dst) + ".partial", r.path):
        raise ValueError(f"{dst}: the repaired file must not replace its source")
    m = r.meta
    done = {"records": r.records, "blocks": 0, "damage": [t.as_dict() for t in r.damage],
            "torn": r.torn.as_dict() if r.torn else None}
    keep = {k: v for k, v in m.items() if k not in _ARG_META}
    part = os.fspath(dst) + ".partial"
    try:
        with LobcWriter(part, venue=m.get("venue", ""), market=m.get("market", ""), symbols=m["symbols"],
                        price_scale=m["price_scale"], qty_scale=m["qty_scale"], streams=m.get("streams", ()),
                        source=m.get("source"), flush_records=flush_records, flush_seconds=float("inf"),
                        extra_meta={**keep, "repaired_from": os.path.basename(r.path),
                                    "repaired": {"damage": done["damage"], "torn": done["torn"]}}) as w:
            for c in r.chunks():
                w.add_many(c)
        os.replace(part, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise
    done["blocks"] = w.blocks
    return done


# ---------------------------------------------------------------- check

def check(path) -> dict:
    """A summary of a .lobc file without loading it whole: whether it is whole
    (else the torn tail), records and blocks, records by kind and by symbol,
    the receive and exchange time spans (earliest, latest; `recv_ns["backwards"]`: records
    received before the one before them), the GAP records and RESYNCs. The counts stop at
    the first bad block; for a corrupt file, `after_damage` says what `lobc replay
    --allow-corrupt` reads on across it: from where the sound blocks resume, their blocks and
    records (CRCs checked) to the end, every stretch of damage skipped (`damage`, with the
    first), and whether the file ends whole after it (`to_the_end`)."""
    r = ChunkReader(path)  # (read with preadv: a file cut while it is checked is a torn tail, not a SIGBUS)
    symbols = r.meta["symbols"]
    by_kind = np.zeros(256, np.int64)
    by_sym = np.zeros(max(1, len(symbols), 65536), np.int64)
    resyncs = np.zeros(65536, np.int64)
    gaps = []
    recv = [None, None]
    exch = [None, None]
    unknown_symbol = 0
    backwards, last_recv = 0, None  # receive times that go back (a capture's clock stepped back)
    for rec in r.chunks(verify=True):
        by_kind += np.bincount(rec["kind"], minlength=256)
        by_sym += np.bincount(rec["symbol"], minlength=65536)
        t = rec["recv_ns"]
        backwards += int((t[1:] < t[:-1]).sum()) + (last_recv is not None and len(t) and int(t[0]) < last_recv)
        last_recv = int(t[-1]) if len(t) else last_recv
        recv = [int(t.min()) if recv[0] is None else min(recv[0], int(t.min())),
                int(t.max()) if recv[1] is None else max(recv[1], int(t.max()))]
        e = rec["exch_ns"][rec["exch_ns"] != 0]
        if len(e):
            exch = [int(e.min()) if exch[0] is None else min(exch[0], int(e.min())),
                    int(e.max()) if exch[1] is None else max(exch[1], int(e.max()))]
        unknown_symbol += int((rec["symbol"] >= len(symbols)).sum())
        g = rec[rec["kind"] == GAP]
        for x in g.tolist():
            sym = x[9]
            gaps.append({"recv_ns": x[0], "symbol": symbols[sym] if sym < len(symbols) else sym,
                         "reason": GAP_REASONS.get(x[10], f"unknown_{x[10]}"), "expected_id": x[2],
                         "received_id": x[3]})
        rs = rec["symbol"][rec["kind"] == RESYNC]
        if len(rs):
            np.add.at(resyncs, rs, 1)
    after = None
    if r.torn is not None and r.torn.corrupt:  # what the sound blocks after the damage hold
        # (the blocks before it, which r checked, are the same first ones: not read again)
        w = ChunkReader(path, past_damage=True).verify(start=len(r.heads))
        sound = sum(h[2] for h in w.heads if h[1] != MARK)
        after = {"offset": r.torn.next_block, "blocks": w.blocks - r.blocks, "records": sound - r.records,
                 "damage": [t.as_dict() for t in w.damage], "to_the_end": w.torn is None}
    return {
        "path": r.path, "whole": r.torn is None, "torn": r.torn.as_dict() if r.torn else None,
        "after_damage": after,
        "bytes": r.size, "blocks": r.blocks, "records": r.records,
        "meta": r.meta,
        "records_by_kind": {KIND_NAMES.get(k, f"unknown_{k}"): int(by_kind[k]) for k in np.flatnonzero(by_kind)},
        "records_by_symbol": {(symbols[i] if i < len(symbols) else str(i)): int(by_sym[i])
                              for i in np.flatnonzero(by_sym)},
        "records_with_unknown_symbol": unknown_symbol,
        "recv_ns": {"first": recv[0], "last": recv[1], "backwards": backwards},
        "exch_ns": {"first": exch[0], "last": exch[1]},
        "gaps": gaps,
        "resyncs": {(symbols[i] if i < len(symbols) else str(i)): int(resyncs[i]) for i in np.flatnonzero(resyncs)},
    }
