"""The live capture against a local fake Binance (tests/fake_binance.py) playing real
recorded messages, with injected faults. Nothing here reaches the internet."""
import asyncio
import collections
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from lobreplay.l2 import lobc
from lobreplay.binance.capture import Capture, CaptureOptions, _quiet, http_get, plan_connections
from lobreplay.binance.convert import convert
from lobreplay.l2.lobc import (DIFF_BEGIN, GAP, GAP_24H, GAP_DISCONNECT, GAP_MALFORMED, GAP_RATE_LIMIT, GAP_SEQUENCE,
                            GAP_SHUTDOWN, GAP_STALE_SNAPSHOT, RESYNC, SNAPSHOT_END, TICKER_BID,
                            TRADE)

from fake_binance import SPOT, USDM, Fault, FakeBinance, ThreadedFake, recorded_script, replay_books, \
    synthetic_script, true_book

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


async def capture_against(fb_args, fb_kw, tmp_path, cap_limit=40.0, **opt_kw):
    async with FakeBinance(*fb_args, **fb_kw) as fb:
        kw = dict(out=str(tmp_path / "cap.lobc"), market=fb.market, seconds=cap_limit, snapshot_limit=1000,
                  ws_url=fb.ws_url, rest_url=fb.rest_url, progress=False, install_signals=False)
        kw.update(opt_kw)
        cap = Capture(CaptureOptions(**kw))
        # a fault is injected only once every symbol is synced again after the previous one
        fb.fault_ready = lambda: all(cap.machine.is_live(s) for s in cap.machine.symbols)
        stop = asyncio.Event()
        task = asyncio.create_task(cap.run(stop))
        async with asyncio.timeout(cap_limit):
            await fb.done.wait()
            await _quiet(cap)
        stop.set()
        stats = await task
    return fb, cap, stats


def segments(rec, sym):
    """[(L, [(U, u), ...])] for each synced stretch of symbol index sym, and the GAP reasons."""
    r = rec[rec["symbol"] == sym]
    segs, reasons, cur = [], [], None
    for x in r.tolist():
        kind = x[7]
        if kind == SNAPSHOT_END:
            cur = (x[2], [])
            segs.append(cur)
        elif kind == DIFF_BEGIN:
            assert cur is not None, "a diff outside a synced stretch"
            cur[1].append((x[2], x[3]))
        elif kind == GAP:
            reasons.append(x[10])
            cur = None
    return segs, reasons


def until_cut_after_end(fb, rec, name):
    """rec up to the first GAP after the server's last depth event (all of it if none)."""
    U, u = fb.applied_depth[name][-1][:2]
    ends = np.flatnonzero((rec["kind"] == DIFF_BEGIN) & (rec["first_id"] == U) & (rec["last_id"] == u))
    assert len(ends), "the server's last event is missing"
    after = np.flatnonzero(rec["kind"][ends[-1]:] == GAP)
    return rec[:ends[-1] + after[0]] if len(after) else rec


