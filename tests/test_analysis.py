"""lobreplay.reports.analysis (load, plots) and lobreplay.reports.hgrm (HdrHistogram .hgrm export)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("matplotlib")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
from matplotlib.collections import PathCollection, QuadMesh  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.table import Table  # noqa: E402

from lobreplay import Kind  # noqa: E402
from lobreplay.l2 import lobc  # noqa: E402
from lobreplay.reports import analysis as A  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample_day.itch.gz"
S = 10**8  # .lobc default scales


@pytest.fixture(scope="module")
def itch_dir(tmp_path_factory):
    from lobreplay.itch.replay import ReplayConfig, replay_itch
    out = tmp_path_factory.mktemp("itch") / "out"
    s = replay_itch(str(SAMPLE), str(out), ReplayConfig(depth_levels=5, depth_every_ns=300 * 10**9))
    assert s["status"] == "ok"
    return out


def _write_small_lobc(path):
    """One symbol: a snapshot, two diffs, three bookTickers (the second disagrees on the ask
    quantity), a trade, then a sequence GAP."""
    t = [1_700_000_000_000_000_000]

    def add(w, **k):
        t[0] += 1_000_000
        w.add(recv_ns=t[0], exch_ns=t[0], **k)

    with lobc.LobcWriter(path, venue="binance", market="spot", symbols=["AAA"]) as w:
        add(w, kind=lobc.SNAPSHOT_BEGIN, first_id=100)
        add(w, kind=lobc.SNAPSHOT_LEVEL, side="B", price=100 * S, qty=5 * S)
        add(w, kind=lobc.SNAPSHOT_LEVEL, side="S", price=101 * S, qty=5 * S)
        add(w, kind=lobc.SNAPSHOT_END, first_id=100)
        add(w, kind=lobc.DIFF_BEGIN, first_id=101, last_id=101)
        add(w, kind=lobc.DIFF_LEVEL, side="B", price=100 * S + S // 2, qty=2 * S)
        add(w, kind=lobc.DIFF_END, first_id=101, last_id=101)
        add(w, kind=lobc.TICKER_BID, first_id=101, price=100 * S + S // 2, qty=2 * S)
        add(w, kind=lobc.TICKER_ASK, first_id=101, price=101 * S, qty=5 * S)
        add(w, kind=lobc.TRADE, first_id=1, price=101 * S, qty=S, side="B")
        add(w, kind=lobc.DIFF_BEGIN, first_id=102, last_id=102)
        add(w, kind=lobc.DIFF_LEVEL, side="S", price=101 * S, qty=3 * S)
        add(w, kind=lobc.DIFF_END, first_id=102, last_id=102)
        for u, ask_qty in ((102, 4), (103, 4)):
            add(w, kind=lobc.TICKER_BID, first_id=u, price=100 * S + S // 2, qty=2 * S)
            add(w, kind=lobc.TICKER_ASK, first_id=u, price=101 * S, qty=ask_qty * S)
        add(w, kind=lobc.GAP, first_id=103, last_id=110, flags=lobc.GAP_SEQUENCE)


@pytest.fixture(scope="module")
def lobc_dir(tmp_path_factory):
    from lobreplay.l2.replay import replay_lobc
    d = tmp_path_factory.mktemp("lobc")
    _write_small_lobc(d / "small.lobc")
    s = replay_lobc(d / "small.lobc", str(d / "out"))
    assert s["status"] == "ok"
    return d / "out"


# ---------------------------------------------------------------- load


def test_load_itch_tables_types_and_provenance(itch_dir):
    r = A.load(itch_dir)
    assert r.source == "itch" and r.summary["status"] == "ok"
    for name in ("desyncs", "executions", "bbo", "latency", "symbols"):
        assert name in r and isinstance(getattr(r, name), pd.DataFrame)
        assert len(r.tables[name]) == r.summary["report_rows"].get(name, len(r.tables[name]))
    assert len(r.symbols) == r.summary["symbols_in_file"]
    assert any(n.startswith("status_S_") for n in r.tables)
    assert r.provenance["source_file"] == "sample_day.itch.gz" and r.price_scale == 10_000
    assert len(r.provenance["source_sha256"]) == 64
    # prices stay integers by default; symbols are categorical; ts is a UTC timestamp
    assert r.bbo["bid_price"].dtype == np.int64 and r.executions["order_ref"].dtype == np.uint64
    assert isinstance(r.bbo["symbol"].dtype, pd.CategoricalDtype)
    assert str(r.bbo["event_ts"].dtype) == "datetime64[ns, UTC]"
    assert r.symbols["peak_live"].dtype == np.uint32
    with pytest.raises(AttributeError, match="no report 'trades'"):
        r.trades


def test_load_scale_prices_itch(itch_dir):
    raw, usd = A.load(itch_dir), A.load(itch_dir, scale_prices=True)
    assert usd.bbo["ask_price"].dtype == np.float64 and usd.prices_scaled
    np.testing.assert_allclose(usd.bbo["ask_price"], raw.bbo["ask_price"] / 10_000)
    assert usd.bbo["ask_qty"].dtype == np.int64          # shares are never scaled
    assert usd.symbols["tick"].max() <= 0.01
    assert usd.price_unit() == "$"
    assert usd.depth["ask_price_5"].dtype == np.float64 and raw.depth["ask_price_5"].dtype == np.int64
    np.testing.assert_allclose(usd.depth["bid_price_1"], raw.depth["bid_price_1"] / 10_000)
    noii = [n for n in raw.tables if n.startswith("status_I")]
    assert noii, sorted(raw.tables)                      # the status tables' prices too (NOII)
    for c in ("far_price", "near_price", "current_reference_price"):
        a, b = raw.tables[noii[0]][c], usd.tables[noii[0]][c]
        assert a.dtype.kind in "iu" and b.dtype == np.float64
        np.testing.assert_allclose(b, a / 10_000)


def test_load_scales_mwcb_levels_as_price8(tmp_path):
    """ITCH sends the MWCB decline levels as Price(8) (1/10^8 dollar), not Price(4)."""
    t = pa.table({"message": pa.array([5], pa.int64()), "level1": pa.array([418_250_000_000], pa.int64()),
                  "level2": pa.array([389_450_000_000], pa.int64()), "level3": pa.array([345_600_000_000],
                                                                                        pa.int64())},
                 metadata={"price_scale": "10000", "source_file": "x"})
    pq.write_table(t, tmp_path / "status_V_mwcb_decline_level.parquet")
    r = A.load(tmp_path, scale_prices=True)
    assert r.tables["status_V_mwcb_decline_level"]["level1"].tolist() == [4182.5]


def test_load_nullable_integers_stay_integers(tmp_path):
    t = pa.table({"symbol": pa.array(["A", "B"]), "price": pa.array([10_000, None], pa.int64())},
                 metadata={"price_scale": "10000", "source_file": "x"})
    pq.write_table(t, tmp_path / "bbo.parquet")
    r = A.load(tmp_path)
    assert str(r.bbo["price"].dtype) == "Int64" and r.bbo["price"].isna().sum() == 1
    assert r.provenance == {"price_scale": "10000", "source_file": "x"}
    with pytest.raises(FileNotFoundError):
        A.load(tmp_path / "nope")


def test_load_lobc_reports(lobc_dir):
    r = A.load(lobc_dir)
    assert r.source == "lobc" and r.provenance["venue"] == "binance" and r.qty_scale == S
    assert set(r.tables) == {"bbo", "desyncs", "trades", "latency", "ticker_mismatches", "latency_histograms"}
    assert r.summary["bookticker"]["comparable"] == 2 and r.summary["bookticker"]["matches"] == 1
    assert len(r.ticker_mismatches) == 1 and r.ticker_mismatches["ticker_ask_qty"].iloc[0] == 4 * S
    assert list(r.desyncs["cause"]) == ["gap_sequence"]
    f = A.load(lobc_dir, scale_prices=True, scale_qty=True)
    assert f.bbo["bid_price"].iloc[-1] == 100.5 and f.bbo["ask_qty"].iloc[-1] == 3.0
    assert f.trades["price"].iloc[0] == 101.0 and f.trades["qty"].iloc[0] == 1.0
    assert A.load(lobc_dir, scale_prices=True).bbo["ask_qty"].dtype == np.int64


# ---------------------------------------------------------------- plots


def _artists(fig):
    ax = fig.axes
    return {"lines": sum(len(a.lines) for a in ax), "collections": [c for a in ax for c in a.collections],
            "tables": [t for a in ax for t in a.tables], "texts": [t.get_text() for a in ax for t in a.texts]}


def test_plots_itch(itch_dir):
    r = A.load(itch_dir)
    sym = A.busiest_symbol(r)
    assert sym == r.bbo["symbol"].astype(str).value_counts().index[0]

    f = A.plot_latency(r)                      # the report's own histograms (latency_histograms.parquet)
    a = _artists(f)
    assert isinstance(f, Figure) and len(a["tables"]) == 1
    n_kinds = len(A.percentile_table(r))
    assert a["lines"] == n_kinds              # one histogram per kind (and ALL)
    assert f.axes[0].get_xscale() == "log" and "histogram" in f.axes[0].get_title()
    f = A.plot_latency(r, sym)                 # a symbol: its book's percentiles
    a = _artists(f)
    assert a["lines"] == 2 * len(A.percentile_table(r, sym))  # a percentile curve and a max line per kind
    assert f.axes[0].get_yscale() == "log"

    f = A.plot_desyncs(r)                     # the sample day has none
    assert isinstance(f, Figure) and any("no desyncs" in t for t in _artists(f)["texts"])

    f = A.plot_bbo(r, sym)
    assert isinstance(f, Figure) and len(f.axes) == 2 and _artists(f)["lines"] == 3
    bid = f.axes[0].lines[0].get_ydata()
    assert np.nanmax(bid) == r.bbo.loc[r.bbo["symbol"] == sym, "bid_price"].max()

    f = A.plot_depth_heatmap(r, sym)           # from depth.parquet (5 levels per side)
    assert any(isinstance(c, QuadMesh) for c in _artists(f)["collections"])
    assert "5 levels per side" in f.axes[0].get_title()
    f = A.plot_depth_heatmap(r, sym, source="bbo")
    assert "top of book only" in f.axes[0].get_title()
    mesh = next(c for c in _artists(f)["collections"] if isinstance(c, QuadMesh))
    b = r.bbo[r.bbo["symbol"] == sym]
    t = b["event_ns"].to_numpy() / 3.6e12
    dur = np.diff(t, append=t[-1])
    total = ((b["bid_qty"].to_numpy() * (b["bid_price"].to_numpy() > 0) * dur).sum()
             + (b["ask_qty"].to_numpy() * (b["ask_price"].to_numpy() > 0) * dur).sum())
    assert np.isclose(np.nansum(mesh.get_array()), total)   # every share-hour at the touch is in a cell

    f = A.plot_tape(r, sym)
    pts = [c for c in _artists(f)["collections"] if isinstance(c, PathCollection)]
    tp = A.tape(r, sym)
    assert pts and sum(len(c.get_offsets()) for c in pts) == len(tp)
    assert set(tp["kind"]) <= {"E", "C", "P", "Q"} and tp["price"].notna().all()
    # an E's price is the level price of the order the core matched for the same message
    ex = r.executions
    e = ex[(ex["source"] == "feed") & (ex["msg_type"] == "E")].iloc[0]
    core = ex[(ex["source"] == "core") & (ex["sequence"] == e["sequence"])]
    assert A.tape(r).query("sequence == @e.sequence")["price"].iloc[0] == core["price"].iloc[0]
    with pytest.raises(KeyError):
        A.plot_bbo(r, "NOSUCH")
    with pytest.raises(ValueError, match="time_bins: expected a number of bins >= 1, got 0"):
        A.plot_depth_heatmap(r, sym, time_bins=0)
    with pytest.raises(ValueError, match="histograms: NEW: expected .* bucket counts each"):
        A.plot_latency(r, histograms={"NEW": np.ones(5)})
    for call in (A.tape, A.plot_tape, A.plot_depth_heatmap):  # (an empty tape; "no bbo rows")
        with pytest.raises(KeyError, match="'NOSUCH': not a symbol of this replay"):
            call(r, "NOSUCH")


def test_plots_lobc(lobc_dir):
    r = A.load(lobc_dir, scale_prices=True, scale_qty=True)
    f = A.plot_desyncs(r)
    assert len(f.axes[0].lines) == 1 and "gap_sequence" in f.axes[0].get_legend().get_texts()[0].get_text()
    assert len(A.plot_bbo(r, "AAA").axes) == 2
    assert isinstance(A.plot_tape(r, "AAA"), Figure)
    assert isinstance(A.plot_latency(r, "AAA"), Figure)
    f = A.plot_depth_heatmap(r, "AAA")
    assert any(isinstance(c, QuadMesh) for c in _artists(f)["collections"])
    assert "top of book only" in f.axes[0].get_title()
    with pytest.raises(KeyError, match="no depth report"):
        A.plot_depth_heatmap(r, "AAA", source="depth")


def test_lobc_depth_samples_load_scaled_and_make_the_heatmap(tmp_path):
    """A .lobc replay with --depth: depth.parquet loads with its level quantities scaled by
    qty_scale (scale_qty) like the other quantities, and the heatmap takes its levels; the
    time-weighted total is that of the samples (each holding until the next, the last one
    for one interval)."""
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc
    _write_small_lobc(tmp_path / "small.lobc")
    replay_lobc(tmp_path / "small.lobc", str(tmp_path / "out"), L2ReplayConfig(depth_levels=2, depth_every_ns=2_000_000))
    raw = A.load(tmp_path / "out")
    r = A.load(tmp_path / "out", scale_prices=True, scale_qty=True)
    d, dr = r.tables["depth"], raw.tables["depth"]
    # (the GAP at the end: the last sample says the book is no longer synced, same levels)
    assert len(d) >= 3 and d["synced"].iloc[:-1].all() and not d["synced"].iloc[-1]
    assert (d.iloc[-1, 6:].to_numpy() == d.iloc[-2, 6:].to_numpy()).all()
    assert (d["bid_qty_1"].to_numpy() == dr["bid_qty_1"].to_numpy() / S).all()
    assert (d["ask_price_1"].to_numpy() == dr["ask_price_1"].to_numpy() / S).all()
    assert d["bid_price_1"].iloc[-1] == 100.5 and d["ask_qty_1"].iloc[-1] == 3.0
    f = A.plot_depth_heatmap(r, "AAA")
    assert "2 levels per side" in f.axes[0].get_title()
    mesh = next(c for c in _artists(f)["collections"] if isinstance(c, QuadMesh))
    t = (d["receive_ns"].to_numpy() - d["receive_ns"].iloc[0]) / 1e9
    dur = np.diff(t, append=t[-1] + 0.002)
    total = sum((d[f"{side}_qty_{i}"].to_numpy() * dur).sum() for side in ("bid", "ask") for i in (1, 2))
    assert np.isclose(np.nansum(mesh.get_array()), total)


def test_plot_latency_with_histograms():
    from lobreplay.testing.synth import generate_flow
    flow = generate_flow(5_000, n_instruments=2, seed=3)
    sess = flow.session()
    sess.set_timing(True)
    sess.apply(flow.events)
    h = A.session_histograms(sess)
    assert h["ALL"].sum() == 5_000
    # a fake report with one scope, to pair with the live histograms
    lat = pd.DataFrame({"scope": ["ALL"], "kind": ["ALL"], "count": [5_000], "p50_ns": [1], "p90_ns": [2],
                        "p99_ns": [3], "p99_9_ns": [4], "max_ns": [5]})
    r = A.Reports(path=Path("."), source="itch", tables={"latency": lat}, summary={}, provenance={},
                  price_scale=10_000, qty_scale=None)
    f = A.plot_latency(r, histograms=h)
    assert len(f.axes[0].lines) == len(h) and f.axes[0].get_xscale() == "log"
    # an empty bucket between two others is a gap in the line (it was drawn at the height of
    # the bucket before it, as if it held as many events)
    from lobreplay.core._coreapi import bucket_lows
    lows = bucket_lows()
    c = np.zeros(len(lows), np.uint64)
    c[[40, 41, 44]] = [5, 7, 2]
    line = A.plot_latency(r, histograms={"NEW": c}).axes[0].lines[0]
    x, y = line.get_xdata(), line.get_ydata()
    assert list(x) == [max(v, 1) for v in lows[40:46]]
    assert np.array_equal(y, [5, 7, np.nan, np.nan, 2, 2], equal_nan=True)


# ---------------------------------------------------------------- hgrm


def _timed_session(n=20_000):
    from lobreplay.testing.synth import generate_flow
    flow = generate_flow(n, n_instruments=2, seed=5)
    sess = flow.session()
    sess.set_timing(True)
    sess.apply(flow.events)
    return sess


def _check_against_summary(df, foot, counts, lows, index_of):
    """The .hgrm table against lobreplay.reports.latency.summarize: same total and max bucket, and each
    percentile of summarize lies between the file's rows that bracket it."""
    from lobreplay.reports.latency import PERCENTILES, summarize
    s = summarize(counts)
    assert foot["TotalCount"] == s["count"] == df["total_count"].iloc[-1]
    assert lows[index_of(int(foot["Max"]))] == s["max"]
    assert df["percentile"].is_monotonic_increasing and df["value"].is_monotonic_increasing
    assert df["percentile"].iloc[-1] == 1.0 and np.isnan(df["inverse"].iloc[-1])
    mids = lows.astype(np.float64)
    nz = np.flatnonzero(counts)
    mean = float((counts[nz] * mids[nz]).sum() / counts.sum())
    assert abs(foot["Mean"] - mean) <= 0.01 * mean + 1   # HDR uses each bucket's middle
    for q in PERCENTILES:
        above = df[df["percentile"] >= q / 100]["value"].iloc[0]
        below = df[df["percentile"] <= q / 100]["value"].iloc[-1]
        assert lows[index_of(int(below))] <= s[f"p{q:g}"] <= lows[index_of(int(above))]
        # a row lies at this percentile's bucket or the rank's cumulative count is reached there
    # the file's rows name buckets of the histogram (each row's value is in a non-empty bucket)
    assert all(counts[index_of(int(v))] > 0 for v in df["value"])


