"""benchmarks/bench_hdr.py end to end at a tiny scale: the C driver builds against the
core, every run is written as raw latencies, a .hgrm file and a table row, and no run
allocates inside its measured loop (the driver's own checks make it exit 1 otherwise)."""
import json
import subprocess
import sys
from pathlib import Path

from lobreplay.reports.hgrm import read_hgrm

ROOT = Path(__file__).resolve().parent.parent
RUNS = ["add_only", "cancel_only", "aggressive_walk", "notional_walk", "mixed_70_20_10",
        "mixed_70_20_10_open_1M", "mixed_70_20_10_open_2M", "mixed_70_20_10_open_5M", "thin_book_sweep",
        "mass_cancel_burst", "self_trade_cancel_resting", "self_trade_cancel_incoming", "self_trade_cancel_both"]


def test_the_latency_suite_at_a_tiny_scale(tmp_path):
    out = tmp_path / "hdr"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_hdr.py"), "--scale", "0.004",
                        "--out", str(out), "--exe", str(tmp_path / "bench_hdr"), "--clock", "mono"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert [r["name"] for r in summary["runs"]] == RUNS
    assert summary["clock"]["used"] == "CLOCK_MONOTONIC" and summary["clock"]["cost_ns"] > 0
    table = (out / "table.md").read_text()
    for r in summary["runs"]:
        assert r["loop"]["core_allocs"] == r["loop"]["proc_allocs"] == r["loop"]["proc_frees"] == 0
        # set-up: nothing allocated but what the core did (its arena's blocks are mappings,
        # which the counting malloc does not see: fewer in the process than in the core)
        assert 0 < r["setup"]["proc_allocs"] <= r["setup"]["core_allocs"]
        assert r["rejects"] == 0 and not r["failed"] and r["samples"] > 0
        df, foot = read_hgrm(out / f"{r['name']}.hgrm")
        assert foot["TotalCount"] == r["samples"] and len(df) > 3
        assert f"| {r['name']}" in table
    stp = {r["name"]: r for r in summary["runs"] if r["name"].startswith("self_trade")}
    assert all(r["stp_records"] > 0 and r["aggressive_stp"] > 0 for r in stp.values())
    assert "allocations/op" in table and "batch mean" in table
