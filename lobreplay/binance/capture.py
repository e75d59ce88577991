"""`lobreplay capture binance`: a live Binance depth capture to .lobc (docs/binance.md).

asyncio + websockets: combined streams (one connection per at most 1024 streams on spot,
200 on USD-M; USD-M depth and bookTicker on /public, trades on /market), a REST snapshot per
symbol through a small asyncio HTTP/1.1 client (cancellable, no new dependency), the sync
procedure of sync.py, and on any gap, disconnect, 24-hour cut or serverShutdown: a GAP
record, reconnect (exponential backoff with jitter; 429/418 wait for Retry-After),
re-snapshot, RESYNC, carry on. `--seconds`, SIGINT and SIGTERM end it cleanly: everything
is flushed and the file is whole. With `rotate` (seconds; 86400: a file per UTC day) the
capture moves on to a new file at every multiple of it since the epoch, named after the
period's start: the old file ends with a GAP (GAP_ROTATE) per symbol, the new one starts as a
new capture (a snapshot per symbol), so each file replays on its own.

With --raw FILE every message is also written as `<recv ns> <message>` (hftbacktest's
layout), plus the snapshots (`{"stream":"<sym>@depthSnapshot","data":<REST body>}`) and the
capture's own events, so `convert(FILE)` rebuilds the same .lobc records.
"""
from __future__ import annotations

import asyncio
import gzip
import json
import os
import random
import signal
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from lobreplay import __version__
from lobreplay.l2.lobc import GAP_24H, GAP_DISCONNECT, GAP_MALFORMED, GAP_RATE_LIMIT, GAP_SHUTDOWN, GAP_STALE_SNAPSHOT
from lobreplay.binance.sync import SPOT, USDM, DepthSync, open_writer

DEFAULT_WS = {SPOT: "wss://stream.binance.com:9443", USDM: "wss://fstream.binance.com"}
DEFAULT_REST = {SPOT: "https://api.binance.com", USDM: "https://fapi.binance.com"}
REST_PATH = {SPOT: "/api/v3/depth", USDM: "/fapi/v1/depth"}
SPEEDS = {SPOT: {"100ms": "@depth@100ms", "1000ms": "@depth"},
          USDM: {"0ms": "@depth@0ms", "100ms": "@depth@100ms", "250ms": "@depth", "500ms": "@depth@500ms"}}
LIMITS = {SPOT: (1, 5000), USDM: (5, 10, 20, 50, 100, 500, 1000)}
MAX_STREAMS = {SPOT: 1024, USDM: 200}
MAX_MESSAGE = 64 << 20   # websocket message size limit (the 1000 ms spot stream of a busy symbol is large)


@dataclass
class CaptureOptions:
    symbols: list
    out: str
    market: str = SPOT
    seconds: float | None = 60.0
    depth_speed: str = "100ms"
    trades: bool = False
    book_ticker: bool = False
    snapshot_limit: int = 1000
    raw: str | None = None
    ws_url: str | None = None
    rest_url: str | None = None
    max_connection_age: float = 86400.0 - 300.0   # reconnect before Binance's 24-hour cut
    ping_interval: float = 20.0
    ping_timeout: float = 20.0
    http_timeout: float = 10.0
    max_backoff: float = 60.0
    progress: bool | None = None                   # None: yes (a \r line on a terminal, else a line every 10 s)
    progress_interval: float | None = None         # default 1 s on a terminal, else 10 s
    install_signals: bool = True
    rotate: float | None = None                    # a new file every this many seconds (86400: per UTC day)

    def validate(self) -> None:
        if self.market not in (SPOT, USDM):
            raise ValueError(f"--market: spot or usdm, not {self.market!r}")
        if not self.symbols:
            raise ValueError("at least one --symbol")
        self.symbols = list(dict.fromkeys(s.upper() for s in self.symbols))
        if self.depth_speed not in SPEEDS[self.market]:
            raise ValueError(f"--depth-speed for {self.market}: one of {', '.join(SPEEDS[self.market])}")
        lim = LIMITS[self.market]
        if self.market == SPOT and not 1 <= self.snapshot_limit <= 5000:
            raise ValueError("--snapshot-limit for spot: 1..5000")
        if self.market == USDM and self.snapshot_limit not in lim:
            raise ValueError(f"--snapshot-limit for usdm: one of {', '.join(map(str, lim))}")
        if self.seconds is not None and not 0 < self.seconds < float("inf"):
            raise ValueError(f"--seconds: a number of seconds > 0, got {self.seconds!r}")
        if not 0 < self.max_connection_age < float("inf"):
            raise ValueError(f"--max-connection-age: a number of seconds > 0, got {self.max_connection_age!r}")
        if self.rotate is not None and not 1 <= self.rotate < float("inf"):  # (file names tell periods apart to the second)
            raise ValueError(f"--rotate: at least 1 s, got {self.rotate!r}")
        for name, url, schemes in (("--ws-url", self.ws_url, ("ws", "wss")),
                                   ("--rest-url", self.rest_url, ("http", "https"))):
            if url is not None and (urlsplit(url).scheme not in schemes or not urlsplit(url).hostname):
                raise ValueError(f"{name}: expected {'/'.join(schemes)}://host[:port], got {url!r}")