def test_hgrm_round_trip_session(tmp_path):
    from lobreplay.reports import hgrm
    from lobreplay.core._coreapi import bucket_lows, hist_index
    sess = _timed_session()
    written = hgrm.export_session_hgrm(sess, tmp_path)
    kinds = {k.name for k in Kind if sess.histogram(k).any()}
    assert set(written) == kinds | {"ALL"}
    for name, path in written.items():
        assert path.name == f"latency_{name}.hgrm"
        text = path.read_text()
        assert text.splitlines()[0].split() == ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
        assert "#[Mean" in text and "StdDeviation" in text and "#[Max" in text
        counts = (sum(sess.histogram(k) for k in Kind) if name == "ALL" else sess.histogram(Kind[name]))
        df, foot = hgrm.read_hgrm(path)
        _check_against_summary(df, foot, counts, bucket_lows(), hist_index)


def test_hgrm_book_histograms(tmp_path):
    from lobreplay.reports import hgrm
    from lobreplay.core._coreapi import book_bucket_lows, book_hist_index
    sess = _timed_session(5_000)
    written = hgrm.export_session_hgrm(sess, tmp_path, instrument=1)
    assert written and all(p.name.startswith("latency_1_") for p in written.values())
    counts = sum(sess.book_histogram(1, k).astype(np.uint64) for k in Kind)
    df, foot = hgrm.read_hgrm(written["ALL"])
    _check_against_summary(df, foot, counts, book_bucket_lows(), book_hist_index)


