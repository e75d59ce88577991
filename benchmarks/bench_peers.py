"""lobreplay against the ITCH peers that install from the package index, side by side.

    make bench                      # R=5 FILES=wide,narrow; peers venv made from benchmarks/peers-requirements.txt
    make bench R=3 FILES=wide
    .venv/bin/python benchmarks/bench_peers.py --peers-python benchmarks/build/peers-venv/bin/python \
        --reps 5 --files wide,narrow [--write benchmarks/RESULTS.md]

The days are bench_itch.py's generated ones (made once, cached in benchmarks/build/).
Every measurement is a fresh process; runs alternate (every tool on every file,
then again, R times, each repetition starting one row later than the last) and the
median is reported with the spread. Before each timed run the tool's own imports
run once, untimed, so that no row pays for its libraries coming back from disk
(this VM pages out what is unused for about a minute). Wall time and peak RSS are
the harness's own, so start-up and imports count; each tool's own timed region
("in-process") is reported beside it.

Issue 28's two ratios are printed per day: lobreplay book only against itch-book
keeping its books without tables, and lobreplay with every report (the default)
against itch-book's `itch2parquet convert` (its default tables, bbo and trades, to
Parquet), each as the median of the repetitions' paired ratios (the two runs of a
pair are in the same repetition) with their spread.

Fairness: every tool's books are compared with lobreplay's on the best bid and
ask (price and shares) of every symbol after the first K messages (K = where the
day's closing run of deletes starts; those empty every book) and at the end of
the day. MeatPy, which builds one instrument's book in pure Python, runs on one
symbol and a prefix of the day and is compared there. A disagreement is printed
with the symbol and both values and counted in the table. Speed is never asserted.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_itch  # noqa: E402  (the generator of the days: DAYS, make_day)

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "benchmarks" / "build"
WORK = BUILD / "peers"
PEERS = ROOT / "benchmarks" / "peers"
LOBREPLAY = Path(sys.executable).with_name("lobreplay")
START, END = "<!-- bench-peers:start -->", "<!-- bench-peers:end -->"  # (earlier runs: one section for all days)
PLACE = "<!-- bench-peers:next -->"  # where a day's first section goes

PEER_IMPORTS = {"itch-book": "itch_book", "itchcpp": "itchcpp", "MeatPy": "meatpy", "hftbacktest": "hftbacktest"}


def rel(p: Path | str) -> str:
    """Paths as the table prints them: relative to the checkout."""
    try:
        return str(Path(os.path.abspath(p)).relative_to(ROOT))
    except ValueError:
        return str(p)


# ---- the day: checkpoint, symbols ------------------------------------------------------------

def scan(path: Path, prefix: int) -> dict:
    """Messages, the checkpoint (start of the closing run of D messages), the stock directory,
    and the busiest symbol of the first `prefix` messages (for MeatPy). Cached beside the day."""
    cache = WORK / f"{path.name}.scan.json"
    st = path.stat()
    key = [st.st_size, int(st.st_mtime), prefix]
    if cache.exists():
        d = json.loads(cache.read_text())
        if d.get("key") == key:
            return d
    from lobreplay.itch.reader import ItchFile

    f = ItchFile(path)
    types, starts, symbols = [], [], {}
    per_locate = np.zeros(65536, np.int64)
    for c in f.chunks():
        types.append(c.types.copy())
        starts.append(c.base + c.offsets.astype(np.int64) - 2)
        for i in np.flatnonzero(c.types == ord("R")):
            o = int(c.offsets[i])
            b = bytes(c.buf[o:o + 19])
            symbols[int.from_bytes(b[1:3], "big")] = b[11:19].decode("ascii").strip()
        take = max(0, min(c.n, prefix - c.first_message))
        if take:
            offs = c.offsets[:take].astype(np.int64)
            loc = (c.buf[offs + 1].astype(np.int64) << 8) | c.buf[offs + 2]
            per_locate += np.bincount(loc, minlength=65536)
    types = np.concatenate(types)
    starts = np.concatenate(starts)
    n = len(types)
    i = n - 1
    while i >= 0 and types[i] == ord("S"):
        i -= 1
    j = i
    while j >= 0 and types[j] == ord("D"):
        j -= 1
    k = j + 1
    if k > i:       # no closing delete run: compare at the end only
        k = n
    per_locate[0] = 0
    busiest = int(np.argmax(per_locate))
    d = {"key": key, "messages": n, "bytes": int(f.stats.bytes), "checkpoint_message": int(k),
         "checkpoint_offset": int(starts[k]) if k < n else int(f.stats.bytes), "closing_deletes": int(n - k - (n - 1 - i)),
         "symbols": {str(a): b for a, b in sorted(symbols.items())},
         "meatpy_symbol": symbols.get(busiest, ""), "meatpy_symbol_messages": int(per_locate[busiest]),
         "meatpy_prefix": int(min(prefix, n))}
    cache.write_text(json.dumps(d))
    return d


# ---- running one measurement -----------------------------------------------------------------

# A child's peak RSS must not include the harness: Linux keeps a process's high-water RSS
# across exec, and a child forked (or vforked) from the harness starts with the harness's
# pages. So every measured command is started by this small launcher, whose own child
# starts from the launcher's few MiB; it reports that child's wall time and peak RSS.
LAUNCH = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[2:]).returncode
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(json.dumps({"rc": rc, "wall": wall, "rss": ru.ru_maxrss * 1024}))
"""


