"""benchmarks/RESULTS.md holds current figures only: `make bench-itch-full` replaces its section's
previous run (it put each new run above the old ones), and the peers bench its own."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_full_day_figures_replace_the_previous_run(tmp_path):
    b = _module("bench_itch")
    src = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert src.count(b.START) == src.count(b.END) == 1 and b.SECTION in src
    res = tmp_path / "RESULTS.md"
    res.write_text(src)
    b.write_section(res, "run one\n")
    b.write_section(res, "run two\n")
    out = res.read_text()
    pre, post = src[:src.index(b.START)], src[src.index(b.END) + len(b.END):]
    assert out == f"{pre}{b.START}\nrun two\n\n{b.END}{post}"
    # a file without the markers gets the section once, then it is replaced as above
    res.write_text("# Benchmark results\n")
    b.write_section(res, "first")
    b.write_section(res, "second")
    assert res.read_text() == f"# Benchmark results\n\n{b.SECTION}\n\n{b.START}\nsecond\n\n{b.END}\n"


def test_results_point_to_the_history_and_keep_the_cited_sections():
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert "`git log -p benchmarks/RESULTS.md`" in text.split("\n## ", 1)[0]
    for heading in ("### Capacity matters", "## Latency suite", "## Binance paths", "## Peers side by side"):
        assert heading in text, heading   # docs/core.md, docs/l2.md and the Makefile name them