def test_hgrm_exact_small_histogram(tmp_path):
    """Values below 2048 ns are exact buckets: the file's percentiles are the values."""
    from lobreplay.reports import hgrm
    from lobreplay.core._coreapi import bucket_lows, hist_index
    from lobreplay.reports.latency import summarize
    lows = bucket_lows()
    counts = np.zeros(len(lows), np.uint64)
    for v, n in ((40, 900), (100, 90), (1500, 9), (3000, 1)):
        counts[hist_index(v)] += n
    p = hgrm.write_hgrm(counts, lows, tmp_path / "x.hgrm")
    df, foot = hgrm.read_hgrm(p)
    s = summarize(counts)
    assert (s["p50"], s["p90"], s["p99"], s["max"]) == (40, 40, 100, 3000)
    at = {round(q, 6): v for q, v in zip(df["percentile"], df["value"])}
    assert at[0.0] == 40 and foot["TotalCount"] == 1000
    assert df[df["total_count"] >= 991]["value"].iloc[0] == 1500   # rank 991 (p99.1) is 1500
    assert 3000 <= foot["Max"] < 3002 and abs(foot["Mean"] - (40 * 900 + 100 * 90 + 1500 * 9 + 3001) / 1000) < 1
    assert hgrm.read_hgrm(p.read_text())[0].equals(df)
    with pytest.raises(ValueError):
        hgrm.write_hgrm(counts[:-1], lows, tmp_path / "bad.hgrm")