def measure(cmd: list[str], log: Path, env: dict | None = None) -> dict:
    """Run cmd; its wall time and peak RSS (measured by the launcher)."""
    res = log.with_suffix(".rusage.json")
    res.unlink(missing_ok=True)
    with open(log, "w") as fh:
        p = subprocess.run([sys.executable, "-S", "-c", LAUNCH, str(res), *cmd], stdout=fh,
                           stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    if not res.exists():
        return {"wall": float("nan"), "rss": 0, "rc": p.returncode or -1, "log": log}
    m = json.loads(res.read_text())
    m["log"] = log
    return m


def warm(*paths: Path) -> None:
    """Read files through once, untimed, so that every run finds its input in the page cache.
    This VM pages out memory left unused for about a minute (the kernel's DAMON reclaim, its
    `pageout` scheme): without this, whichever tool came first after such a gap read its
    input from disk, 0.3-0.4 s more on a 150 MB day (lobreplay's book-only row, first in
    each repetition, showed it)."""
    buf = bytearray(8 << 20)
    for p in paths:
        if p.exists():
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def tail(log: Path, n: int = 6) -> str:
    lines = log.read_text(errors="replace").strip().splitlines()
    return " / ".join(line.strip() for line in lines[-n:])


class Day:
    def __init__(self, name: str, path: Path, info: dict):
        self.name, self.path, self.info = name, path, info
        self.date = f"{path.name[:4]}-{path.name[4:6]}-{path.name[6:8]}"   # (bench_itch names days YYYYMMDD.*)
        self.dir = WORK / path.stem
        self.dir.mkdir(parents=True, exist_ok=True)
        self.symbols_json = self.dir / "symbols.json"
        self.symbols_json.write_text(json.dumps(info["symbols"]))
        self.ref: dict | None = None         # lobreplay's BBO at the checkpoint, the end, and MeatPy's prefix
        self.npz = self.dir / "hftbacktest_events.npz"
        self.cache_filled = False            # lobreplay's sizing cache holds this day (the cached row)
        self.stages: dict | None = None      # benchmarks/stages_itch.py's figures (the design's floor)
        shutil.rmtree(self.dir / "sizing-cache", ignore_errors=True)


def driver_args(day: Day) -> list[str]:
    return [str(day.path), "--checkpoint-offset", str(day.info["checkpoint_offset"]),
            "--checkpoint-message", str(day.info["checkpoint_message"]), "--symbols", str(day.symbols_json)]


def lobreplay_config(label: str, args: list[str], what: str, cached: bool = False):
    """A lobreplay row. Its pass 1 scans the day (--no-cache), or, cached=True, comes from
    the sizing cache, which an untimed replay fills first: a day replayed before."""
    def run(day: Day, rep: int) -> dict:
        out = day.dir / f"lobreplay-{label}"
        cmd = [str(LOBREPLAY), "itch", "replay", str(day.path), "-o", str(out), "--force", "--no-progress", *args]
        env = None
        if cached:
            env = dict(os.environ, LOBREPLAY_CACHE_DIR=str(day.dir / "sizing-cache"))
            if not day.cache_filled:
                subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True, cwd=ROOT)
                day.cache_filled = True
        else:
            cmd.append("--no-cache")
        m = measure(cmd, day.dir / f"lobreplay-{label}.log", env)
        if m["rc"] == 0:
            s = json.loads((out / "summary.json").read_text())
            if s["pass1"].get("cached", False) != cached:
                raise RuntimeError(f"{out}: pass 1 {'not ' if cached else ''}from the sizing cache")
            m.update(messages=s["messages"], inproc=s["pass1"]["seconds"] + s["pass2"]["seconds"],
                     pass1=s["pass1"]["seconds"], pass2=s["pass2"]["seconds"], version=s["source"]["lobreplay_version"],
                     desyncs=s["desyncs"], residual=s.get("residual_orders"))
            if (out / "bbo.parquet").exists():
                m["bbo"] = bbo_from_report(out / "bbo.parquet", day)
        return m
    return {"tool": "lobreplay", "label": label, "what": what, "run": run, "needs": None}


# What each tool imports, run once untimed right before each of its timed runs: no row pays for
# its libraries coming back from disk after the VM paged them out (it does so to anything unused
# for about a minute, and a repetition of every row takes longer than that), and no row gets
# them warm from the row before it. (The rows of `make bench` at d1aadc8 had itch-book without
# tables slower than with a table: the first of the two paid for reading itch-book back.)
PRIME = {
    "lobreplay": "import lobreplay.cli.main, lobreplay.cli.itch, lobreplay.itch.replay, lobreplay.replay.engine, "
                 "lobreplay.core._coreapi, pyarrow.parquet",
    "itch-book": "import itch_book, itch_book._core, itch_book.cli, pyarrow.parquet",
    "itchcpp": "import itchcpp.book",
    "hftbacktest": "import hftbacktest",
    "MeatPy": "import meatpy",
}


def python_of(tool: str) -> str:
    """The interpreter a tool runs on: lobreplay's own, or the peers' virtualenv's."""
    return sys.executable if tool == "lobreplay" else ARGS.peers_python


