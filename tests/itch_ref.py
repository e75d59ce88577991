"""A plain struct.unpack reference decoder for NASDAQ TotalView-ITCH 5.0 in
BinaryFILE framing, for differential tests.

Written on its own from the format notes (shared/docs/itch-format.md, which
follows the Nasdaq specification): it imports nothing from lobreplay, so a
mistake in lobreplay.itch.spec cannot hide here too. Slow and simple on purpose:
one struct.unpack per message.

    for offset, msg in iter_messages(data):
        ...

``offset`` is the byte offset of the frame's 2-byte length prefix. ``msg`` is a
dict: "type" (1-char str), "stock_locate", "tracking", "timestamp" (int ns since
midnight), then the type's fields: ints for integers and prices (Price(4) and
Price(8) stay integers), a 1-char str for one-character fields, and str with
trailing spaces stripped for text fields.

Framing rules: a zero-length frame ends the session (nothing after it is read);
EOF on a frame boundary is a normal end; a partial trailing frame raises
ValueError naming its offset, unless allow_partial, in which case one last item
``(offset, {"type": None, "partial": True, "bytes": k, "length": n})`` reports
it (k = bytes present from the prefix on, n = the payload length the prefix
announces, or None when not even the prefix is complete). An unknown type byte
yields ``{"type": t, "length": n, "unknown": True}`` and is skipped by length. A
known type whose frame length disagrees with its size raises ValueError.
"""
from __future__ import annotations

import struct

# Fields after the 11-byte header, per type: (name, struct code). Codes:
# c = one character, Ns = N-character text, B/H/I/Q = 1/2/4/8-byte unsigned
# big-endian integer (prices are I for Price(4), Q for Price(8)).
_BODY: dict[str, list[tuple[str, str]]] = {
    # System Event
    "S": [("event_code", "c")],
    # Stock Directory
    "R": [("stock", "8s"), ("market_category", "c"), ("financial_status", "c"),
          ("round_lot_size", "I"), ("round_lots_only", "c"), ("issue_classification", "c"),
          ("issue_subtype", "2s"), ("authenticity", "c"), ("short_sale_threshold", "c"),
          ("ipo_flag", "c"), ("luld_tier", "c"), ("etp_flag", "c"),
          ("etp_leverage_factor", "I"), ("inverse_indicator", "c")],
    # Stock Trading Action
    "H": [("stock", "8s"), ("trading_state", "c"), ("reserved", "c"), ("reason", "4s")],
    # Reg SHO Short Sale Price Test Restricted Indicator
    "Y": [("stock", "8s"), ("reg_sho_action", "c")],
    # Market Participant Position
    "L": [("mpid", "4s"), ("stock", "8s"), ("primary_market_maker", "c"),
          ("market_maker_mode", "c"), ("market_participant_state", "c")],
    # MWCB Decline Level (Price(8) x 3)
    "V": [("level1", "Q"), ("level2", "Q"), ("level3", "Q")],
    # MWCB Status
    "W": [("breached_level", "c")],
    # IPO Quoting Period Update (release time in seconds)
    "K": [("stock", "8s"), ("release_time", "I"), ("release_qualifier", "c"), ("ipo_price", "I")],
    # LULD Auction Collar
    "J": [("stock", "8s"), ("reference_price", "I"), ("upper_price", "I"), ("lower_price", "I"),
          ("extension", "I")],
    # Operational Halt (lower-case h)
    "h": [("stock", "8s"), ("market_code", "c"), ("halt_action", "c")],
    # Add Order, no MPID
    "A": [("order_ref", "Q"), ("side", "c"), ("shares", "I"), ("stock", "8s"), ("price", "I")],
    # Add Order with MPID attribution
    "F": [("order_ref", "Q"), ("side", "c"), ("shares", "I"), ("stock", "8s"), ("price", "I"),
          ("attribution", "4s")],
    # Order Executed
    "E": [("order_ref", "Q"), ("executed_shares", "I"), ("match_number", "Q")],
    # Order Executed With Price
    "C": [("order_ref", "Q"), ("executed_shares", "I"), ("match_number", "Q"), ("printable", "c"),
          ("execution_price", "I")],
    # Order Cancel (a decrement)
    "X": [("order_ref", "Q"), ("cancelled_shares", "I")],
    # Order Delete
    "D": [("order_ref", "Q")],
    # Order Replace
    "U": [("order_ref", "Q"), ("new_order_ref", "Q"), ("shares", "I"), ("price", "I")],
    # Trade (non-cross, non-displayed)
    "P": [("order_ref", "Q"), ("side", "c"), ("shares", "I"), ("stock", "8s"), ("price", "I"),
          ("match_number", "Q")],
    # Cross Trade: shares is 8 bytes here
    "Q": [("shares", "Q"), ("stock", "8s"), ("cross_price", "I"), ("match_number", "Q"),
          ("cross_type", "c")],
    # Broken Trade
    "B": [("match_number", "Q")],
    # NOII: paired and imbalance shares are 8 bytes; stock at offset 28
    "I": [("paired_shares", "Q"), ("imbalance_shares", "Q"), ("imbalance_direction", "c"),
          ("stock", "8s"), ("far_price", "I"), ("near_price", "I"), ("current_reference_price", "I"),
          ("cross_type", "c"), ("price_variation_indicator", "c")],
    # Retail Price Improvement Indicator
    "N": [("stock", "8s"), ("interest_flag", "c")],
    # Direct Listing with Capital Raise Price Discovery
    "O": [("stock", "8s"), ("open_eligibility_status", "c"), ("min_allowable_price", "I"),
          ("max_allowable_price", "I"), ("near_execution_price", "I"), ("near_execution_time", "Q"),
          ("lower_price_range_collar", "I"), ("upper_price_range_collar", "I")],
}

