"""The README's Python example runs as written (docs stay true to the code)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
