"""Golden digests of the JSONL -> .lobc conversion (lobreplay.binance.convert) of every real
Binance recording bundled in data/real/binance.

    .venv/bin/python tests/convert_golden.py --write   # regenerate tests/golden/convert.json
    .venv/bin/python tests/convert_golden.py           # compare the current code against it

The file was first written by the Python converter, before depth messages were decoded in C
(csrc/feeds/bnjson.c); tests/binance/test_binance_decode.py compares every conversion against it: the
records byte for byte (a SHA-256), the block layout, the metadata (but its creation time) and
the converter's statistics (but its timings; its bytes after the file's header, whose length
follows the source paths).
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import golden_common  # noqa: E402
from golden_common import RECORDINGS  # noqa: E402
from lobreplay.l2 import lobc  # noqa: E402
from lobreplay.binance.convert import convert  # noqa: E402

GOLDEN = HERE / "golden" / "convert.json"
TIMING = ("seconds", "cpu_seconds", "level_updates_per_s", "dst")


def digest(path: Path, stats: dict) -> dict:
    data = lobc.read(path)
    meta = {k: v for k, v in data.meta.items() if k != "created_ns"}
    meta["source"] = ",".join(Path(p).name for p in str(meta.get("source", "")).split(","))
    st = {k: v for k, v in stats.items() if k not in TIMING}
    # the header holds the source paths as given (where the checkout
    # is), padded to 64-byte units: the bytes written must be the file's, and the golden
    # figure is the bytes after the header (a longer path once added a unit)
    assert stats["bytes"] == data.size, (stats["bytes"], data.size)
    st["bytes"] = stats["bytes"] - lobc._open(path)[2]
    return json.loads(json.dumps({
        "records": len(data.records), "blocks": data.blocks, "whole": data.whole,
        "sha256": hashlib.sha256(data.records.tobytes()).hexdigest(), "meta": meta, "stats": st}, default=str))


def compute(**kw) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, srcs in RECORDINGS.items():
            dst = Path(tmp) / f"{name}.lobc"
            st = convert(srcs if len(srcs) > 1 else srcs[0], dst, **kw)
            out[name] = digest(dst, st)
    return out


def _differing(g: dict, n: dict) -> list[str]:
    return sorted(k for k in set(g) | set(n) if g.get(k) != n.get(k))


def compare(golden: dict, got: dict) -> list[str]:
    """One line per recording that differs, naming the keys, and for a dict-valued key (the
    stats, the metadata) the entries that differ, golden value first."""
    bad = []
    for name in sorted(set(golden) | set(got)):
        g, n = golden.get(name) or {}, got.get(name) or {}
        if g != n:
            keys = _differing(g, n)
            detail = [f"{k}.{e}: {g[k].get(e)!r} -> {n[k].get(e)!r}" for k in keys
                      if isinstance(g.get(k), dict) and isinstance(n.get(k), dict) for e in _differing(g[k], n[k])]
            bad.append(f"{name}: differs in {keys}" + (f" ({'; '.join(detail)})"[:2000] if detail else ""))
    return bad


def main() -> int:
    return golden_common.run(GOLDEN, compute, compare, "conversions", __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
