"""The command line: in-process through main(), and once as a real subprocess."""
import json
import pathlib
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from lobreplay.cli.main import main

SAMPLE_DAY = str(pathlib.Path(__file__).resolve().parent.parent / "data" / "sample_day.itch.gz")


def test_demo_in_process(capsys):
    assert main(["demo", "--events", "3000", "--instruments", "3", "--resting", "100", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "generated 3,000 events for 3 instruments" in out
    assert "core allocations during replay: 0" in out
    assert "every book passed validate()" in out


def test_the_report_line_counts_rows_in_english():
    from lobreplay.cli.common import reports_text
    assert reports_text("out", {"desyncs": 0, "bbo": 1, "executions": 1234}, "summary.json") == \
        "reports in out/: desyncs (0 rows), bbo (1 row), executions (1,234 rows), summary.json"


def test_no_verb_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage: lobreplay" in capsys.readouterr().err


def test_subprocess_exit_codes_and_streams():
    ok = subprocess.run([sys.executable, "-m", "lobreplay", "demo", "--events", "1000", "--instruments", "2",
                         "--resting", "50", "--repeat", "1"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "M events/s" in ok.stdout and ok.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "lobreplay", "demo", "--events", "many"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "invalid int value" in bad.stderr and "Traceback" not in bad.stderr


def test_itch_verbs(tmp_path, capsys):
    from tests.conftest import REAL_ITCH
    cap = str(REAL_ITCH / "nasdaq_20230822_0930_moldudp64.pcap")
    assert main(["itch", "stats", cap]) == 0
    out = capsys.readouterr().out
    assert "269 messages" in out and "'A'  add_order" in out and "0 sequence gap(s)" in out
    assert main(["itch", "decode", cap, "-o", str(tmp_path / "dec"), "--types", "A,U"]) == 0
    assert sorted(p.name for p in (tmp_path / "dec").iterdir()) == ["A_add_order.parquet", "U_order_replace.parquet",
                                                                   "summary.json"]
    assert main(["itch", "decode", cap, "-o", str(tmp_path / "dec2"), "--types", "A,Z"]) == 1
    assert "unknown message type(s) Z" in capsys.readouterr().err
    assert main(["itch", "replay", cap, "-o", str(tmp_path / "rep"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "unknown_reference 113" in out and "does not reach the end of the session" in out
    assert main(["itch", "replay", cap, "-o", str(tmp_path / "rep"), "--no-progress"]) == 1
    assert "--force" in capsys.readouterr().err
    assert main(["itch", "replay", cap, "-o", str(tmp_path / "rep2"), "--reports", "bbo,nope"]) == 1
    assert "unknown report(s) nope" in capsys.readouterr().err


def test_itch_replay_of_a_gzip_cut_short(tmp_path, capsys):
    """An interrupted download of a gzip day: a one-line error that says what happened and
    what to do; with --allow-truncated the replay runs to the cut, reports it in its output and
    summary.json, and its reports are readable."""
    import json

    import pyarrow.parquet as pq
    day = pathlib.Path(SAMPLE_DAY).read_bytes()
    cut = tmp_path / "20191230.cut.itch.gz"
    cut.write_bytes(day[:len(day) * 2 // 3])
    assert main(["itch", "replay", str(cut), "-o", str(tmp_path / "no"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert str(cut) in err and "ends before its end-of-stream marker" in err and "Traceback" not in err
    out = tmp_path / "yes"
    assert main(["itch", "replay", str(cut), "-o", str(out), "--no-progress", "--allow-truncated"]) == 0
    assert "the gzip stream ends early (cut short" in capsys.readouterr().out
    s = json.loads((out / "summary.json").read_text())
    assert s["truncated"]["stream_break"].startswith("cut short") and s["messages"] > 30_000
    # the orders live at the cut are residual_order rows, which the desync rate leaves out
    assert s["desyncs_by_cause"]["residual_order"] == s["desyncs"] > 1000 and s["desync_rate_per_execution"] == 0
    assert pq.read_table(out / "bbo.parquet").num_rows > 0
    # decode and stats say where the text stops too
    assert main(["itch", "decode", str(cut), "-o", str(tmp_path / "dec"), "--types", "A", "--allow-truncated"]) == 0
    assert "the gzip stream ends early (cut short" in capsys.readouterr().out
    # two processes read the cut the same way and write the same reports
    out2 = tmp_path / "yes2"
    assert main(["itch", "replay", str(cut), "-o", str(out2), "--no-progress", "--allow-truncated", "--jobs", "2"]) == 0
    s2 = json.loads((out2 / "summary.json").read_text())
    assert (s2["messages"], s2["truncated"], s2["desyncs"]) == (s["messages"], s["truncated"], s["desyncs"])
    for name in ("bbo", "executions", "desyncs"):
        assert pq.read_table(out2 / f"{name}.parquet").to_pylist() == pq.read_table(out / f"{name}.parquet").to_pylist()


def test_a_partial_last_message_is_named_by_replay_and_stats_alike(tmp_path, capsys):
    """A raw day cut inside a message: with --allow-truncated, replay and stats print the
    same line, with the partial message's offset and size (the framing walked here)."""
    import gzip
    import json
    day = gzip.decompress(pathlib.Path(SAMPLE_DAY).read_bytes())
    cut_at = len(day) // 2
    off = 0
    while off + 2 + int.from_bytes(day[off:off + 2], "big") <= cut_at:
        off += 2 + int.from_bytes(day[off:off + 2], "big")
    if off == cut_at:  # on a boundary: cut inside the next message instead
        cut_at += 5
    cut = tmp_path / "20191230.partial.itch"
    cut.write_bytes(day[:cut_at])
    line = f"truncated: {cut_at - off} byte(s) of a partial message at offset {off:,} were not read"
    out = tmp_path / "rep"
    assert main(["itch", "replay", str(cut), "-o", str(out), "--no-progress", "--allow-truncated"]) == 0
    assert line in capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["truncated"] == {
        "offset": off, "bytes": cut_at - off, "stream_break": None, "bytes_after_end_marker": 0}
    assert main(["itch", "stats", str(cut), "--allow-truncated"]) == 0
    assert line in capsys.readouterr().out


def test_an_output_that_cannot_be_created_is_one_line_naming_it(tmp_path, capsys):
    """An output under a file (or on a read-only or full disk): exit status 1 and one line
    naming the path and the system's reason, for every verb that writes, never a traceback."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    day = SAMPLE_DAY
    from tests.fake_binance import BINANCE_DATA
    spot = str(BINANCE_DATA / "hftbacktest" / "spot" / "btcusdt_20240808.gz")
    for argv in (["itch", "replay", day, "-o", str(blocker / "out"), "--no-progress"],
                 ["itch", "decode", day, "-o", str(blocker / "out")],
                 ["capture", "binance", "--from-jsonl", spot, "-o", str(blocker / "x.lobc")]):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith(f"lobreplay: error: {blocker / ''}") and "Not a directory" in err, err
        assert len(err.splitlines()) == 1


def test_replay_options_out_of_range_are_named(capsys):
    """Options a replay cannot use are refused by name before anything runs (a negative
    headroom made every book's band invalid and failed deep in the core)."""
    day = SAMPLE_DAY
    for opt, val, want in (("--headroom", "-1", "--headroom: expected a fraction"),
                           ("--headroom", "nan", "--headroom: expected a fraction"),
                           ("--chunk-mb", "0", "--chunk-mb: expected a chunk size of 1 to 1024 (MiB), got 0"),
                           # (these were numpy's MemoryError tracebacks: 977 GiB, 95 GiB)
                           ("--chunk-mb", "1000000", "--chunk-mb: expected a chunk size of 1 to 1024"),
                           ("--depth", "100000", "--depth: expected a number of levels of 0 to 100, got 100000"),
                           ("--depth", "-1", "--depth: expected a number of levels of 0 to 100"),
                           ("--jobs", "0", "--jobs: expected a number of processes >= 1")):
        assert main(["itch", "replay", day, "-o", "never-created", opt, val]) == 1
        assert want in capsys.readouterr().err
    assert not pathlib.Path("never-created").exists()


def _replay_signalled(out, signame: str):
    """`itch replay` of the sample day in a subprocess that sends itself signal `signame`
    after its first chunk of report rows (so that it lands mid-run every time; tables
    write a row group every 1,000 rows, so that some are being written then)."""
    import os
    root = pathlib.Path(__file__).resolve().parent.parent
    script = (
        "import os, signal, sys\n"
        "from lobreplay.itch import replay\n"
        "from lobreplay.reports.tables import ReportSet, TableWriter\n"
        "TableWriter.ROW_GROUP = 1000\n"
        "real = replay.ItchReplay._chunk_reports\n"
        "def once(self, *a, **k):\n"
        "    real(self, *a, **k)\n"
        "    for r in [x for x in a if isinstance(x, ReportSet)]:  # its rows handed to the writers\n"
        "        [f.result() for f in r._pending]\n"
        f"    os.kill(os.getpid(), signal.{signame})\n"
        "replay.ItchReplay._chunk_reports = once\n"
        "from lobreplay.cli.main import main\n"
        f"sys.exit(main(['itch', 'replay', {SAMPLE_DAY!r}, '-o', {str(out)!r}, '--no-progress', '--chunk-mb', '1']))\n")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})


def _where_stopped(s: dict, stderr: str, what: str) -> None:
    """The one line and summary.json of a replay stopped by a signal after its first chunk of
    pass 2 (1 MiB): they name the file, the pass and the messages done."""
    import os
    w = s["stopped_at"]
    size = os.path.getsize(SAMPLE_DAY)
    assert w["pass"] == 2 and 0 < w["messages_done"] <= (1 << 20) // 14  # the first 1 MiB chunk's (>= 14 B each)
    assert w["file_bytes"] == size and 0 < w["file_bytes_read"] <= size
    line = (f"lobreplay: {what} at {SAMPLE_DAY}: in pass 2, after {w['messages_done']:,} messages "
            f"({w['file_bytes_read']:,} of {size:,} bytes read)")
    assert stderr.strip().startswith(line), stderr


def test_sigterm_mid_replay_leaves_whole_reports_and_a_failed_summary(tmp_path):
    """SIGTERM (a scheduler stopping the job) mid-replay: the command stops as on Ctrl-C,
    exit 143, one line that says where it was; every report file already open is closed
    whole (readable Parquet) and summary.json says failed, and where."""
    import json

    import pyarrow.parquet as pq
    out = tmp_path / "out"
    p = _replay_signalled(out, "SIGTERM")
    assert p.returncode == 143, p.stderr
    assert p.stderr.strip().endswith("; the reports written so far are whole") and len(p.stderr.splitlines()) == 1
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "failed" and s["error"] == "terminated (SIGTERM)"
    _where_stopped(s, p.stderr, "terminated (SIGTERM)")
    tables = sorted(out.glob("*.parquet"))
    assert tables and all(pq.read_metadata(t).num_rows >= 0 for t in tables)  # every one has its footer
    assert pq.read_metadata(out / "bbo.parquet").num_rows > 0


def test_sigint_mid_replay_says_where_it_stopped(tmp_path):
    """Ctrl-C mid-replay: exit 130, one line naming the file, the pass and the messages done
    (whole chunks: the messages before them are in the reports), the same in summary.json."""
    import json

    import pyarrow.parquet as pq
    out = tmp_path / "out"
    p = _replay_signalled(out, "SIGINT")
    assert p.returncode == 130, p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "failed" and s["error"] == "interrupted (SIGINT)"
    _where_stopped(s, p.stderr, "interrupted")
    last = pq.read_table(out / "bbo.parquet", columns=["sequence"])["sequence"].to_numpy()
    assert len(last) and last.max() < s["stopped_at"]["messages_done"]


def _decoded_rows(out) -> int:
    import pyarrow.parquet as pq
    return sum(pq.read_metadata(t).num_rows for t in out.glob("*.parquet"))


def test_decode_that_fails_part_way_says_so_in_its_summary(tmp_path, capsys):
    """A corrupt frame at message 30,000: the tables used to be renamed to their final names
    with no summary and no marker, so half a day looked decoded. They still hold every message
    before the frame (valid Parquet), and summary.json says failed, the error and where; a
    whole decode's summary.json says ok, with its counts."""
    import gzip
    import json
    raw = bytearray(gzip.decompress(pathlib.Path(SAMPLE_DAY).read_bytes()))
    off = 0
    for _ in range(30_000):
        off += 2 + int.from_bytes(raw[off:off + 2], "big")
    raw[off + 1] += 1  # its length disagrees with its type
    bad = tmp_path / "20191230.corrupt.itch"
    bad.write_bytes(bytes(raw))
    out = tmp_path / "dec"
    assert main(["itch", "decode", str(bad), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"corrupt frame at byte {off:,}" in err and len(err.splitlines()) == 1, err
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "failed" and "corrupt frame" in s["error"]
    assert s["stopped_at"]["messages_done"] == 30_000 and s["stopped_at"]["file_bytes"] == len(raw)
    assert _decoded_rows(out) == sum(s["report_rows"].values()) == 30_000
    assert not list(out.glob("*.partial"))
    ok = tmp_path / "ok"
    assert main(["itch", "decode", SAMPLE_DAY, "-o", str(ok)]) == 0
    assert f"{ok / 'summary.json'}: status ok" in capsys.readouterr().out
    s = json.loads((ok / "summary.json").read_text())
    assert s["status"] == "ok" and "stopped_at" not in s and s["truncated"] is None
    assert s["messages"] == sum(s["messages_by_type"].values()) == _decoded_rows(ok) == 65_000


def test_sigterm_mid_decode_says_where_and_leaves_a_failed_summary(tmp_path):
    """SIGTERM after the first chunk: exit 143, one line naming the file and the messages
    decoded; the tables hold exactly those (whole Parquet) and summary.json says failed."""
    import json
    import os
    out = tmp_path / "dec"
    p = _main_with(
        "from lobreplay.itch import decode, reader\n"
        "reader.ItchFile.__init__.__kwdefaults__['chunk_bytes'] = 1 << 18\n"
        "real, seen = decode.decode, []\n"
        "def second(chunk, types=None):\n"
        "    seen.append(1)\n"
        "    if len(seen) == 2:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return real(chunk, types)\n"
        "decode.decode = second\n", ["itch", "decode", SAMPLE_DAY, "-o", str(out)])
    assert p.returncode == 143, p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "failed" and s["error"] == "terminated (SIGTERM)"
    w = s["stopped_at"]
    assert 0 < w["messages_done"] < 65_000 and w["file_bytes"] == os.path.getsize(SAMPLE_DAY)
    assert p.stderr.strip() == (
        f"lobreplay: terminated (SIGTERM) at {SAMPLE_DAY}: after {w['messages_done']:,} messages decoded "
        f"({w['file_bytes_read']:,} of {w['file_bytes']:,} bytes read; summary.json says failed); "
        "the reports written so far are whole")
    assert _decoded_rows(out) == w["messages_done"]


def test_text_bytes_outside_ascii_are_counted_not_fatal(tmp_path, capsys):
    """A damaged text field (a byte outside ASCII in an R or A message's stock) once failed
    replay, decode and the symbol harvest with a traceback (UnicodeDecodeError, or Arrow's
    invalid UTF-8). Now it is written as '?', counted in summary.json and said in one line."""
    import gzip
    import json

    import pyarrow.parquet as pq
    raw = bytearray(gzip.decompress(pathlib.Path(SAMPLE_DAY).read_bytes()))
    hit, pos = {}, 0
    while pos + 3 <= len(raw) and len(hit) < 2:  # the first R and the first A
        n, t = int.from_bytes(raw[pos:pos + 2], "big"), chr(raw[pos + 2])
        if t in "RA" and t not in hit:
            hit[t] = pos + 2 + (11 if t == "R" else 24)  # the stock field's first byte
        pos += 2 + n
    for at in hit.values():
        raw[at] = 0xDE
    bad = tmp_path / "20191230.damaged.itch"
    bad.write_bytes(bytes(raw))
    assert main(["itch", "replay", str(bad), "-o", str(tmp_path / "r"), "--no-progress"]) == 0
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["status"] == "ok" and s["text_bytes_outside_ascii"] >= 1
    assert main(["itch", "decode", str(bad), "-o", str(tmp_path / "d"), "--types", "R,A"]) == 0
    out = capsys.readouterr().out
    assert out.count("byte(s) outside ASCII") == 2, out
    stocks = pq.read_table(tmp_path / "d" / "R_stock_directory.parquet")["stock"].to_pylist()
    assert any("?" in x for x in stocks) and all(x.isascii() for x in stocks)


@pytest.mark.parametrize("argv, says", [
    (["demo", "--events", "0"], "--events: expected a number >= 1"),
    (["demo", "--resting", "0", "--events", "500"], "--resting: expected a number >= 1"),
    (["itch", "replay", SAMPLE_DAY, "--depth", "-2"], "--depth: expected a number of levels of 0 to 100, got -2"),
    (["itch", "replay", SAMPLE_DAY, "--date", "2019-13-45"], "--date: expected a date YYYY-MM-DD"),
    (["itch", "replay", SAMPLE_DAY, "--symbols", ",,,"], "--symbols: expected comma-separated symbols"),
    (["lobc", "replay", "never-read.lobc", "--symbols", ","],
     "--symbols: expected comma-separated symbols"),
    (["itch", "lobster", SAMPLE_DAY, "--symbol", "X", "--date", "2019-02-30"], "--date: expected a date"),
    (["itch", "replay-many", SAMPLE_DAY, "--date", "x.itch=2019-99-01"], "expected a date YYYY-MM-DD"),
    (["itch", "replay", SAMPLE_DAY, "--reports", "bbo,depth"], "--reports depth: the depth table needs --depth N"),
    (["itch", "lobster", SAMPLE_DAY, "--symbol", "FTC", "--date", "2019-12-30", "--start-ms", "9", "--end-ms", "9"],
     "window: expected 0 <= start < end"),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, argv, says):
    """Arguments out of range: exit 1 and one line naming the option (each was a traceback:
    ZeroDivisionError, 'negative dimensions', 'month must be in 1..12', 'empty range')."""
    argv = argv[:3] + ["-o", str(tmp_path / "o")] + argv[3:] if argv[0] in ("itch", "lobc") else argv
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("lobreplay: error: ") and says in err and len(err.strip().splitlines()) == 1, err


def test_a_directory_given_as_an_input_file_is_called_one(tmp_path, capsys):
    """It was called 'no such file'."""
    d = tmp_path / "adir.itch"
    d.mkdir()
    for argv in (["capture", "binance", "--from-jsonl", str(d), "-o", str(tmp_path / "x.lobc")],
                 ["itch", "replay-many", str(d), "-o", str(tmp_path / "ds")],
                 ["lobc", "replay", str(d), "-o", str(tmp_path / "o")]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.strip() in (f"lobreplay: error: {d}: a directory, not a file",
                               f"lobreplay: error: {d}: a directory, not a .lobc file"), err


def test_sigkill_mid_replay_leaves_no_report_without_its_footer(tmp_path):
    """kill -9 cannot be caught: the files being written are left as NAME.partial, so every
    file under a report's name is whole; a --force rerun clears the leftovers."""
    import pyarrow.parquet as pq
    out = tmp_path / "out"
    p = _replay_signalled(out, "SIGKILL")
    assert p.returncode == -9, p.stderr
    assert list(out.glob("*.partial"))
    for t in out.glob("*.parquet"):
        pq.read_metadata(t)  # whole
    assert main(["itch", "replay", SAMPLE_DAY, "-o", str(out), "--no-progress", "--force"]) == 0
    assert not list(out.glob("*.partial")) and (out / "bbo.parquet").exists()


def test_a_report_that_cannot_be_closed_fails_the_replay(tmp_path, capsys):
    """Closing a report fails (here its name is taken by a directory; a full disk does the
    same): exit 1 naming it, and summary.json says failed with the error (it said "ok", as
    the status was set before the reports were closed)."""
    out = tmp_path / "out"
    (out / "bbo.parquet").mkdir(parents=True)
    assert main(["itch", "replay", SAMPLE_DAY, "-o", str(out), "--no-progress", "--force"]) == 1
    err = capsys.readouterr().err
    assert "bbo.parquet: Is a directory" in err and "Traceback" not in err
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "failed" and "bbo.parquet" in s["error"] and s["stopped_at"]["pass"] == 2
    assert pq.read_metadata(out / "desyncs.parquet").num_rows == 0  # the others are closed whole


def test_force_clears_the_previous_replays_histogram_files(tmp_path):
    """--force over an earlier replay's reports: its latency_*.hgrm files go with its tables
    (a --no-timing replay left the earlier run's histograms beside its own reports)."""
    out = tmp_path / "out"
    assert main(["itch", "replay", SAMPLE_DAY, "-o", str(out), "--no-progress"]) == 0
    assert (out / "latency_ALL.hgrm").exists()
    (out / "notes.txt").write_text("mine")
    assert main(["itch", "replay", SAMPLE_DAY, "-o", str(out), "--no-progress", "--no-timing", "--force"]) == 0
    assert not list(out.glob("*.hgrm")) and (out / "notes.txt").read_text() == "mine"


def test_decode_of_a_file_that_cannot_be_read_makes_no_output(tmp_path, capsys):
    """An input that cannot even be opened as ITCH (here empty): one line, and no output
    directory (decode made an empty one, with no summary, before opening the input)."""
    (tmp_path / "empty.itch").write_bytes(b"")
    assert main(["itch", "decode", str(tmp_path / "empty.itch"), "-o", str(tmp_path / "out")]) == 1
    assert "empty file" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_sigterm_line_claims_whole_reports_only_for_commands_that_write_them(tmp_path):
    """The SIGTERM line's ending is the command's own: a conversion (written beside its output
    and renamed at the end) leaves no file and does not claim "the reports written so far are
    whole", as every command once did."""
    from tests.conftest import REAL_BINANCE
    src = REAL_BINANCE / "hftbacktest" / "usdm" / "btcusdt_20240808.gz"
    out = tmp_path / "u.lobc"
    p = _main_with(
        "from lobreplay.binance import convert as c\n"
        "real = c._feed_blob\n"
        "def once(*a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return real(*a, **k)\n"
        "c._feed_blob = once\n", ["capture", "binance", "--from-jsonl", str(src), "-o", str(out)])
    assert p.returncode == 143, p.stderr
    assert p.stderr.strip() == "lobreplay: terminated (SIGTERM)" and not list(tmp_path.iterdir())


def _main_with(patch: str, argv: list):
    """`lobreplay ARGV` in a subprocess after `patch` (Python lines, with os, signal and sys
    imported), e.g. one that makes the command signal itself at a chosen point."""
    import os
    root = pathlib.Path(__file__).resolve().parent.parent
    script = ("import os, signal, sys\n" + patch + "from lobreplay.cli.main import main\n"
              f"sys.exit(main({argv!r}))\n")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_an_output_that_is_an_input_is_refused_by_every_command(tmp_path, capsys):
    """issue 26: every command that reads files and writes files refuses an output that is
    one of its inputs (by path, or the same file by a hard link), --force or not, with one
    line naming it: view over a file of the report directory it reads, itch lobster over
    its ITCH file, replay-many with the dataset at an input. Nothing is changed."""
    import os

    from lobreplay.itch.lobster import lobster_names
    rep = tmp_path / "rep"
    assert main(["itch", "replay", SAMPLE_DAY, "-o", str(rep), "--no-progress", "--no-timing"]) == 0
    day = tmp_path / "day.itch.gz"
    day.write_bytes(pathlib.Path(SAMPLE_DAY).read_bytes())
    out = tmp_path / "lobster"
    out.mkdir()
    msg, _ = lobster_names("AAPL", "2019-12-30", 34_200_000, 57_600_000, 10)
    os.link(day, out / msg)
    before = {p: p.read_bytes() for p in (rep / "summary.json", rep / "bbo.parquet", day)}
    cases = [
        (["view", str(rep), "-o", str(rep / "summary.json")], rep / "summary.json"),
        (["view", str(rep), "-o", str(rep / "bbo.parquet")], rep / "bbo.parquet"),
        (["itch", "lobster", str(day), "--symbol", "AAPL", "--date", "2019-12-30", "-o", str(out)], out / msg),
        (["itch", "replay-many", str(day), "-o", str(day)], day),
    ]
    for argv, named in cases:
        for force in ([], ["--force"]) if argv[1] != "replay-many" else ([],):  # (replay-many has no --force)
            assert main(argv + force) == 1, argv
            err = capsys.readouterr().err
            assert err.startswith(f"lobreplay: error: {named}") and err.count("\n") == 1, err
            assert "the output is an input of this command" in err, err
    assert all(p.read_bytes() == b for p, b in before.items())


@pytest.mark.parametrize("argv", [["itch", "replay", "--no-progress", "--no-timing"],
                                  ["itch", "replay", "--no-progress", "--jobs", "2"],
                                  ["itch", "decode", "--types", "S,R"]])
def test_force_removes_only_an_earlier_runs_files_after_opening_the_input(tmp_path, capsys, argv):
    """issue 26: --force removed every *.parquet and summary.json of the output directory,
    before the input was opened: `itch replay nonexist -o u --force` lost the user's
    prices_2023.parquet. Now a missing input changes nothing, and --force removes only the
    files an earlier run wrote (its summary.json lists them all): another file stays, even
    a copy of one of its tables under another name."""
    import os
    import shutil
    verb, opts = argv[:2], argv[2:]
    out = tmp_path / "u"
    assert main(verb + [SAMPLE_DAY, "-o", str(out)] + opts) == 0
    first = json.loads((out / "summary.json").read_text())
    assert first["files"] == sorted(n for n in os.listdir(out) if n != "summary.json") and first["files"]
    table = first["files"][0]
    shutil.copy(out / table, out / "prices_2023.parquet")
    (out / "notes.txt").write_text("mine")
    mine = {n: (out / n).read_bytes() for n in ("prices_2023.parquet", "notes.txt")}
    capsys.readouterr()
    assert main(verb + [str(tmp_path / "nonexist.itch"), "-o", str(out), "--force"] + opts) == 1
    assert "cannot read" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == sorted(first["files"] + ["summary.json", *mine])
    assert main(verb + [SAMPLE_DAY, "-o", str(out), "--force"] + opts) == 0
    again = json.loads((out / "summary.json").read_text())
    assert again["files"] == first["files"] and {n: (out / n).read_bytes() for n in mine} == mine
    assert not [n for n in os.listdir(out) if n.startswith(".part-")]  # (--jobs: its parts' directories gone)
    # the input kept in the directory under the name of a table of the earlier run: never removed
    shutil.copy(SAMPLE_DAY, tmp_path / "day.itch.gz")
    os.replace(tmp_path / "day.itch.gz", out / table)
    assert main(verb + [str(out / table), "-o", str(out), "--force"] + opts) == 1
    assert "the output is an input of this command" in capsys.readouterr().err
    assert (out / table).read_bytes() == pathlib.Path(SAMPLE_DAY).read_bytes()


def test_timing_every_sets_the_sample_of_timed_events(tmp_path, capsys):
    """--timing-every N: every Nth event is timed (the latency table's count), and the summary
    says N; 1 times every event; the help names the default, TIMING_EVERY; 0 is refused."""
    from lobreplay.reports.latency import TIMING_EVERY

    day = SAMPLE_DAY
    counts = {}
    for every in (None, 1, 5):
        out = tmp_path / f"o{every}"
        argv = ["itch", "replay", day, "-o", str(out), "--no-progress", "--reports", "latency"]
        assert main(argv + (["--timing-every", str(every)] if every else [])) == 0
        s = json.loads((out / "summary.json").read_text())
        assert s["pass2"]["timing_every"] == (every or TIMING_EVERY)
        lat = pq.read_table(out / "latency.parquet").to_pandas()
        counts[every] = int(lat[(lat.scope == "ALL") & (lat.kind == "ALL")]["count"].iloc[0])
        events = s["events"]
    assert counts[1] == events
    assert counts[5] == -(-events // 5) and counts[None] == -(-events // TIMING_EVERY)
    capsys.readouterr()
    assert main(["itch", "replay", day, "-o", str(tmp_path / "bad"), "--timing-every", "0"]) == 1
    assert "timing_every: expected a whole number >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["itch", "replay", "--help"])
    assert f"default {TIMING_EVERY}:" in " ".join(capsys.readouterr().out.split())
