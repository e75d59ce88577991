"""lobreplay.reports.latency: the vectorised percentile summaries against a naive one
(one histogram at a time: cumulative sum, first bucket reaching the rank)."""
from __future__ import annotations

import math

import numpy as np

from lobreplay.core._coreapi import book_bucket_lows, bucket_lows
from lobreplay.reports.latency import PERCENTILES, ROW_KEYS, summaries, summarize, summary_rows


def naive(counts, lows):
    total = int(sum(int(c) for c in counts))
    out = {"count": total}
    for q in PERCENTILES:
        if total == 0:
            out[f"p{q:g}"] = 0
            continue
        rank, run = max(1, math.ceil(q / 100.0 * total)), 0
        for i, c in enumerate(counts):
            run += int(c)
            if run >= rank:
                out[f"p{q:g}"] = int(lows[i])
                break
    nz = [i for i, c in enumerate(counts) if c]
    out["max"] = int(lows[nz[-1]]) if nz else 0
    return out


def random_hists(rng, n, lows):
    h = np.zeros((n, len(lows)), np.uint64)
    for row in h[1:]:  # row 0 stays empty
        k = rng.integers(1, 40)
        row[rng.integers(0, len(lows), k)] += rng.integers(1, 10**6, k).astype(np.uint64)
    h[-1, :] = 0
    h[-1, 7] = 1  # a single sample
    return h


def test_summaries_agree_with_the_naive_percentiles():
    rng = np.random.default_rng(5)
    for lows in (bucket_lows(), book_bucket_lows()):
        h = random_hists(rng, 25, lows)
        got = summaries(h)
        for i in range(len(h)):
            want = naive(h[i], lows)
            assert {k: int(v[i]) for k, v in got.items()} == want
            assert summarize(h[i]) == want
        assert got["count"][0] == 0 and got["p50"][-1] == lows[7] == got["max"][-1]


def test_summary_rows_per_kind_then_all():
    lows = bucket_lows()
    a = np.zeros(len(lows), np.uint64)
    b = np.zeros(len(lows), np.uint64)
    a[10], b[2000] = 3, 1
    rows = summary_rows("ALL", None, {"NEW": a, "CANCEL": np.zeros_like(a), "EXEC": b})
    assert [r["kind"] for r in rows] == ["NEW", "EXEC", "ALL"]
    assert list(rows[0]) == list(ROW_KEYS)
    assert (rows[2]["count"], rows[2]["p50_ns"], rows[2]["max_ns"]) == (4, int(lows[10]), int(lows[2000]))
