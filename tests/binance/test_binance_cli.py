"""`capture binance` through add_commands(): --from-jsonl and --selftest (offline)."""
import argparse

from lobreplay.l2 import lobc
from lobreplay.binance import capture as capture_mod
from lobreplay.cli.binance import add_commands

from fake_binance import BINANCE_DATA


def run(argv):
    p = argparse.ArgumentParser(prog="lobreplay")
    add_commands(p.add_subparsers(dest="verb"))
    args = p.parse_args(argv)
    return args.func(args)


def test_parser_takes_the_documented_options():
    p = argparse.ArgumentParser(prog="lobreplay")
    add_commands(p.add_subparsers(dest="verb"))
    a = p.parse_args(["capture", "binance", "--symbol", "btcusdt", "--symbol", "ethusdt", "--market", "usdm",
                      "--seconds", "5", "-o", "x.lobc", "--depth-speed", "0ms", "--trades", "--book-ticker",
                      "--snapshot-limit", "500", "--raw", "x.jsonl", "--ws-url", "ws://h", "--rest-url", "http://h"])
    assert (a.symbol, a.market_given, a.seconds, a.out, a.depth_speed, a.trades, a.book_ticker, a.snapshot_limit,
            a.raw, a.ws_url, a.rest_url) == (["btcusdt", "ethusdt"], "usdm", 5.0, "x.lobc", "0ms", True, True, 500,
                                             "x.jsonl", "ws://h", "http://h")


