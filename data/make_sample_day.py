"""Make data/sample_day.itch.gz and data/sample_day.truth.json: a small synthetic
NASDAQ TotalView-ITCH 5.0 day (BinaryFILE framing, gzip) and what is in it.

    .venv/bin/python data/make_sample_day.py            # (re)write both files, print their checksums
    .venv/bin/python data/make_sample_day.py --check    # regenerate in memory and compare, write nothing

The generator is lobreplay.testing.itch_synth with a fixed seed, so the decompressed
stream is the same on every machine. The gzip bytes are reproducible too
(mtime 0, no file name), but may differ with another zlib build: --check
compares the decompressed stream.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout even without an install

from lobreplay.testing.itch_synth import generate_day  # noqa: E402

PARAMS = dict(n_messages=65_000, n_symbols=50, seed=20191230, date="2019-12-30")
ITCH = "sample_day.itch.gz"
TRUTH = "sample_day.truth.json"


def make(out_dir: Path):
    itch = out_dir / ITCH
    truth = generate_day(itch, gzip=True, compresslevel=9, **PARAMS)
    truth = dataclasses.replace(truth, path=f"data/{ITCH}", elapsed_s=0.0)
    (out_dir / TRUTH).write_text(truth.to_json(indent=None) + "\n")
    return truth


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="regenerate in a temporary directory and compare")
    a = ap.parse_args(argv)
    if a.check:
        with tempfile.TemporaryDirectory() as tmp:
            make(Path(tmp))
            new_stream = gzip.decompress((Path(tmp) / ITCH).read_bytes())
            new_truth = (Path(tmp) / TRUTH).read_text()
        old_stream = gzip.decompress((HERE / ITCH).read_bytes())
        ok = new_stream == old_stream and new_truth == (HERE / TRUTH).read_text()
        print("sample day is up to date" if ok else "sample day differs from what the generator makes now")
        return 0 if ok else 1
    truth = make(HERE)
    gz = (HERE / ITCH).read_bytes()
    raw = gzip.decompress(gz)
    print(f"{ITCH}: {len(gz):,} bytes, sha256 {sha256(gz)}")
    print(f"  decompressed: {len(raw):,} bytes, sha256 {sha256(raw)}")
    print(f"{TRUTH}: {(HERE / TRUTH).stat().st_size:,} bytes, sha256 {sha256((HERE / TRUTH).read_bytes())}")
    print(f"messages: {truth.n_messages:,}  by type: "
          + ", ".join(f"{t} {c:,}" for t, c in sorted(truth.counts.items(), key=lambda kv: -kv[1])))
    print(f"symbols: {len(truth.symbols)}  peak live orders: {truth.peak_live_total:,}  "
          f"aggressor groups: {truth.n_aggressor_groups:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