def verify(fb, out, expected, *, cut_after_end=False):
    """The file is whole; each symbol's book equals the server's; the GAP reasons are the
    injected ones; every GAP is followed by a RESYNC; each synced stretch is exactly the
    server's depth sequence from the snapshot on, all of it sent, and the last one runs to
    the server's last event. cut_after_end (one symbol): the capture's own cuts go on after
    the server's last event, and one there cannot resync (no event comes to sync on): the
    records from the first GAP after that event are left out (the file may end unsynced)."""
    c = lobc.check(out)
    assert c["whole"], c["torn"]
    data = lobc.read(out)
    syms = data.meta["symbols"]
    rec = data.records
    if cut_after_end:
        rec = until_cut_after_end(fb, rec, syms[0])
    books = replay_books(rec, len(syms))
    for i, s in enumerate(syms):
        assert books[i] == true_book(fb, s), f"{s}: book differs from the server's"
        segs, reasons = segments(rec, i)
        assert collections.Counter(reasons) == collections.Counter(expected.get(s, [])), (s, reasons)
        episodes, in_gap = 0, False     # runs of GAPs; each must end with a RESYNC
        for k in rec["kind"][rec["symbol"] == i].tolist():
            if k == GAP and not in_gap:
                episodes, in_gap = episodes + 1, True
            elif k == RESYNC:
                assert in_gap, f"{s}: RESYNC without a GAP"
                in_gap = False
        assert not in_gap, f"{s}: a GAP was never resynced"
        assert int(((rec["kind"] == RESYNC) & (rec["symbol"] == i)).sum()) == episodes
        true = [(U, u) for U, u, _ in fb.applied_depth[s]]
        sent = {(U, u) for U, u, _ in fb.sent_depth[s]}
        for L, ids in segs:
            assert ids, f"{s}: empty synced stretch"
            j0 = next(j for j, (U, u) in enumerate(true) if (u > L if fb.market == SPOT else u >= L))
            assert ids == true[j0:j0 + len(ids)], f"{s}: stretch from {L} is not the server's sequence"
            assert set(ids) <= sent
        assert segs[-1][1][-1] == true[-1], f"{s}: the last events are missing"
    return rec, syms


@pytest.mark.parametrize("market", [SPOT, USDM])
def test_recorded_script_starts_with_the_event_that_straddles_its_snapshot(market):
    """The fake's script from a recording keeps the depth events received before the
    snapshot that it does not cover (the recording's first applied event straddles the
    snapshot: spot U <= L+1 <= u, USD-M U <= L <= u); without them the fake's true book,
    the one every capture test compares against, missed their levels and was crossed."""
    from decimal import Decimal
    script = recorded_script(market, max_items=3000)
    depth = [it for it in script.items if it.kind == "depth"]
    L = script.snapshot["lastUpdateId"]
    U, u, _ = depth[0].ids
    assert (U <= L + 1 <= u) if market == SPOT else (U <= L <= u)
    fb = FakeBinance(market, [script])
    book = fb.books["BTCUSDT"]
    for it in depth:
        fb._apply("BTCUSDT", it)
        assert max(map(Decimal, book.bids)) < min(map(Decimal, book.asks)), it.ids


def test_plan_connections_routes_usdm_public_and_market():
    o = CaptureOptions(symbols=["btcusdt", "ethusdt"], out="x", market=USDM, depth_speed="0ms", trades=True,
                       book_ticker=True, snapshot_limit=1000)
    o.validate()
    c = plan_connections(o)
    assert [x.url for x in c] == [
        "wss://fstream.binance.com/public/stream?streams=btcusdt@depth@0ms/btcusdt@bookTicker/ethusdt@depth@0ms/"
        "ethusdt@bookTicker",
        "wss://fstream.binance.com/market/stream?streams=btcusdt@trade/ethusdt@trade"]
    assert c[0].depth_symbols == ["BTCUSDT", "ETHUSDT"] and c[1].depth_symbols == []
    s = CaptureOptions(symbols=["btcusdt"], out="x", trades=True)
    s.validate()
    assert [x.url for x in plan_connections(s)] == [
        "wss://stream.binance.com:9443/stream?streams=btcusdt@depth@100ms/btcusdt@trade"]
    for bad in (dict(market=USDM, snapshot_limit=5000), dict(depth_speed="0ms"), dict(symbols=[])):
        with pytest.raises(ValueError):
            CaptureOptions(**{**dict(symbols=["x"], out="x"), **bad}).validate()


