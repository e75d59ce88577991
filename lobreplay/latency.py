"""Percentiles from the core's log-linear latency histograms."""
from __future__ import annotations

import numpy as np

from ._coreapi import book_bucket_lows, bucket_lows

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


def _lows(counts: np.ndarray) -> np.ndarray:
    """The bucket bounds that go with a histogram: the session's fine one or a book's coarse one."""
    return book_bucket_lows() if len(counts) == len(book_bucket_lows()) else bucket_lows()


def percentile(counts: np.ndarray, q: float) -> int:
    """The q-th percentile (0..100) of a histogram, as the lowest value of the bucket
    holding the sample of that rank (HDR's 'value at percentile', bucket-quantised)."""
    total = int(counts.sum())
    if total == 0:
        return 0
    rank = max(1, int(np.ceil(q / 100.0 * total)))
    idx = int(np.searchsorted(np.cumsum(counts, dtype=np.uint64), rank))
    return int(_lows(counts)[idx])


def summarize(counts: np.ndarray) -> dict:
    """count, p50, p90, p99, p99.9, p99.99 and max (ns) of one histogram."""
    nz = np.flatnonzero(counts)
    out = {"count": int(counts.sum())}
    for q in PERCENTILES:
        out[f"p{q:g}"] = percentile(counts, q)
    out["max"] = int(_lows(counts)[nz[-1]]) if len(nz) else 0
    return out


ROW_KEYS = ("scope", "locate", "kind", "count", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "max_ns")


def summary_rows(scope, locate, hists: dict) -> list[dict]:
    """Latency report rows of one scope: one per event kind with samples, then ALL."""
    hists = dict(hists)
    hists["ALL"] = sum(hists.values())
    rows = []
    for name, h in hists.items():
        if np.any(h):
            s = summarize(np.asarray(h))
            rows.append(dict(zip(ROW_KEYS, (scope, locate, name, s["count"], s["p50"], s["p90"], s["p99"],
                                            s["p99.9"], s["max"]))))
    return rows


def report_rows(session, books) -> dict[str, list]:
    """The rows of a latency report: per event kind and ALL, for the whole session
    (scope "ALL", from its fine histograms) and for each book (scope = its name, from
    the book's coarse histogram). books: (name, instrument id) pairs."""
    from .events import Kind

    rows = summary_rows("ALL", None, {k.name: session.histogram(k) for k in Kind})
    for name, instrument in books:
        rows += summary_rows(name, instrument,
                             {k.name: session.book_histogram(instrument, k).astype(np.uint64) for k in Kind})
    return {key: [r[key] for r in rows] for key in ROW_KEYS}


def histogram_table(hists: dict):
    """Non-empty buckets of {kind: fine histogram counts} as an Arrow table
    (kind, bucket_low_ns, bucket_high_ns, count): the histograms themselves, beside the
    percentile rows, so a report directory can be plotted as a histogram."""
    import pyarrow as pa

    lows = bucket_lows()
    cols = {"kind": [], "bucket_low_ns": [], "bucket_high_ns": [], "count": []}
    for kind, h in hists.items():
        h = np.asarray(h)
        nz = np.flatnonzero(h)
        cols["kind"] += [kind] * len(nz)
        cols["bucket_low_ns"] += lows[nz].astype(np.int64).tolist()
        cols["bucket_high_ns"] += (lows[np.minimum(nz + 1, len(lows) - 1)].astype(np.int64)).tolist()
        cols["count"] += h[nz].astype(np.int64).tolist()
    return pa.table({"kind": pa.array(cols["kind"], pa.string()),
                     "bucket_low_ns": pa.array(cols["bucket_low_ns"], pa.int64()),
                     "bucket_high_ns": pa.array(cols["bucket_high_ns"], pa.int64()),
                     "count": pa.array(cols["count"], pa.int64())})
