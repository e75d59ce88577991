"""Vectorised decoding of framed ITCH 5.0 messages into typed columns.

For each message type: the rows of that type are gathered from the chunk in
one numpy operation, viewed as a big-endian structured dtype built from
spec.LAYOUTS, and converted to native columns. No Python loop per message.

Column types: integers as unsigned numpy integers of their width (u48
timestamps as int64 ns since midnight), prices as int64 in the feed's units
(Price(4): 1/10,000; Price(8): 1/100,000,000), one-character fields as 'S1'
bytes, text as 'S<n>' bytes with the trailing space padding removed (as_text
turns both into str).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from lobreplay.itch.reader import Chunk
from lobreplay.itch.spec import HEADER, LAYOUTS, Layout, field_size

_NP = {"u1": "u1", "u2": ">u2", "u4": ">u4", "u8": ">u8", "p4": ">u4", "p8": ">u8", "c": "S1"}


def _wire_dtype(lay: Layout) -> np.dtype:
    names, formats, offsets = ["type"], ["S1"], [0]
    off = 1
    for name, kind in HEADER + lay.fields:
        if kind == "u6":  # 48-bit timestamp: two fields, joined later
            names += ["_ts_hi", "_ts_lo"]
            formats += [">u2", ">u4"]
            offsets += [off, off + 2]
        else:
            names.append(name)
            formats.append(_NP.get(kind, f"S{field_size(kind)}"))
            offsets.append(off)
        off += field_size(kind)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": lay.length})


WIRE = {t: _wire_dtype(lay) for t, lay in LAYOUTS.items()}


# Bytes outside ASCII found in text fields (ITCH Alpha fields are ASCII: such a byte is
# damage), written as "?" so that every text column is valid text (they became Arrow strings
# with invalid UTF-8 and failed the write): counted here, per process, and reported by the
# commands (summary.json text_bytes_outside_ascii).
_NON_ASCII = [0]


def non_ascii_bytes() -> int:
    """Bytes outside ASCII replaced by "?" in text fields so far in this process."""
    return _NON_ASCII[0]


def _ascii(col: np.ndarray) -> np.ndarray:
    """col (a new contiguous bytes column, changed in place) with every byte outside ASCII
    replaced by "?" (counted)."""
    raw = col.view(np.uint8)
    bad = raw >= 0x80
    if bad.any():
        raw[bad] = ord("?")
        _NON_ASCII[0] += int(bad.sum())
    return col


def column_kinds(t: str) -> dict[str, str]:
    """Field name -> spec kind for every column decode() returns for type t."""
    lay = LAYOUTS[t]
    return dict(HEADER + lay.fields)


def positions_of(chunk: Chunk, types: str) -> dict[str, np.ndarray]:
    """The positions in the chunk of the messages of each of several types that it holds
    (in file order), found in one pass over its types instead of one per type: a stable
    sort by type (a radix sort of bytes) when they are a good part of the chunk, else the
    positions of all of them, then split."""
    present = [t for t in types if chunk.has(t)]
    if len(present) <= 1:
        return {t: np.flatnonzero(chunk.types == ord(t)) for t in present}
    counts = chunk.type_counts if chunk.type_counts is not None else np.bincount(chunk.types, minlength=256)
    if sum(int(counts[ord(t)]) for t in present) > chunk.n // 8:
        order = np.argsort(chunk.types, kind="stable")
        ends = np.cumsum(counts)
        return {t: order[ends[ord(t)] - counts[ord(t)]:ends[ord(t)]] for t in present}
    wanted = np.zeros(256, bool)
    wanted[[ord(t) for t in present]] = True
    idx = np.flatnonzero(wanted[chunk.types])
    of = chunk.types[idx]
    return {t: idx[of == ord(t)] for t in present}


def gather(chunk: Chunk, t: str, idx: np.ndarray) -> np.ndarray:
    """The raw wire records of type t in a chunk at positions idx, as a structured array
    (one copy)."""
    lay = LAYOUTS[t]
    windows = sliding_window_view(chunk.buf, lay.length)
    rows = windows[chunk.offsets[idx]]
    return rows.view(WIRE[t]).reshape(len(idx))


def decode_type(chunk: Chunk, t: str, *, with_index: bool = True,
                idx: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Columns of every message of type t in the chunk, in file order.
    With with_index, 'message' holds each row's file-wide message index. idx: the
    positions of the type-t messages (positions_of), when the caller has them."""
    if idx is None:
        idx = np.flatnonzero(chunk.types == ord(t))
    rec = gather(chunk, t, idx)
    out: dict[str, np.ndarray] = {}
    if with_index:
        out["message"] = chunk.first_message + idx.astype(np.int64)
    for name, kind in column_kinds(t).items():
        if kind == "u6":
            out[name] = (rec["_ts_hi"].astype(np.int64) << 32) | rec["_ts_lo"].astype(np.int64)
        elif kind in ("p4", "p8"):
            out[name] = rec[name].astype(np.int64)
        elif kind[0] == "u":
            out[name] = rec[name].astype(kind)  # native unsigned of the same width
        elif kind == "c":
            out[name] = _ascii(rec[name].copy())
        else:  # text: strip the space padding
            out[name] = _ascii(np.char.rstrip(rec[name], b" "))
    return out


def decode(chunk: Chunk, types: str | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Columns per message type present in the chunk (or only those in types), in type order."""
    wanted = "".join(sorted(t for t in (chunk.present() if types is None else set(types)) if t in LAYOUTS))
    return {t: decode_type(chunk, t, idx=idx) for t, idx in positions_of(chunk, wanted).items()}


def as_text(col: np.ndarray) -> np.ndarray:
    """Bytes columns (c / aN) as str."""
    return np.char.decode(col, "ascii")


def timestamps(chunk: Chunk, idx: np.ndarray) -> np.ndarray:
    """Timestamps (ns since midnight) of the chunk's messages at positions idx."""
    off = chunk.offsets[idx].astype(np.int64) + 5
    b = chunk.buf
    hi = (b[off].astype(np.int64) << 8) | b[off + 1]
    lo = ((b[off + 2].astype(np.int64) << 24) | (b[off + 3].astype(np.int64) << 16)
          | (b[off + 4].astype(np.int64) << 8) | b[off + 5])
    return (hi << 32) | lo


def to_arrow(cols: dict[str, np.ndarray], t: str | None = None):
    """Decoded columns as an Arrow table (bytes columns as strings). t: their message type,
    whose price columns then carry their scale in their field metadata (`price_scale`)."""
    import pyarrow as pa

    from lobreplay.core import arrow as _arrow
    from lobreplay.itch.spec import price_scales
    scales = price_scales(t) if t is not None else {}
    arrays = [_arrow.array(v, pa.string() if v.dtype.kind == "S" else None) for v in cols.values()]
    fields = [pa.field(k, a.type, metadata={"price_scale": str(scales[k])} if k in scales else None)
              for k, a in zip(cols, arrays)]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