def prime(tool: str) -> None:
    subprocess.run([python_of(tool), "-c", PRIME[tool]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)


def convert_config():
    """itch-book's own command line, as a user runs it: `itch2parquet convert --date D FILE OUT`
    (its default tables, bbo and trades, as Parquet; its default float prices and input md5),
    the row lobreplay's every-report row is set against. Its bbo.parquet gives the BBO
    (`seq` counts messages from 1; prices float dollars, NaN for an empty side)."""
    label = "itch-book-convert"

    def run(day: Day, rep: int) -> dict:
        out = day.dir / label
        shutil.rmtree(out, ignore_errors=True)
        exe = Path(ARGS.peers_python).with_name("itch2parquet")
        m = measure([str(exe), "convert", "--date", day.date, str(day.path), str(out)], day.dir / f"{label}.log")
        if m["rc"] == 0:
            import pyarrow.parquet as pq

            meta = pq.read_metadata(out / "bbo.parquet").metadata or {}
            stats = json.loads(meta.get(b"itch_book.stats", b"{}"))
            m.update(messages=stats.get("messages") or day.info["messages"], inproc=None,
                     version=meta.get(b"itch_book.version", b"?").decode(), bbo=convert_bbo(out / "bbo.parquet", day))
        return m
    return {"tool": "itch-book", "label": label, "needs": "itch-book", "run": run,
            "what": "`itch2parquet convert` (its default tables, bbo and trades, to Parquet)"}


def startup_config(tool: str, label: str, imports: str, what: str):
    """A floor, not a row of the table: the interpreter and the imports a replay needs, no input."""
    def run(day: Day, rep: int) -> dict:
        m = measure([python_of(tool), "-c", imports], day.dir / f"{label}.log")
        m.update(messages=0, inproc=None, version=None)
        return m
    return {"tool": tool, "label": label, "what": what, "run": run, "needs": None if tool == "lobreplay" else tool,
            "floor": True}


def peer_config(tool: str, script: str, what: str, extra=lambda day: [], label: str | None = None):
    label = label or tool

    def run(day: Day, rep: int) -> dict:
        out = day.dir / f"{label}.json"
        out.unlink(missing_ok=True)
        m = measure([ARGS.peers_python, str(PEERS / script), *driver_args(day), "--out", str(out), *extra(day)],
                    day.dir / f"{label}.log")
        if m["rc"] == 0:
            d = json.loads(out.read_text())
            m.update(messages=d["messages"] or day.info["messages"], inproc=d["seconds"], version=d["version"],
                     phases=d["phases"], mode=d["mode"], stats=d.get("stats"))
            if d["checkpoint"] or d["final"]:
                m["bbo"] = {"checkpoint": d["checkpoint"], "final": d["final"]}
        return m
    return {"tool": tool, "label": label, "what": what, "run": run, "needs": tool}


def convert_bbo(path: Path, day: Day) -> dict:
    """itch2parquet's BBO per symbol after message K and at the end, in ITCH integers."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["seq", "locate", "bid_px", "bid_sz", "ask_px", "ask_sz"])
    seq = t["seq"].to_numpy().astype(np.int64)
    loc = t["locate"].to_numpy().astype(np.int64)

    def ticks(col: str) -> np.ndarray:
        px = t[col].to_numpy(zero_copy_only=False).astype(np.float64)
        return np.where(np.isnan(px), 0, np.rint(np.nan_to_num(px) * 10_000)).astype(np.int64)

    vals = np.stack([ticks("bid_px"), t["bid_sz"].to_numpy().astype(np.int64), ticks("ask_px"),
                     t["ask_sz"].to_numpy().astype(np.int64)], 1)
    at = bbo_after(seq, loc, vals, day)  # (seq counts messages from 1: the row's is done after it)
    return {"checkpoint": at(day.info["checkpoint_message"]), "final": at(None)}


def bbo_after(done: np.ndarray, loc: np.ndarray, vals: np.ndarray, day: Day):
    """at(K): each symbol's last BBO row among those written once K messages were done (done[i]:
    the messages done when row i was; None: all rows), as {symbol: [bid_px, bid_qty, ask_px,
    ask_qty]} ([0, 0, 0, 0]: none)."""
    symbols = {int(k): v for k, v in day.info["symbols"].items()}

    def at(limit: int | None) -> dict:
        sel = np.ones(len(done), bool) if limit is None else done <= limit
        lo, va = loc[sel], vals[sel]
        last = np.zeros((65536, 4), np.int64)
        if len(lo):
            u, first = np.unique(lo[::-1], return_index=True)
            last[u] = va[len(lo) - 1 - first]
        return {s: [int(v) for v in last[k]] for k, s in symbols.items()}
    return at


def bbo_from_report(path: Path, day: Day) -> dict:
    """lobreplay's BBO per symbol after message K, at the end, and after MeatPy's prefix."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["sequence", "instrument", "bid_price", "bid_qty", "ask_price", "ask_qty"])
    msg = t["sequence"].to_numpy()
    loc = t["instrument"].to_numpy().astype(np.int64)
    vals = np.stack([t[c].to_numpy().astype(np.int64) for c in ("bid_price", "bid_qty", "ask_price", "ask_qty")], 1)
    at = bbo_after(msg.astype(np.int64) + 1, loc, vals, day)  # (sequence counts messages from 0)
    return {"checkpoint": at(day.info["checkpoint_message"]), "final": at(None),
            "meatpy": at(day.info["meatpy_prefix"])}


def compare(day: Day, row: str, got: dict) -> dict:
    """Agreement counts of one run's BBO with lobreplay's; disagreements printed loudly."""
    out = {}
    if day.ref is None:
        return out
    for when, ref_key in (("checkpoint", "checkpoint"), ("final", "final")):
        mine = got.get(when) or {}
        if not mine:
            continue
        if row == "MeatPy":
            ref_key = "meatpy"
        ref = day.ref[ref_key]
        bad = [(s, ref.get(s), v) for s, v in mine.items() if ref.get(s) != v]
        out[when] = (len(mine) - len(bad), len(mine))
        for s, r, v in bad[:20]:
            print(f"!!! BBO DISAGREEMENT {day.name} {row} {when} {s}: lobreplay {r} vs {row} {v} "
                  f"(bid_px, bid_qty, ask_px, ask_qty; prices in 1/10000)", file=sys.stderr, flush=True)
        if len(bad) > 20:
            print(f"!!! ... and {len(bad) - 20} more disagreements ({day.name} {row} {when})", file=sys.stderr)
    return out


# ---- configurations --------------------------------------------------------------------------