def test_hgrm_range_ends_at_the_largest_value():
    """The file's HdrHistogram spans 1 ns .. the largest recorded value (its iterators are
    Python loops over the whole range); every row is that of the full 2^42 ns range."""
    from hdrh.histogram import HdrHistogram

    from lobreplay.reports import hgrm
    from lobreplay.core._coreapi import bucket_lows, hist_index
    lows = bucket_lows()
    counts = np.zeros(len(lows), np.uint64)
    rng = np.random.default_rng(5)
    for v in np.concatenate([rng.integers(30, 400, 3000), rng.integers(2_000, 3_000_000, 200), [2**39]]):
        counts[hist_index(int(v))] += 1
    full = HdrHistogram(1, 1 << 42, 3)
    for i in np.flatnonzero(counts):
        full.record_value(int(lows[i]), int(counts[i]))
    text, want = hgrm.hgrm_text(counts, lows), hgrm._text(full, 5)
    rows = [line for line in text.splitlines() if not line.startswith("#[Buckets")]
    assert rows == [line for line in want.splitlines() if not line.startswith("#[Buckets")]
    assert len(rows) > 50 and "Buckets =           30," in text and "Buckets =           33," in want
    # the same range through the package alone: the same file, byte for byte (hgrm._fast)
    plain = HdrHistogram(1, int(lows[np.flatnonzero(counts)[-1]]), 3)
    for i in np.flatnonzero(counts):
        plain.record_value(int(lows[i]), int(counts[i]))
    assert text == hgrm._text(plain, 5)
    # a book's coarse buckets (several core values to one bucket) too
    from lobreplay.core._coreapi import book_bucket_lows, book_hist_index
    blows = book_bucket_lows()
    coarse = np.zeros(len(blows), np.uint64)
    for v in rng.integers(20, 5_000_000, 4000):
        coarse[book_hist_index(int(v))] += 1
    plain = HdrHistogram(1, int(blows[np.flatnonzero(coarse)[-1]]), 3)
    for i in np.flatnonzero(coarse):
        plain.record_value(int(blows[i]), int(coarse[i]))
    assert hgrm.hgrm_text(coarse, blows) == hgrm._text(plain, 5)
    empty = hgrm.read_hgrm(hgrm.hgrm_text(np.zeros(len(lows), np.uint64), lows))[1]
    assert empty["TotalCount"] == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 10**6)), min_size=1, max_size=40),
       st.sampled_from([1, 2, 5, 10]), st.booleans())
