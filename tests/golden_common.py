"""What the golden-digest scripts (tests/*_golden.py) share: the real Binance recordings
they digest, and their command line (compare the current code's digests with the golden
file, or rewrite it with --write)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

from conftest import REAL_BINANCE as BINANCE  # noqa: E402  (the golden scripts put tests/ on sys.path)
HFT = BINANCE / "hftbacktest"
# name -> the recording(s) converted as one
RECORDINGS = {
    "spot_20240808": [HFT / "spot" / "btcusdt_20240808.gz"],
    "spot_20240809": [HFT / "spot" / "btcusdt_20240809.gz"],
    "spot_20240808_09": [HFT / "spot" / "btcusdt_20240808.gz", HFT / "spot" / "btcusdt_20240809.gz"],
    "usdm_20240808": [HFT / "usdm" / "btcusdt_20240808.gz"],
    "cryptofeed_spot": [BINANCE / "cryptofeed" / "BINANCE.ws.1.0"],
    "cryptofeed_usdm": [BINANCE / "cryptofeed" / "BINANCE_FUTURES.ws.1.0"],
}


def run(golden: Path, compute: Callable[[], dict], compare: Callable[[dict, dict], list[str]], noun: str,
        description: str) -> int:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--write", action="store_true", help="write the golden file instead of comparing")
    args = ap.parse_args()
    got = compute()
    if args.write:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {golden.relative_to(golden.parents[2])}: {len(got)} {noun}")
        return 0
    bad = compare(json.loads(golden.read_text()), got)
    for b in bad:
        print(b)
    print(f"{len(got)} {noun}, {len(bad)} difference(s)")
    return 1 if bad else 0
