"""Percentiles from the core's log-linear latency histograms."""
from __future__ import annotations

import numpy as np

from lobreplay.core import arrow as _arrow
from lobreplay.core._coreapi import book_bucket_lows, bucket_lows

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)
# A replay times every Nth core event by default (--timing-every): a histogram needs thousands of
# samples, not millions, and timing every event costs two clock readings' worth per event
# (benchmarks/RESULTS.md). The rate is in summary.json (clock.timing_every) and in the latency
# table's `count` (the events timed).
TIMING_EVERY = 16


def check_timing_every(every) -> int:
    """timing_every of a replay config: a whole number >= 1, or None for TIMING_EVERY."""
    from lobreplay.errors import InputError
    if every is None:
        return TIMING_EVERY
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise InputError(f"timing_every: expected a whole number >= 1 (1: every event), got {every!r}")
    return int(every)


def _lows(n_buckets: int) -> np.ndarray:
    """The bucket bounds that go with a histogram of n buckets: the session's fine one or a book's coarse one."""
    return book_bucket_lows() if n_buckets == len(book_bucket_lows()) else bucket_lows()


def percentile(counts: np.ndarray, q: float) -> int:
    """The q-th percentile (0..100) of a histogram, as the lowest value of the bucket
    holding the sample of that rank (HDR's 'value at percentile', bucket-quantised)."""
    return int(summaries(np.asarray(counts), (q,))[f"p{q:g}"])


def summaries(counts: np.ndarray, percentiles=PERCENTILES) -> dict[str, np.ndarray]:
    """count, the percentiles and max (ns) of many histograms at once: counts has the
    buckets on its last axis; each figure has the shape of the other axes (0 where
    a histogram is empty). Percentiles are bucket-quantised, as in `percentile`."""
    counts = np.asarray(counts)
    if counts.dtype.kind not in "iu" or (counts.dtype.kind == "i" and counts.size and counts.min() < 0):
        raise ValueError(f"counts: expected histogram bucket counts (integers >= 0), got {counts.dtype} "
                         f"{'with negative values' if counts.dtype.kind == 'i' else 'values'}")
    bad = [q for q in percentiles if not 0 <= q <= 100]
    if bad:
        raise ValueError(f"percentiles: expected values in 0..100, got {bad}")
    counts = counts.astype(np.uint64, copy=False)
    lows = _lows(counts.shape[-1])
    cum = np.cumsum(counts, axis=-1, dtype=np.uint64)
    total = cum[..., -1] if counts.shape[-1] else np.zeros(counts.shape[:-1], np.uint64)
    out = {"count": total.astype(np.int64)}
    for q in percentiles:
        rank = np.maximum(1, np.ceil(q / 100.0 * total.astype(np.float64))).astype(np.uint64)
        idx = np.minimum((cum < rank[..., None]).sum(axis=-1), counts.shape[-1] - 1)  # searchsorted, left
        out[f"p{q:g}"] = np.where(total > 0, lows[idx], 0).astype(np.int64)
    last = counts.shape[-1] - 1 - np.argmax(counts[..., ::-1] > 0, axis=-1)
    out["max"] = np.where(total > 0, lows[last], 0).astype(np.int64)
    return out


def summarize(counts: np.ndarray) -> dict:
    """count, p50, p90, p99, p99.9, p99.99 and max (ns) of one histogram."""
    return {k: int(v) for k, v in summaries(np.asarray(counts)).items()}


ROW_KEYS = ("scope", "instrument", "kind", "count", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "max_ns")
_FIGURES = ("count", "p50", "p90", "p99", "p99.9", "max")


def _columns(scopes: list, locates: list, kinds: list[str], hists: np.ndarray) -> dict[str, list]:
    """Report columns for hists shaped (scopes, kinds + ALL, buckets): per scope, each
    kind with samples, then ALL (one row each)."""
    hists = np.concatenate([hists, hists.sum(axis=1, keepdims=True)], axis=1)
    s = summaries(hists)
    i, k = np.nonzero(s["count"] > 0)  # (row-major: scope by scope, kinds in order)
    names = np.array(list(kinds) + ["ALL"], dtype=object)
    cols = {"scope": np.array(scopes, dtype=object)[i].tolist(),
            "instrument": np.array(locates, dtype=object)[i].tolist(),
            "kind": names[k].tolist()}
    for key, f in zip(ROW_KEYS[3:], _FIGURES):
        cols[key] = s[f][i, k].tolist()
    return cols


def summary_rows(scope, locate, hists: dict) -> list[dict]:
    """Latency report rows of one scope: one per event kind with samples, then ALL."""
    cols = _columns([scope], [locate], list(hists),
                    np.stack([np.asarray(h, np.uint64) for h in hists.values()])[None])
    return [dict(zip(ROW_KEYS, row)) for row in zip(*(cols[key] for key in ROW_KEYS))]


def report_rows(session, books) -> dict[str, list]:
    """The rows of a latency report: per event kind and ALL, for the whole session
    (scope "ALL", from its fine histograms) and for each book (scope = its name, from
    the book's coarse histogram), all books summarised in one pass.
    books: (name, instrument id) pairs."""
    from lobreplay.core.events import Kind

    kinds = [k.name for k in Kind]
    cols = _columns(["ALL"], [None], kinds, np.stack([session.histogram(k) for k in Kind])[None])
    if books:
        names, ids = zip(*books)
        hists = session.book_histograms(ids)[:, [int(k) for k in Kind]].astype(np.uint64)
        per_book = _columns(list(names), list(ids), kinds, hists)
        cols = {key: cols[key] + per_book[key] for key in ROW_KEYS}
    return cols


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
    return pa.table({"kind": _arrow.strings(cols["kind"]),
                     "bucket_low_ns": _arrow.array(np.array(cols["bucket_low_ns"], np.int64)),
                     "bucket_high_ns": _arrow.array(np.array(cols["bucket_high_ns"], np.int64)),
                     "count": _arrow.array(np.array(cols["count"], np.int64))})
