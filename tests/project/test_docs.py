"""The README's Python example runs as written (docs stay true to the code)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_example_runs(monkeypatch):
    monkeypatch.chdir(ROOT)  # (the examples name the bundled sample day from the repository's root)
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python example"
    ns: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), ns)
    assert ns["fill"].trades == [(2, 1000100, 200)]
    assert ns["out"].results["status"].tolist() == [0, 0, 0]
    assert ns["out"].execs["qty"].tolist() == [40]
    assert ns["s"].book(7).best_bid() == (1_000_000, 50, 1)


def test_readme_names_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "make demo" in text and "make test" in text


def test_python_md_examples_run(monkeypatch):
    """Every python block of docs/python.md runs, in order, in one namespace, from the
    repository's root; what they show holds."""
    import shutil
    monkeypatch.chdir(ROOT)
    text = (ROOT / "docs" / "python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 8
    ns: dict = {}
    try:
        for i, code in enumerate(blocks):
            exec(compile(code, f"docs/python.md, block {i + 1}", "exec"), ns)
    finally:
        if "WORK" in ns:
            shutil.rmtree(ns["WORK"], ignore_errors=True)
    assert ns["summary"]["status"] == "ok" and ns["summary"]["desyncs"] == 0
    assert ns["spread"] > 0 and ns["changes"] > 0
    assert ns["rep"].bbo["symbol"].astype(str).isin(["FTC", "MMPF"]).all()
    assert ns["steps"] and ns["steps"][-1].last == ns["conv"]["records"] // 2   # the cut: before that record
    asks = ns["asks"]
    assert len(asks) == 3 and [p for p, _, _ in asks] == sorted(p for p, _, _ in asks)
    assert all(isinstance(p, int) and q > 0 and n == 1 for p, q, n in asks)   # one order per level


def test_python_md_names_every_public_name_a_replay_is_driven_with():
    """Every name of lobreplay.__all__ but the core's (docs/core.md, the README) is in
    docs/python.md, and the README links it."""
    import lobreplay as lr
    text = (ROOT / "docs" / "python.md").read_text()
    core = {"Session", "OrderBook", "BookView", "BatchResult", "Fill", "EVENT_DTYPE", "EXEC_DTYPE", "RESULT_DTYPE",
            "BBO_DTYPE", "DESYNC_DTYPE", "Kind", "Side", "TIF", "Status", "Flag", "Cause", "__version__"}  # docs/core.md
    missing = [n for n in lr.__all__ if n not in core and f"`{n}" not in text]
    assert not missing, f"docs/python.md does not document {missing}"
    assert "docs/python.md" in (ROOT / "README.md").read_text()
