"""The notebooks run top to bottom (nbclient, a kernel on this interpreter, Agg backend) and
show what they say they show. They are executed in memory; the committed files are not touched."""
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
TIMEOUT = 600  # seconds per cell


def run(name: str, monkeypatch, **env):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    return nb


def outputs(nb):
    """Every code cell's outputs as (texts, number of PNG images), and errors."""
    texts, images, errors = [], 0, []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                texts.append(o.text)
            elif o.output_type in ("execute_result", "display_data"):
                texts.append(o.data.get("text/plain", ""))
                images += "image/png" in o.data
            elif o.output_type == "error":
                errors.append(f"{o.ename}: {o.evalue}")
    return "\n".join(texts), images, errors


def test_kernel_is_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] in ("python", "python3", sys.executable)  # nbclient runs "python" as sys.executable


@pytest.mark.parametrize("name", ["replay_itch.ipynb", "binance_capture.ipynb"])
def test_committed_notebooks_are_executed_and_small(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))  # top to bottom, once
    text, images, errors = outputs(nb)
    assert not errors and images >= 3
    assert (NOTEBOOKS / name).stat().st_size < 600_000


@pytest.mark.slow
def test_replay_itch_notebook(monkeypatch):
    nb = run("replay_itch.ipynb", monkeypatch)
    text, images, errors = outputs(nb)
    assert not errors
    assert "'status': 'ok'" in text and "'messages': 65000" in text and "'desyncs': 0" in text
    assert "sample_day.itch.gz" in text and "c1af4f506498e95be0c50a8733aec074f64eb114b19b115144082d8fc1776e54" in text
    assert re.search(r"^[A-Z]+ - \d+ bbo changes", text, re.M)
    assert images == 5  # desyncs, latency, bbo, depth heatmap, tape


@pytest.mark.slow
def test_binance_notebook(monkeypatch):
    nb = run("binance_capture.ipynb", monkeypatch)
    text, images, errors = outputs(nb)
    assert not errors
    m = re.search(r"bookTicker match rate: ([0-9.]+)% \(([0-9,]+) of ([0-9,]+) comparable points", text)
    assert m, text[:2000]
    rate, matches, comparable = float(m.group(1)), int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))
    assert rate >= 99.9 and comparable > 6000 and comparable - matches == 2  # the two misses of docs/l2.md
    assert "ok - 6493 messages applied, 0 desyncs" in text
    assert "update ids checked by the spot rule; 651 depth samples" in text
    assert "651 samples; all in sync: True" in text
    assert images == 4  # bbo, tape, latency, depth heatmap


def test_binance_notebook_stops_clearly_without_data(monkeypatch, tmp_path):
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="recordings are missing"):
        run("binance_capture.ipynb", monkeypatch, LOBREPLAY_DATA=str(tmp_path / "nothing"))