def test_spot_capture_every_fault_marked_and_resynced(tmp_path):
    btc = recorded_script(SPOT, max_items=9000)
    eth = synthetic_script("ETHUSDT", SPOT, n_events=500, seed=2)
    faults = [Fault(1000, "drop", "BTCUSDT"), Fault(2000, "dup", "BTCUSDT"), Fault(3000, "swap", "BTCUSDT"),
              Fault(4000, "garbage", "BTCUSDT"), Fault(5000, "stale", "BTCUSDT"),
              Fault(6000, "rate_limit", "BTCUSDT"), Fault(7000, "disconnect"), Fault(8000, "shutdown"),
              Fault(8500, "swap", "ETHUSDT")]
    raw = tmp_path / "cap.jsonl"
    fb, cap, st = asyncio.run(capture_against(
        (SPOT, [btc, eth]), dict(rate=2000, faults=faults, retry_after="0.2"), tmp_path,
        symbols=["btcusdt", "ethusdt"], trades=True, book_ticker=True, snapshot_limit=5000, raw=str(raw)))
    assert [k for k, _, _ in fb.injected] == ["drop", "dup", "swap", "garbage", "stale", "rate_limit", "disconnect",
                                              "shutdown", "swap"]
    expected = {"BTCUSDT": [GAP_SEQUENCE, GAP_SEQUENCE, GAP_MALFORMED, GAP_SEQUENCE, GAP_STALE_SNAPSHOT,
                            GAP_SEQUENCE, GAP_RATE_LIMIT, GAP_DISCONNECT, GAP_SHUTDOWN],
                "ETHUSDT": [GAP_DISCONNECT, GAP_SHUTDOWN, GAP_SEQUENCE]}
    rec, syms = verify(fb, tmp_path / "cap.lobc", expected)
    assert st["connects"] == 3 and st["malformed"] == 1 and st["rate_limited"] == 1
    assert 429 in fb.http_status
    assert any(stale for _, _, stale in fb.snapshots_served)
    # trades and tickers: every one the server sent while connected is in the file
    n_sent = collections.Counter(k for _, k, _ in fb.sent)
    assert int((rec["kind"] == TRADE).sum()) == n_sent["trade"]
    assert int((rec["kind"] == TICKER_BID).sum()) == n_sent["bookTicker"]
    # the raw log converts back to exactly the same records
    st2 = convert(raw, tmp_path / "again.lobc")
    assert st2["format"] == "raw"
    again = lobc.read(tmp_path / "again.lobc").records
    assert len(again) == len(rec) and (again == rec).all()


def test_usdm_capture_two_connections(tmp_path):
    btc = recorded_script(USDM, max_items=7000)
    faults = [Fault(1500, "drop", "BTCUSDT"), Fault(3000, "garbage", "BTCUSDT"), Fault(4500, "disconnect"),
              Fault(5500, "dup", "BTCUSDT")]
    fb, cap, st = asyncio.run(capture_against(
        (USDM, [btc]), dict(rate=2500, faults=faults), tmp_path, symbols=["btcusdt"], trades=True,
        book_ticker=True, depth_speed="0ms"))
    assert len(cap.conns) == 2 and "/market/stream?" in cap.conns[1].url
    rec, _ = verify(fb, tmp_path / "cap.lobc",
                    {"BTCUSDT": [GAP_SEQUENCE, GAP_MALFORMED, GAP_DISCONNECT]})
    assert int((rec["kind"] == TRADE).sum()) > 0 and int((rec["kind"] == TICKER_BID).sum()) > 0
    d = rec[rec["kind"] == DIFF_BEGIN]
    assert (d["prev_id"] > 0).all()
    # the CPU time of the run itself (bench_binance's "running" figure): the messages took some
    assert st["messages_received"] > 5000 and 0 < st["cpu_seconds"] < 60


def test_rate_limited_websocket_and_snapshot_back_off_then_succeed(tmp_path):
    eth = synthetic_script("ETHUSDT", SPOT, n_events=1500, seed=4)
    t0 = time.monotonic()
    fb, cap, st = asyncio.run(capture_against(
        (SPOT, [eth]), dict(rate=1000, ws_429=2, rest_429=1, retry_after="1"), tmp_path, symbols=["ethusdt"]))
    # two refused handshakes (429 + Retry-After: 1), then a refused snapshot: waited, not failed
    assert fb.http_status[:3] == [429, 429, 429] and 200 in fb.http_status
    assert st["rate_limited"] == 3 and st["connects"] == 1
    assert time.monotonic() - t0 >= 3.0
    verify(fb, tmp_path / "cap.lobc", {"ETHUSDT": [GAP_RATE_LIMIT]})