@dataclass
class _Conn:
    url: str
    streams: list
    depth_symbols: list
    ws: object = None
    connects: int = 0
    opened: float = 0.0
    messages: int = 0


def plan_connections(opts: CaptureOptions) -> list[_Conn]:
    base = (opts.ws_url or DEFAULT_WS[opts.market]).rstrip("/")
    depth_sfx = SPEEDS[opts.market][opts.depth_speed]
    book, market = [], []
    for s in opts.symbols:
        low = s.lower()
        book.append((s, low + depth_sfx))
        if opts.book_ticker:
            book.append((None, low + "@bookTicker"))
        if opts.trades:
            (market if opts.market == USDM else book).append((None, low + "@trade"))
    conns = []
    groups = [("/public" if opts.market == USDM else "", book)]
    if market:
        groups.append(("/market", market))
    n = MAX_STREAMS[opts.market]
    for prefix, items in groups:
        for i in range(0, len(items), n):
            part = items[i:i + n]
            streams = [x[1] for x in part]
            conns.append(_Conn(f"{base}{prefix}/stream?streams={'/'.join(streams)}", streams,
                               [x[0] for x in part if x[0]]))
    return conns


# ---------------------------------------------------------------- a small HTTP/1.1 GET

async def http_get(url: str, timeout: float = 10.0, max_body: int = 64 << 20):
    """GET url -> (status, headers with lower-case names, body bytes). HTTP/1.1, Connection:
    close, Content-Length / chunked / read-to-EOF bodies. Cancellable."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    host = parts.hostname
    port = parts.port or (443 if https else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl.create_default_context() if https else None,
                                                       limit=1 << 20)
        try:
            hosthdr = host if parts.port is None else f"{host}:{parts.port}"
            writer.write((f"GET {target} HTTP/1.1\r\nHost: {hosthdr}\r\nUser-Agent: lobreplay/{__version__}\r\n"
                          "Accept: application/json\r\nConnection: close\r\n\r\n").encode("ascii"))
            await writer.drain()
            line = await reader.readline()
            bits = line.decode("latin-1").split(None, 2)
            if len(bits) < 2 or not bits[0].startswith("HTTP/"):
                raise ValueError(f"bad HTTP status line {line[:80]!r}")
            status = int(bits[1])
            headers = {}
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                body = bytearray()
                while True:
                    size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        break
                    body += await reader.readexactly(size)
                    await reader.readline()
                    if len(body) > max_body:
                        raise ValueError("body too large")
                body = bytes(body)
            elif "content-length" in headers:
                body = await reader.readexactly(int(headers["content-length"]))
            else:
                body = await reader.read(max_body)
            return status, headers, body
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass


def retry_after(headers: dict) -> float | None:
    v = headers.get("retry-after")
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        return None


# ---------------------------------------------------------------- raw log

class RawLog:
    """`<recv ns> <message>` lines (gzip if the name ends in .gz), flushed at least every second."""

    def __init__(self, path: str, header: dict):
        self.path = path
        self.f = gzip.open(path, "wt", encoding="utf-8") if path.endswith(".gz") else open(path, "w", encoding="utf-8")
        self.lines = 0
        self.write(time.time_ns(), json.dumps({"lobreplay": header}, separators=(",", ":")))

    def write(self, recv_ns: int, text: str) -> None:
        self.f.write(f"{recv_ns} {text}\n")
        self.lines += 1

    def control(self, recv_ns: int, **event) -> None:
        self.write(recv_ns, json.dumps({"lobreplay": event}, separators=(",", ":")))

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def _clean(text) -> str:
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8", "replace")
    if "\n" in text or "\r" in text:  # one message per line; JSON whitespace either way
        text = text.replace("\r", " ").replace("\n", " ")
    return text


# ---------------------------------------------------------------- the capture

class Capture:
    """One capture run: Capture(opts).run(stop) -> stats (see CaptureOptions)."""

    def __init__(self, opts: CaptureOptions):
        opts.validate()
        self.opts = opts
        self.conns = plan_connections(opts)
        self.streams = [s for c in self.conns for s in c.streams]
        self.machine = DepthSync(opts.market, opts.symbols)
        self.rest = (opts.rest_url or DEFAULT_REST[opts.market]).rstrip("/")
        self.writer = None
        self.raw = None
        self.messages = 0
        self.bytes_in = 0
        self.connects = 0
        self.disconnects = 0
        self.rate_limited = 0
        self.snapshot_errors = 0
        self.snapshot_tasks = {}
        self.snap_failures = {}
        self.errors = []
        self._last_take = time.monotonic()
        self._t0 = time.monotonic()
        self.started_ns = 0
        self._cpu0 = None  # process CPU time when run() started
        self.files = []  # with rotate: {"out", "raw", "records", "bytes"} of each file closed

    # ------------------------------------------------------------ records

    def _drain(self) -> None:
        if self.machine.pending_records:
            self.writer.add_many(self.machine.take_records())
        self._last_take = time.monotonic()

    def _after(self, conn=None) -> bool:
        """React to what the machine says; True if the connection must end (serverShutdown)."""
        m = self.machine
        shutdown = False
        if m.events:
            for ev in m.events:
                if ev[0] == "shutdown":
                    shutdown = True
                elif ev[0] == "synced":
                    self.snap_failures[ev[1]] = 0
                elif ev[0] == "gap" and ev[2] in (GAP_STALE_SNAPSHOT, GAP_MALFORMED):
                    # a stale or malformed snapshot: the next fetch waits a little (0.25 s, doubling)
                    self.snap_failures[ev[1]] = self.snap_failures.get(ev[1], 0) + 1
            m.events = []
        for sym in m.snapshot_wanted():
            m.mark_requested(sym)
            self.snapshot_tasks[sym] = asyncio.get_running_loop().create_task(self._fetch_snapshot(sym))
        if m.pending_records >= 4096 or time.monotonic() - self._last_take > 0.2:
            self._drain()
        return shutdown

    # ------------------------------------------------------------ connections

    async def _conn_loop(self, conn: _Conn) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
        o = self.opts
        attempt = 0
        while True:
            reason = GAP_DISCONNECT
            delay = None
            got = False
            try:
                async with connect(conn.url, max_size=MAX_MESSAGE, max_queue=1024, ping_interval=o.ping_interval,
                                   ping_timeout=o.ping_timeout, open_timeout=o.http_timeout, close_timeout=2,
                                   proxy=None, user_agent_header=f"lobreplay/{__version__}") as ws:
                    conn.ws = ws
                    conn.connects += 1
                    self.connects += 1
                    conn.opened = time.monotonic()
                    try:
                        # the connection-age cut: one timer for the connection (a timer per
                        # message took about a sixth of the capture's Python time under
                        # cProfile); it cancels the recv() waiting when it fires, which loses
                        # no message
                        async with asyncio.timeout(o.max_connection_age):
                            while True:
                                msg = await ws.recv()
                                got = True
                                recv = time.time_ns()
                                msg = _clean(msg)
                                if self.raw:
                                    self.raw.write(recv, msg)
                                self.machine.feed(msg, recv)
                                self.messages += 1
                                conn.messages += 1
                                self.bytes_in += len(msg)
                                if self._after(conn):
                                    reason = GAP_SHUTDOWN
                                    break
                    except TimeoutError:
                        reason = GAP_24H
            except InvalidStatus as e:
                status = e.response.status_code
                if status in (429, 418):
                    reason = GAP_RATE_LIMIT
                    self.rate_limited += 1
                    delay = retry_after({k.lower(): v for k, v in e.response.headers.raw_items()})
                self._note(f"{conn.url.split('?')[0]}: HTTP {status}")
            except (OSError, TimeoutError, ConnectionClosed, InvalidHandshake, EOFError) as e:
                if not isinstance(e, ConnectionClosed):
                    self._note(f"{conn.url.split('?')[0]}: {type(e).__name__}: {e}")
            except Exception as e:  # anything else: note it, back off, try again (never end the capture)
                self._note(f"{conn.url.split('?')[0]}: {type(e).__name__}: {e}")
            finally:
                conn.ws = None
            recv = time.time_ns()
            self.disconnects += 1
            if conn.depth_symbols:
                for s in conn.depth_symbols:
                    t = self.snapshot_tasks.pop(s, None)
                    if t is not None:
                        t.cancel()
                if self.raw:
                    self.raw.control(recv, event="disconnected", reason=reason, symbols=conn.depth_symbols)
                self.machine.disconnected(recv, reason, conn.depth_symbols)
                self._after(conn)
            if got:
                attempt = 0
            if delay is None:
                delay = 0.0 if got else min(o.max_backoff, 0.5 * 2 ** attempt) * (0.5 + random.random())
            attempt += 1
            if delay:
                await asyncio.sleep(delay)

    async def _fetch_snapshot(self, sym: str) -> None:
        o = self.opts
        fails = self.snap_failures.get(sym, 0)
        if fails:  # a stale or malformed snapshot just came: do not hammer the endpoint
            await asyncio.sleep(min(o.max_backoff, 0.25 * 2 ** (fails - 1)))
        url = f"{self.rest}{REST_PATH[o.market]}?symbol={sym}&limit={o.snapshot_limit}"
        attempt = 0
        while True:
            try:
                status, headers, body = await http_get(url, o.http_timeout)
            except Exception as e:  # network, TLS, bad HTTP: retry with backoff
                status, headers, body = None, {}, b""
                self._note(f"snapshot {sym}: {type(e).__name__}: {e}")
            recv = time.time_ns()
            if status == 200:
                text = _clean(body)
                if self.raw:
                    self.raw.write(recv, '{"stream":"%s@depthSnapshot","data":%s}' % (sym.lower(), text))
                self.snapshot_tasks.pop(sym, None)
                self.machine.feed_snapshot(sym, text, recv)
                self._after()
                return
            if status in (429, 418):
                self.rate_limited += 1
                wait = retry_after(headers)
                if wait is None:
                    wait = min(o.max_backoff, 1.0 * 2 ** attempt)
                if self.raw:
                    self.raw.control(recv, event="snapshot_failed", reason=GAP_RATE_LIMIT, symbol=sym, status=status)
                self.machine.snapshot_failed(sym, recv, GAP_RATE_LIMIT)
                self._after()
            else:
                if status is not None:
                    self._note(f"snapshot {sym}: HTTP {status}")
                self.snapshot_errors += 1
                wait = min(o.max_backoff, 0.5 * 2 ** attempt) * (0.5 + random.random())
            attempt += 1
            await asyncio.sleep(wait)

    def _note(self, text: str) -> None:
        self.errors.append(text)
        if len(self.errors) > 100:
            del self.errors[:50]

    # ------------------------------------------------------------ files

    def _paths(self, start_ns: int) -> tuple[str, str | None]:
        """The .lobc (and raw) file names for the period starting at start_ns."""
        o = self.opts
        if not o.rotate:
            return o.out, o.raw
        return rotated_name(o.out, start_ns, o.rotate), (rotated_name(o.raw, start_ns, o.rotate) if o.raw else None)

    def _open_files(self, start_ns: int) -> None:
        o = self.opts
        out, raw = self._paths(start_ns)
        self.writer = open_writer(out, market=o.market, symbols=self.machine.symbols, streams=self.streams)
        if raw:
            self.raw = RawLog(raw, {"format": "raw", "version": 1, "market": o.market,
                                    "symbols": self.machine.symbols, "streams": self.streams,
                                    "tool": f"lobreplay {__version__}"})

    def _close_files(self) -> None:
        self._drain()
        self.writer.close()
        if self.raw:
            self.raw.close()
        self.files.append({"out": self.writer.path, "raw": self.raw.path if self.raw else None,
                           "records": self.writer.records, "bytes": self.writer.bytes})

    def _period_start(self, t_ns: int) -> int:
        """The start (ns since the epoch) of the rotation period holding t_ns (0 without rotation)."""
        if not self.opts.rotate:
            return 0
        period = int(self.opts.rotate * 1e9)
        return t_ns // period * period

    async def _rotator(self, current: int) -> None:
        """current: the start of the open file's period. The boundary is taken from it, not
        from the time this task first runs (that may already be past it), and the file opened
        is the one of the period the clock is in when the sleep ends (the wall clock and the
        loop's monotonic clock drift; a machine may sleep through a boundary)."""
        period = int(self.opts.rotate * 1e9)
        while True:
            now = time.time_ns()
            if now < current + period:
                await asyncio.sleep((current + period - now) / 1e9)
                continue
            current = self._period_start(now)
            for t in self.snapshot_tasks.values():  # the new file asks for its own snapshots
                t.cancel()
            self.snapshot_tasks.clear()
            if self.raw:
                self.raw.control(now, event="end_file")
            self.machine.end_file(now)
            self.machine.events = []
            self._close_files()
            self._open_files(current)
            self._after()

    # ------------------------------------------------------------ progress

    def progress_line(self) -> str:
        st = self.machine.stats
        live = sum(1 for s in self.machine.symbols if self.machine.is_live(s))
        written = self.writer.bytes + 64 * self.writer.pending if self.writer else 0
        return (f"capture binance {self.opts.market}: {time.monotonic() - self._t0:6.0f} s  "
                f"messages {self.messages:,}  gaps {st['gaps']}  resyncs {st['resyncs']}  "
                f"live {live}/{len(self.machine.symbols)}  written {written:,} B")

    async def _ticker(self, tty: bool, interval: float) -> None:
        while True:
            await asyncio.sleep(1.0 if not self.opts.progress else min(1.0, interval))
            self._drain()
            self.writer.flush()
            if self.raw:
                self.raw.flush()
            if self.opts.progress and time.monotonic() - getattr(self, "_last_print", 0) >= interval:
                self._last_print = time.monotonic()
                sys.stderr.write(("\r" if tty else "") + self.progress_line() + ("" if tty else "\n"))
                sys.stderr.flush()

    # ------------------------------------------------------------ run

    async def run(self, stop: asyncio.Event | None = None) -> dict:
        o = self.opts
        stop = stop or asyncio.Event()
        tty = sys.stderr.isatty()
        if o.progress is None:
            o.progress = True
        interval = o.progress_interval or (1.0 if tty else 10.0)
        self.started_ns = time.time_ns()
        self._cpu0 = time.process_time()
        first_period = self._period_start(self.started_ns)
        self._open_files(first_period)
        loop = asyncio.get_running_loop()
        sigs = []
        if o.install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, stop.set)
                    sigs.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        tasks = [loop.create_task(self._conn_loop(c)) for c in self.conns]
        tasks.append(loop.create_task(self._ticker(tty, interval)))
        if o.rotate:
            tasks.append(loop.create_task(self._rotator(first_period)))
        self._t0 = time.monotonic()
        try:
            if o.seconds is None:
                await stop.wait()
            else:
                try:
                    async with asyncio.timeout(o.seconds):
                        await stop.wait()
                except TimeoutError:
                    pass
        finally:
            # the signal handlers stay until the files are closed: a second Ctrl-C or SIGTERM
            # while the connections close (at most close_timeout, 2 s) only sets `stop` again
            # (with the default handlers back it would cut the closing short and lose the
            # pending records, the gzip trailer and the summary)
            try:
                everything = tasks + list(self.snapshot_tasks.values())
                for t in everything:
                    t.cancel()
                await asyncio.gather(*everything, return_exceptions=True)
                self._close_files()
                if o.progress:
                    sys.stderr.write(("\r" if tty else "") + self.progress_line() + "\n")
                    sys.stderr.flush()
            finally:
                for sig in sigs:
                    loop.remove_signal_handler(sig)
        return self.stats()

    def stats(self) -> dict:
        st = dict(self.machine.stats)
        st.update(messages_received=self.messages, bytes_received=self.bytes_in, connects=self.connects,
                  disconnects=self.disconnects, rate_limited=self.rate_limited, snapshot_errors=self.snapshot_errors,
                  records=sum(f["records"] for f in self.files) if self.files else
                  (self.writer.records if self.writer else 0),
                  bytes=sum(f["bytes"] for f in self.files) if self.files else (self.writer.bytes if self.writer else 0),
                  out=self.writer.path if self.writer else self.opts.out, raw=self.opts.raw,
                  files=list(self.files), per_symbol=self.machine.symbol_stats(), notes=list(self.errors[-10:]),
                  # the process's CPU time since run() started (start-up and imports not counted)
                  cpu_seconds=None if self._cpu0 is None else time.process_time() - self._cpu0)
        return st