def configs() -> list[dict]:
    return [
        lobreplay_config("book", ["--no-reports", "--no-timing"], "book only (`--no-reports --no-timing`)"),
        lobreplay_config("book-cached", ["--no-reports", "--no-timing"],
                         "book only, the day replayed before (pass 1 from the sizing cache)", cached=True),
        lobreplay_config("bbo", ["--reports", "bbo", "--no-timing"], "books + bbo report (`--reports bbo --no-timing`)"),
        lobreplay_config("all", [], "every report (the default command; latency timed on every 16th event)"),
        peer_config("itch-book", "run_itchbook.py", "books only (`tables=()`)", lambda d: ["--tables", "none"],
                    label="itch-book-book"),
        peer_config("itch-book", "run_itchbook.py", "books + bbo table (kept in memory)",
                    lambda d: ["--tables", "bbo"], label="itch-book-bbo"),
        convert_config(),
        peer_config("itchcpp", "run_itchcpp.py", "`BookManager.process_stream`, all symbols"),
        peer_config("hftbacktest", "run_hftbacktest.py", "L3 replay of converted events, one backtest per symbol",
                    lambda d: ["--npz", str(d.npz), "--assets", "per-symbol"], label="hftbacktest-per-symbol"),
        peer_config("hftbacktest", "run_hftbacktest.py", "L3 replay of converted events, one backtest of all symbols",
                    lambda d: ["--npz", str(d.npz), "--assets", "all"], label="hftbacktest-all"),
        peer_config("MeatPy", "run_meatpy.py", "one symbol, day prefix",
                    lambda d: ["--symbol", d.info["meatpy_symbol"], "--max-messages", str(d.info["meatpy_prefix"])]),
        startup_config("lobreplay", "lobreplay-startup", "import lobreplay.cli.main, lobreplay.cli.itch, lobreplay.itch.replay",
                       "start-up: interpreter + a book-only replay's imports (no pyarrow)"),
        startup_config("itch-book", "itch-book-startup", "import itch_book, itch_book._core",
                       "start-up: interpreter + its Session's imports"),
    ]


FULL_ROWS = {"book", "all", "itch-book-book", "itch-book-convert", "lobreplay-startup", "itch-book-startup"}


def day_cfgs(day: Day, cfgs: list[dict]) -> list[dict]:
    """The rows run on a day: on the full-size day only those of issue 28's ratios (the slow
    peers would take hours, and itchcpp and hftbacktest's conversion hold the day in memory)."""
    return [c for c in cfgs if c["label"] in FULL_ROWS] if day.name == "full" else cfgs


def peer_status(python: str) -> dict[str, str | None]:
    """None when the peer imports in its venv, else why not."""
    out = {}
    for tool, mod in PEER_IMPORTS.items():
        if not Path(python).exists():
            out[tool] = f"no peers virtualenv at {rel(python)} (`make bench` creates it)"
            continue
        p = subprocess.run([python, "-c", f"import {mod}"], capture_output=True, text=True)
        out[tool] = None if p.returncode == 0 else f"`import {mod}` failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}"
    return out


# ---- report ----------------------------------------------------------------------------------

def fmt_spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def source_note() -> str:
    """Which lobreplay was measured: the commit, uncommitted changes, the core's source hashes."""
    import hashlib

    def git(*a: str) -> str:
        p = subprocess.run(["git", *a], capture_output=True, text=True, cwd=ROOT)
        return p.stdout if p.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD").strip() or "?"
    dirty = [line[3:] for line in git("status", "--porcelain", "--", "csrc", "lobreplay", "setup.py",
                                       "pyproject.toml").splitlines() if line.strip()]
    core = ", ".join(f"{hashlib.sha256((ROOT / 'csrc' / f).read_bytes()).hexdigest()[:16]} csrc/{f}"
                     for f in ("core/lob.c", "core/lob.h", "feeds/itch.c") if (ROOT / "csrc" / f).exists())
    note = f"lobreplay at commit {head}"
    if dirty:
        note += f" plus uncommitted changes to {len(dirty)} file(s) ({', '.join(dirty[:6])}{', ...' if len(dirty) > 6 else ''})"
    return note + f"; core source sha256 {core}"


def machine_note() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.machine()}, "
            f"python {platform.python_version()}, load average {load:.2f} at the start")