# Message lengths from the format notes' length table, kept separately from the
# layouts above so that a slip in either shows up as a mismatch at import.
LENGTHS = {
    "S": 12, "R": 39, "H": 25, "Y": 20, "L": 26, "V": 35, "W": 12, "K": 28, "J": 35, "h": 21,
    "A": 36, "F": 40, "E": 31, "C": 36, "X": 23, "D": 19, "U": 35, "P": 44, "Q": 40, "B": 19,
    "I": 50, "N": 20, "O": 48,
}

_HEADER = ">cHHHI"  # type, stock locate, tracking, timestamp high 16 bits, low 32 bits

FIELDS: dict[str, tuple[str, ...]] = {}
_STRUCTS: dict[int, tuple[str, struct.Struct, tuple[str, ...], tuple[str, ...]]] = {}
for _t, _body in _BODY.items():
    _st = struct.Struct(_HEADER + "".join(code for _, code in _body))
    assert _st.size == LENGTHS[_t], (_t, _st.size, LENGTHS[_t])
    FIELDS[_t] = ("stock_locate", "tracking", "timestamp") + tuple(n for n, _ in _body)
    _STRUCTS[ord(_t)] = (_t, _st, tuple(n for n, _ in _body), tuple(c for _, c in _body))
assert set(_BODY) == set(LENGTHS)
del _t, _body, _st


def decode_message(payload: bytes, offset: int = 0) -> dict:
    """One message (without its length prefix) as a dict; see the module docstring."""
    if not payload:
        raise ValueError(f"offset {offset}: empty message")
    entry = _STRUCTS.get(payload[0])
    if entry is None:
        return {"type": chr(payload[0]), "length": len(payload), "unknown": True}
    t, st, names, codes = entry
    if len(payload) != st.size:
        raise ValueError(f"offset {offset}: {t!r} message has length {len(payload)}, expected {st.size}")
    vals = st.unpack(payload)
    msg = {"type": t, "stock_locate": vals[1], "tracking": vals[2], "timestamp": (vals[3] << 32) | vals[4]}
    for name, code, v in zip(names, codes, vals[5:]):
        if code == "c":
            try:
                v = v.decode("ascii")
            except UnicodeDecodeError:
                raise ValueError(f"offset {offset}: field {name!r} of {t!r} is not ASCII: {v!r}") from None
        elif code.endswith("s"):
            try:
                v = v.decode("ascii").rstrip(" ")
            except UnicodeDecodeError:
                raise ValueError(f"offset {offset}: field {name!r} of {t!r} is not ASCII: {v!r}") from None
        msg[name] = v
    return msg


def iter_messages(data: bytes, *, allow_partial: bool = False):
    """Yield (offset, msg) for each BinaryFILE frame of ``data``; see the module docstring."""
    mv = memoryview(data)
    n = len(mv)
    off = 0
    while off < n:
        if off + 2 > n:
            if not allow_partial:
                raise ValueError(f"offset {off}: truncated frame: {n - off} byte(s) left, a length prefix "
                                 "needs 2")
            yield off, {"type": None, "partial": True, "bytes": n - off, "length": None}
            return
        length = (mv[off] << 8) | mv[off + 1]
        if length == 0:  # end of session
            return
        end = off + 2 + length
        if end > n:
            if not allow_partial:
                raise ValueError(f"offset {off}: truncated frame: the prefix says {length} bytes, "
                                 f"{n - off - 2} present")
            yield off, {"type": None, "partial": True, "bytes": n - off, "length": length}
            return
        yield off, decode_message(bytes(mv[off + 2:end]), off)
        off = end


def read_messages(data: bytes, *, allow_partial: bool = False) -> list[dict]:
    """All messages of ``data`` (without offsets)."""
    return [m for _, m in iter_messages(data, allow_partial=allow_partial)]
