"""Export the core's latency histograms as HdrHistogram percentile-distribution files (.hgrm).

A `.hgrm` file is the text HdrHistogram's `outputPercentileDistribution` prints: a
"Value Percentile TotalCount 1/(1-Percentile)" table, one row per percentile tick, then a
footer with the mean, standard deviation, max and total count. HdrHistogram's own plotter
(`plotFiles.html`) and HistogramLogAnalyzer read it.

The file is produced by the `hdrhistogram` package (HdrHistogram_py, the HdrHistogram
project's Python port): each non-empty bucket of our histogram is recorded into an
`HdrHistogram` with 3 significant figures at the bucket's lowest value, with the bucket's
count. The session's histograms have exactly HdrHistogram's 3-figure layout (values below
2048 exact, then 1024 buckets per power of two), so every bucket lands in the same
HdrHistogram bucket and the file's percentiles are those of the core's histogram. HDR
prints a bucket by its highest equivalent value (e.g. 2049 for the bucket [2048, 2050)),
whereas `lobreplay.reports.latency.summarize` reports the lowest: the two name the same bucket.
A book's coarse histogram (4 buckets per power of two) is recorded the same way, each count
at its bucket's lowest value, so the file is as coarse as the histogram.

The HdrHistogram's range ends at the largest recorded value (its footer's `Buckets` says how
many powers of two that spans), not at the core's 2^40 ns clamp: the package's percentile
and mean iterators walk every bucket up to the end of the range in Python, so a full-range
histogram took about 0.15 s per file whatever it held, and a replay writes six. The rows
are the same either way (tests/test_analysis.py checks it).

Values are in ns. Requires the `hdrhistogram` package (`pip install lobreplay[analysis]`).
"""
from __future__ import annotations

import bisect
import functools
import io
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lobreplay.core._coreapi import book_bucket_lows, bucket_lows
from lobreplay.core.events import Kind

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["write_hgrm", "hgrm_text", "read_hgrm", "export_session_hgrm", "export_report_hgrm", "hgrm_files", "values_histogram",
           "write_values_hgrm", "SIGNIFICANT_FIGURES"]

SIGNIFICANT_FIGURES = 3


def _hdr():
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("lobreplay.reports.hgrm needs the hdrhistogram package: pip install 'lobreplay[analysis]' "
                          "(or pip install hdrhistogram)") from e
    return HdrHistogram


@functools.cache
def _fast(base):
    """base (HdrHistogram) whose percentile rows, mean and standard deviation visit only
    the non-empty buckets.

    The package computes them with iterators that are Python loops over every bucket up
    to the largest value: the mean and the deviation three times per .hgrm file (the
    deviation computes the mean again), the percentile rows once (six files of a replay
    with timing: about 0.06 s of the 0.08 s they took, mostly stepping through empty
    buckets). These are the same sums and the same rows over the same buckets in the same
    order, so the file is the same, byte for byte (tests/test_analysis.py compares them)."""
    from hdrh.iterators import PercentileIterator

    class FastPercentiles(PercentileIterator):
        """The package's percentile iterator, stepping from one non-empty bucket to the
        next instead of through every bucket between them. An empty bucket changes
        nothing it reports: it adds no count, and a percentile level is only ever
        reached at a bucket with a count (reached_iteration_level)."""

        def __init__(self, histogram, ticks_per_half_distance):
            super().__init__(histogram, ticks_per_half_distance)
            self._find_nonzero()

        def reset_iterator(self, histogram):
            super().reset_iterator(histogram)
            self._find_nonzero()

        def reset(self, histogram=None, percentile_ticks_per_half_distance=0):
            super().reset(histogram, percentile_ticks_per_half_distance)
            self._find_nonzero()

        def _find_nonzero(self):
            h = self.histogram
            self._nonzero = np.flatnonzero(np.ctypeslib.as_array(h.counts)[:h.counts_len]).tolist() + [h.counts_len]

        def increment_sub_bucket(self):
            self.fresh_sub_bucket = True
            self.current_index = self._nonzero[bisect.bisect_right(self._nonzero, self.current_index)]
            self.value_at_index = self.histogram.get_value_from_index(self.current_index)
            self.value_at_next_index = self.histogram.get_value_from_index(self.current_index + 1)

    class FastStats(base):
        def get_percentile_iterator(self, ticks_per_half_distance):
            return FastPercentiles(self, ticks_per_half_distance)

        def _recorded(self):
            counts = np.ctypeslib.as_array(self.counts)[:self.counts_len]
            for i in np.flatnonzero(counts).tolist():
                yield self._hdr_median_equiv_value(self.get_highest_equivalent_value(self.get_value_from_index(i))), \
                    int(counts[i])

        def get_mean_value(self):
            if not self.total_count:
                return 0.0
            return float(sum(c * v for v, c in self._recorded())) / self.total_count

        def get_stddev(self):
            if not self.total_count:
                return 0.0
            mean, total = self.get_mean_value(), 0.0
            for v, c in self._recorded():
                dev = v * 1.0 - mean
                total += (dev * dev) * c
            return math.sqrt(total / self.total_count)
    return FastStats