def test_connection_age_cut_resyncs(tmp_path):
    eth = synthetic_script("ETHUSDT", USDM, n_events=2000, seed=5)
    fb, cap, st = asyncio.run(capture_against(
        (USDM, [eth]), dict(rate=1500), tmp_path, symbols=["ethusdt"], max_connection_age=0.7))
    rec = lobc.read(tmp_path / "cap.lobc").records
    _, reasons = segments(rec, 0)
    assert reasons and set(reasons) == {GAP_24H}
    # every cut is followed by a new connection, but the end of the capture can overtake the
    # last one: cut while the test stops it (the file then ends with that GAP), before the
    # handshake that would count (a slow machine's CI run saw 5 connects for 5 cuts)
    ends_cut = rec[rec["symbol"] == 0]["kind"][-1] == GAP
    assert st["connects"] == len(reasons) + 1 or (ends_cut and st["connects"] == len(reasons)), \
        (st["connects"], len(reasons), ends_cut)
    _, before_end = segments(until_cut_after_end(fb, rec, "ETHUSDT"), 0)  # each of these resynced
    assert before_end
    verify(fb, tmp_path / "cap.lobc", {"ETHUSDT": before_end}, cut_after_end=True)


def test_http_get_against_the_fake(tmp_path):
    async def go():
        eth = synthetic_script("ETHUSDT", SPOT, n_events=10, seed=1)
        async with FakeBinance(SPOT, [eth], rest_429=1, retry_after="7") as fb:
            a = await http_get(fb.rest_url + "/api/v3/depth?symbol=ETHUSDT&limit=10")
            b = await http_get(fb.rest_url + "/api/v3/depth?symbol=ETHUSDT&limit=10")
            return a, b
    (s1, h1, b1), (s2, h2, b2) = asyncio.run(go())
    assert s1 == 429 and h1["retry-after"] == "7"
    assert s2 == 200 and b2.startswith(b'{"lastUpdateId":1000000,')