NOTES = """\
### How each tool is run

- **Columns.** *wall*: the whole process, from start to exit (interpreter start-up, imports, reading
  the file, the replay, writing outputs), and *peak RSS*: that process's high-water mark; both
  measured by the harness's launcher. *in-process*: the tool's own timed region (lobreplay: pass 1 +
  pass 2 from its `summary.json`; a peer: its driver's clock from opening the file to the final book,
  imports excluded). *M msg/s* and *ns/msg* use the file's messages (MeatPy: its prefix) and the wall
  time. *speed vs lobreplay*: the row's msg/s over lobreplay book-only's, wall and in-process
  (above 1 = faster than lobreplay).
- **Page cache.** Before every run the harness reads the day's file (and hftbacktest's converted
  events) through once, untimed: every tool starts with its input in memory. (This VM pages out
  memory unused for about a minute; before this, the first tool after such a gap read from disk.)
- **lobreplay**: `.venv/bin/lobreplay itch replay FILE -o DIR --force --no-progress` plus the flags in
  the row, and `--no-cache`: every row scans the day in pass 1, except the one marked as replayed
  before, whose pass 1 comes from the sizing cache (`docs/itch.md`) that one untimed replay of the
  day filled first. Its `bbo.parquet` (the `sequence` column says after which message) is the
  reference.
- **Order and warm-up.** One untimed round of lobreplay's and itch-book's rows first; then in each
  repetition every row once, each repetition starting one row later than the one before (no row
  always follows the same one), and right before each timed run the tool's imports once, untimed
  (`PRIME`): this VM pages out what is unused for about a minute, and a repetition takes longer.
  Issue 28's ratios pair the two runs of the same repetition.
- **itch-book** (`benchmarks/peers/run_itchbook.py`): its C++ `Session`, the object
  `itch_book.open(...).batches()` drives (without that reader thread), fed 8 MiB reads; with
  `tables=()` it keeps the books and writes nothing, so no BBO can be read back and the check is its
  own counters; with the bbo table (its rows taken as numpy columns and kept in memory, nothing
  written: lobreplay's bbo row writes zstd Parquet and its status tables), the last row per locate.
  Its own command line, `itch2parquet convert --date D FILE OUT` (its default tables, bbo and trades,
  as Parquet; float prices and the input's md5, its defaults), is the row set against lobreplay's
  every-report row; its `bbo.parquet` gives the BBO compared. The start-up rows time the interpreter
  and the imports alone (no input): the least either tool's whole process can take.
- **itchcpp** (`run_itchcpp.py`): `itchcpp.book.BookManager().process_stream(bytes)`, which builds
  the L3 book of every symbol in C++; then `book_for_symbol(s).bbo()`. It takes bytes, so the file
  is read into memory (inside the timed region).
- **hftbacktest** (`run_hftbacktest.py`) reads no ITCH: it is a backtester that replays its own
  event rows (`event_dtype`; its converters cover Binance, Bybit, Tardis, Databento and others, not
  ITCH). `prep_hftbacktest.py` converts each day once per bench run (figures under the table, not in
  the rows): itch-book's `messages` table (order by order, side and price of the resting order
  already looked up) mapped to ADD / MODIFY (shares left) / CANCEL_ORDER_EVENT rows (U = cancel +
  add), flagged LOCAL_EVENT only (the book a strategy sees; with EXCH_EVENT the exchange model
  would keep a second copy of each book), one array per symbol. The rows then time loading that
  `.npz` and the L3 replay in `HashMapMarketDepthBacktest` (`l3_fifo_queue_model`,
  `no_partial_fill_exchange`), either one backtest per symbol or one backtest holding every symbol.
  So its rows replay already-decoded, already-resolved events: the ITCH work (framing, decoding,
  and finding each E/X/D/U's order, i.e. a book of its own) is in the conversion. Replaying ITCH
  directly would need an ITCH reader feeding hftbacktest's depth API, which it does not have.
- **MeatPy** (`run_meatpy.py`): `ITCH50MessageReader` + one `ITCH50MarketProcessor`, pure Python.
  MeatPy builds the book of one instrument per processor (each processor still sees every
  message), and finds an order by scanning its price levels, so the cost grows with the book. It is
  run on the busiest symbol of a prefix of the day (`--meatpy-messages`), labelled as such; its
  msg/s are not comparable with whole-market rows.
- **Fairness check.** The generated days end with a D for every live order, so every book is empty
  at the end and a comparison there alone would prove little. Every driver therefore also records
  the best bid and ask (price and shares) of every symbol after message K, where the closing run of
  deletes starts (its input is split there: no extra work per message), and the harness compares
  them with lobreplay's. A disagreement is printed with the symbol and both values and marked
  **DISAGREE** here; `make bench` then exits non-zero.
"""


TARGET = 1.5  # issue 28: lobreplay at least 1.5x itch-book's speed, on both comparisons


def paired(results: dict, day: Day, mine: str, theirs: str) -> list[tuple[float, float]]:
    """(lobreplay's wall, the peer's wall) of each repetition in which both ran."""
    a = {m["rep"]: m["wall"] for m in results.get((day.name, mine), []) if m["rc"] == 0}
    b = {m["rep"]: m["wall"] for m in results.get((day.name, theirs), []) if m["rc"] == 0}
    return [(a[r], b[r]) for r in sorted(a.keys() & b.keys())]


def target_lines(day: Day, results: dict) -> list[str]:
    """Issue 28's two ratios for the day, each the median of the repetitions' paired ratios (the
    peer's wall time over lobreplay's in the same repetition), with their spread, and the
    start-up floors that bound them."""
    out = ["", f"**Against itch-book** (target: lobreplay at least {TARGET}x its speed; whole processes; per "
           "repetition the peer's wall time over lobreplay's, median (min-max) of the pairs):", ""]
    for mine, theirs, what in (("book", "itch-book-book", "book only (`--no-reports --no-timing`) against itch-book "
                                "keeping its books without tables"),
                               ("all", "itch-book-convert", "every report (the default command) against "
                                "`itch2parquet convert`")):
        pairs = paired(results, day, mine, theirs)
        if not pairs:
            out.append(f"- {what}: not measured")
            continue
        ratios = [b / a for a, b in pairs]
        med = statistics.median(ratios)
        verdict = ("met" if min(ratios) >= TARGET else "not met" if max(ratios) < TARGET
                   else f"{'met' if med >= TARGET else 'not met'} by the median; the pairs straddle {TARGET}x")
        out.append(f"- {what}: **{med:.2f}x** ({min(ratios):.2f}-{max(ratios):.2f}, {len(pairs)} pair{'s' if len(pairs) > 1 else ''}; lobreplay "
                   f"{statistics.median(a for a, _ in pairs):.2f} s, itch-book {statistics.median(b for _, b in pairs):.2f} s"
                   f"): {verdict}")
    floors = {k: [m["wall"] for m in results.get((day.name, k), []) if m["rc"] == 0]
              for k in ("lobreplay-startup", "itch-book-startup")}
    if all(floors.values()):
        out.append(f"- start-up alone (interpreter and imports, no input; median): lobreplay "
                   f"{statistics.median(floors['lobreplay-startup']):.2f} s, itch-book "
                   f"{statistics.median(floors['itch-book-startup']):.2f} s")
    nb = [m["wall"] for m in results.get((day.name, "itch-book-book"), []) if m["rc"] == 0]
    st = day.stages
    if st and floors["lobreplay-startup"] and nb:
        least = statistics.median(floors["lobreplay-startup"]) + st["main_thread_least_s"]
        out.append(f"- lobreplay's floor, book only: start-up {statistics.median(floors['lobreplay-startup']):.2f} s + "
                   f"the main thread's least {st['main_thread_least_s']:.2f} s (pass 1's scan {st['scan_s']:.2f} s, "
                   f"prices read again {st['prices_again_s']:.2f} s and the core {st['core_s']:.2f} s, each alone over "
                   f"the day in memory: `benchmarks/stages_itch.py`, best of {st['reps']}) = {least:.2f} s, against "
                   f"itch-book's {statistics.median(nb):.2f} s: at most **{statistics.median(nb) / least:.2f}x** "
                   "for this design here, with no Python, reader or report cost at all")
    wb = [m["wall"] for m in results.get((day.name, "itch-book-bbo"), []) if m["rc"] == 0]
    if nb and wb and statistics.median(nb) > statistics.median(wb):
        out.append(f"- **noisy run**: itch-book without tables ({statistics.median(nb):.2f} s) took longer than with "
                   f"a bbo table ({statistics.median(wb):.2f} s), which does more work")
    return out


