"""Every report table's schema, for both venues, in one place, and the one vocabulary they share
(docs/reports.md, "One vocabulary").

The same thing has the same name on every venue:

    event_ns     the feed's own time of the event (ITCH: ns since midnight, exchange local
                 time, as ITCH sends it; .lobc: the exchange's event time, ns since the Unix
                 epoch, 0 where the venue sent none)
    event_ts     event_ns as a UTC timestamp (ITCH; null when the session date is unknown)
    receive_ns   when the recording machine received it, ns since the Unix epoch (.lobc only)
    receive_ts   receive_ns as a UTC timestamp (.lobc only)
    sequence     the row's place in the input: the ITCH message number, the .lobc record number
                 (0-based, in the file whatever the symbol selection)
    instrument   the core's book id (ITCH: the stock locate; .lobc: the symbol's index)
    symbol       the instrument's name, dictionary-encoded
    trade_id     the venue's id of a trade (ITCH: its match number; Binance: the trade id)

A replay writes a table with exactly the schema `schema(venue, name)` gives (plus its
provenance in the schema metadata); tests/test_report_schemas.py holds every table of a
replay of the sample day and of a .lobc file to it. RENAMES lists every column the
vocabulary renamed, per venue and table (tests/golden/make_report_digests.py maps the new
names back through it to compare the reports with those written before).

pyarrow is imported on first use (the schemas are built then): a replay without reports
never needs it.
"""
from __future__ import annotations

import functools

from lobreplay._lazy import Deferred

pa = Deferred("pyarrow")

VENUES = ("itch", "lobc")

# venue -> table -> {old column name: new}; the tables not named kept every name
RENAMES: dict[str, dict[str, dict[str, str]]] = {
    "itch": {
        "desyncs": {"time_ns": "event_ns", "ts": "event_ts", "message": "sequence", "locate": "instrument"},
        "executions": {"time_ns": "event_ns", "ts": "event_ts", "message": "sequence", "locate": "instrument",
                       "match_number": "trade_id"},
        "bbo": {"time_ns": "event_ns", "ts": "event_ts", "message": "sequence", "locate": "instrument"},
        "depth": {"time_ns": "event_ns", "ts": "event_ts", "locate": "instrument"},
        "latency": {"locate": "instrument"},
        "symbols": {"locate": "instrument"},
    },
    "lobc": {
        "bbo": {"recv_ns": "receive_ns", "exch_ns": "event_ns", "ts": "receive_ts", "record": "sequence"},
        "desyncs": {"recv_ns": "receive_ns", "exch_ns": "event_ns", "ts": "receive_ts", "record": "sequence"},
        "trades": {"recv_ns": "receive_ns", "exch_ns": "event_ns", "ts": "receive_ts", "record": "sequence"},
        "ticker_mismatches": {"recv_ns": "receive_ns", "ts": "receive_ts", "record": "sequence"},
        "depth": {"recv_ns": "receive_ns", "ts": "receive_ts", "record": "sequence"},
        "latency": {"locate": "instrument"},
    },
}

# integer (or timestamp) columns that rise row by row: written DELTA_BINARY_PACKED (tables.parquet_options)
DELTA_COLUMNS = ("event_ns", "event_ts", "receive_ns", "receive_ts", "sequence",
                 "message")  # (message: the status tables' decoded-message number)

ITCH_TABLES = ("desyncs", "executions", "bbo", "latency", "symbols")  # (+ depth, latency_histograms, status_*)
LOBC_TABLES = ("bbo", "desyncs", "trades", "ticker_mismatches", "latency")  # (+ depth, latency_histograms)


def _ts():
    return pa.timestamp("ns", tz="UTC")


def _symbol():
    return pa.dictionary(pa.int32(), pa.string())


def _state():
    return pa.dictionary(pa.int8(), pa.string())


def _itch_where() -> list:
    """Where an ITCH row is: its feed time, as UTC, its message, its book and symbol."""
    return [("event_ns", pa.int64()), ("event_ts", _ts()), ("sequence", pa.int64()),
            ("instrument", pa.uint16()), ("symbol", _symbol())]


