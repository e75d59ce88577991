"""The book viewer (lobreplay.reports.viewer, `lobreplay view`): the page's embedded data and its
sampling (fast), and the page as Chromium renders it (marked `browser`: needs
/usr/bin/chromium, fails without it; run with `-m browser`)."""
import json
import os
import re
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lobreplay.cli.view import add_commands
from lobreplay.errors import InputError, LobError
from lobreplay.itch.replay import ReplayConfig, replay_itch
from lobreplay.reports.viewer import build_view, fmt_price, fmt_qty, fmt_time

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample_day.itch.gz"
CHROMIUM = "/usr/bin/chromium"
SIZE_LIMIT = 3 << 20  # the page stays well under a few MB


def embedded(html_path) -> dict:
    text = Path(html_path).read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    assert m, "no embedded data block"
    return json.loads(m.group(1).replace("<\\/", "</"))


# ---------------------------------------------------------------- hand-made reports (fast)

META = {b"price_scale": b"10000", b"session_date": b"2019-12-30", b"source_file": b"made.itch",
        b"lobreplay_version": b"test"}


def _write(path, cols: dict):
    t = pa.table(cols)
    pq.write_table(t.replace_schema_metadata(META), path)


def _sym(values):
    return pa.array(values).dictionary_encode()


def make_reports(d: Path, n_depth=5000, levels=3, with_depth=True):
    """AAA: n_depth depth rows (one a second from 09:30), 2 levels used of `levels`;
    BBB: 10 rows. Executions of AAA: one E every 7 s (core row for its price) and a P."""
    d.mkdir(parents=True, exist_ok=True)
    t0 = 34_200 * 10**9
    if with_depth:
        rows = {"event_ns": [], "instrument": [], "symbol": []}
        cols = {f"{s}_{f}_{i}": [] for i in range(1, levels + 1) for s in ("bid", "ask") for f in ("price", "qty", "count")}
        for sym, loc, n in (("AAA", 1, n_depth), ("BBB", 2, 10)):
            for k in range(n):
                rows["event_ns"].append(t0 + k * 10**9)
                rows["instrument"].append(loc)
                rows["symbol"].append(sym)
                for i in range(1, levels + 1):
                    live = i <= 2
                    cols[f"bid_price_{i}"].append((1_000_000 + k * 100 - i * 100) if live else 0)
                    cols[f"ask_price_{i}"].append((1_000_000 + k * 100 + i * 100) if live else 0)
                    for s in ("bid", "ask"):
                        cols[f"{s}_qty_{i}"].append(100 * i + k % 7 if live else 0)
                        cols[f"{s}_count_{i}"].append(i if live else 0)
        _write(d / "depth.parquet", {"event_ns": pa.array(rows["event_ns"], pa.int64()),
                                     "instrument": pa.array(rows["instrument"], pa.uint16()),
                                     "symbol": _sym(rows["symbol"]),
                                     **{c: pa.array(v, pa.int64()) for c, v in cols.items()}})
    # bbo: AAA changes every 3 s, BBB once
    bt = [t0 + k * 3 * 10**9 for k in range(n_depth // 3)] + [t0]
    bs = ["AAA"] * (n_depth // 3) + ["BBB"]
    bp = [1_000_000 + 300 * k for k in range(n_depth // 3)] + [50_000]
    _write(d / "bbo.parquet", {"event_ns": pa.array(bt, pa.int64()), "sequence": pa.array(range(len(bt)), pa.uint64()),
                               "instrument": pa.array([1] * (len(bt) - 1) + [2], pa.uint16()), "symbol": _sym(bs),
                               "bid_price": pa.array(bp, pa.int64()), "bid_qty": pa.array([300] * len(bt), pa.int64()),
                               "bid_count": pa.array([2] * len(bt), pa.int64()),
                               "ask_price": pa.array([p + 100 for p in bp], pa.int64()),
                               "ask_qty": pa.array([400] * len(bt), pa.int64()),
                               "ask_count": pa.array([3] * len(bt), pa.int64())})
    ex = {"event_ns": [], "sequence": [], "symbol": [], "source": [], "msg_type": [], "qty": [], "price": []}

    def add(t, m, src, ty, q, p):
        for k, v in zip(ex, (t, m, "AAA", src, ty, q, p)):
            ex[k].append(v)
    for k in range(0, n_depth, 7):
        add(t0 + k * 10**9 + 500, 10_000 + k, "feed", "E", 100, 0)
        add(t0 + k * 10**9 + 500, 10_000 + k, "core", "", 100, 1_000_000 + k * 100)
    add(t0 + 5 * 10**9, 99, "feed", "P", 50, 1_000_050)
    _write(d / "executions.parquet", {"event_ns": pa.array(ex["event_ns"], pa.int64()),
                                      "sequence": pa.array(ex["sequence"], pa.uint64()), "symbol": _sym(ex["symbol"]),
                                      "source": pa.array(ex["source"]), "msg_type": pa.array(ex["msg_type"]),
                                      "qty": pa.array(ex["qty"], pa.int64()), "price": pa.array(ex["price"], pa.int64())})
    lat = []
    for scope in ("ALL", "AAA", "BBB"):
        for j, kind in enumerate(("NEW", "CANCEL", "ALL")):
            lat.append((scope, kind, 10 + j, 500 + j, 900, 5000, 30_000, 90_000 + j))
    _write(d / "latency.parquet", {c: pa.array([r[i] for r in lat]) for i, c in enumerate(
        ("scope", "kind", "count", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "max_ns"))})
    _write(d / "symbols.parquet", {"symbol": pa.array(["AAA", "BBB", "CCC"]), "messages": pa.array([900, 50, 5000]),
                                   "replayed": pa.array([True, True, False])})
    return d


def test_build_view_downsamples_and_embeds(tmp_path):
    rep = make_reports(tmp_path / "rep")
    s = build_view(rep, tmp_path / "book.html", max_frames=400)
    assert s["symbol"] == "AAA"  # most messages among the replayed symbols (CCC was not replayed)
    assert s["source"] == "depth" and s["levels"] == 3
    assert s["frames"] == 400 and s["frames_available"] == 5000 and s["frames_dropped"] == 4600
    html = (tmp_path / "book.html").read_text()
    assert "<script src" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    assert s["bytes"] == os.path.getsize(tmp_path / "book.html") < SIZE_LIMIT
    d = embedded(tmp_path / "book.html")
    assert d["symbol"] == "AAA" and d["scale"] == 10000 and d["date"] == "2019-12-30"
    t = d["frames"]["t"]
    t0 = 34_200 * 10**9
    assert len(t) == 400 and t[0] == t0 and t[-1] == t0 + 4999 * 10**9  # first and last kept
    steps = np.diff(np.array(t) // 10**9)
    assert steps.min() >= 12 and steps.max() <= 13  # evenly: 4999 / 399 = 12.5 s apart
    assert d["frames"]["bp"][0] == [999_900, 999_800]  # trailing empty levels trimmed
    assert d["frames"]["aq"][0] == [100, 200]
    # tape: at most 12 per frame; an E takes the price of its core row
    assert s["tape_per_frame"] == 12
    assert s["tape_rows"] + s["tape_rows_dropped"] == s["tape_rows_available"] == len(range(0, 5000, 7)) + 1
    assert s["tape_rows"] <= 12 * 400
    tape = d["tape"]
    assert all(p > 0 for p in tape["p"])
    for k in range(len(tape["t"])):
        if tape["ty"][k] == "E":
            assert tape["p"][k] == 1_000_000 + (tape["m"][k] - 10_000) * 100
    ends = d["tapeEnd"]
    assert len(ends) == 400 and ends[0] == 0  # nothing before the first sample's time
    for k in (1, 100, 399):  # the frame's last tape row is the last execution before its time
        assert tape["t"][ends[k] - 1] < t[k] and (ends[k] == len(tape["t"]) or tape["t"][ends[k]] >= t[k])
    assert {(r["scope"], r["kind"]) for r in d["lat"]} == {(sc, k) for sc in ("ALL", "SYMBOL")
                                                           for k in ("NEW", "CANCEL", "ALL")}
    assert any("dropped" in n for n in d["notes"])


def test_build_view_symbol_and_no_sampling(tmp_path):
    rep = make_reports(tmp_path / "rep", n_depth=50)
    s = build_view(rep, tmp_path / "b.html", symbol="BBB")
    assert s["symbol"] == "BBB" and s["frames"] == 10 and s["frames_dropped"] == 0
    assert s["tape_rows"] == 0 and s["tape_rows_available"] == 0
    d = embedded(tmp_path / "b.html")
    assert d["tapeEnd"] == [0] * 10
    assert [r["max_ns"] for r in d["lat"] if r["scope"] == "SYMBOL"] == [90_000, 90_001, 90_002]
    with pytest.raises(InputError, match="ZZZ"):
        build_view(rep, tmp_path / "c.html", symbol="ZZZ")
    with pytest.raises(InputError, match="not a directory"):
        build_view(tmp_path / "nope", tmp_path / "c.html")


def test_build_view_falls_back_to_bbo(tmp_path):
    rep = make_reports(tmp_path / "rep", n_depth=3000, with_depth=False)
    s = build_view(rep, tmp_path / "b.html", max_frames=100)
    assert s["source"] == "bbo" and s["levels"] == 1
    assert s["frames"] == 100 and s["frames_available"] == 1000
    d = embedded(tmp_path / "b.html")
    assert d["source"] == "bbo" and d["frames"]["bp"][0] == [1_000_000] and d["frames"]["aq"][0] == [400]
    assert any("No depth.parquet" in n for n in d["notes"])
    assert "bbo.parquet: best bid and offer only" in (tmp_path / "b.html").read_text()


@pytest.mark.parametrize("name", ["depth", "bbo", "latency"])
def test_build_view_names_a_report_file_cut_short(tmp_path, name):
    """A report file cut short (copied in part, a full disk): one error naming it (it was
    Arrow's 'magic bytes not found' traceback from wherever the page first read it)."""
    rep = make_reports(tmp_path / "rep", n_depth=300)
    path = rep / f"{name}.parquet"
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(InputError, match=f"{name}.parquet: not a whole Parquet file"):
        build_view(rep, tmp_path / "x.html")


def test_a_page_that_cannot_be_written_leaves_nothing_beside_it(tmp_path, monkeypatch):
    """A full disk (here: the final rename fails): the error goes up and no x.html.tmp stays."""
    import errno
    rep = make_reports(tmp_path / "rep", n_depth=100)

    def full(*a):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("lobreplay.reports.viewer.os.replace", full)
    with pytest.raises(OSError, match="No space left"):
        build_view(rep, tmp_path / "x.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_build_view_real_day_without_depth(tmp_path):
    """The bundled day replayed without --depth: the page is the 1-level fallback."""
    rep = tmp_path / "rep"
    replay_itch(str(SAMPLE), str(rep), ReplayConfig(date="2019-12-30"))
    assert not (rep / "depth.parquet").exists()
    s = build_view(rep, tmp_path / "book.html", max_frames=500)
    syms = pd.read_parquet(rep / "symbols.parquet")
    assert s["symbol"] == syms[syms["replayed"]].sort_values("messages").iloc[-1]["symbol"]
    bbo = pd.read_parquet(rep / "bbo.parquet")
    assert s["source"] == "bbo" and s["frames_available"] == int((bbo["symbol"] == s["symbol"]).sum())
    assert s["frames"] == min(500, s["frames_available"]) and s["bytes"] < SIZE_LIMIT
    ex = pd.read_parquet(rep / "executions.parquet")
    assert s["tape_rows_available"] == int(((ex["symbol"] == s["symbol"]) & (ex["source"] == "feed")).sum())


def cli_main(argv) -> int:
    """`lobreplay VERB ...` with only the view command (lobreplay.cli.main wires add_commands in)."""
    import argparse
    import sys
    p = argparse.ArgumentParser(prog="lobreplay")
    add_commands(p.add_subparsers(dest="verb"))
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except LobError as e:
        print(f"lobreplay: error: {e}", file=sys.stderr)
        return 1


def test_cli_view(tmp_path, capsys):
    rep = make_reports(tmp_path / "rep", n_depth=100)
    out = tmp_path / "book.html"
    assert cli_main(["view", str(rep), "-o", str(out), "--max-frames", "20"]) == 0
    assert "20 frames from depth.parquet" in capsys.readouterr().out
    assert embedded(out)["sampled"]["frames"] == 20
    assert cli_main(["view", str(rep), "-o", str(out)]) == 1  # exists, no --force
    assert "--force" in capsys.readouterr().err
    assert cli_main(["view", str(rep), "-o", str(out), "--symbol", "BBB", "--force"]) == 0
    assert embedded(out)["symbol"] == "BBB"


EVIL_SYMBOL = "<!--<script>__TITLE__"          # a symbol that swallowed the page's script
EVIL_FILE = "</script><!--/*__DATA__*/__TITLE__.itch"  # and a source file name


def evil_reports(d: Path) -> Path:
    """make_reports with BBB renamed EVIL_SYMBOL in every table and EVIL_FILE as the source file."""
    rep = make_reports(d, n_depth=50)
    for f in rep.glob("*.parquet"):
        t = pq.read_table(f)
        for c in ("symbol", "scope"):
            if c in t.column_names:
                vals = [EVIL_SYMBOL if v == "BBB" else v for v in t[c].to_pylist()]
                arr = pa.array(vals).dictionary_encode() if pa.types.is_dictionary(t[c].type) else pa.array(vals)
                t = t.set_column(t.column_names.index(c), c, arr)
        pq.write_table(t.replace_schema_metadata({**META, b"source_file": EVIL_FILE.encode()}), f)
    return rep


def test_data_cannot_break_the_page(tmp_path):
    """A symbol or file name holding <!--<script> or a placeholder (__TITLE__, the data's):
    the embedded JSON has no < at all (\\u003c), it is the data exactly, the title is
    substituted once, before the data went in (it rewrote a symbol holding __TITLE__)."""
    rep = evil_reports(tmp_path / "rep")
    out = tmp_path / "evil.html"
    s = build_view(rep, out, symbol=EVIL_SYMBOL)
    assert s["symbol"] == EVIL_SYMBOL
    html = out.read_text(encoding="utf-8")
    block = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in block and ">" not in block and "&" not in block
    d = json.loads(block)
    assert d["symbol"] == EVIL_SYMBOL and d["source_file"] == EVIL_FILE
    assert html.count("<script") == 2 and html.count("</script>") == 2 and "<!--" not in html
    assert "<title>&lt;!--&lt;script&gt;__TITLE__ book — lobreplay</title>" in html
    assert html.replace(block, "").count("__TITLE__") == 1  # the title's: the template's was filled
    from lobreplay.reports.viewer import embed_json, render_page
    page = render_page("t</title>", {"x": "/*__DATA__*/ __TITLE__ <!-- </script> &amp;"})
    assert "<title>t&lt;/title&gt;</title>" in page and page.count("/*__DATA__*/") == 1
    assert json.loads(embed_json({"x": "<!--<script>&"})) == {"x": "<!--<script>&"}


def test_cli_view_of_a_stopped_replay_and_a_path_through_a_file(tmp_path, capsys):
    """A replay that did not finish (summary.json: failed, stopped_at): the page is built from
    what it wrote and both the page and the command say so (it said nothing). An output path
    through a file: one line naming it (it was "File exists")."""
    rep = make_reports(tmp_path / "rep", n_depth=50)
    (rep / "summary.json").write_text(json.dumps({"status": "failed", "error": "terminated (SIGTERM)",
                                                  "stopped_at": {"pass": 2, "messages_done": 1048576}}))
    out = tmp_path / "book.html"
    assert cli_main(["view", str(rep), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    note = ("This replay did not finish (status failed: terminated (SIGTERM); stopped at pass 2, "
            "messages_done 1,048,576): the page shows what it wrote.")
    assert f"note: {note}" in said and note in embedded(out)["notes"]
    (tmp_path / "afile").write_text("x")
    assert cli_main(["view", str(rep), "-o", str(tmp_path / "afile" / "sub" / "v.html")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'afile'} is a file, not a directory" in err and len(err.splitlines()) == 1


def test_formatting():
    assert fmt_price(1_234_500, 10_000, 2) == "123.45"
    assert fmt_price(1_234, 10_000, 4) == "0.1234"
    assert fmt_price(0, 10_000, 2) == ""
    assert fmt_time(34_200 * 10**9 + 5_678_000_000) == "09:30:05.678"


# ---------------------------------------------------------------- in Chromium

def _chromium(args, url, timeout=120) -> subprocess.CompletedProcess:
    assert os.path.exists(CHROMIUM), (
        f"{CHROMIUM} is missing: the browser tests need Chromium (apt-get install -y chromium); "
        "deselect them with -m 'not browser'")
    with tempfile.TemporaryDirectory(prefix="lobreplay-chromium-") as profile:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args, url]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"chromium failed ({p.returncode}): {p.stderr[-2000:]}"
    return p


def png_pixels(path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG with zlib: (width, height, rows of raw pixels)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0], "bad CRC"
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + n
    w, h, depth, color, _, _, interlace = hdr
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unexpected PNG format {hdr}"
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa_, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa_ <= pb and pa_ <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows


@pytest.fixture(scope="module")
def depth_day(tmp_path_factory):
    rep = tmp_path_factory.mktemp("viewer") / "rep"
    replay_itch(str(SAMPLE), str(rep), ReplayConfig(depth_levels=10, depth_every_ns=10 * 10**9, date="2019-12-30"))
    return rep


def _attrs(tag: str) -> dict:
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag))


@pytest.mark.browser
def test_view_in_chromium(depth_day, tmp_path):
    out = tmp_path / "book.html"
    s = build_view(depth_day, out)
    assert s["source"] == "depth" and s["levels"] == 10 and s["bytes"] < SIZE_LIMIT
    sym, scale, dec = s["symbol"], s["price_scale"], s["decimals"]
    n_rows = pq.read_table(depth_day / "depth.parquet", columns=["event_ns"], filters=[("symbol", "=", sym)]).num_rows
    assert s["frames"] == min(2000, n_rows)
    d = embedded(out)
    # the depth rows of the frames checked below (the time filter skips the other row groups)
    # a frame with a full tape: the first whose time is after the 12th feed execution
    ex = pd.read_parquet(depth_day / "executions.parquet")
    feed = ex[(ex["symbol"] == sym) & (ex["source"] == "feed")].sort_values(["event_ns", "sequence"], kind="stable")
    assert len(feed) >= 12
    k = next(i for i, t in enumerate(d["frames"]["t"]) if (feed["event_ns"] < t).sum() >= 12)
    mine = pq.read_table(depth_day / "depth.parquet", filters=[("symbol", "=", sym), (
        "event_ns", "in", [d["frames"]["t"][0], d["frames"]["t"][k]])]).to_pandas()

    for frame in (0, k):
        dom = _chromium(["--dump-dom"], f"{out.as_uri()}#paused&frame={frame}").stdout
        body = _attrs(re.search(r"<body[^>]*>", dom).group(0))
        assert body.get("data-ready") == "1", "the page's script did not run"
        assert body["data-frame"] == str(frame) and body["data-playing"] == "0"
        assert re.search(rf'<h1 id="symbol">{sym}</h1>', dom)
        t = d["frames"]["t"][frame]
        row = mine[mine["event_ns"] == t].iloc[0]
        assert re.search(rf'<span id="time" data-time-ns="{t}">{fmt_time(t)} ET</span>', dom)
        assert f"frame {frame + 1} / {s['frames']}" in dom
        # the ladder: every non-empty level of the depth row, with its price in dollars
        levels_seen = 0
        for side in ("bid", "ask"):
            shown = {}
            for m in re.finditer(r'<tr class="' + side + r' lvl[^"]*"[^>]*>(.*?)</tr>', dom, re.S):
                a = _attrs(m.group(0).split(">", 1)[0])
                if "data-price" in a:
                    cells = re.findall(r"<td[^>]*>(?:<span[^>]*></span><span[^>]*>)?([^<]*)", m.group(1))
                    shown[int(a["data-level"])] = (int(a["data-price"]), int(a["data-qty"]), cells)
            want = {i: (int(row[f"{side}_price_{i}"]), int(row[f"{side}_qty_{i}"]), int(row[f"{side}_count_{i}"]))
                    for i in range(1, 11) if row[f"{side}_price_{i}"]}
            levels_seen += len(want)
            assert set(shown) == set(want)  # an empty level or side shows no row
            for i, (p, q, c) in want.items():
                assert shown[i][:2] == (p, q)
                cells = shown[i][2]
                assert cells[2] == fmt_price(p, scale, dec)
                assert f"{q:,}" in cells and f"{c:,}" in cells
        assert levels_seen, f"{sym} frame {frame}: an empty book in depth.parquet"
        # the tape: the last 12 feed executions before the frame's time, newest first
        trades = [_attrs(m) for m in re.findall(r'<tr class="trade[^"]*"[^>]*>', dom)]
        before = feed[feed["event_ns"] < t].tail(12).iloc[::-1]
        assert [int(a["data-message"]) for a in trades] == before["sequence"].astype(int).tolist()
        assert [int(a["data-qty"]) for a in trades] == before["qty"].astype(int).tolist()
        if frame == k:
            assert len(trades) == 12
            tape_rows = re.findall(r'<tr class="trade[^"]*"[^>]*><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>'
                                   r'<td>([^<]*)</td>', dom)
            a0, r0 = trades[0], tape_rows[0]
            assert r0[0] == fmt_time(int(a0["data-time-ns"])) and r0[2] == f"{int(a0['data-qty']):,}"
            assert r0[3] == fmt_price(int(a0["data-price"]), scale, dec) and int(a0["data-price"]) > 0
    # the latency table: the whole replay's and the symbol's rows as in latency.parquet
    lat = pd.read_parquet(depth_day / "latency.parquet")
    for scope, sc in (("ALL", "ALL"), (sym, "SYMBOL")):
        for r in lat[lat["scope"] == scope].itertuples():
            m = re.search(rf'<tr class="lat" data-scope="{sc}" data-kind="{r.kind}">(.*?)</tr>', dom, re.S)
            assert m, (scope, r.kind)
            for col in ("count", "p50_ns", "p99_9_ns", "max_ns"):
                v = int(getattr(r, col))
                assert f'data-col="{col}" data-value="{v}">{v:,}<' in m.group(1)
    assert len(re.findall(r'class="latbar"', dom)) == 10  # kind ALL: 5 percentiles x 2 scopes

    # the screenshot, playing
    png = tmp_path / "book.png"
    _chromium([f"--screenshot={png}", "--window-size=1200,800"], out.as_uri())
    assert png.exists() and png.stat().st_size > 10_000
    w, h, rows = png_pixels(png)
    assert (w, h) == (1200, 800)
    values = set()
    for y in range(0, h, 8):
        values.update(rows[y][::97])
    assert len(values) > 20, "the screenshot is blank"
    print(f"screenshot: {png}")


@pytest.mark.browser
def test_data_cannot_break_the_page_in_chromium(tmp_path):
    """The page of a symbol and a source file holding <!--<script>, </script> and the
    placeholders: its script runs, and it shows them as text."""
    rep = evil_reports(tmp_path / "rep")
    out = tmp_path / "evil.html"
    build_view(rep, out, symbol=EVIL_SYMBOL)
    dom = _chromium(["--dump-dom"], f"{out.as_uri()}#paused&frame=3").stdout
    body = _attrs(re.search(r"<body[^>]*>", dom).group(0))
    assert body.get("data-ready") == "1", "the page's script did not run"
    assert body["data-frame"] == "3"
    assert '<h1 id="symbol">&lt;!--&lt;script&gt;__TITLE__</h1>' in dom
    assert "frame 4 / 10" in dom


# ---------------------------------------------------------------- a .lobc replay's reports

from conftest import REAL_BINANCE  # noqa: E402

USDM = REAL_BINANCE / "hftbacktest" / "usdm" / "btcusdt_20240808.gz"


@pytest.fixture(scope="module")
def lobc_day(tmp_path_factory):
    """The real USD-M recording converted and replayed with depth samples every second."""
    from lobreplay.binance.convert import convert
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    d = tmp_path_factory.mktemp("viewer_lobc")
    convert(USDM, d / "usdm.lobc")
    replay_lobc(d / "usdm.lobc", str(d / "rep"), L2ReplayConfig(depth_levels=10, depth_every_ns=10**9))
    return d / "rep"


def test_fmt_qty():
    assert fmt_qty(1_895_900_000, 10**8) == "18.959"
    assert fmt_qty(123_400_000_000, 10**8) == "1,234"
    assert fmt_qty(1, 10**8) == "0.00000001"
    assert fmt_qty(12_345, 1) == "12,345"


def test_build_view_of_a_lobc_replay(lobc_day, tmp_path):
    """A .lobc replay's reports (recv_ns since the epoch, scaled quantities, no order counts,
    trades.parquet for the tape): frames at the UTC time of day of the depth samples, the
    date beside them, quantities with their scale, the tape the trades before each frame."""
    s = build_view(lobc_day, tmp_path / "book.html", max_frames=300)
    d = embedded(tmp_path / "book.html")
    depth = pd.read_parquet(lobc_day / "depth.parquet")
    trades = pd.read_parquet(lobc_day / "trades.parquet").sort_values(["receive_ns", "sequence"], kind="stable")
    assert s["symbol"] == d["symbol"] == "BTCUSDT" and s["feed"] == "lobc" and s["levels"] == 10
    assert (d["tz"], d["qscale"], d["counts"], d["date"]) == ("UTC", 10**8, False, "2024-08-08")
    assert s["frames_available"] == len(depth) and s["frames"] == 300 and s["decimals"] == 2
    day0 = np.datetime64("2024-08-08", "ns").astype(np.int64)
    picked = depth.set_index("receive_ns").loc[[t + day0 for t in d["frames"]["t"]]]
    assert d["frames"]["bp"] == [[int(x) for x in r if x] for r in picked[[f"bid_price_{i}" for i in range(1, 11)]]
                                 .to_numpy()]
    assert d["frames"]["aq"] == [[int(x) for x in r if x] or [] for r in picked[[f"ask_qty_{i}" for i in range(1, 11)]]
                                 .to_numpy()]
    k = 150
    t = d["frames"]["t"][k] + day0
    before = trades[trades["receive_ns"] < t].tail(s["tape_per_frame"])
    end = d["tapeEnd"][k]
    assert d["tape"]["m"][end - len(before):end] == before["sequence"].tolist()
    assert d["tape"]["ty"][end - 1] == {"B": "buy", "S": "sell"}[before["side"].iloc[-1]]
    assert d["tape"]["t"][end - 1] == int(before["receive_ns"].iloc[-1]) - day0


@pytest.mark.browser
def test_view_of_a_lobc_replay_in_chromium(lobc_day, tmp_path):
    out = tmp_path / "book.html"
    s = build_view(lobc_day, out, max_frames=200)
    d = embedded(out)
    k = 120
    dom = _chromium(["--dump-dom"], f"{out.as_uri()}#paused&frame={k}").stdout
    body = _attrs(re.search(r"<body[^>]*>", dom).group(0))
    assert body.get("data-ready") == "1" and body["data-frame"] == str(k)
    t = d["frames"]["t"][k]
    assert re.search(rf'<span id="time" data-time-ns="{t}">{fmt_time(t)} UTC</span>', dom)
    for side, key in (("bid", "b"), ("ask", "a")):
        prices, qtys = d["frames"][key + "p"][k], d["frames"][key + "q"][k]
        assert len(prices) == 10
        for i, (p, q) in enumerate(zip(prices, qtys), start=1):
            m = re.search(rf'<tr class="{side} lvl[^"]*"[^>]*data-level="{i}"[^>]*>(.*?)</tr>', dom, re.S)
            cells = re.findall(r"<td[^>]*>(?:<span[^>]*></span><span[^>]*>)?([^<]*)", m.group(1))
            assert fmt_price(p, s["price_scale"], s["decimals"]) in cells and fmt_qty(q, 10**8) in cells
            assert cells[0] == cells[4] == ""  # no order counts for one synthetic order per level
    rows = re.findall(r'<tr class="trade[^"]*"[^>]*><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>'
                      r'<td>([^<]*)</td>', dom)
    end = d["tapeEnd"][k]
    assert len(rows) == 12 and rows[0] == (fmt_time(d["tape"]["t"][end - 1]), d["tape"]["ty"][end - 1],
                                           fmt_qty(d["tape"]["q"][end - 1], 10**8),
                                           fmt_price(d["tape"]["p"][end - 1], s["price_scale"], s["decimals"]))
    assert "time (UTC)" in dom and "trades (the aggressor's side)" in dom