def test_hgrm_rows_match_the_package(buckets, ticks, coarse):
    """hgrm's percentile rows step from one non-empty bucket to the next (hgrm._fast); the
    package steps through every bucket: the same text, byte for byte, for any histogram,
    tick density and bucket layout."""
    from hdrh.histogram import HdrHistogram

    from lobreplay.reports import hgrm
    from lobreplay.core._coreapi import book_bucket_lows, bucket_lows
    lows = book_bucket_lows() if coarse else bucket_lows()
    counts = np.zeros(len(lows), np.uint64)
    for i, c in buckets:
        counts[i % len(lows)] += c
    top = int(lows[np.flatnonzero(counts)[-1]])
    plain = HdrHistogram(1, max(2, top), 3)
    for i in np.flatnonzero(counts):
        plain.record_value(int(lows[i]), int(counts[i]))
    assert hgrm.hgrm_text(counts, lows, ticks_per_half_distance=ticks) == hgrm._text(plain, ticks)


def test_hgrm_from_raw_values(tmp_path):
    """Raw values (ns) into a 1 ns .. 1 s, 3-figure HdrHistogram: the same as one record per value."""
    from hdrh.histogram import HdrHistogram

    from lobreplay.reports import hgrm
    rng = np.random.default_rng(3)
    v = np.concatenate([rng.integers(20, 200, 5000), rng.integers(2000, 90_000, 300), [2 * 10**9]])
    h, clamped = hgrm.values_histogram(v.astype(np.uint32))
    one = HdrHistogram(1, 10**9, 3)
    for x in np.minimum(v, 10**9).tolist():
        one.record_value(x)
    assert clamped == 1 and h.get_total_count() == len(v) == one.get_total_count()
    for q in (50, 90, 99, 99.9, 99.99, 100):
        assert h.get_value_at_percentile(q) == one.get_value_at_percentile(q)
    path, h2, _ = hgrm.write_values_hgrm(v[:-1], tmp_path / "raw.hgrm")
    df, foot = hgrm.read_hgrm(path)
    assert foot["TotalCount"] == len(v) - 1 and foot["Max"] == h2.get_max_value()
    assert df["value"].iloc[0] == v[:-1].min()
    with pytest.raises(ValueError):
        hgrm.values_histogram(np.array([5, -1]))
    with pytest.raises(TypeError):
        hgrm.values_histogram(np.array([1.5]))