def _lobc_where(event: bool = True) -> list:
    """Where a .lobc row is: its receive time, the exchange's time (event), the receive
    time as UTC, its record and symbol."""
    return ([("receive_ns", pa.int64())] + ([("event_ns", pa.int64())] if event else [])
            + [("receive_ts", _ts()), ("sequence", pa.int64()), ("symbol", _symbol())])


def latency_schema():
    return pa.schema([
        ("scope", pa.string()), ("instrument", pa.uint16()), ("kind", pa.string()), ("count", pa.int64()),
        ("p50_ns", pa.int64()), ("p90_ns", pa.int64()), ("p99_ns", pa.int64()), ("p99_9_ns", pa.int64()),
        ("max_ns", pa.int64()),
    ])


def latency_histograms_schema():
    return pa.schema([("kind", pa.string()), ("bucket_low_ns", pa.int64()), ("bucket_high_ns", pa.int64()),
                      ("count", pa.int64())])


@functools.cache
def itch_schemas() -> dict:
    """The ITCH replay's fixed tables (depth: itch_depth_schema; status_*: status_schema)."""
    return {
        "desyncs": pa.schema(_itch_where() + [
            ("order_ref", pa.uint64()), ("cause", pa.string()), ("other_ref", pa.uint64()),
            ("expected_qty", pa.int64()), ("found_qty", pa.int64()), ("expected_price", pa.int64()),
            ("found_price", pa.int64()),
        ]),
        "executions": pa.schema(_itch_where() + [
            ("source", pa.string()), ("msg_type", pa.string()), ("order_ref", pa.uint64()), ("qty", pa.int64()),
            ("price", pa.int64()), ("trade_id", pa.uint64()), ("printable", pa.string()),
            ("maker_remaining", pa.int64()),
        ]),
        "bbo": pa.schema(_itch_where() + [
            ("bid_price", pa.int64()), ("bid_qty", pa.int64()), ("bid_count", pa.uint32()),
            ("ask_price", pa.int64()), ("ask_qty", pa.int64()), ("ask_count", pa.uint32()),
            ("trading_state", _state()),
        ]),
        "latency": latency_schema(),
        "symbols": pa.schema([
            ("instrument", pa.uint16()), ("symbol", pa.string()), ("market_category", pa.string()),
            ("financial_status", pa.string()), ("round_lot_size", pa.uint32()), ("authenticity", pa.string()),
            ("replayed", pa.bool_()), ("band_low", pa.int64()), ("band_high", pa.int64()), ("tick", pa.int64()),
            ("levels", pa.int64()), ("extra_prices", pa.int64()), ("orders_outside_band", pa.int64()),
            ("capacity", pa.uint32()), ("min_price", pa.int64()), ("max_price", pa.int64()),
            ("messages", pa.uint64()), ("adds", pa.uint64()), ("deletes", pa.uint64()), ("replaces", pa.uint64()),
            ("executions", pa.uint64()), ("cancels", pa.uint64()), ("executed_shares", pa.uint64()),
            ("unknown_refs", pa.uint64()), ("peak_live", pa.uint32()), ("desyncs", pa.int64()),
            ("residual_orders", pa.int64()),
        ]),
    }


def itch_depth_schema(n: int):
    """depth.parquet of an ITCH replay: the sample (or change) time, the book, its trading
    state, then for i = 1..n each side's price, qty and order count."""
    return pa.schema([("event_ns", pa.int64()), ("event_ts", _ts()), ("instrument", pa.uint16()),
                      ("symbol", _symbol()), ("trading_state", _state())]
                     + [(f"{side}_{f}_{i}", t) for i in range(1, n + 1) for side in ("bid", "ask")
                        for f, t in (("price", pa.int64()), ("qty", pa.int64()), ("count", pa.uint32()))])