def test_sigterm_mid_run_leaves_a_whole_file(tmp_path):
    eth = synthetic_script("ETHUSDT", SPOT, n_events=20000, seed=6)
    out = tmp_path / "term.lobc"
    with ThreadedFake(SPOT, [eth], rate=400) as fb:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.Popen([sys.executable, "-m", "lobreplay", "capture", "binance", "--symbol",
                              "ethusdt", "--seconds", "120", "-o", str(out), "--trades", "--book-ticker",
                              "--ws-url", fb.ws_url, "--rest-url", fb.rest_url, "--no-progress"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:   # until a block with the synced book is on disk
                if out.exists() and out.stat().st_size > 512:
                    c = lobc.check(out)
                    if c["records_by_kind"].get("DIFF_BEGIN", 0) > 5:
                        break
                time.sleep(0.2)
            p.send_signal(signal.SIGTERM)
            rc = p.wait(30)
        finally:
            if p.poll() is None:
                p.kill()
        err, said = p.stderr.read().decode(), p.stdout.read().decode()
    assert rc == 0, err
    c = lobc.check(out)
    assert c["whole"] and c["torn"] is None
    assert c["records_by_kind"]["SNAPSHOT_BEGIN"] == 1 and c["records_by_kind"]["DIFF_BEGIN"] > 5
    # the closing line: what was received and written, connections and gaps
    line = said.strip().splitlines()[-1]
    assert line.startswith(f"{out}: ") and " messages received, " in line and "connections 1," in line, said


def test_a_capture_that_never_connects_says_so_and_fails(tmp_path):
    """Nothing listening (here: 127.0.0.1 port 1): the capture retries with backoff for its
    --seconds, then says it never connected, with the last error, and exits 1; the file is
    whole, its header only (it once ended quietly with exit 0)."""
    out = tmp_path / "none.lobc"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "lobreplay", "capture", "binance", "--symbol", "btcusdt",
                        "--seconds", "1.5", "-o", str(out), "--ws-url", "ws://127.0.0.1:1/",
                        "--rest-url", "http://127.0.0.1:1/", "--no-progress"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    assert "never connected to ws://127.0.0.1:1/" in p.stderr and "Connect" in p.stderr and "Traceback" not in p.stderr
    assert "connections 0," in p.stdout
    c = lobc.check(out)
    assert c["whole"] and c["records"] == 0


def test_a_capture_whose_symbol_never_syncs_says_so_and_exits_3(tmp_path):
    """The stream works but every snapshot request is refused (429): the capture ends at
    --seconds, names the symbol that never synced and exits 3 as --from-jsonl does (it
    exited 0 as if the file held a book)."""
    eth = synthetic_script("ETHUSDT", SPOT, n_events=5000, seed=11)
    out = tmp_path / "never.lobc"
    with ThreadedFake(SPOT, [eth], rate=400, rest_429=10**6, retry_after="0.3") as fb:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.run([sys.executable, "-m", "lobreplay", "capture", "binance", "--symbol",
                            "ethusdt", "--seconds", "2", "-o", str(out), "--ws-url", fb.ws_url, "--rest-url",
                            fb.rest_url, "--no-progress"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr
    assert "ETHUSDT: NEVER SYNCED (" in p.stdout and "snapshot(s) received" in p.stdout, p.stdout
    c = lobc.check(out)
    assert c["whole"] and c["records_by_kind"].get("SNAPSHOT_BEGIN", 0) == 0
    assert [g["reason"] for g in c["gaps"]] == ["rate_limit"]


def test_rotate_starts_a_file_per_period_each_replaying_on_its_own(tmp_path):
    """--rotate: a new file at every multiple of the period, named after its start; each
    ends with one GAP (rotate) per symbol and the next starts as a new capture (a snapshot,
    no RESYNC); every synced stretch is the server's sequence; the books of the last file
    with events are the server's; each raw log converts to its own file's records."""
    from lobreplay.binance.capture import rotated_name
    from lobreplay.l2.lobc import GAP_ROTATE
    names = ["ETHUSDT", "BTCUSDT"]
    scripts = [synthetic_script(n, SPOT, n_events=2400, seed=8 + i) for i, n in enumerate(names)]
    fb, cap, st = asyncio.run(capture_against(
        (SPOT, scripts), dict(rate=2500), tmp_path, symbols=[n.lower() for n in names], trades=True,
        raw=str(tmp_path / "cap.jsonl"), rotate=1.0))
    files = st["files"]
    assert len(files) >= 2 and st["records"] == sum(f["records"] for f in files)
    stamps = [os.path.basename(f["out"])[len("cap."):-len(".lobc")] for f in files]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)  # one file per period, in order
    assert all(len(x) == len("20261130T130000") for x in stamps)
    assert rotated_name(str(tmp_path / "cap.lobc"), 0, 86400).endswith("cap.19700101.lobc")
    assert rotated_name("x.jsonl.gz", 3600 * 10**9, 3600) == "x.19700101T010000.jsonl.gz"
    synced_files = []
    for i, f in enumerate(files):
        last = i == len(files) - 1
        assert lobc.check(f["out"])["whole"]
        rec = lobc.read(f["out"]).records
        assert not (rec["kind"] == RESYNC).any()
        for s, name in enumerate(names):
            segs, reasons = segments(rec, s)
            true = [(U, u) for U, u, _ in fb.applied_depth[name]]
            for L, ids in segs:  # every synced stretch is the server's own sequence
                j0 = next(j for j, (U, u) in enumerate(true) if u > L)
                assert ids == true[j0:j0 + len(ids)], (i, name, L)
            if segs:
                synced_files.append((i, s))
                assert reasons == ([] if last else [GAP_ROTATE]), (i, name, reasons)
            if reasons:
                assert rec[rec["symbol"] == s][-1]["kind"] == GAP  # the file's last word on the symbol
        again = tmp_path / f"again-{i}.lobc"
        convert(f["raw"], again)
        assert len(lobc.read(again).records) == len(rec) and (lobc.read(again).records == rec).all()
    # every file but possibly the last (a period after the server went quiet) synced both
    # symbols; and the first only if its period left time to (the capture starts partway
    # through a period: it may have had a few milliseconds before the first rotation)
    first_ms = (10**9 - cap.started_ns % 10**9) / 1e6
    for i in range(0 if first_ms > 500 else 1, len(files) - 1):
        assert {s for j, s in synced_files if j == i} == {0, 1}, (i, first_ms)
    # the last synced stretch runs to the server's last event, and its book is the server's;
    # unless the server went quiet just after a rotation: then the events it sent in the new
    # period are in a file that never got to sync (a snapshot needs a later event)
    for s, name in enumerate(names):
        i = max(j for j, k in synced_files if k == s)
        rec = lobc.read(files[i]["out"]).records
        if segments(rec, s)[0][-1][1][-1] == [(U, u) for U, u, _ in fb.applied_depth[name]][-1]:
            assert replay_books(rec, 2)[s] == true_book(fb, name)
        else:
            assert i == len(files) - 2 and not segments(lobc.read(files[-1]["out"]).records, s)[0]


def test_rotated_raw_parts_converted_together_are_one_continuous_file(tmp_path):
    """The --raw parts of a rotating capture converted as one recording: each rotation is a
    GAP (rotate) and the sync after it a RESYNC (the capture's own files start afresh, so
    without it a replay skipped every update after the first rotation); apart from those
    RESYNCs the records are the parts' own, one after the other; a replay skips nothing."""
    from lobreplay.l2.replay import replay_lobc
    from lobreplay.l2.lobc import GAP_ROTATE
    names = ["ETHUSDT", "BTCUSDT"]
    scripts = [synthetic_script(n, SPOT, n_events=3000, seed=18 + i) for i, n in enumerate(names)]
    fb, cap, st = asyncio.run(capture_against(
        (SPOT, scripts), dict(rate=2500), tmp_path, symbols=[n.lower() for n in names],
        raw=str(tmp_path / "cap.jsonl"), rotate=1.0))
    files = st["files"]
    assert len(files) >= 3
    both = tmp_path / "all.lobc"
    convert([f["raw"] for f in files], both)
    rec = lobc.read(both).records
    parts = [lobc.read(f["out"]).records for f in files]
    import numpy as np
    assert (rec[rec["kind"] != RESYNC] == np.concatenate(parts)).all()
    resynced = 0
    for s in range(len(names)):
        segs, reasons = segments(rec, s)
        assert reasons and set(reasons) == {GAP_ROTATE}
        kinds = rec["kind"][rec["symbol"] == s].tolist()
        gap_open = False
        for i, k in enumerate(kinds):  # every sync after a GAP is followed by a RESYNC, and no other
            if k == GAP:
                gap_open = True
            elif k == SNAPSHOT_END:
                assert (kinds[i + 1] == RESYNC) == gap_open, (s, i)
                resynced += gap_open
                gap_open = False
    assert resynced >= len(names) and resynced == int((rec["kind"] == RESYNC).sum())
    summary = replay_lobc(both, str(tmp_path / "rp"))
    assert summary["messages_skipped"].get("unsynced_update_skipped", 0) == 0, summary["messages_skipped"]


def test_rotation_is_taken_from_the_open_file_period(tmp_path):
    """The rotation boundary follows the open file's period, not the time the rotating task
    first runs: a task that starts after the boundary rotates at once, to the period the
    clock is in (it slept until the boundary after that and wrote the next period into the
    first file)."""
    from lobreplay.binance.capture import rotated_name
    cap = Capture(CaptureOptions(symbols=["ethusdt"], out=str(tmp_path / "r.lobc"), rotate=3600.0, progress=False,
                                 install_signals=False))
    hour = 3600 * 10**9
    now = time.time_ns()
    past = now // hour * hour - hour  # the file the capture opened an hour ago
    cap._open_files(past)

    async def go():
        task = asyncio.create_task(cap._rotator(past))
        await asyncio.sleep(0.2)
        task.cancel()
    asyncio.run(go())
    cap._close_files()
    assert [f["out"] for f in cap.files] == [rotated_name(cap.opts.out, past, 3600),
                                             rotated_name(cap.opts.out, now // hour * hour, 3600)]


def test_a_second_signal_while_closing_loses_nothing(tmp_path):
    """SIGTERM while the capture closes (after the first stop): the files are still closed
    whole (the .lobc with its pending records, the raw .gz with its trailer) and the
    summary is printed; the handlers used to be removed first, so that signal killed it."""
    eth = synthetic_script("ETHUSDT", SPOT, n_events=20000, seed=9)
    out, raw = tmp_path / "two.lobc", tmp_path / "two.jsonl.gz"
    script = f"""
import asyncio, os, signal, sys
from lobreplay.binance.capture import Capture, CaptureOptions
cap = Capture(CaptureOptions(symbols=["ethusdt"], out=sys.argv[1], raw=sys.argv[2], seconds=2.5,
                             ws_url=sys.argv[3], rest_url=sys.argv[4], progress=True, trades=True))
close = cap._close_files
def closing():
    os.kill(os.getpid(), signal.SIGTERM)
    close()
cap._close_files = closing
st = asyncio.run(cap.run())
print("records", st["records"])
"""
    with ThreadedFake(SPOT, [eth], rate=400) as fb:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.run([sys.executable, "-c", script, str(out), str(raw), fb.ws_url, fb.rest_url], env=env,
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "capture binance spot:" in p.stderr  # the final progress line
    n = int(p.stdout.split()[-1])
    c = lobc.check(out)
    assert c["whole"] and c["records"] == n > 0 and c["records_by_kind"]["DIFF_BEGIN"] > 5
    st = convert(raw, tmp_path / "again.lobc")  # whole gzip: no allow_truncated needed
    assert st["records"] == n


def test_sigkill_leaves_a_raw_gzip_that_converts_with_allow_truncated(tmp_path):
    """kill -9 during a capture with --raw FILE.jsonl.gz: the .lobc keeps its whole blocks,
    and the raw file (flushed every second, no gzip trailer) is a clear error to convert
    unless allow_truncated, with which it converts, syncs and says where it breaks off."""
    from lobreplay.errors import InputError
    eth = synthetic_script("ETHUSDT", SPOT, n_events=20000, seed=7)
    out, raw = tmp_path / "kill.lobc", tmp_path / "kill.jsonl.gz"
    with ThreadedFake(SPOT, [eth], rate=400) as fb:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.Popen([sys.executable, "-m", "lobreplay", "capture", "binance", "--symbol",
                              "ethusdt", "--seconds", "120", "-o", str(out), "--raw", str(raw), "--trades",
                              "--ws-url", fb.ws_url, "--rest-url", fb.rest_url, "--no-progress"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:   # until the synced book is on disk
                if out.exists() and out.stat().st_size > 512:
                    if lobc.check(out)["records_by_kind"].get("DIFF_BEGIN", 0) > 5:
                        break
                time.sleep(0.2)
            time.sleep(1.5)  # and the raw file has been flushed since
            p.kill()
            p.wait(30)
        finally:
            if p.poll() is None:
                p.kill()
    assert lobc.check(out)["records_by_kind"]["DIFF_BEGIN"] > 5
    with pytest.raises(InputError, match="breaks off in the piece read after byte"):
        convert(raw, tmp_path / "no.lobc")
    st = convert(raw, tmp_path / "raw.lobc", allow_truncated=True)
    (t,) = st["truncated"]
    assert t["file"] == str(raw) and "cut short" in t["reason"] and t["text_bytes"] > 0
    eth_st = st["per_symbol"]["ETHUSDT"]
    assert eth_st["synced"] >= 1 and eth_st["applied"] > 5
    assert lobc.check(tmp_path / "raw.lobc")["whole"]