def test_tape_of_a_replay_that_starts_mid_day_keeps_integer_prices(tmp_path):
    """The real 09:30 capture refers to orders added before it: its E rows of such orders
    (the core never had them) have no price. They are <NA> in an Int64 column (it was float64 NaN for the whole
    column); the others are the order's price level; the plot draws the priced ones."""
    from lobreplay.itch.replay import ReplayConfig, replay_itch
    from tests.conftest import REAL_ITCH

    replay_itch(str(REAL_ITCH / "nasdaq_20230822_0930.itch"), str(tmp_path / "r"), ReplayConfig(date="2023-08-22"))
    r = A.load(tmp_path / "r")
    t = A.tape(r)
    assert str(t["price"].dtype) == "Int64" and t["price"].isna().any()
    missing = t[t["price"].isna()]
    assert (missing["kind"] == "E").all()
    core = r.executions[r.executions["source"] == "core"]
    assert not set(missing["order_ref"].tolist()) & set(core["order_ref"].tolist())  # orders it never had
    assert (t["price"].dropna() > 0).all()
    sym = str(missing["symbol"].iloc[0])
    assert isinstance(A.plot_tape(r, sym), Figure)
    scaled = A.tape(A.load(tmp_path / "r", scale_prices=True))
    assert scaled["price"].dtype == np.float64 and scaled["price"].isna().sum() == len(missing)
