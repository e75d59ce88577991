"""Shared fixtures: the real ITCH fixtures beside the checkout, and small
synthetic days generated once per test session."""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_ITCH = ROOT.parent / "shared" / "data" / "itch"

# Every replay in the tests scans its file: the sizing cache (lobreplay.replay.cache) is off, and
# on in the tests of it only (test_sizing_cache.py), each with a directory of its own.
# (os.environ: the command-line tests' child processes inherit it.)
os.environ["LOBREPLAY_CACHE_DIR"] = "off"


def real_itch_files() -> list[Path]:
    files = sorted(p for p in SHARED_ITCH.glob("*") if p.suffix in (".itch", ".pcap"))
    assert files, f"the real ITCH fixtures are missing: expected them in {SHARED_ITCH}"
    return files


@pytest.fixture(scope="session")
def synthetic_day(tmp_path_factory):
    """A 60k-message synthetic day (20 symbols) with its ground truth."""
    from lobreplay.testing.itch_synth import generate_day
    path = tmp_path_factory.mktemp("day") / "20191230.synthetic.itch"
    return generate_day(path, n_messages=60_000, n_symbols=20, seed=11)