@functools.cache
def lobc_schemas() -> dict:
    """The .lobc replay's fixed tables (depth: lobc_depth_schema)."""
    return {
        "bbo": pa.schema(_lobc_where() + [
            ("update_id", pa.uint64()), ("bid_price", pa.int64()), ("bid_qty", pa.int64()),
            ("ask_price", pa.int64()), ("ask_qty", pa.int64()),
        ]),
        "desyncs": pa.schema(_lobc_where() + [
            ("cause", pa.string()), ("first_id", pa.uint64()), ("last_id", pa.uint64()), ("side", pa.string()),
            ("price", pa.int64()), ("qty", pa.int64()), ("other_price", pa.int64()), ("other_qty", pa.int64()),
        ]),
        "trades": pa.schema(_lobc_where() + [
            ("trade_id", pa.uint64()), ("price", pa.int64()), ("qty", pa.int64()), ("side", pa.string()),
        ]),
        "ticker_mismatches": pa.schema(_lobc_where(event=False) + [
            ("update_id", pa.uint64()), ("ticker_id", pa.uint64()),
            ("book_bid_price", pa.int64()), ("book_bid_qty", pa.int64()),
            ("book_ask_price", pa.int64()), ("book_ask_qty", pa.int64()),
            ("ticker_bid_price", pa.int64()), ("ticker_bid_qty", pa.int64()),
            ("ticker_ask_price", pa.int64()), ("ticker_ask_qty", pa.int64()),
        ]),
        "latency": latency_schema(),
    }


def lobc_depth_schema(n: int):
    """depth.parquet of a .lobc replay: the sample time, the last record it holds, the book's
    last update id and sync state, then the N best levels of each side (docs/l2.md)."""
    return pa.schema(_lobc_where(event=False) + [("update_id", pa.uint64()), ("synced", pa.bool_())]
                     + [(f"{side}_{f}_{i}", pa.int64()) for i in range(1, n + 1) for side in ("bid", "ask")
                        for f in ("price", "qty")])


_STATUS_INT = {"u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64"}


def status_schema(fields, scales: dict):
    """status_<t>_<name>.parquet of an ITCH replay: the decoded messages of type t as
    `itch decode` writes them (lobreplay.itch.decode.to_arrow): `message`, then the header
    and the type's fields under the spec's names; a price column's field metadata holds its
    price_scale. fields: the (name, kind) pairs of the header and the type
    (lobreplay.itch.spec: HEADER + LAYOUTS[t].fields), scales: price_scales(t) (given, not
    imported: the venues import the reports, not the other way)."""
    out = [pa.field("message", pa.int64())]
    for name, kind in fields:
        if kind in _STATUS_INT:
            typ = getattr(pa, _STATUS_INT[kind])()
        elif kind in ("u6", "p4", "p8"):
            typ = pa.int64()
        else:  # c, aN
            typ = pa.string()
        out.append(pa.field(name, typ, metadata={"price_scale": str(scales[name])} if name in scales else None))
    return pa.schema(out)


def schema(venue: str, name: str, depth_levels: int = 0):
    """The schema of report `name` of a replay of `venue` ("itch" or "lobc"): a fixed table,
    "depth" (with depth_levels levels) or "latency_histograms" (an ITCH status table:
    status_schema)."""
    if venue not in VENUES:
        raise ValueError(f"venue: expected one of {', '.join(VENUES)}, got {venue!r}")
    if name == "depth":
        return itch_depth_schema(depth_levels) if venue == "itch" else lobc_depth_schema(depth_levels)
    if name == "latency_histograms":
        return latency_histograms_schema()
    fixed = itch_schemas() if venue == "itch" else lobc_schemas()
    if name not in fixed:
        raise KeyError(f"no {venue} report named {name!r}")
    return fixed[name]


def renamed(venue: str, table: str) -> dict[str, str]:
    """{old column name: new} of one table (depth's level columns kept their names)."""
    return RENAMES.get(venue, {}).get(table, {})


def time_column(names) -> str | None:
    """The column a table's rows run by in time, of a table with these column names: its
    receive_ns if it has one (the .lobc tables: a replay runs by the receive clock), else
    its event_ns (the ITCH tables); None if it has neither."""
    return next((c for c in ("receive_ns", "event_ns") if c in names), None)


def timestamp_column(names) -> str | None:
    """time_column's UTC timestamp twin (receive_ts, event_ts) in a table with these names."""
    return next((c for c in ("receive_ts", "event_ts") if c in names), None)