def report(days: list[Day], cfgs: list[dict], results: dict, status: dict, prep: dict, cmd: str,
           versions: dict, machine: str, source: str, reps: int, elapsed: float) -> dict[str, str]:
    """Each day's section of RESULTS.md (its own command, machine and commit: a run of some
    days replaces their sections and leaves the others')."""
    sections = {}
    for day in days:
        L = []
        i = day.info
        L.append(f"### {day.name} {i['messages'] / 1e6:,.0f}M (`{day.path.name}`: {i['messages']:,} messages, "
                 f"{len(i['symbols']):,} symbols)\n")
        L.append(f"`{cmd}` ({time.strftime('%Y-%m-%d')}; whole run {elapsed / 60:.1f} min): machine {machine}; "
                 f"{reps} alternating repetition{'s' if reps > 1 else ''}. Versions: "
                 + ", ".join(f"{k} {v}" for k, v in versions.items()) +
                 " (peers pinned in `benchmarks/peers-requirements.txt`, in their own virtualenv); " + source + ".\n")
        if i["checkpoint_message"] < i["messages"]:
            where = (f"Books compared after message {i['checkpoint_message']:,} (before the closing run of "
                     f"{i['closing_deletes']:,} deletes, which empties every book) and at the end.")
        else:
            where = "Books compared at the end (the day has no closing run of deletes)."
        if any(c["tool"] == "MeatPy" for c in day_cfgs(day, cfgs)):
            where += (f" MeatPy: symbol {i['meatpy_symbol']} ({i['meatpy_symbol_messages']:,} of the first "
                      f"{i['meatpy_prefix']:,} messages), compared after message {i['meatpy_prefix']:,}.")
        L.append(where + "\n")
        L.append("| tool | what | messages | wall s, median (min-max) | M msg/s | ns/msg | in-process s | "
                 "in-process M msg/s | peak RSS MiB | speed vs lobreplay book only (wall / in-process) | "
                 "BBO agrees: after K / at the end |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        base = results.get((day.name, "book"))
        base_ok = [m for m in (base or []) if m["rc"] == 0]
        # the baseline as its own row computes it: messages over the median time
        b_wall = base_ok[0]["messages"] / statistics.median(m["wall"] for m in base_ok) if base_ok else None
        b_in = base_ok[0]["messages"] / statistics.median(m["inproc"] for m in base_ok) if base_ok else None
        for c in day_cfgs(day, cfgs):
            if c.get("floor"):
                continue
            runs = results.get((day.name, c["label"]))
            if c["needs"] and status.get(c["needs"]):
                L.append(f"| {c['tool']} | {c['what']} | | | | | | | | | not run: {status[c['needs']]} |")
                continue
            if not runs:
                continue
            ok = [m for m in runs if m["rc"] == 0]
            if not ok:
                L.append(f"| {c['tool']} | {c['what']} | | | | | | | | | FAILED (exit {runs[0]['rc']}): "
                         f"{tail(runs[0]['log'])} |")
                continue
            n = ok[0]["messages"]
            walls = [m["wall"] for m in ok]
            wall = statistics.median(walls)
            inprocs = [m["inproc"] for m in ok if m["inproc"] is not None]
            inproc = statistics.median(inprocs) if inprocs else None
            rss = statistics.median(m["rss"] for m in ok) / 2**20
            what = c["what"]
            if c["tool"] == "MeatPy":
                what = f"one symbol ({day.info['meatpy_symbol']}), first {n:,} messages"
            ratio = ""
            if b_wall:
                ratio = f"{(n / wall) / b_wall:.3g}x / " + (f"{(n / inproc) / b_in:.3g}x" if inproc else "-")
            agree = []
            for when in ("checkpoint", "final"):
                cs = [m["agree"].get(when) for m in ok if m.get("agree")]
                cs = [x for x in cs if x]
                if not cs:
                    agree.append("-")
                    continue
                worst = min(cs, key=lambda x: x[0] - x[1])
                agree.append(f"{worst[0]:,}/{worst[1]:,}" + ("" if worst[0] == worst[1] else " **DISAGREE**"))
            if c["tool"] == "lobreplay":
                tail_s = f"{ok[0]['desyncs']} desyncs, {ok[0]['residual']} orders left"
                if not ok[0]["has_bbo"]:
                    agree_s = f"no BBO output; {tail_s}"
                elif c["label"] == "bbo":
                    agree_s = f"the reference (its first run; later runs {' / '.join(agree)}); {tail_s}"
                else:
                    agree_s = f"{' / '.join(agree)}; {tail_s}"
            elif c["label"] == "itch-book-book":
                st = ok[0].get("stats") or {}
                sc, sf = st.get("checkpoint", {}), st.get("final", {})
                live = sc.get("live_orders", "?")
                agree_s = (f"no BBO output; {live:,} live orders after K, " if isinstance(live, int) else
                           f"no BBO output; {live} live orders after K, ") + (
                           f"{sf.get('live_orders', '?')} at the end, {sf.get('missing_ref', '?')} unknown refs")
            elif c["tool"] == "MeatPy":
                agree_s = f"{agree[1]} (after the prefix)"
            else:
                agree_s = " / ".join(agree)
            fails = len(runs) - len(ok)
            L.append(f"| {c['tool']} | {what} | {n:,} | {fmt_spread(walls)}{f' ({fails} failed)' if fails else ''} | "
                     f"{n / wall / 1e6:.2f} | {wall / n * 1e9:,.0f} | "
                     + (f"{inproc:.2f} | {n / inproc / 1e6:.2f} | " if inproc else "- | - | ")
                     + f"{rss:,.0f} | {ratio} | {agree_s} |")
        L.extend(target_lines(day, results))
        for c in cfgs:
            for k, m in enumerate(results.get((day.name, c["label"]), [])):
                if m["rc"] != 0:
                    L.append(f"- run {k + 1} of {c['tool']} ({c['what']}) FAILED (exit {m['rc']}): {tail(m['log'], 3)}")
        lob = [m for m in results.get((day.name, "book"), []) if m["rc"] == 0]
        loa = [m for m in results.get((day.name, "all"), []) if m["rc"] == 0]
        loc = [m for m in results.get((day.name, "book-cached"), []) if m["rc"] == 0]
        if lob:
            L.append("")
            L.append(f"lobreplay's two passes (medians): book only pass 1 (sizing scan) "
                     f"{statistics.median(m['pass1'] for m in lob):.2f} s + pass 2 "
                     f"{statistics.median(m['pass2'] for m in lob):.2f} s" +
                     (f"; every report pass 1 {statistics.median(m['pass1'] for m in loa):.2f} s + pass 2 "
                      f"{statistics.median(m['pass2'] for m in loa):.2f} s" if loa else "") +
                     (f"; book only from the sizing cache pass 1 {statistics.median(m['pass1'] for m in loc):.2f} s "
                      f"+ pass 2 {statistics.median(m['pass2'] for m in loc):.2f} s" if loc else "") + ".")
        if day.name in prep:
            p = prep[day.name]
            if p.get("rc") == 0:
                ph = ", ".join(f"{k} {v:.2f} s" for k, v in p["phases"].items())
                L.append(f"hftbacktest's input, made once per run of the bench (not in the table): "
                         f"{p['inproc']:.2f} s in-process ({ph}), {p['wall']:.2f} s wall, "
                         f"{p['rss'] / 2**20:,.0f} MiB peak RSS, {p['events']:,} events.")
            else:
                L.append(f"hftbacktest's conversion FAILED: {tail(p['log'])}")
        sections[day.name] = "\n".join(L).rstrip() + "\n"
    return sections


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench-peers:{name}:start -->", f"<!-- bench-peers:{name}:end -->"


def write_sections(path: Path, sections: dict[str, str]) -> None:
    """Replace each day's delimited section of the Markdown file (appended at the end of the
    peers' part, before its notes line, if new); the other days' sections stay."""
    body = path.read_text() if path.exists() else "# Benchmark results\n"
    if START in body and END in body:  # the single section of earlier runs: its place kept for the days'
        pre, rest = body.split(START, 1)
        body = pre + PLACE + rest.split(END, 1)[1]
    for name, text in sections.items():
        a, b = markers(name)
        block = f"{a}\n{text.rstrip()}\n{b}\n"
        if a in body and b in body:
            pre, rest = body.split(a, 1)
            body = pre + block.rstrip("\n") + rest.split(b, 1)[1]
        elif PLACE in body:
            body = body.replace(PLACE, block + PLACE)
        else:
            body = body.rstrip("\n") + "\n\n" + block + PLACE + "\n"
    path.write_text(body)


ARGS: argparse.Namespace


def main() -> int:
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers-python", default=str(BUILD / "peers-venv" / "bin" / "python"))
    ap.add_argument("--files", default="wide,narrow",
                    help="comma-separated generated days: wide, narrow (5M messages each), full (the full-size day: "
                         "270M messages, ~8 GB, only lobreplay's and itch-book's rows of issue 28's ratios)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--millions", type=int, default=5, help="messages per day, in millions")
    ap.add_argument("--seed", type=int, default=bench_itch.SEED,
                    help="the generator's seed of the wide and narrow days (another seed: other days of the same "
                         "kinds, each with its own part of RESULTS.md, named e.g. wide-seed11)")
    ap.add_argument("--meatpy-messages", type=int, default=200_000, help="MeatPy's prefix of the day")
    ap.add_argument("--only", help="comma-separated row labels (book,bbo,all,itch-book-book,...) to run")
    ap.add_argument("--write", help="replace the delimited section of this Markdown file (benchmarks/RESULTS.md)")
    ap.add_argument("--command", default=None, help="the command to print in the report (DAY_SEED=N added for a seed "
                                                   "other than the days' own)")
    ARGS = ap.parse_args()
    compileall.compile_dir(ROOT / "lobreplay", quiet=1)  # as installed (pip compiles bytecode)
    t_start = time.perf_counter()
    machine = machine_note()
    source = source_note()
    WORK.mkdir(parents=True, exist_ok=True)
    status = peer_status(ARGS.peers_python)
    for tool, why in status.items():
        if why:
            print(f"!!! {tool}: {why}", file=sys.stderr)
    days = []
    for name in ARGS.files.split(","):
        name = name.strip()
        if name == "full":  # the full-size day of `make bench-itch-full` (made once, ~8 GB)
            path = bench_itch.make_full_day("all", bench_itch.FULL_MESSAGES // 1_000_000)
        elif name in bench_itch.DAYS:
            path = bench_itch.make_day(name, ARGS.millions, ARGS.seed)
            name = name if ARGS.seed == bench_itch.SEED else f"{name}-seed{ARGS.seed}"
        else:
            sys.exit(f"unknown day {name!r}; have {sorted(bench_itch.DAYS) + ['full']}")
        days.append(Day(name, path, scan(path, ARGS.meatpy_messages)))
    cfgs = configs()
    if ARGS.only:
        # the baseline, the reference BBO and the start-up floors
        keep = set(ARGS.only.split(",")) | {"book", "bbo"} | {c["label"] for c in cfgs if c.get("floor")}
        cfgs = [c for c in cfgs if c["label"] in keep]
    prep = {}
    if not status.get("hftbacktest") and any(c["tool"] == "hftbacktest" for c in cfgs):
        for day in (d for d in days if any(c["tool"] == "hftbacktest" for c in day_cfgs(d, cfgs))):
            out = day.dir / "hftbacktest_prep.json"
            m = measure([ARGS.peers_python, str(PEERS / "prep_hftbacktest.py"), str(day.path), "--npz", str(day.npz),
                         "--out", str(out)], day.dir / "hftbacktest_prep.log")
            if m["rc"] == 0:
                d = json.loads(out.read_text())
                m.update(inproc=d["seconds"], phases=d["phases"], events=d["events"])
            else:
                status["hftbacktest"] = f"conversion failed: {tail(m['log'])}"
            prep[day.name] = m
            print(f"hftbacktest conversion {day.name}: {m['wall']:.2f} s, {m['rss'] / 2**20:.0f} MiB",
                  file=sys.stderr, flush=True)
    results: dict = {}
    versions: dict = {}
    # one untimed round of the rows issue 28's ratios compare (lobreplay's and itch-book's), so
    # that the first timed repetition finds what a later one finds (files, libraries, the
    # kernel's page and slab caches); the slow peers' rows are not worth one, nor the full-size
    # day's rows (minutes each, against start-up effects of a fraction of a second)
    for day in (d for d in days if d.name != "full"):
        for c in day_cfgs(day, cfgs):
            if c["tool"] in ("lobreplay", "itch-book") and not (c["needs"] and status.get(c["needs"])):
                warm(day.path)
                c["run"](day, -1)
    for rep in range(ARGS.reps):
        for day in days:
            # each repetition starts one row later: no row always runs right after the same one
            mine = day_cfgs(day, cfgs)
            turn = rep % len(mine)
            for c in mine[turn:] + mine[:turn]:
                if c["needs"] and status.get(c["needs"]):
                    continue
                warm(day.path, day.npz)
                prime(c["tool"])
                load = os.getloadavg()[0]
                m = c["run"](day, rep)
                m["load"] = load
                m["rep"] = rep
                if m["rc"] == 0:
                    if m["version"]:
                        versions.setdefault(c["tool"], m["version"])
                    if c["tool"] == "lobreplay" and "bbo" in m:
                        if day.ref is None:
                            day.ref = m["bbo"]
                        elif day.ref != m["bbo"]:
                            print(f"!!! lobreplay's own BBO differs between runs ({day.name}, {c['label']})",
                                  file=sys.stderr)
                    m["agree"] = compare(day, c["tool"], m.get("bbo") or {})
                    m["has_bbo"] = "bbo" in m
                    m.pop("bbo", None)
                    inproc = "-" if m["inproc"] is None else f"{m['inproc']:.2f} s"
                    print(f"rep {rep + 1} {day.name} {c['label']}: {m['wall']:.2f} s wall, {inproc} "
                          f"in-process, {m['rss'] / 2**20:.0f} MiB, agree {m['agree']}", file=sys.stderr, flush=True)
                else:
                    print(f"!!! rep {rep + 1} {day.name} {c['label']} FAILED (exit {m['rc']}): {tail(m['log'])}",
                          file=sys.stderr, flush=True)
                results.setdefault((day.name, c["label"]), []).append(m)
    # the floor of lobreplay's design on each day: its stages alone, in memory (benchmarks/stages_itch.py;
    # not on the full-size day, which it would hold in memory)
    for day in days:
        if day.name != "full":
            out = day.dir / "stages.json"
            out.unlink(missing_ok=True)
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "stages_itch.py"), str(day.path), "--reps", "3",
                            "--json", str(out)], stdout=subprocess.DEVNULL, cwd=ROOT)
            if out.exists():
                day.stages = json.loads(out.read_text())
    cmd = ARGS.command or " ".join(shlex.quote(a) for a in [rel(sys.executable), rel(__file__), *sys.argv[1:]])
    if ARGS.command and ARGS.seed != bench_itch.SEED:  # (make bench passes its seed as --seed)
        cmd += f" DAY_SEED={ARGS.seed}"
    if source_note() != source:
        source += (" -- **lobreplay's sources changed during this run** (the checkout is shared): its rows may "
                   "mix builds; now: " + source_note())
    loads = [m["load"] for rs in results.values() for m in rs]
    if loads:
        machine += f"; 1-minute load average {min(loads):.2f}-{max(loads):.2f} (median {statistics.median(loads):.2f}) before the runs"
    sections = report(days, cfgs, results, status, prep, cmd, versions, machine, source, ARGS.reps,
                      time.perf_counter() - t_start)
    print("\n".join(sections.values()))
    if ARGS.write:
        write_sections(Path(ARGS.write), sections)
        print(f"wrote the sections of {', '.join(sections)} in {ARGS.write}", file=sys.stderr)
    disagreements = any(c[0] != c[1] for rs in results.values() for m in rs if m["rc"] == 0
                        for c in (m.get("agree") or {}).values())
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
