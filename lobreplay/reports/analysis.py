"""Load a replay's report directory into pandas and plot it (docs/analysis.md).

`load(dir)` reads what `lobreplay.itch.replay.replay_itch` (`lobreplay itch replay`) or
`lobreplay.l2.replay.replay_lobc` (`lobreplay replay FILE.lobc`) wrote: every Parquet table
present as a typed DataFrame, `summary.json`, and the provenance stored in the Parquet
schema metadata. Prices stay integers in the feed's units unless `scale_prices=True`.

The plotting helpers take the loaded reports and return a matplotlib Figure; they never
call `plt.show()` and work with the Agg backend (no display needed). Each one plots only
what the reports hold, and says so in its title or axis labels:

* `plot_latency`: the histograms a replay wrote (latency_histograms.parquet), with the
  percentile table beside them; without that table (timing off) the percentile
  distribution (p50 .. p99.9 and max per event kind, HdrHistogram style). Pass
  `histograms=` (bucket counts from a live `Session`, e.g. `session_histograms(session)`)
  to plot those.
* `plot_desyncs`: cumulative desyncs over time by cause.
* `plot_bbo`: best bid and ask and the spread over the session.
* `plot_depth_heatmap`: time-weighted resting quantity over time and price, from the
  replay's N-level samples (`depth.parquet`, `--depth N`, ITCH or .lobc) when present, else
  from `bbo`: then the top of book only.
* `plot_tape`: the trade tape (ITCH: the feed's executions; .lobc: the trades).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lobreplay.reports import schemas

__all__ = [
    "Reports", "load", "percentile_table", "busiest_symbol", "session_histograms", "tape",
    "plot_latency", "plot_desyncs", "plot_bbo", "plot_depth_heatmap", "plot_tape",
]

_PCT_COLS = [("p50_ns", 50.0), ("p90_ns", 90.0), ("p99_ns", 99.0), ("p99_9_ns", 99.9)]
_NULLABLE = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
             pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
             pa.uint32(): pd.UInt32Dtype(), pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype()}
# Columns in price units (ITCH Price(4) or the .lobc price_scale) and in quantity units (.lobc qty_scale).
_PRICE_COLS = {"price", "bid_price", "ask_price", "expected_price", "found_price", "other_price", "min_price",
               "max_price", "band_low", "band_high", "tick", "book_bid_price", "book_ask_price",
               "ticker_bid_price", "ticker_ask_price",
               # the status tables: NOII and LULD collar prices are Price(4) too
               "far_price", "near_price", "current_reference_price", "reference_price", "upper_price", "lower_price"}
_PRICE8_COLS = {"level1", "level2", "level3"}  # MWCB decline levels: ITCH Price(8), 1/10^8 dollar
_LEVEL_PRICE = re.compile(r"^(bid|ask)_price_[0-9]+$")   # depth.parquet's levels
_L2_QTY_COLS = {"qty", "bid_qty", "ask_qty", "other_qty", "book_bid_qty", "book_ask_qty", "ticker_bid_qty",
                "ticker_ask_qty"}
_LEVEL_QTY = re.compile(r"^(bid|ask)_qty_[0-9]+$")       # depth.parquet's levels (a .lobc replay's: scaled)


@dataclass
class Reports:
    """A loaded report directory. Tables are attributes (`r.bbo`, `r.desyncs`, ...) and in
    `r.tables`; ITCH status tables (`status_<type>_<name>`) are in `r.tables` too."""
    path: Path
    source: str                      # "itch" or "lobc"
    tables: dict[str, pd.DataFrame]
    summary: dict
    provenance: dict[str, str]
    price_scale: int
    qty_scale: int | None            # .lobc only (ITCH quantities are shares)
    prices_scaled: bool = False
    qty_scaled: bool = False
    table_provenance: dict[str, dict] = field(default_factory=dict, repr=False)

    def __getattr__(self, name: str) -> pd.DataFrame:
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(f"no report {name!r} in {self.__dict__.get('path')}; present: "
                             f"{', '.join(sorted(tables)) or 'none'}")

    def __contains__(self, name: str) -> bool:
        return name in self.tables

    def __repr__(self) -> str:
        rows = ", ".join(f"{k} {len(v):,}" for k, v in self.tables.items())
        return f"Reports({str(self.path)!r}, {self.source}, status={self.summary.get('status')!r}: {rows})"

    @property
    def symbols_list(self) -> list[str]:
        """Symbols that appear in the bbo (else trades/executions) report."""
        for name in ("bbo", "trades", "executions"):
            if name in self.tables and len(self.tables[name]):
                return sorted(map(str, self.tables[name]["symbol"].astype(str).unique()))
        return []

    def price_unit(self) -> str:
        """The unit of price columns, for axis labels."""
        if self.prices_scaled:
            return "$" if self.source == "itch" else "price"
        return f"price (1/{self.price_scale:,}{' $' if self.source == 'itch' else ''})"


def _decode_meta(schema: pa.Schema) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (schema.metadata or {}).items() if not k.startswith(b"pandas")
            and k != b"ARROW:schema"}


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """numpy dtypes where a column has no nulls; pandas' nullable dtypes (Int64, UInt32,
    boolean, ...) for integer and bool columns that have nulls, so integers never become floats."""
    df = table.to_pandas()
    for i, f in enumerate(table.schema):
        col = table.column(i)
        if col.null_count and f.type in _NULLABLE:
            df[f.name] = col.to_pandas(types_mapper=_NULLABLE.get).astype(_NULLABLE[f.type])
    return df


def load(report_dir, *, scale_prices: bool = False, scale_qty: bool = False) -> Reports:
    """Load every report in `report_dir` (an ITCH or a .lobc replay's output).

    Prices stay integers in the feed's units (ITCH Price(4): 1/10,000 dollar; .lobc: 1/price_scale)
    unless `scale_prices=True`, which converts every price column to float (dollars for ITCH).
    `scale_qty=True` does the same for a .lobc replay's quantities (qty_scale); ITCH quantities
    are whole shares and are never converted."""
    d = Path(report_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such report directory")
    summary = {}
    if (d / "summary.json").is_file():
        summary = json.loads((d / "summary.json").read_text())
    tables, metas = {}, {}
    for p in sorted(d.glob("*.parquet")):
        t = pq.read_table(p)
        tables[p.stem] = _to_pandas(t)
        metas[p.stem] = _decode_meta(t.schema)
    if not tables and not summary:
        raise FileNotFoundError(f"{d}: no reports (no summary.json, no .parquet)")
    provenance: dict[str, str] = {}
    # (the report tables first: a status table's price_scale is its own prices', e.g. V's Price(8))
    for _, m in sorted(metas.items(), key=lambda nm: nm[0].startswith("status_")):
        for k, v in m.items():
            provenance.setdefault(k, v)
    if not provenance:
        provenance = {k: str(v) for k, v in (summary.get("source") or {}).items()}
    is_lobc = "venue" in provenance or "lobc" in summary or any(
        "receive_ns" in df.columns for df in tables.values())
    price_scale = int(provenance.get("price_scale") or (10**8 if is_lobc else 10_000))
    qty_scale = int(provenance.get("qty_scale") or 10**8) if is_lobc else None
    if scale_prices or (scale_qty and is_lobc):
        for df in tables.values():
            for c in df.columns:
                is_price = c in _PRICE_COLS or _LEVEL_PRICE.match(c) or (c in _PRICE8_COLS and not is_lobc)
                scale = 10**8 if c in _PRICE8_COLS else price_scale
                if scale_prices and is_price and df[c].dtype.kind in "iu":
                    df[c] = df[c].astype("float64") / scale
                elif scale_prices and is_price and str(df[c].dtype)[:1] in "IU":  # nullable
                    df[c] = df[c].astype("Float64") / scale
                elif scale_qty and is_lobc and (c in _L2_QTY_COLS or _LEVEL_QTY.match(c)) and df[c].dtype.kind in "iu":
                    df[c] = df[c].astype("float64") / qty_scale
    return Reports(path=d, source="lobc" if is_lobc else "itch", tables=tables, summary=summary,
                   provenance=provenance, price_scale=price_scale, qty_scale=qty_scale,
                   prices_scaled=scale_prices, qty_scaled=bool(scale_qty and is_lobc), table_provenance=metas)


# ---------------------------------------------------------------- helpers


def percentile_table(r: Reports, symbol: str | None = None) -> pd.DataFrame:
    """The latency report for one scope (ALL, or a symbol), indexed by event kind (ns)."""
    lat = r.latency
    scope = "ALL" if symbol is None else str(symbol)
    cols = [c for c in ("count", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "p99_99_ns", "max_ns") if c in lat]
    t = lat[lat["scope"].astype(str) == scope].set_index("kind")[cols]
    if t.empty:
        raise KeyError(f"no latency rows for scope {scope!r} (scopes: {', '.join(lat['scope'].unique()[:10])} ...)")
    return t


def busiest_symbol(r: Reports) -> str:
    """The symbol with the most top-of-book changes (else the most trades)."""
    for name in ("bbo", "trades", "executions"):
        if name in r.tables and len(r.tables[name]):
            return str(r.tables[name]["symbol"].astype(str).value_counts().index[0])
    raise ValueError("no bbo, trades or executions rows to pick a symbol from")


def session_histograms(session) -> dict[str, np.ndarray]:
    """Bucket counts per event kind (and ALL) of a live Session with timing on, for
    plot_latency(histograms=...); bucket bounds: lobreplay.core._coreapi.bucket_lows()."""
    from lobreplay.core.events import Kind
    h = {k.name: np.asarray(session.histogram(k), np.uint64) for k in Kind}
    h = {k: v for k, v in h.items() if v.any()}
    h["ALL"] = sum(h.values()) if h else np.zeros(0, np.uint64)
    return h


def _time(df: pd.DataFrame, r: Reports):
    """x values and label: the table's clock (schemas.time_column: the ITCH tables' event
    time, the .lobc tables' receive time) as UTC timestamps when known, else (an ITCH day
    without its date) hours since midnight."""
    ts, ns = schemas.timestamp_column(df.columns), schemas.time_column(df.columns)
    if ts is not None and df[ts].notna().all() and len(df):
        return df[ts].dt.tz_convert(None), "time (UTC)"
    if ns == "event_ns":  # (the feed's time of day: an ITCH day whose date is unknown)
        return df[ns].to_numpy(np.float64) / 3.6e12, "hours since midnight (exchange local time)"
    if ns == "receive_ns":
        return pd.to_datetime(df[ns]), "receive time (UTC)"
    raise ValueError("no time column")


def _sym(df: pd.DataFrame, symbol) -> pd.DataFrame:
    return df[df["symbol"].astype(str) == str(symbol)]


def _figure(figsize, nrows=1, ncols=1, **kw):
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state
    fig = Figure(figsize=figsize, dpi=kw.pop("dpi", 80), layout="constrained")
    axes = fig.subplots(nrows, ncols, **kw)
    return fig, axes


def _prices(s: pd.Series) -> np.ndarray:
    """Prices as floats with the empty side (price 0) as NaN."""
    v = s.astype("float64").to_numpy(copy=True)
    v[v == 0] = np.nan
    return v


# ---------------------------------------------------------------- plots


def plot_latency(r: Reports, symbol: str | None = None, *, histograms: dict | None = None,
                 figsize=(9, 3.6)):
    """Latency by event kind: the percentile distribution from the report (log scale), with
    the percentile table beside it. `symbol` selects that book's (coarse) figures.

    `histograms` ({kind: bucket counts} of the session's fine histograms, e.g.
    session_histograms(session)) plots those instead (log x); without either, and for a
    symbol, the percentile distribution."""
    fig, (ax, tab) = _figure(figsize, 1, 2, width_ratios=[3, 2])
    t = percentile_table(r, symbol)
    if histograms is None and symbol is None and "latency_histograms" in r:
        # the report's own bucket counts (an ITCH replay writes them beside the percentiles)
        from lobreplay.core._coreapi import bucket_lows, hist_index
        lh = r.latency_histograms
        histograms = {}
        for kind, g in lh.groupby("kind", sort=False):
            counts = np.zeros(len(bucket_lows()), np.uint64)
            counts[[hist_index(int(v)) for v in g["bucket_low_ns"]]] = g["count"].to_numpy()
            histograms[kind] = counts
    if histograms:
        from lobreplay.core._coreapi import bucket_lows
        lows = bucket_lows().astype(np.float64)
        bad = [k for k, c in histograms.items() if np.shape(c) != lows.shape]
        if bad:
            raise ValueError(f"histograms: {', '.join(map(str, bad))}: expected {len(lows)} bucket counts each "
                             "(session_histograms(session))")
        for kind, counts in histograms.items():
            counts = np.asarray(counts)
            nz = np.flatnonzero(counts)
            if not len(nz):
                continue
            # every bucket from the first to the last non-empty one, each drawn across its own
            # width (up to the next bucket's low); an empty one is a gap, not the step before it
            lo, hi = nz[0], nz[-1]
            edges = lows[lo:hi + 2] if hi + 1 < len(lows) else np.append(lows[lo:hi + 1], 2 * lows[hi])
            y = counts[lo:hi + 1].astype(np.float64)
            y[y == 0] = np.nan
            ax.step(np.maximum(edges, 1), np.append(y, y[-1]), where="post", label=kind, lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("service time per event (ns, log)")
        ax.set_ylabel("events per bucket")
        ax.set_title("core latency histogram by event kind")
    else:
        inv = [1 / (1 - q / 100) for _, q in _PCT_COLS]
        for kind, row in t.iterrows():
            vals = [max(float(row[c]), 0.5) for c, _ in _PCT_COLS]
            ax.plot(inv, vals, marker="o", lw=1, ms=3, label=kind)
            ax.axhline(max(float(row["max_ns"]), 0.5), lw=0.4, ls=":", color=ax.lines[-1].get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(inv, [f"p{q:g}" for _, q in _PCT_COLS])
        ax.minorticks_off()
        ax.set_xlabel("percentile (dotted: max)")
        ax.set_ylabel("service time (ns, log)")
        ax.set_title(f"core latency percentiles, {'all books' if symbol is None else symbol} "
                     "(report: percentiles only)", fontsize=9)
    ax.legend(fontsize=7)
    tab.axis("off")
    cols = ["count", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "max_ns"]
    cells = [[f"{int(v):,}" for v in row] for row in t[cols].to_numpy()]
    table = tab.table(cellText=cells, rowLabels=list(t.index), colLabels=["n", "p50", "p90", "p99", "p99.9", "max"],
                      loc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    return fig


def plot_desyncs(r: Reports, *, figsize=(8, 3)):
    """Cumulative desyncs over time, one line per cause (a message when there are none)."""
    fig, ax = _figure(figsize)
    d = r.desyncs
    if d.empty:
        ax.text(0.5, 0.5, "no desyncs: the core and the feed agreed on every event", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    x, label = _time(d, r)
    x = pd.Series(np.asarray(x), index=d.index)
    for cause, g in d.groupby("cause", observed=True, sort=True):
        xs = x.loc[g.index].sort_values()
        ax.step(xs.to_numpy(), np.arange(1, len(xs) + 1), where="post", label=f"{cause} ({len(xs):,})")
    ax.set_xlabel(label)
    ax.set_ylabel("desyncs (cumulative)")
    ax.set_title(f"desyncs by cause: {len(d):,}")
    ax.legend(fontsize=7)
    return fig


def plot_bbo(r: Reports, symbol: str, *, figsize=(8, 4.5)):
    """Best bid and ask (top) and the spread (bottom) of one symbol, from the bbo report
    (steps: each value holds until the next change; an empty side is a gap)."""
    b = _sym(r.bbo, symbol)
    if b.empty:
        raise KeyError(f"no bbo rows for {symbol!r}")
    fig, (ax, sp) = _figure(figsize, 2, 1, sharex=True, height_ratios=[2, 1])
    x, label = _time(b, r)
    x = np.asarray(x)
    bid, ask = _prices(b["bid_price"]), _prices(b["ask_price"])
    ax.step(x, bid, where="post", lw=0.8, color="tab:green", label="best bid")
    ax.step(x, ask, where="post", lw=0.8, color="tab:red", label="best ask")
    ax.set_ylabel(r.price_unit())
    ax.set_title(f"{symbol}: top of book ({len(b):,} changes)")
    ax.legend(fontsize=7)
    sp.step(x, ask - bid, where="post", lw=0.8, color="tab:blue")
    sp.set_ylabel(f"spread ({r.price_unit()})")
    sp.set_xlabel(label)
    return fig


def plot_depth_heatmap(r: Reports, symbol: str, *, source: str = "auto", time_bins: int = 60,
                       price_bins: int = 40, figsize=(8, 3.6)):
    """Where size rested over time: a heatmap of time x price, each cell the quantity resting
    at prices in that bin weighted by how long it rested (qty x seconds, or x hours for ITCH
    without a date).

    source "depth" (the default "auto" when the replay wrote `depth.parquet`, `--depth N`):
    the N-level book samples; a row holds until the symbol's next row (a symbol without events
    has no row), the last one for one sampling interval. Only N levels per side, at the sample
    times. Source "bbo" (the default otherwise): the top of book only, each change holding
    until the next; levels behind the touch are not in that report."""
    for name, v in (("time_bins", time_bins), ("price_bins", price_bins)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}: expected a number of bins >= 1, got {v!r}")
    depth = r.tables.get("depth")
    if source not in ("auto", "depth", "bbo"):
        raise ValueError(f"source: expected auto, depth or bbo, got {source!r}")
    if not _known_symbol(r, symbol):
        raise KeyError(f"{symbol!r}: not a symbol of this replay")
    use_depth = source == "depth" or (source == "auto" and depth is not None and len(_sym(depth, symbol)) > 0)
    if use_depth:
        if depth is None:
            raise KeyError("no depth report (replay with --depth N)")
        d = _sym(depth, symbol).sort_values(schemas.time_column(depth.columns))
        if d.empty:
            raise KeyError(f"no depth rows for {symbol!r}")
        x, label = _time(d, r)
        t1 = _num(x)
        tt = np.unique(_num(_time(depth, r)[0]))
        step = float(np.min(np.diff(tt))) if len(tt) > 1 else 1.0
        dur1 = np.diff(t1, append=t1[-1] + step)
        n = max(int(c.rsplit("_", 1)[1]) for c in d.columns if c.startswith("bid_price_"))
        ps, qs = [], []
        for side in ("bid", "ask"):
            for i in range(1, n + 1):
                ps.append(_prices(d[f"{side}_price_{i}"]))
                qs.append(d[f"{side}_qty_{i}"].astype("float64").to_numpy())
        p, q = np.concatenate(ps), np.concatenate(qs)
        t, dur = np.tile(t1, 2 * n), np.tile(dur1, 2 * n)
        what = f"{n} levels per side, depth report samples"
    else:
        b = _sym(r.bbo, symbol)
        if b.empty:
            raise KeyError(f"no bbo rows for {symbol!r}")
        x, label = _time(b, r)
        t1 = _num(x)
        dur1 = np.diff(t1, append=t1[-1])
        bid, ask = _prices(b["bid_price"]), _prices(b["ask_price"])
        t = np.concatenate([t1, t1])
        p = np.concatenate([bid, ask])
        q = np.concatenate([b["bid_qty"].astype("float64").to_numpy(), b["ask_qty"].astype("float64").to_numpy()])
        dur = np.concatenate([dur1, dur1])
        what = "top of book only (bbo report)"
    ok = np.isfinite(p) & (q > 0) & (dur > 0)
    fig, ax = _figure(figsize)
    ax.set_title(f"{symbol}: time-weighted resting quantity, {what}", fontsize=9)
    if not ok.any():
        ax.text(0.5, 0.5, "no resting quantity", ha="center", va="center", transform=ax.transAxes)
        return fig
    h, xe, ye = np.histogram2d(t[ok], p[ok], bins=(time_bins, price_bins), weights=(q * dur)[ok])
    h[h == 0] = np.nan
    mesh = ax.pcolormesh(xe, ye, h.T, cmap="viridis", shading="flat")
    fig.colorbar(mesh, ax=ax, label="qty x " + ("hours" if "hours" in label else "seconds"))
    ax.set_xlabel(label if "hours" in label else label + ", seconds from start")
    ax.set_ylabel(r.price_unit())
    return fig


def _num(x) -> np.ndarray:
    """Time values as floats (hours for ITCH hours, seconds from the first for timestamps)."""
    a = np.asarray(x)
    if np.issubdtype(a.dtype, np.datetime64):
        a = a.astype("datetime64[ns]").astype(np.int64)
        return (a - a[0]) / 1e9 if len(a) else a.astype(np.float64)
    return a.astype(np.float64)


def tape(r: Reports, symbol: str | None = None) -> pd.DataFrame:
    """The trade tape as one table: time columns, symbol, kind, price, qty (and side for .lobc).

    ITCH: the feed's executions (E, C, P, Q). An E carries no price (the order's own price
    applies): it is taken from the core row of the same message for the same order, which holds
    the order's price level; an E whose order the core did not fill (a fill_order desync; an
    order added before a replay that starts mid-day) has no price: <NA> in an Int64 column (float only with
    scale_prices). .lobc: the trades report."""
    if r.source == "lobc":
        t = r.trades.copy()
        t["kind"] = "trade"
    else:
        ex = r.executions
        feed = ex[ex["source"] == "feed"].copy()
        core = ex[ex["source"] == "core"][["sequence", "order_ref", "price"]].drop_duplicates(["sequence", "order_ref"])
        core = core.rename(columns={"price": "core_price"})
        feed = feed.merge(core, on=["sequence", "order_ref"], how="left")
        e = feed["msg_type"] == "E"
        if r.prices_scaled:
            price = feed["price"].astype("float64")
            price.loc[e] = feed.loc[e, "core_price"].astype("float64")
        else:  # integers stay integers: a missing price is <NA>, never a float NaN
            price = feed["price"].astype("Int64")
            price.loc[e] = feed.loc[e, "core_price"].astype("Int64")
            if not price.isna().any():
                price = price.astype(np.int64)
        feed["price"] = price
        t = feed.drop(columns=["core_price"]).rename(columns={"msg_type": "kind"})
    if symbol is not None:
        t = _sym(t, symbol)
        if t.empty and not _known_symbol(r, symbol):  # (a symbol without trades: an empty tape)
            raise KeyError(f"{symbol!r}: not a symbol of this replay")
    return t.reset_index(drop=True)


def _known_symbol(r: Reports, symbol) -> bool:
    """Whether the replay has the symbol (True too when no table can say)."""
    have = [n for n in ("symbols", "bbo", "depth", "trades", "executions") if n in r]
    return not have or any((r.tables[n]["symbol"].astype(str) == str(symbol)).any() for n in have)


def plot_tape(r: Reports, symbol: str, *, figsize=(8, 3.2)):
    """The trades of one symbol: price against time, marker area by size (ITCH: coloured by
    message type, E/C displayed executions, P non-displayed, Q crosses; .lobc: by aggressor side)."""
    t = tape(r, symbol)
    fig, ax = _figure(figsize)
    if t.empty:
        ax.text(0.5, 0.5, f"no trades for {symbol}", ha="center", va="center", transform=ax.transAxes)
        return fig
    x, label = _time(t, r)
    x = np.asarray(x)
    q = t["qty"].astype("float64").to_numpy()
    size = 4 + 60 * np.sqrt(q / q.max()) if q.max() > 0 else np.full(len(q), 4.0)
    groups = t["side"].replace({"B": "buy aggressor", "S": "sell aggressor"}) if r.source == "lobc" else t["kind"]
    for g in sorted(groups.dropna().unique()):
        m = (groups == g).to_numpy()
        ax.scatter(x[m], t["price"].to_numpy(np.float64, na_value=np.nan)[m], s=size[m], alpha=0.6,
                   label=f"{g} ({m.sum():,})",
                   linewidths=0)
    ax.set_xlabel(label)
    ax.set_ylabel(r.price_unit())
    ax.set_title(f"{symbol}: trade tape ({len(t):,} trades, {int(np.nansum(q)):,} "
                 f"{'shares' if r.source == 'itch' else 'in qty' if r.qty_scaled else 'qty units'})", fontsize=9)
    ax.legend(fontsize=7, markerscale=0.7)
    return fig
