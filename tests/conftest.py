"""Shared fixtures: where the real fixtures bundled with the repository are (REAL), and small
synthetic days generated once per test session."""
import os
from pathlib import Path

import pytest
from hypothesis import settings

# hypothesis: HYPOTHESIS_PROFILE=dev (the default: random examples, failures remembered in
# .hypothesis/ and tried first next time), ci (.ci/run: the same examples on every run, nothing
# remembered, so CI is repeatable), expensive (more examples and longer state-machine runs, by
# hand). The state machines of test_differential.py size their runs by the profile's name.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, database=None, print_blob=True)
settings.register_profile("expensive", deadline=None, max_examples=1000)
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
if HYPOTHESIS_PROFILE not in ("dev", "ci", "expensive"):
    raise pytest.UsageError(f"HYPOTHESIS_PROFILE must be dev, ci or expensive, got {HYPOTHESIS_PROFILE!r}")
settings.load_profile(HYPOTHESIS_PROFILE)

ROOT = Path(__file__).resolve().parent.parent
# The real fixtures (ITCH, LOBSTER, Binance) travel with the repository: data/real/<source>/, each
# folder with its PROVENANCE.md, every file checked against data/real/checksums.tsv
# (tests/test_real_data.py). Every test and helper that reads one names it from here.
REAL = ROOT / "data" / "real"
REAL_ITCH = REAL / "itch"
REAL_LOBSTER = REAL / "lobster"
REAL_BINANCE = REAL / "binance"

# Every replay in the tests scans its file: the sizing cache (lobreplay.replay.cache) is off, and
# on in the tests of it only (test_sizing_cache.py), each with a directory of its own.
# (os.environ: the command-line tests' child processes inherit it.)
os.environ["LOBREPLAY_CACHE_DIR"] = "off"


def real_itch_files() -> list[Path]:
    files = sorted(p for p in REAL_ITCH.glob("*") if p.suffix in (".itch", ".pcap"))
    assert files, f"the real ITCH fixtures are missing: expected them in {REAL_ITCH}"
    return files


@pytest.fixture(scope="session")
def synthetic_day(tmp_path_factory):
    """A 60k-message synthetic day (20 symbols) with its ground truth."""
    from lobreplay.testing.itch_synth import generate_day
    path = tmp_path_factory.mktemp("day") / "20191230.synthetic.itch"
    return generate_day(path, n_messages=60_000, n_symbols=20, seed=11)