def test_from_jsonl(tmp_path, capsys):
    out = tmp_path / "cf.lobc"
    assert run(["capture", "binance", "--from-jsonl", str(BINANCE_DATA / "cryptofeed" / "BINANCE_FUTURES.ws.1.0"),
                "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "usdm" in text and "SUSHIUSDT: 255 depth events" in text and "NEVER" not in text
    assert lobc.check(out)["whole"]
    # an existing -o is not overwritten without --force
    day9 = str(BINANCE_DATA / "hftbacktest" / "spot" / "btcusdt_20240809.gz")
    size = out.stat().st_size
    from lobreplay.cli.main import main
    assert main(["capture", "binance", "--from-jsonl", day9, "-o", str(out)]) == 1
    assert f"{out} exists; use --force to overwrite it" in capsys.readouterr().err and out.stat().st_size == size
    # a file that cannot sync on its own says so and exits 3
    assert run(["capture", "binance", "--from-jsonl", day9, "-o", str(out), "--force"]) == 3
    assert "NEVER SYNCED" in capsys.readouterr().out


def test_selftest_offline_with_synthetic_streams(monkeypatch, capsys):
    monkeypatch.setattr(capture_mod, "_recorded_sample", lambda: None)
    assert run(["capture", "binance", "--selftest"]) == 0
    out = capsys.readouterr().out
    assert "playing synthetic" in out and "selftest: OK" in out


def test_selftest_finds_the_bundled_recording(monkeypatch, tmp_path):
    """In a checkout the selftest plays the spot recording in data/real/binance (it looked for
    a shared folder beside the checkout); $LOBREPLAY_BINANCE_DATA names another folder, and
    a folder without it means the synthetic stream."""
    monkeypatch.delenv("LOBREPLAY_BINANCE_DATA", raising=False)
    spot = BINANCE_DATA / "hftbacktest" / "spot" / "btcusdt_20240808.gz"
    assert capture_mod._recorded_sample() == str(spot.resolve())
    monkeypatch.setenv("LOBREPLAY_BINANCE_DATA", str(tmp_path))
    assert capture_mod._recorded_sample() == str(spot.resolve())   # (not there: the checkout's)
    (tmp_path / "hftbacktest" / "spot").mkdir(parents=True)
    (tmp_path / "hftbacktest" / "spot" / "btcusdt_20240808.gz").write_bytes(spot.read_bytes())
    assert capture_mod._recorded_sample() == str(tmp_path / "hftbacktest" / "spot" / "btcusdt_20240808.gz")


def test_from_jsonl_of_a_cut_or_corrupt_gzip_names_the_file(tmp_path, capsys):
    """A recording whose gzip stream is cut short or corrupt: a one-line error naming the file
    and how much text came before, exit status 1, no traceback, no .lobc left behind (the scan
    reads the whole file before anything is written)."""
    from lobreplay.binance.scan import CHUNK
    from lobreplay.cli.main import main
    whole = (BINANCE_DATA / "hftbacktest" / "spot" / "btcusdt_20240808.gz").read_bytes()
    for name, data, after in [("cut.gz", whole[:600_000], f"in the piece read after byte {CHUNK:,} of it"),
                              ("corrupt.gz", b"\x1f\x8b\x08\x00" + b"garbage" * 9, "in the piece read after byte 0")]:
        src, out = tmp_path / name, tmp_path / (name + ".lobc")
        src.write_bytes(data)
        assert main(["capture", "binance", "--from-jsonl", str(src), "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert str(src) in err and after in err and "Traceback" not in err and len(err.splitlines()) == 1
        assert not out.exists()
    # --allow-truncated: the cut file converts up to its last whole line, and says so
    src, out = tmp_path / "cut.gz", tmp_path / "cut.lobc"
    assert main(["capture", "binance", "--from-jsonl", str(src), "-o", str(out), "--allow-truncated"]) == 0
    text = capsys.readouterr().out
    assert f"truncated: {src} breaks off after" in text and "cut short" in text and "synced" in text
    assert lobc.check(out)["whole"]


def test_capture_arguments_checked_before_anything_runs(tmp_path, capsys):
    """Values that made a capture loop or run forever, or fail only at its end, are refused at
    once with a one-line error and exit 1, before any connection or file."""
    from lobreplay.cli.main import main
    out = tmp_path / "x.lobc"
    base = ["capture", "binance", "--symbol", "btcusdt", "-o", str(out), "--ws-url", "ws://127.0.0.1:1",
            "--rest-url", "http://127.0.0.1:1", "--no-progress"]
    for extra, said in [(["--seconds", "nan"], "--seconds: a number of seconds > 0, got nan"),
                        (["--seconds", "inf"], "--seconds: a number of seconds > 0, got inf"),
                        (["--max-connection-age", "0"], "--max-connection-age: a number of seconds > 0, got 0.0"),
                        (["--max-connection-age", "-5"], "--max-connection-age: a number of seconds > 0, got -5.0"),
                        (["--rotate", "inf"], "--rotate: at least 1 s, got inf"),
                        (["--stats-json", str(tmp_path / "no" / "st.json")], f"no directory {tmp_path / 'no'}"),
                        (["--stats-json", str(tmp_path)], f"{tmp_path} is a directory")]:
        assert main(base + extra) == 1, extra
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err and len(err.splitlines()) == 1, (extra, err)
    assert not out.exists()


def test_capture_refuses_to_overwrite_without_force(tmp_path, capsys):
    """An existing -o or --raw (with --rotate: a file of the current or a later period) is not
    overwritten unless --force: a capture is not something to lose by repeating a command."""
    from lobreplay.binance.capture import CaptureOptions, existing_outputs, rotated_name
    from lobreplay.cli.main import main
    out, raw = tmp_path / "c.lobc", tmp_path / "c.jsonl.gz"
    raw.write_bytes(b"earlier")
    base = ["capture", "binance", "--symbol", "btcusdt", "-o", str(out), "--raw", str(raw), "--seconds", "0.3",
            "--ws-url", "ws://127.0.0.1:1", "--rest-url", "http://127.0.0.1:1", "--no-progress"]
    assert main(base) == 1
    assert f"{raw} exists; use --force to overwrite it" in capsys.readouterr().err
    assert raw.read_bytes() == b"earlier" and not out.exists()
    assert main(base + ["--force"]) == 1  # (it runs: nothing listens there)
    assert "never connected" in capsys.readouterr().err and lobc.check(out)["whole"]
    # rotation: the files of this period and later ones count, earlier ones do not
    now = 1_800_000_000 * 10**9
    o = CaptureOptions(symbols=["x"], out=str(out), raw=str(raw), rotate=3600.0)
    for t, name in [(now - 3600 * 10**9, "earlier"), (now, "this"), (now + 7200 * 10**9, "later")]:
        for p in (out, raw):
            open(rotated_name(str(p), t // (3600 * 10**9) * 3600 * 10**9, 3600), "w").write(name)
    (tmp_path / "c.notastamp.lobc").write_text("x")
    found = existing_outputs(o, now)
    assert [open(p).read() for p in found] == ["this", "later"] * 2
    assert all(p.startswith(str(tmp_path / "c.")) for p in found)


def test_from_jsonl_refuses_to_write_over_its_own_recording(tmp_path, capsys):
    """issue 26: `--from-jsonl rec.gz -o rec.gz --force` replaced the recording with the
    .lobc. An output that is an input is refused, --force or not, by path, through a symbolic
    link and as a hard link of it: one line naming it, exit 1, the recording as it was; so
    are two outputs of a live capture that are one file (-o and --raw), before connecting."""
    import os

    from lobreplay.cli.main import main
    rec = tmp_path / "rec.gz"
    rec.write_bytes((BINANCE_DATA / "hftbacktest" / "spot" / "btcusdt_20240808.gz").read_bytes())
    before = rec.read_bytes()
    os.symlink(rec, tmp_path / "sym.gz")
    os.link(rec, tmp_path / "hard.gz")
    for out in (rec, tmp_path / "sub" / ".." / "rec.gz", tmp_path / "sym.gz", tmp_path / "hard.gz"):
        for force in ([], ["--force"]):
            assert main(["capture", "binance", "--from-jsonl", str(rec), "-o", str(out)] + force) == 1
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "the output is an input of this command" in err, err
            assert str(out) in err and "Traceback" not in err
    assert rec.read_bytes() == before and not list(tmp_path.glob("*.tmp"))
    assert main(["capture", "binance", "--symbol", "btcusdt", "-o", str(tmp_path / "x.lobc"),
                 "--raw", str(tmp_path / "x.lobc"), "--seconds", "1"]) == 1
    assert "two outputs of this command are the same file" in capsys.readouterr().err
