"""A static HTML book viewer for a replay's reports (`lobreplay view REPORT_DIR -o book.html`).

build_view() reads the Parquet reports of one symbol (depth.parquet, or bbo.parquet as a
1-level ladder when there is no depth.parquet; executions.parquet, or a .lobc replay's
trades.parquet; latency.parquet; symbols.parquet) and writes one self-contained page: inline
vanilla JavaScript and SVG, no network, no server. The page animates the depth ladder frame
by frame with the trade tape (the trades up to the frame's time) and shows the core's
latency percentiles. An ITCH replay's times are ns since midnight (US Eastern); a .lobc
replay's are receive times since the epoch, shown as the UTC time of day, and its
quantities are scaled (qty_scale).

It stays light on a full day: at most `max_frames` frames (taken evenly from the symbol's
samples), at most `tape_per_frame` tape rows per frame (only the executions some frame shows
are embedded), and prices as the feed's integers, turned into dollars in the page with
`price_scale` from the Parquet metadata. See docs/viewer.md.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lobreplay.errors import InputError, refuse_input_as_output
from lobreplay.reports import schemas

DEFAULT_MAX_FRAMES = 2000
DEFAULT_TAPE_PER_FRAME = 12
LAT_COLS = ("count", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "max_ns")


def _meta(path: str) -> dict:
    md = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode(errors="replace") for k, v in md.items()}


def _read(path: str, columns=None, symbol: str | None = None):
    filters = [("symbol", "=", symbol)] if symbol is not None else None
    return pq.read_table(path, columns=columns, filters=filters)


def _symbol_rows(path: str, sym: str, columns: list[str], max_frames: int, time_col: str = "event_ns"):
    """The rows of one symbol, in time order, downsampled evenly to max_frames: (table, rows
    available). Reads the symbol and time columns first, then only the row groups that hold a
    picked row (a report written sample by sample has many small row groups)."""
    f = pq.ParquetFile(path)
    key = f.read(columns=[time_col, "symbol"])
    mask_parts = []
    for chunk in key.column("symbol").chunks:
        if isinstance(chunk, pa.DictionaryArray):
            values = chunk.dictionary.to_pylist()
            codes = chunk.indices.to_numpy(zero_copy_only=False)
            mask_parts.append(codes == values.index(sym) if sym in values else np.zeros(len(chunk), bool))
        else:
            mask_parts.append(np.asarray(chunk.to_numpy(zero_copy_only=False) == sym, bool))
    mask = np.concatenate(mask_parts) if mask_parts else np.zeros(0, bool)
    rows = np.flatnonzero(mask)
    n_avail = len(rows)
    if not n_avail:
        return None, 0
    times = key.column(time_col).to_numpy()[rows]
    rows = rows[np.argsort(times, kind="stable")]
    picked = rows[_even(n_avail, max_frames)]
    nr = np.array([f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)], np.int64)
    starts = np.cumsum(nr) - nr
    rg_of = np.searchsorted(starts, picked, side="right") - 1
    groups = np.unique(rg_of)
    t = f.read_row_groups(groups.tolist(), columns=columns)
    base = np.cumsum(nr[groups]) - nr[groups]  # where each read group starts in t
    local = base[np.searchsorted(groups, rg_of)] + (picked - starts[rg_of])
    return t.take(pa.array(local)), n_avail


def _most_active(report_dir: str, have: dict) -> str:
    """The replayed symbol with the most messages (symbols.parquet), else the one with the
    most rows in the frame source."""
    sp = os.path.join(report_dir, "symbols.parquet")
    if os.path.exists(sp):
        t = pq.read_table(sp, columns=["symbol", "messages", "replayed"]).to_pandas()
        t = t[t["replayed"]]
        if len(t):
            t = t.sort_values(["messages", "symbol"], ascending=[False, True], kind="stable")
            return str(t["symbol"].iloc[0])
    src = have.get("depth") or have.get("bbo")
    counts = pq.read_table(src, columns=["symbol"]).column("symbol").to_pandas().astype(str).value_counts()
    if not len(counts):
        raise InputError(f"{src}: no rows, nothing to show")
    return str(counts.sort_index().idxmax())


def _even(n: int, k: int) -> np.ndarray:
    """k indices of 0..n-1 spread evenly, first and last included (all if n <= k)."""
    if n <= k:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(np.int64))


def _trim(row) -> list[int]:
    row = [int(x) for x in row]
    while row and row[-1] == 0:
        row.pop()
    return row


def _decimals(prices: np.ndarray, scale: int) -> int:
    """2 (cents) when every price is on the cent grid, else all the digits of the scale."""
    full = max(0, round(math.log10(scale))) if scale > 0 else 0
    if full <= 2:
        return full
    cent = scale // 100
    p = prices[prices != 0]
    return 2 if (p % cent == 0).all() else full


def fmt_price(p: int, scale: int, decimals: int) -> str:
    """A feed price as dollars, as the page shows it (exact integer arithmetic)."""
    if p == 0:
        return ""
    sign = "-" if p < 0 else ""
    whole, frac = divmod(abs(int(p)), scale)
    full = max(0, round(math.log10(scale)))
    digits = str(frac).rjust(full, "0")[:decimals]
    return f"{sign}{whole}" + (f".{digits}" if decimals else "")


def _tape_window(tape_times: np.ndarray, frame_times: np.ndarray, before: bool, per_frame: int):
    """Which tape rows (sorted by time) some frame shows: the last per_frame up to the frame's
    time (before: strictly before it, as a depth sample; else up to and including it, as a
    bbo change). Returns (the rows kept: a mask, each frame's end in the kept rows)."""
    end = np.searchsorted(tape_times, frame_times, side="left" if before else "right")
    keep = np.zeros(len(tape_times), bool)
    for a, b in zip(np.maximum(end - per_frame, 0), end):
        keep[a:b] = True
    new_pos = np.cumsum(keep) - 1  # position of each kept row in the embedded tape
    return keep, [int(new_pos[e - 1] + 1) if e > 0 else 0 for e in end]


def fmt_qty(q: int, qty_scale: int) -> str:
    """A quantity as the page shows it: with thousands separators, and for a scaled quantity
    (a .lobc replay's, qty_scale units per 1) its decimals without trailing zeros."""
    whole, frac = divmod(int(q), qty_scale)
    text = f"{whole:,}"
    if qty_scale > 1 and frac:
        text += "." + str(frac).rjust(round(math.log10(qty_scale)), "0").rstrip("0")
    return text


def fmt_time(ns: int) -> str:
    """ns since midnight as HH:MM:SS.mmm, as the page shows it."""
    s, rem = divmod(int(ns), 1_000_000_000)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{h:02d}:{m:02d}:{s:02d}.{rem // 1_000_000:03d}"


REPORTS_READ = ("depth", "bbo", "executions", "trades", "latency", "symbols")  # the tables a page is made of
REPORT_FILES = tuple(f"{n}.parquet" for n in REPORTS_READ) + ("summary.json",)  # every file build_view reads


def build_view(report_dir, out_html, *, symbol: str | None = None, max_frames: int = DEFAULT_MAX_FRAMES,
               tape_per_frame: int = DEFAULT_TAPE_PER_FRAME) -> dict:
    """Write the viewer page for one symbol of a replay's reports; return what was sampled."""
    report_dir = os.fspath(report_dir)
    out_html = os.fspath(out_html)
    if max_frames < 1:
        raise InputError(f"max_frames must be at least 1 (got {max_frames})")
    if not os.path.isdir(report_dir):
        raise InputError(f"{report_dir}: not a directory (expected the reports of `lobreplay itch replay` or "
                         "`lobreplay replay FILE.lobc`)")
    refuse_input_as_output(out_html, [os.path.join(report_dir, n) for n in REPORT_FILES])
    have = {n: os.path.join(report_dir, f"{n}.parquet") for n in REPORTS_READ}
    have = {n: p for n, p in have.items() if os.path.exists(p)}
    for p in have.values():  # a file cut short or not Parquet at all: say which, before reading any
        try:
            pq.read_metadata(p)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"{p}: not a whole Parquet file ({e})") from None
    if "depth" not in have and "bbo" not in have:
        raise InputError(f"{report_dir}: neither depth.parquet nor bbo.parquet; replay with --depth N "
                         "(or with the bbo report) to view a book")
    notes: list[str] = []
    sp = os.path.join(report_dir, "summary.json")
    if os.path.exists(sp):  # a replay that stopped part way: the page shows what it wrote, and says so
        with contextlib.suppress(OSError, ValueError):
            with open(sp) as f:
                run = json.load(f)
            if run.get("status") != "ok":
                at = run.get("stopped_at") or {}
                where = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in at.items())
                notes.append(f"This replay did not finish (status {run.get('status')}: {run.get('error')}"
                             f"{'; stopped at ' + where if where else ''}): the page shows what it wrote.")
    source = "depth" if "depth" in have else "bbo"
    names = pq.read_schema(have[source]).names
    # the rows' clock (schemas.time_column): an ITCH replay's event_ns (ns since midnight, US
    # Eastern), a .lobc replay's receive_ns (ns since the Unix epoch: the page shows the UTC
    # time of day, the date beside it)
    time_col = schemas.time_column(names)
    if time_col is None:
        raise InputError(f"{report_dir}: {source}.parquet has neither event_ns nor receive_ns: not the reports of "
                         "`lobreplay itch replay` or `lobreplay replay FILE.lobc`")
    l2 = time_col == "receive_ns"
    if source == "bbo":
        notes.append("No depth.parquet in the report directory: the ladder is the best bid and offer only "
                     "(bbo.parquet, one level). Replay with --depth N --every 1s for N levels.")
    meta = _meta(have[source])
    scale = int(meta.get("price_scale") or 10000)
    qscale = int(meta.get("qty_scale") or 1) if l2 else 1
    sym = symbol if symbol is not None else _most_active(report_dir, have)

    # Frames: the symbol's rows of the frame source, downsampled evenly. (A .lobc replay's book
    # holds one synthetic order per level: no order counts to show.)
    fields = ("price", "qty") if l2 else ("price", "qty", "count")
    if source == "depth":
        levels = sum(1 for n in names if re.fullmatch(r"bid_price_\d+", n))
        cols = [f"{s}_{f}_{i}" for i in range(1, levels + 1) for s in ("bid", "ask") for f in fields]
    else:
        levels = 1
        cols = [f"{s}_{f}" for s in ("bid", "ask") for f in fields]
    t, n_avail = _symbol_rows(have[source], sym, [time_col] + cols, max_frames, time_col)
    if not n_avail:
        raise InputError(f"{sym}: no rows in {os.path.basename(have[source])} (is the symbol in this replay?)")
    times = t.column(time_col).to_numpy().astype(np.int64)
    day0 = 0
    if l2:  # the UTC time of day, from midnight of the first frame's day
        day0 = int(times[0]) // 86_400_000_000_000 * 86_400_000_000_000
        meta.setdefault("session_date", str(np.datetime64(day0, "ns").astype("datetime64[D]")))
        times = times - day0
    arr = {c: t.column(c).to_numpy().astype(np.int64) for c in cols}
    if l2:
        for c in [c for c in cols if "_price" in c]:
            arr[c.replace("_price", "_count")] = (arr[c] != 0).astype(np.int64)
    if source == "depth":
        def side(s, f):
            return np.stack([arr[f"{s}_{f}_{i}"] for i in range(1, levels + 1)], axis=1)
    else:
        def side(s, f):
            return arr[f"{s}_{f}"][:, None]
    lad = {k: side(s, f) for k, (s, f) in {"bp": ("bid", "price"), "bq": ("bid", "qty"), "bc": ("bid", "count"),
                                           "ap": ("ask", "price"), "aq": ("ask", "qty"),
                                           "ac": ("ask", "count")}.items()}
    frames = {"t": times.tolist(), **{k: [_trim(r) for r in v] for k, v in lad.items()}}

    # Tape: the feed's executions of the symbol; each frame shows the last tape_per_frame
    # up to its time (depth: before T, as the sample; bbo: up to and including the change).
    tape = {"t": [], "ty": [], "q": [], "p": [], "m": []}
    tape_end: list[int] = []
    feed_total = 0
    prices_for_dec = [lad["bp"].ravel(), lad["ap"].ravel()]
    # (the venue's prints: a .lobc replay's trades, an ITCH replay's executions, whose feed
    # rows are the prints and whose core rows give an E its price; the same columns otherwise)
    tape_table = "trades" if "trades" in have else "executions" if "executions" in have else None
    if tape_table is None:
        notes.append(f"No {'trades' if l2 else 'executions'}.parquet: no trade tape.")
    else:
        tnames = pq.read_schema(have[tape_table]).names
        tcol = schemas.time_column(tnames)
        kind = "side" if "side" in tnames else "msg_type"
        rows = _read(have[tape_table], [tcol, "sequence", "qty", "price", kind]
                     + (["source"] if "source" in tnames else []), sym).to_pandas()
        core = rows[rows["source"] == "core"] if "source" in rows else rows.iloc[:0]
        feed = rows[rows["source"] == "feed"] if "source" in rows else rows
        feed = feed.sort_values([tcol, "sequence"], kind="stable")
        feed_total = len(feed)
        keep, tape_end = _tape_window(feed[tcol].to_numpy().astype(np.int64) - day0, times, source == "depth",
                                      tape_per_frame)
        kf = feed[keep]
        price = kf["price"].to_numpy().astype(np.int64)
        # An ITCH E carries no price (the order's own applies): the core's level for the same message.
        core_price = dict(zip(core["sequence"].tolist(), core["price"].tolist()))
        seqs = kf["sequence"].tolist()
        price = [int(p) if p else int(core_price.get(m, 0)) for p, m in zip(price, seqs)]
        tape = {"t": (kf[tcol].to_numpy().astype(np.int64) - day0).tolist(),
                "ty": [{"B": "buy", "S": "sell"}.get(x, x) if kind == "side" else x
                       for x in kf[kind].astype(str).tolist()],
                "q": kf["qty"].astype(np.int64).tolist(), "p": price, "m": [int(m) for m in seqs]}
        prices_for_dec.append(np.asarray(price, np.int64))
    decimals = _decimals(np.concatenate(prices_for_dec), scale)

    # Latency: the symbol's rows and the whole replay's (scope ALL).
    lat_rows = []
    if "latency" in have:
        lt = pq.read_table(have["latency"]).to_pandas()
        for scope in ("ALL", sym):
            for r in lt[lt["scope"].astype(str) == scope].itertuples(index=False):
                lat_rows.append({"scope": "ALL" if scope == "ALL" else "SYMBOL", "kind": str(r.kind),
                                 **{c: int(getattr(r, c)) for c in LAT_COLS}})
        if not any(r["scope"] == "SYMBOL" for r in lat_rows):
            notes.append(f"latency.parquet has no rows for {sym}.")
    else:
        notes.append("No latency.parquet (replayed with --no-timing?): no latency figures.")

    sampled = {
        "symbol": sym, "source": source, "levels": levels, "price_scale": scale, "decimals": decimals,
        "qty_scale": qscale, "feed": "lobc" if l2 else "itch",
        "frames": len(times), "frames_available": int(n_avail), "frames_dropped": int(n_avail - len(times)),
        "tape_rows": len(tape["t"]), "tape_rows_available": int(feed_total),
        "tape_rows_dropped": int(feed_total - len(tape["t"])), "tape_per_frame": tape_per_frame,
        "latency_rows": len(lat_rows),
        "first_time_ns": int(times[0]), "last_time_ns": int(times[-1]),
    }
    if sampled["frames_dropped"]:
        notes.append(f"{n_avail:,} {source} rows for {sym}: {len(times):,} frames shown, taken evenly "
                     f"({sampled['frames_dropped']:,} dropped).")
    data = {
        "symbol": sym, "date": meta.get("session_date") or "", "source_file": meta.get("source_file") or "",
        "version": meta.get("lobreplay_version") or "", "scale": scale, "dec": decimals, "qscale": qscale,
        "tz": "UTC" if l2 else "ET", "counts": not l2,
        "tapeWhat": "trades (the aggressor's side)" if l2 else "feed executions",
        "source": source, "levels": levels, "frames": frames, "tape": tape, "tapeEnd": tape_end,
        "tapePerFrame": tape_per_frame, "lat": lat_rows, "latCols": list(LAT_COLS), "notes": notes,
        "sampled": sampled,
    }
    page = render_page(f"{sym} book — lobreplay", data)
    parent = os.path.dirname(os.path.abspath(out_html))
    up = parent
    while not os.path.exists(up):  # (makedirs would say "File exists" of a file on the way)
        up = os.path.dirname(up)
    if not os.path.isdir(up):
        raise InputError(f"{out_html}: cannot create it: {up} is a file, not a directory")
    os.makedirs(parent, exist_ok=True)
    tmp = out_html + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, out_html)
    except BaseException:  # a full disk, Ctrl-C: no half-written page left beside it
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    sampled["bytes"] = os.path.getsize(out_html)
    sampled["path"] = out_html
    sampled["notes"] = notes
    return sampled