def _histogram(counts, lows):
    counts = np.asarray(counts)
    lows = np.asarray(lows)
    if counts.shape != lows.shape:
        raise ValueError(f"counts has {counts.shape[0] if counts.ndim else 0} buckets, bucket_lows {len(lows)}")
    if counts.dtype.kind in "if" and (counts < 0).any():
        raise ValueError("negative bucket count")
    nonzero = np.flatnonzero(counts)
    highest = max(2, int(lows[nonzero[-1]])) if len(nonzero) else 2  # the range ends where the values do
    h = _fast(_hdr())(1, highest, SIGNIFICANT_FIGURES)
    for i in nonzero:
        h.record_value(int(lows[i]), int(counts[i]))
    return h


def _text(h, ticks_per_half_distance: int) -> str:
    buf = io.BytesIO()
    h.output_percentile_distribution(buf, 1, ticks_per_half_distance)
    return buf.getvalue().decode("ascii")


def _write(path, text: str) -> Path:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def hgrm_text(counts, bucket_lows, *, ticks_per_half_distance: int = 5) -> str:
    """The .hgrm text of a histogram: counts per bucket, and each bucket's lowest value (ns)."""
    return _text(_histogram(counts, bucket_lows), ticks_per_half_distance)


def write_hgrm(counts, bucket_lows, path, *, ticks_per_half_distance: int = 5) -> Path:
    """Write one histogram as a .hgrm file (values in ns); returns the path.

    `counts` and `bucket_lows` go together: `Session.histogram(kind)` with
    `lobreplay.core._coreapi.bucket_lows()`, or `Session.book_histogram(...)` with
    `book_bucket_lows()`."""
    return _write(path, hgrm_text(counts, bucket_lows, ticks_per_half_distance=ticks_per_half_distance))


def values_histogram(values, *, lowest: int = 1, highest: int = 10**9,
                     significant_figures: int = SIGNIFICANT_FIGURES):
    """Raw values (e.g. ns per operation, as integers) recorded into an `HdrHistogram`
    trackable from `lowest` to `highest` (default 1 ns .. 1 s) with 3 significant figures:
    each distinct value once, with its count (the same histogram as one record per value).
    Returns (histogram, clamped): values above `highest` are recorded as `highest` and
    counted in `clamped`; negative values are an error."""
    v = np.asarray(values)
    if v.dtype.kind not in "iu":
        raise TypeError(f"values: expected integers, got {v.dtype}")
    v = v.astype(np.int64, copy=False).ravel()
    if len(v) and v.min() < 0:
        raise ValueError("negative value")
    clamped = int((v > highest).sum())
    h = _fast(_hdr())(lowest, highest, significant_figures)
    uniq, cnt = np.unique(np.minimum(v, highest), return_counts=True)
    for x, c in zip(uniq.tolist(), cnt.tolist()):
        h.record_value(x, c)
    return h, clamped


def write_values_hgrm(values, path, *, lowest: int = 1, highest: int = 10**9,
                      significant_figures: int = SIGNIFICANT_FIGURES, ticks_per_half_distance: int = 5):
    """Write raw values as a .hgrm file (see `values_histogram`). Returns (path, histogram, clamped)."""
    h, clamped = values_histogram(values, lowest=lowest, highest=highest, significant_figures=significant_figures)
    return _write(path, _text(h, ticks_per_half_distance)), h, clamped