def rotated_name(path: str, start_ns: int, period: float) -> str:
    """path with the period's start (UTC) before its extension: cap.lobc -> cap.20261130.lobc
    for whole days, cap.20261130T130000.lobc otherwise (.jsonl.gz and the like kept whole). The
    YYYYMMDD is what replay-many and the replays read a file's date from."""
    head, base, ext = _name_parts(path)
    return os.path.join(head, f"{base}.{_stamp(start_ns, period)}{ext}")


def _stamp(start_ns: int, period: float) -> str:
    """The UTC date (whole-day periods) or date and time of the period holding start_ns."""
    p = int(period * 1e9)
    t = time.gmtime(start_ns // p * p // 1_000_000_000)
    return time.strftime("%Y%m%d" if period % 86400 == 0 else "%Y%m%dT%H%M%S", t)


def _name_parts(path: str) -> tuple[str, str, str]:
    """(directory, name before the extension, extension with its dot; .jsonl.gz kept whole)."""
    head, name = os.path.split(path)
    parts = name.split(".")
    keep = 2 if len(parts) > 2 and parts[-1] == "gz" else 1
    if len(parts) == 1:
        return head, name, ""
    return head, ".".join(parts[:-keep]), "." + ".".join(parts[-keep:])


def existing_outputs(opts: CaptureOptions, start_ns: int) -> list[str]:
    """The files a capture starting at start_ns would overwrite: -o and --raw, or with
    rotate, their files of the first period and of any later period already on disk."""
    found = []
    for path in filter(None, (opts.out, opts.raw)):
        if not opts.rotate:
            if os.path.lexists(path):
                found.append(path)
            continue
        head, base, ext = _name_parts(path)
        first = _stamp(start_ns, opts.rotate)
        try:
            names = sorted(os.listdir(head or "."))
        except OSError:
            continue
        for n in names:
            stamp = n[len(base) + 1:len(n) - len(ext)] if n.startswith(base + ".") and n.endswith(ext) else ""
            if len(stamp) == len(first) and stamp.replace("T", "").isdigit() and stamp >= first:
                found.append(os.path.join(head, n))
    return found


def run_capture(opts: CaptureOptions) -> dict:
    """Blocking entry point (the CLI): runs until --seconds, SIGINT or SIGTERM."""
    return asyncio.run(Capture(opts).run())


# ---------------------------------------------------------------- --selftest

def _replay_books(records, n_symbols):
    """The book of every symbol from a record array, naively: snapshot replaces, diffs set."""
    from lobreplay.l2.lobc import DIFF_LEVEL, SNAPSHOT_BEGIN, SNAPSHOT_LEVEL
    books = [({}, {}) for _ in range(n_symbols)]
    for r in records.tolist():
        kind, side, sym = r[7], r[8], r[9]
        if kind == SNAPSHOT_BEGIN:
            books[sym] = ({}, {})
        elif kind in (SNAPSHOT_LEVEL, DIFF_LEVEL):
            book = books[sym][0 if side == ord("B") else 1]
            if r[6] == 0:
                book.pop(r[5], None)
            else:
                book[r[5]] = r[6]
    return books


def _fake_book_scaled(book, scale=10**8):
    from lobreplay.l2.lobc import parse_decimal
    return ({parse_decimal(p, scale): parse_decimal(q, scale) for p, q in book.bids.items()},
            {parse_decimal(p, scale): parse_decimal(q, scale) for p, q in book.asks.items()})


def _recorded_sample():
    """The recorded spot BTCUSDT the selftest plays: $LOBREPLAY_BINANCE_DATA if set, else the
    checkout's data/real/binance (not in an installed package: then None, a synthetic stream)."""
    env = os.environ.get("LOBREPLAY_BINANCE_DATA")
    here = os.path.dirname(os.path.abspath(__file__))
    cands = ([env] if env else []) + [os.path.join(here, "..", "..", "data", "real", "binance")]
    for c in cands:
        p = os.path.join(c, "hftbacktest", "spot", "btcusdt_20240808.gz")
        if os.path.isfile(p):
            return os.path.normpath(p)
    return None


async def _quiet(cap, every: float = 0.3) -> None:
    """Until the capture has received nothing new for `every` seconds."""
    last = -1
    while last != cap.messages:
        last = cap.messages
        await asyncio.sleep(every)


async def _selftest_async(workdir: str, seconds_cap: float = 30.0) -> dict:
    from lobreplay.l2.lobc import check, read
    from lobreplay.testing.fake_binance import Fault, FakeBinance, script_from_lines, synthetic_script
    rec = _recorded_sample()
    if rec:
        with gzip.open(rec, "rt") as f:
            btc = script_from_lines(f, "BTCUSDT", SPOT, max_items=4000)
        source = rec
    else:
        btc = synthetic_script("BTCUSDT", SPOT, n_events=1500, seed=7)
        source = "synthetic"
    eth = synthetic_script("ETHUSDT", SPOT, n_events=700 if rec is None else 300, seed=3)
    faults = [Fault(300, "rate_limit", "BTCUSDT"), Fault(900, "drop", "BTCUSDT"), Fault(1500, "disconnect"),
              Fault(2200, "swap", "ETHUSDT")]
    out = os.path.join(workdir, "selftest.lobc")
    async with FakeBinance(SPOT, [btc, eth], rate=1500, faults=faults) as fb:
        opts = CaptureOptions(symbols=["btcusdt", "ethusdt"], out=out, market=SPOT, seconds=seconds_cap,
                              trades=True, book_ticker=True, snapshot_limit=5000, ws_url=fb.ws_url,
                              rest_url=fb.rest_url, progress=False, install_signals=False)
        cap = Capture(opts)
        fb.fault_ready = lambda: all(cap.machine.is_live(s) for s in cap.machine.symbols)
        stop = asyncio.Event()
        task = asyncio.create_task(cap.run(stop))
        try:
            async with asyncio.timeout(seconds_cap):
                await fb.done.wait()
                await _quiet(cap)
        except TimeoutError:
            pass
        stop.set()
        stats = await task
        books_true = {s: _fake_book_scaled(b) for s, b in fb.books.items()}
        injected = list(fb.injected)
    c = check(out)
    data = read(out)
    books = _replay_books(data.records, len(data.meta["symbols"]))
    same = {s: books[i] == books_true[s] for i, s in enumerate(data.meta["symbols"])}
    return {"source": source, "whole": c["whole"], "gaps": c["gaps"], "resyncs": c["resyncs"],
            "books_equal": same, "injected": injected, "stats": stats, "out": out}


def selftest(workdir: str | None = None) -> int:
    import tempfile
    with tempfile.TemporaryDirectory(prefix="lobreplay-selftest-") as tmp:
        r = asyncio.run(_selftest_async(workdir or tmp))
        ok = r["whole"] and all(r["books_equal"].values()) and len(r["injected"]) == 4 and \
            len(r["gaps"]) >= 4 and sum(r["resyncs"].values()) >= 4
        print(f"selftest: fake Binance on 127.0.0.1 playing {r['source']}; injected "
              f"{', '.join(k for k, _, _ in r['injected'])}")
        print(f"  file whole: {r['whole']}; GAP records: "
              f"{', '.join(g['symbol'] + ' ' + g['reason'] for g in r['gaps']) or 'none'}; RESYNCs: {r['resyncs']}")
        print(f"  books equal to the server's: {r['books_equal']}; messages {r['stats']['messages_received']:,}, "
              f"records {r['stats']['records']:,}, connects {r['stats']['connects']}")
        print("selftest: " + ("OK" if ok else "FAILED"))
        return 0 if ok else 1
