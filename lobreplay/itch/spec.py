"""NASDAQ TotalView-ITCH 5.0 message layouts: the one table every decoder,
writer and test in lobreplay reads.

Each message type is a list of fields after the common header. The common
header is type (1 byte), stock_locate (u16), tracking (u16), timestamp (u48:
ns since midnight, exchange local time). Field kinds:

  u1/u2/u4/u8  big-endian unsigned integers of 1/2/4/8 bytes
  p4           Price(4): u32 with 4 implied decimals (kept as an integer)
  p8           Price(8): u64 with 8 implied decimals (kept as an integer)
  c            one ASCII character
  aN           ASCII text of N bytes, right-padded with spaces

Facts and sources: the project's ITCH format notes (NASDAQ TotalView-ITCH 5.0
specification, revision of 2023-04-28).
"""
from __future__ import annotations

from dataclasses import dataclass

HEADER = (("stock_locate", "u2"), ("tracking", "u2"), ("timestamp", "u6"))


@dataclass(frozen=True)
class Layout:
    type: str
    name: str
    length: int
    fields: tuple[tuple[str, str], ...]  # after the header

    def offsets(self) -> dict[str, int]:
        """Byte offset of every field (header included) from the type byte."""
        out, off = {}, 1
        for name, kind in HEADER + self.fields:
            out[name] = off
            off += field_size(kind)
        return out


def field_size(kind: str) -> int:
    if kind in ("c",):
        return 1
    if kind[0] == "a":
        return int(kind[1:])
    if kind[0] == "u":
        return int(kind[1:])
    return {"p4": 4, "p8": 8}[kind]


_L = Layout
LAYOUTS: dict[str, Layout] = {lay.type: lay for lay in (
    _L("S", "system_event", 12, (("event_code", "c"),)),
    _L("R", "stock_directory", 39, (
        ("stock", "a8"), ("market_category", "c"), ("financial_status", "c"), ("round_lot_size", "u4"),
        ("round_lots_only", "c"), ("issue_classification", "c"), ("issue_subtype", "a2"),
        ("authenticity", "c"), ("short_sale_threshold", "c"), ("ipo_flag", "c"), ("luld_tier", "c"),
        ("etp_flag", "c"), ("etp_leverage_factor", "u4"), ("inverse_indicator", "c"))),
    _L("H", "stock_trading_action", 25, (
        ("stock", "a8"), ("trading_state", "c"), ("reserved", "c"), ("reason", "a4"))),
    _L("Y", "reg_sho_restriction", 20, (("stock", "a8"), ("reg_sho_action", "c"))),
    _L("L", "market_participant_position", 26, (
        ("mpid", "a4"), ("stock", "a8"), ("primary_market_maker", "c"), ("market_maker_mode", "c"),
        ("market_participant_state", "c"))),
    _L("V", "mwcb_decline_level", 35, (("level1", "p8"), ("level2", "p8"), ("level3", "p8"))),
    _L("W", "mwcb_status", 12, (("breached_level", "c"),)),
    _L("K", "ipo_quoting_period", 28, (
        ("stock", "a8"), ("release_time", "u4"), ("release_qualifier", "c"), ("ipo_price", "p4"))),
    _L("J", "luld_auction_collar", 35, (
        ("stock", "a8"), ("reference_price", "p4"), ("upper_price", "p4"), ("lower_price", "p4"),
        ("extension", "u4"))),
    _L("h", "operational_halt", 21, (("stock", "a8"), ("market_code", "c"), ("halt_action", "c"))),
    _L("A", "add_order", 36, (
        ("order_ref", "u8"), ("side", "c"), ("shares", "u4"), ("stock", "a8"), ("price", "p4"))),
    _L("F", "add_order_mpid", 40, (
        ("order_ref", "u8"), ("side", "c"), ("shares", "u4"), ("stock", "a8"), ("price", "p4"),
        ("attribution", "a4"))),
    _L("E", "order_executed", 31, (("order_ref", "u8"), ("executed_shares", "u4"), ("match_number", "u8"))),
    _L("C", "order_executed_price", 36, (
        ("order_ref", "u8"), ("executed_shares", "u4"), ("match_number", "u8"), ("printable", "c"),
        ("execution_price", "p4"))),
    _L("X", "order_cancel", 23, (("order_ref", "u8"), ("cancelled_shares", "u4"))),
    _L("D", "order_delete", 19, (("order_ref", "u8"),)),
    _L("U", "order_replace", 35, (
        ("order_ref", "u8"), ("new_order_ref", "u8"), ("shares", "u4"), ("price", "p4"))),
    _L("P", "trade", 44, (
        ("order_ref", "u8"), ("side", "c"), ("shares", "u4"), ("stock", "a8"), ("price", "p4"),
        ("match_number", "u8"))),
    _L("Q", "cross_trade", 40, (
        ("shares", "u8"), ("stock", "a8"), ("cross_price", "p4"), ("match_number", "u8"), ("cross_type", "c"))),
    _L("B", "broken_trade", 19, (("match_number", "u8"),)),
    _L("I", "noii", 50, (
        ("paired_shares", "u8"), ("imbalance_shares", "u8"), ("imbalance_direction", "c"), ("stock", "a8"),
        ("far_price", "p4"), ("near_price", "p4"), ("current_reference_price", "p4"), ("cross_type", "c"),
        ("price_variation_indicator", "c"))),
    _L("N", "rpii", 20, (("stock", "a8"), ("interest_flag", "c"))),
    _L("O", "dlcr_price_discovery", 48, (
        ("stock", "a8"), ("open_eligibility_status", "c"), ("min_allowable_price", "p4"),
        ("max_allowable_price", "p4"), ("near_execution_price", "p4"), ("near_execution_time", "u8"),
        ("lower_price_range_collar", "p4"), ("upper_price_range_collar", "p4"))),
)}

for _lay in LAYOUTS.values():  # the table is checked against the spec's lengths at import
    assert 11 + sum(field_size(k) for _, k in _lay.fields) == _lay.length, _lay.type

LENGTHS = {t: lay.length for t, lay in LAYOUTS.items()}
BY_NAME = {lay.name: lay for lay in LAYOUTS.values()}

PRICE4_SCALE = 10_000       # Price(4): integer units per dollar
PRICE8_SCALE = 100_000_000  # Price(8)

SCALES = {"p4": PRICE4_SCALE, "p8": PRICE8_SCALE}


def price_scales(t: str) -> dict[str, int]:
    """The price columns of message type t, each with its scale (integer units per dollar)."""
    return {name: SCALES[kind] for name, kind in LAYOUTS[t].fields if kind in SCALES}


def price_metadata(t: str) -> dict[str, str | None]:
    """The metadata a table of message type t carries about its prices: `price_scale` when
    every price column has the same scale (None: no price column, or several scales; each
    price column's field metadata says its own), and `price_columns`, comma-separated."""
    scales = price_scales(t)
    one = set(scales.values())
    return {"price_scale": str(one.pop()) if len(one) == 1 else None, "price_columns": ",".join(scales)}


# The tables an ITCH replay writes (lobreplay.itch.replay; named here, beside the message types,
# so that what a report directory may hold, lobreplay.replay.outdir, is known without the replay)
ALL_REPORTS = ("desyncs", "executions", "bbo", "latency", "symbols", "depth")  # depth: with depth_levels
STATUS_TYPES = "SHYLVWKJhINOB"  # tables of their own (R is the symbols table)