def export_session_hgrm(session, out_dir, *, instrument: int | None = None, prefix: str = "latency") -> dict:
    """One .hgrm file per event kind with samples, plus ALL (every kind), from a session
    with timing on (`Session.set_timing(True)`; also `L2Replay.session`).

    With `instrument`, the book's coarse histograms instead of the session's. Files are
    named `<prefix>_<KIND>.hgrm` (`<prefix>_<instrument>_<KIND>.hgrm` for a book).
    Returns {kind name: path}; nothing is written for a kind without samples."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if instrument is None:
        hists = {k.name: np.asarray(session.histogram(k), np.uint64) for k in Kind}
        lows, tag = bucket_lows(), prefix
    else:
        hists = {k.name: np.asarray(session.book_histogram(instrument, k), np.uint64) for k in Kind}
        lows, tag = book_bucket_lows(), f"{prefix}_{instrument}"
    return {name: write_hgrm(h, lows, path) for name, (h, path) in hgrm_files(hists, out, tag).items()}


def export_report_hgrm(report_dir, out_dir=None, *, prefix: str = "latency") -> dict:
    """The .hgrm files of a report directory's latency_histograms.parquet (the whole
    session's histograms, as a replay with timing on writes them): one per event kind and
    ALL, named as export_session_hgrm names them, into out_dir (default: report_dir).
    A .lobc replay writes the table but not these files (they cost it about 7 ms)."""
    import pyarrow.parquet as pq

    from lobreplay.core._coreapi import hist_index
    src = Path(report_dir) / "latency_histograms.parquet"
    if not src.exists():
        from lobreplay.errors import InputError
        raise InputError(f"{src}: no such file (a replay with timing on writes it)")
    t = pq.read_table(src, columns=["kind", "bucket_low_ns", "count"]).to_pydict()
    lows = bucket_lows()
    hists: dict[str, np.ndarray] = {}
    for kind, low, n in zip(t["kind"], t["bucket_low_ns"], t["count"]):
        hists.setdefault(kind, np.zeros(len(lows), np.uint64))[hist_index(int(low))] += n
    out = Path(out_dir if out_dir is not None else report_dir)
    out.mkdir(parents=True, exist_ok=True)
    return {name: write_hgrm(h, lows, out / f"{prefix}_{name}.hgrm") for name, h in hists.items() if h.any()}


def hgrm_files(hists: dict, out_dir, tag: str = "latency") -> dict:
    """{kind name: (counts, path)} of the .hgrm files of histograms {kind name: counts}:
    every kind with samples, then ALL (their sum), named `<tag>_<KIND>.hgrm`."""
    hists = {name: np.asarray(h, np.uint64) for name, h in hists.items()}
    if hists:
        hists["ALL"] = sum(hists.values())
    return {name: (h, Path(out_dir) / f"{tag}_{name}.hgrm") for name, h in hists.items() if h.any()}


_ROW = re.compile(r"^\s*([0-9.]+)\s+([0-9.]+)\s+([0-9]+)(?:\s+([0-9.]+|Infinity))?\s*$")
_FOOT = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*=\s*([0-9.]+)")


def read_hgrm(path_or_text) -> tuple[pd.DataFrame, dict]:
    """Parse a .hgrm file (or its text): the table (value, percentile 0..1, total_count,
    inverse = 1/(1-percentile), NaN on the last row) and the footer
    ({'Mean', 'StdDeviation', 'Max', 'TotalCount', 'Buckets', 'SubBuckets'}; Java's
    spelling 'Total count' is read as 'TotalCount')."""
    text = str(path_or_text)
    if "\n" not in text:
        text = Path(text).read_text()
    rows, foot = [], {}
    for line in text.splitlines():
        if line.startswith("#"):
            for k, v in _FOOT.findall(line):
                foot[k.replace("Total count", "TotalCount").strip()] = float(v)
            continue
        m = _ROW.match(line)
        if m:
            inv = m.group(4)
            rows.append((float(m.group(1)), float(m.group(2)), int(m.group(3)),
                         float("inf") if inv == "Infinity" else float(inv) if inv else float("nan")))
    import pandas as pd  # here: writing .hgrm files (every replay with timing) does not need it

    df = pd.DataFrame(rows, columns=["value", "percentile", "total_count", "inverse"])
    return df, foot