def embed_json(data) -> str:
    """data as JSON to put inside a <script> element: every <, > and & written as a \\u
    escape (the same string to JSON.parse), so that no text from data (a symbol or file
    name holding </script> or <!--<script>) can end the element or change how the page
    parses it."""
    text = json.dumps(data, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(title: str, data) -> str:
    """The page: the template's placeholders filled in one pass each, the title before the
    data goes in and the data by concatenation, so that no placeholder written in the data
    (a symbol holding __TITLE__) is ever substituted."""
    head, tail = _TEMPLATE.split("/*__DATA__*/")
    return head.replace("__TITLE__", _html_escape(title)) + embed_json(data) + tail


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>__TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{display:flex;gap:16px;align-items:baseline;padding:8px 14px;background:#1d2330;color:#fff}
header h1{font-size:18px;margin:0}
header .sub{color:#aab3c5}
#controls{display:flex;gap:10px;align-items:center;padding:8px 14px;background:#fff;border-bottom:1px solid #dde1e8}
#controls button{font:inherit;padding:3px 12px;min-width:70px}
#slider{flex:1}
#time{font:600 15px ui-monospace,Menlo,Consolas,monospace}
#notes{margin:6px 14px;padding:0;list-style:none;color:#8a5a00}
#notes li{background:#fff6e0;border:1px solid #f0d9a0;padding:3px 8px;margin:3px 0}
main{display:grid;grid-template-columns:minmax(380px,1.1fr) minmax(300px,1fr);gap:12px;padding:8px 14px}
section{background:#fff;border:1px solid #dde1e8;border-radius:4px;padding:8px}
h2{font-size:13px;margin:0 0 6px;text-transform:uppercase;letter-spacing:.04em;color:#56607a}
table{border-collapse:collapse;width:100%;font:12px ui-monospace,Menlo,Consolas,monospace}
td,th{padding:1px 6px;text-align:right;white-space:nowrap}
th{color:#56607a;font-weight:600;border-bottom:1px solid #dde1e8}
#ladder td{height:17px;position:relative}
#ladder td.px{text-align:center;font-weight:600}
tr.bid td.px{color:#0a7a3a} tr.ask td.px{color:#b3261e}
td .bar{position:absolute;top:2px;bottom:2px;opacity:.22}
tr.bid td.q .bar{right:0;background:#0a9a4a} tr.ask td.q .bar{left:0;background:#d2382e}
td .v{position:relative}
tr.spread td{border-top:1px dashed #bbb;border-bottom:1px dashed #bbb;color:#56607a;text-align:center}
#tape tr.new td{background:#fff3b0}
#chart,#latchart{width:100%;display:block}
.right{grid-column:2}
small{color:#56607a}
</style></head>
<body>
<header><h1 id="symbol"></h1><span class="sub" id="subtitle"></span></header>
<div id="controls">
<button id="play" type="button">Play</button>
<button id="step-back" type="button" title="previous frame (←)">&#9664;</button>
<button id="step-fwd" type="button" title="next frame (→)">&#9654;</button>
<label>speed <select id="speed"><option value="2">2 fps</option><option value="5">5 fps</option>
<option value="10" selected>10 fps</option><option value="25">25 fps</option><option value="60">60 fps</option></select></label>
<input id="slider" type="range" min="0" max="0" value="0" step="1">
<span id="time"></span><small id="frame-info"></small>
</div>
<ul id="notes"></ul>
<main>
<section id="ladder-box"><h2>Depth ladder <small id="ladder-src"></small></h2>
<table id="ladder"><thead><tr><th class="cnt">orders</th><th>bid size</th><th style="text-align:center">price</th><th>ask size</th><th class="cnt">orders</th></tr></thead>
<tbody id="ladder-body"></tbody></table>
<h2 style="margin-top:10px">Best bid / ask over the frames <small>(click to seek)</small></h2>
<svg id="chart" viewBox="0 0 600 150" preserveAspectRatio="none" height="150"></svg>
</section>
<div>
<section><h2>Trade tape <small id="tape-info"></small></h2>
<table><thead><tr><th id="tape-time">time</th><th>type</th><th>size</th><th>price</th></tr></thead>
<tbody id="tape"></tbody></table></section>
<section style="margin-top:12px"><h2>Latency of the replay <small>(core service time per event, ns)</small></h2>
<svg id="latchart" viewBox="0 0 600 170" height="170"></svg>
<table id="latency-table"><thead><tr><th style="text-align:left">scope</th><th style="text-align:left">kind</th>
<th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr></thead><tbody></tbody></table>
<small id="lat-note"></small></section>
</div>
</main>
<script type="application/json" id="data">/*__DATA__*/</script>
<script>
"use strict";
(function () {
  var D = JSON.parse(document.getElementById("data").textContent);
  var F = D.frames, T = D.tape, N = F.t.length, SC = D.scale, DEC = D.dec, QSC = D.qscale || 1;
  var FULL = Math.round(Math.log10(SC)), QFULL = Math.round(Math.log10(QSC));
  var SVGNS = "http://www.w3.org/2000/svg";
  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) if (attrs[k] !== undefined) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function sv(tag, attrs) { var e = document.createElementNS(SVGNS, tag); for (var k in attrs) e.setAttribute(k, attrs[k]); return e; }
  function px(p) {              // integer feed price -> dollars, exact
    if (!p) return "";
    var neg = p < 0; p = Math.abs(p);
    var w = Math.floor(p / SC), f = String(p % SC);
    while (f.length < FULL) f = "0" + f;
    return (neg ? "-" : "") + w + (DEC ? "." + f.slice(0, DEC) : "");
  }
  function num(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function qn(q) {              // a quantity: whole units with separators, a scaled one's decimals
    if (QSC === 1) return num(q);
    var f = String(q % QSC);
    while (f.length < QFULL) f = "0" + f;
    f = f.replace(/0+$/, "");
    return num(Math.floor(q / QSC)) + (f ? "." + f : "");
  }
  function tm(ns) {
    var s = Math.floor(ns / 1e9), ms = Math.floor((ns % 1e9) / 1e6);
    function two(x) { return (x < 10 ? "0" : "") + x; }
    return two(Math.floor(s / 3600)) + ":" + two(Math.floor(s / 60) % 60) + ":" + two(s % 60) + "." + ("00" + ms).slice(-3);
  }

  $("symbol").textContent = D.symbol;
  $("subtitle").textContent = [D.date, D.source_file, D.source === "depth" ? D.levels + " levels from depth.parquet" : "top of book from bbo.parquet",
    num(N) + " frames", "lobreplay " + D.version].filter(Boolean).join(" · ");
  $("ladder-src").textContent = D.source === "depth" ? "(depth.parquet, " + D.levels + " levels)" : "(bbo.parquet: best bid and offer only)";
  D.notes.forEach(function (n) { $("notes").appendChild(el("li", {}, n)); });
  $("tape-info").textContent = "(" + D.tapeWhat + " before the frame's time, last " + D.tapePerFrame + ")";
  $("tape-time").textContent = "time (" + D.tz + ")";
  if (!D.counts) Array.prototype.forEach.call(document.querySelectorAll("#ladder th.cnt"), function (t) { t.textContent = ""; });

  // ---- ladder rows, made once, filled per frame
  var body = $("ladder-body"), L = D.levels, rows = { ask: [], bid: [] };
  function mkRow(side, lvl) {
    var tr = el("tr", { "class": side + " lvl", "data-side": side, "data-level": lvl });
    var cells = [el("td", { "class": "c" }), el("td", { "class": "q" }), el("td", { "class": "px" }), el("td", { "class": "q" }), el("td", { "class": "c" })];
    cells.forEach(function (c) { tr.appendChild(c); });
    var qi = side === "bid" ? 1 : 3, ci = side === "bid" ? 0 : 4;
    var bar = el("span", { "class": "bar" }), v = el("span", { "class": "v" });
    cells[qi].appendChild(bar); cells[qi].appendChild(v);
    return { tr: tr, px: cells[2], q: v, bar: bar, c: cells[ci] };
  }
  for (var i = L; i >= 1; i--) { var r = mkRow("ask", i); rows.ask[i - 1] = r; body.appendChild(r.tr); }
  var spread = el("tr", { "class": "spread" }); var spreadTd = el("td", { colspan: 5, id: "spread" }); spread.appendChild(spreadTd); body.appendChild(spread);
  for (i = 1; i <= L; i++) { r = mkRow("bid", i); rows.bid[i - 1] = r; body.appendChild(r.tr); }

  function fill(side, k) {
    var P = F[side[0] + "p"][k], Q = F[side[0] + "q"][k], C = F[side[0] + "c"][k], mx = 1;
    for (var j = 0; j < Q.length; j++) if (P[j] && Q[j] > mx) mx = Q[j];
    return { P: P, Q: Q, C: C, mx: mx };
  }
  function renderLadder(k) {
    var b = fill("bid", k), a = fill("ask", k), mx = Math.max(b.mx, a.mx);
    [["bid", b], ["ask", a]].forEach(function (sd) {
      var side = sd[0], s = sd[1];
      for (var j = 0; j < L; j++) {
        var r = rows[side][j], p = s.P[j] || 0, q = s.Q[j] || 0;
        if (p || q) {
          r.tr.setAttribute("data-price", p); r.tr.setAttribute("data-qty", q); r.tr.setAttribute("data-count", s.C[j] || 0);
          r.tr.classList.remove("empty");
          r.px.textContent = px(p); r.q.textContent = qn(q); r.c.textContent = D.counts ? num(s.C[j] || 0) : "";
          r.bar.style.width = (100 * q / mx).toFixed(1) + "%";
        } else {
          r.tr.removeAttribute("data-price"); r.tr.removeAttribute("data-qty"); r.tr.removeAttribute("data-count");
          r.tr.classList.add("empty");
          r.px.textContent = ""; r.q.textContent = ""; r.c.textContent = ""; r.bar.style.width = "0";
        }
      }
    });
    var bb = b.P[0] || 0, ba = a.P[0] || 0;
    spreadTd.textContent = bb && ba ? "spread " + px(ba - bb) + "  ·  mid " + px(Math.round((ba + bb) / 2)) : (bb || ba ? "one side empty" : "book empty");
  }

  // ---- tape
  var tapeBody = $("tape"), prevEnd = -1;
  function renderTape(k) {
    var end = D.tapeEnd.length ? D.tapeEnd[k] : 0, start = Math.max(0, end - D.tapePerFrame);
    while (tapeBody.firstChild) tapeBody.removeChild(tapeBody.firstChild);
    for (var j = end - 1; j >= start; j--) {
      var tr = el("tr", { "class": "trade" + (prevEnd >= 0 && j >= prevEnd ? " new" : ""), "data-message": T.m[j], "data-qty": T.q[j], "data-price": T.p[j], "data-time-ns": T.t[j] });
      tr.appendChild(el("td", {}, tm(T.t[j]))); tr.appendChild(el("td", {}, T.ty[j]));
      tr.appendChild(el("td", {}, qn(T.q[j]))); tr.appendChild(el("td", {}, T.p[j] ? px(T.p[j]) : "—"));
      tapeBody.appendChild(tr);
    }
    if (end === start) { var e = el("tr", { "class": "no-trades" }); e.appendChild(el("td", { colspan: 4, style: "text-align:center;color:#888" }, "no executions yet")); tapeBody.appendChild(e); }
    prevEnd = end;
  }

  // ---- best bid/ask chart with a cursor
  var chart = $("chart"), W = 600, H = 150, cursor;
  (function () {
    var lo = Infinity, hi = -Infinity;
    for (var k = 0; k < N; k++) { var b = F.bp[k][0] || 0, a = F.ap[k][0] || 0;
      if (b) { lo = Math.min(lo, b); hi = Math.max(hi, b); } if (a) { lo = Math.min(lo, a); hi = Math.max(hi, a); } }
    if (lo === Infinity) { lo = 0; hi = 1; } if (hi === lo) { hi = lo + 1; }
    function x(k) { return N > 1 ? 4 + (W - 8) * k / (N - 1) : W / 2; }
    function y(p) { return H - 14 - (H - 24) * (p - lo) / (hi - lo); }
    ["bp", "ap"].forEach(function (key) {
      var d = "", pen = false;
      for (var k = 0; k < N; k++) { var p = F[key][k][0] || 0;
        if (p) { d += (pen ? "L" : "M") + x(k).toFixed(1) + " " + y(p).toFixed(1); pen = true; } else pen = false; }
      chart.appendChild(sv("path", { d: d, fill: "none", stroke: key === "bp" ? "#0a9a4a" : "#d2382e", "stroke-width": 1.2, "vector-effect": "non-scaling-stroke" }));
    });
    var t1 = sv("text", { x: 4, y: 10, "font-size": 10, fill: "#56607a" }); t1.textContent = "$" + px(hi); chart.appendChild(t1);
    var t2 = sv("text", { x: 4, y: H - 2, "font-size": 10, fill: "#56607a" }); t2.textContent = "$" + px(lo); chart.appendChild(t2);
    cursor = sv("line", { y1: 0, y2: H, stroke: "#1d2330", "stroke-width": 1, "vector-effect": "non-scaling-stroke" });
    chart.appendChild(cursor);
    chart.addEventListener("click", function (ev) {
      var r = chart.getBoundingClientRect(); show(Math.round((N - 1) * (ev.clientX - r.left) / r.width));
    });
    chart.cursorX = x;
  })();

  // ---- latency table and bar chart
  (function () {
    var tb = $("latency-table").tBodies[0], cols = D.latCols;
    D.lat.forEach(function (r) {
      var tr = el("tr", { "class": "lat", "data-scope": r.scope, "data-kind": r.kind });
      tr.appendChild(el("td", { style: "text-align:left" }, r.scope === "ALL" ? "all symbols" : D.symbol));
      tr.appendChild(el("td", { style: "text-align:left" }, r.kind));
      cols.forEach(function (c) { tr.appendChild(el("td", { "data-col": c, "data-value": r[c] }, num(r[c]))); });
      tb.appendChild(tr);
    });
    if (!D.lat.length) { $("lat-note").textContent = "no latency figures in this report"; return; }
    $("lat-note").textContent = "Bars: kind ALL, log scale. The symbol's figures come from its book's coarse histogram (low edge of a bucket up to 25 % wide); the whole replay's to 3 significant figures.";
    var svg = $("latchart"), pcs = ["p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "max_ns"], lab = ["p50", "p90", "p99", "p99.9", "max"];
    var sel = D.lat.filter(function (r) { return r.kind === "ALL"; });
    var mx = 1; sel.forEach(function (r) { pcs.forEach(function (c) { mx = Math.max(mx, r[c]); }); });
    var lmax = Math.log10(mx) + 0.1, x0 = 48, w = 600 - x0 - 70, bh = 12;
    function xs(v) { return x0 + w * Math.max(0, Math.log10(Math.max(v, 1))) / lmax; }
    for (var d = 1; d <= mx * 1.3; d *= 10) {
      svg.appendChild(sv("line", { x1: xs(d), x2: xs(d), y1: 0, y2: 158, stroke: "#e3e6ec" }));
      var tl = sv("text", { x: xs(d), y: 168, "font-size": 9, "text-anchor": "middle", fill: "#56607a" }); tl.textContent = d >= 1000 ? (d / 1000) + "µs" : d + "ns"; svg.appendChild(tl);
    }
    pcs.forEach(function (c, i) {
      var gy = 4 + i * 31;
      var t = sv("text", { x: 2, y: gy + bh + 3, "font-size": 10, fill: "#1d2330" }); t.textContent = lab[i]; svg.appendChild(t);
      sel.forEach(function (r, j) {
        var y = gy + j * (bh + 1), v = r[c];
        svg.appendChild(sv("rect", { x: x0, y: y, width: Math.max(1, xs(v) - x0), height: bh, fill: r.scope === "ALL" ? "#7a8599" : "#3d6fd8", "class": "latbar", "data-scope": r.scope, "data-col": c }));
        var vt = sv("text", { x: xs(v) + 3, y: y + bh - 2, "font-size": 9, fill: "#1d2330" }); vt.textContent = num(v) + " ns"; svg.appendChild(vt);
      });
    });
    var lg = sv("text", { x: 600, y: 10, "font-size": 10, "text-anchor": "end", fill: "#3d6fd8" }); lg.textContent = "■ " + D.symbol; svg.appendChild(lg);
    var lg2 = sv("text", { x: 600, y: 22, "font-size": 10, "text-anchor": "end", fill: "#7a8599" }); lg2.textContent = "■ all symbols"; svg.appendChild(lg2);
  })();

  // ---- frames, playback
  var cur = 0, playing = false, timer = null, slider = $("slider");
  slider.max = Math.max(0, N - 1);
  function show(k) {
    k = Math.max(0, Math.min(N - 1, k | 0)); cur = k;
    renderLadder(k); renderTape(k);
    slider.value = k;
    $("time").textContent = tm(F.t[k]) + " " + D.tz;
    $("time").setAttribute("data-time-ns", F.t[k]);
    $("frame-info").textContent = "frame " + (k + 1) + " / " + N;
    document.body.setAttribute("data-frame", k);
    var cx = chart.cursorX(k); cursor.setAttribute("x1", cx); cursor.setAttribute("x2", cx);
  }
  function tick() { if (cur >= N - 1) { pause(); return; } show(cur + 1); }
  function play() { if (N < 2) return; if (cur >= N - 1) show(0); playing = true; $("play").textContent = "Pause"; clearInterval(timer); timer = setInterval(tick, 1000 / +$("speed").value); document.body.setAttribute("data-playing", "1"); }
  function pause() { playing = false; $("play").textContent = "Play"; clearInterval(timer); document.body.setAttribute("data-playing", "0"); }
  $("play").addEventListener("click", function () { playing ? pause() : play(); });
  $("step-back").addEventListener("click", function () { pause(); show(cur - 1); });
  $("step-fwd").addEventListener("click", function () { pause(); show(cur + 1); });
  $("speed").addEventListener("change", function () { if (playing) play(); });
  slider.addEventListener("input", function () { show(+slider.value); });
  document.addEventListener("keydown", function (e) {
    if (e.target && e.target.tagName === "SELECT") return;
    if (e.key === " ") { e.preventDefault(); playing ? pause() : play(); }
    else if (e.key === "ArrowRight") { pause(); show(cur + 1); }
    else if (e.key === "ArrowLeft") { pause(); show(cur - 1); }
  });
  // URL fragment: #frame=K starts at frame K; #paused does not start playing.
  var h = location.hash || "", m = /frame=(\d+)/.exec(h);
  show(m ? +m[1] : 0);
  document.body.setAttribute("data-ready", "1");
  if (!/paused/.test(h)) play(); else pause();
})();
</script>
</body></html>
"""
