"""A local fake Binance for tests and `capture binance --selftest`.

One websockets server on 127.0.0.1 serves both the combined streams
(`/stream?streams=a/b`, `/ws/a/b`, also under `/public` and `/market`) and, through
process_request on the same port, the REST snapshot (`GET /api/v3/depth` or
`/fapi/v1/depth?symbol=X&limit=N`).

It plays a script per symbol: the real recorded messages (tests/fake_binance.py loads the
hftbacktest files) or a synthetic stream (`synthetic_script`, used by --selftest when the
recordings are not there). It keeps the true book of every symbol (the script's snapshot
plus every depth event played, sent or not), so a REST snapshot is always consistent with
the stream, and it can inject faults at chosen points of the script:

  drop        the depth event is applied but not sent (a sequence gap)
  dup         the depth event is sent twice
  swap        the event and the next one of the same symbol are sent in reverse order
  garbage     the event is sent cut in half (malformed JSON) and so lost
  stale       drop, and the next snapshot request gets the script's first snapshot (stale)
  rate_limit  drop, and the next snapshot request gets 429 with Retry-After
  disconnect  every client connection is closed (1011); a few events pass unseen meanwhile
  shutdown    serverShutdown is sent, then the connections are closed with 1001

Simplifications (documented): the REST snapshot ignores `limit` unless apply_limit=True
(the whole book is served, so a test can compare whole books); the producer pauses while
no client is connected (plus `skip_on_disconnect` events that pass unseen).
"""
from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

SPOT, USDM = "spot", "usdm"


@dataclass
class Item:
    kind: str                # "depth", "trade", "aggTrade", "bookTicker"
    data: str                # the payload JSON text, verbatim
    ids: tuple | None = None  # depth: (U, u, pu)


@dataclass
class Script:
    symbol: str              # upper case
    snapshot: dict           # the REST body the script starts from (lastUpdateId, bids, asks[, E, T])
    items: list = field(default_factory=list)


@dataclass
class Fault:
    at: int                  # index in the played sequence (all symbols); applied at the first
    kind: str                # depth event of `symbol` at or after it
    symbol: str | None = None


def script_from_lines(lines, symbol: str, market: str, max_items: int | None = None) -> Script:
    """A script from hftbacktest `<recv ns> <message>` lines: its snapshot, then the stream
    items from the first depth event the snapshot does not cover, wherever it was received
    (a recording's snapshot comes back after the events that straddle it: those are kept,
    as a capture keeps them, or the fake's true book would miss their levels)."""
    symbol = symbol.upper()
    snap = None
    items = []
    early = []  # depth items received before the snapshot
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode()
        _, _, msg = line.strip().partition(" ")
        if not msg:
            continue
        if msg.startswith('{"lastUpdateId"'):
            if snap is None:
                snap = json.loads(msg, parse_float=str)
                items += [it for it in early if not _covered(it.ids[1], snap["lastUpdateId"], market)]
            continue
        obj = json.loads(msg, parse_float=str)
        stream, data = obj.get("stream", ""), obj.get("data", {})
        if stream.split("@", 1)[0].upper() != symbol:
            continue
        text = msg[msg.index('"data":') + 7:-1]
        e = data.get("e")
        if e == "depthUpdate":
            it = Item("depth", text, (data["U"], data["u"], data.get("pu", 0)))
            if snap is None:
                early.append(it)
            elif not _covered(data["u"], snap["lastUpdateId"], market):
                items.append(it)
        elif snap is None:
            continue
        elif e in ("trade", "aggTrade"):
            items.append(Item(e, text))
        elif "@bookTicker" in stream:
            items.append(Item("bookTicker", text))
        if max_items and len(items) >= max_items:
            break
    if snap is None:
        raise ValueError("no snapshot in the recording")
    return Script(symbol, snap, items)


def _covered(u: int, L: int, market: str) -> bool:
    """A depth event ending at u is already in a snapshot at L (Binance's rule per market)."""
    return u <= L if market == SPOT else u < L


def synthetic_script(symbol: str, market: str, n_events: int = 400, seed: int = 1, start_id: int = 1_000_000,
                     tick: str = "0.01") -> Script:
    """A made-up but well-formed stream: depth events around a mid price, trades, bookTickers."""
    rng = random.Random(seed)
    symbol = symbol.upper()
    t = Decimal(tick)
    mid = 2000 * (1 / t)  # in ticks

    def px(k):
        return f"{(Decimal(k) * t):.8f}"
    book = {"B": {}, "S": {}}
    for k in range(1, 51):
        book["B"][px(int(mid) - k)] = f"{rng.randint(1, 5000) / 1000:.8f}"
        book["S"][px(int(mid) + k)] = f"{rng.randint(1, 5000) / 1000:.8f}"
    L = start_id
    snap = {"lastUpdateId": L, "bids": [[p, q] for p, q in book["B"].items()],
            "asks": [[p, q] for p, q in book["S"].items()]}
    if market == USDM:
        snap.update(E=1_700_000_000_000, T=1_700_000_000_000)
    items = []
    last_u = L
    E = 1_700_000_000_000
    trade_id = 10_000
    for _ in range(n_events):
        E += 100
        U = last_u + 1 if market == SPOT else last_u + rng.randint(1, 50)
        u = U + rng.randint(0, 20)
        b, a = [], []
        for _k in range(rng.randint(1, 12)):
            side = rng.choice("BS")
            k = int(mid) - rng.randint(1, 60) if side == "B" else int(mid) + rng.randint(1, 60)
            q = "0.00000000" if rng.random() < 0.3 else f"{rng.randint(1, 5000) / 1000:.8f}"
            lst = b if side == "B" else a
            if all(x[0] != px(k) for x in lst):
                lst.append([px(k), q])
        d = {"e": "depthUpdate", "E": E}
        if market == USDM:
            d["T"] = E - 1
        d.update(s=symbol, U=U, u=u)
        if market == USDM:
            d["pu"] = last_u
        d.update(b=b, a=a)
        items.append(Item("depth", json.dumps(d, separators=(",", ":")), (U, u, last_u if market == USDM else 0)))
        last_u = u
        for p, q in b:
            book["B"][p] = q
        for p, q in a:
            book["S"][p] = q
        if rng.random() < 0.5:
            trade_id += 1
            tr = {"e": "trade", "E": E, "s": symbol, "t": trade_id, "p": px(int(mid)), "q": "0.01000000",
                  "T": E, "m": rng.random() < 0.5}
            items.append(Item("trade", json.dumps(tr, separators=(",", ":"))))
        if rng.random() < 0.5:
            tk = {"u": u, "s": symbol, "b": px(int(mid) - 1), "B": "1.00000000", "a": px(int(mid) + 1),
                  "A": "1.00000000"}
            items.append(Item("bookTicker", json.dumps(tk, separators=(",", ":"))))
    return Script(symbol, snap, items)


def _dkey(p: str) -> Decimal:
    return Decimal(p)


class _Book:
    def __init__(self, snap: dict):
        self.L = snap["lastUpdateId"]
        self.E = snap.get("E")
        self.bids = {p: q for p, q in snap["bids"] if Decimal(q) != 0}
        self.asks = {p: q for p, q in snap["asks"] if Decimal(q) != 0}

    def apply(self, data: dict):
        for side, book in (("b", self.bids), ("a", self.asks)):
            for p, q in data[side]:
                if Decimal(q) == 0:
                    book.pop(p, None)
                else:
                    book[p] = q
        self.L = data["u"]
        self.E = data.get("E", self.E)

    def body(self, market: str, limit: int | None) -> str:
        bids = sorted(self.bids.items(), key=lambda x: _dkey(x[0]), reverse=True)
        asks = sorted(self.asks.items(), key=lambda x: _dkey(x[0]))
        if limit:
            bids, asks = bids[:limit], asks[:limit]
        d = {"lastUpdateId": self.L}
        if market == USDM:
            d["E"] = self.E or 0
            d["T"] = self.E or 0
        d["bids"] = [[p, q] for p, q in bids]
        d["asks"] = [[p, q] for p, q in asks]
        return json.dumps(d, separators=(",", ":"))


class _Client:
    def __init__(self, ws, streams):
        self.ws = ws
        self.streams = streams
        self.by_kind = {}
        for s in streams:
            sym, _, kind = s.partition("@")
            if kind.startswith("depth") and not kind[5:6].isdigit():
                self.by_kind[(sym.upper(), "depth")] = s
            elif kind in ("trade", "aggTrade", "bookTicker"):
                self.by_kind[(sym.upper(), kind)] = s


class FakeBinance:
    """See the module docstring. Use: `async with FakeBinance(...) as fb:` then fb.ws_url,
    fb.rest_url; await fb.done.wait() for the end of the script."""

    def __init__(self, market: str, scripts, *, rate: float = 4000.0, faults=(), ws_429: int = 0,
                 rest_429: int = 0, retry_after: str = "1", apply_limit: bool = False,
                 skip_on_disconnect: int = 3):
        self.market = market
        self.scripts = {s.symbol: s for s in scripts}
        self.books = {s.symbol: _Book(s.snapshot) for s in scripts}
        self.rate = rate
        self.faults = sorted(faults, key=lambda f: f.at)
        self.ws_429 = ws_429
        self.rest_429 = {"*": rest_429}
        self.retry_after = retry_after
        self.apply_limit = apply_limit
        self.skip_on_disconnect = skip_on_disconnect
        self.stale_armed = set()
        self.clients = set()
        self.done = asyncio.Event()
        self._have_client = asyncio.Event()
        # logs for tests
        self.sent = []                      # (symbol, kind, text) as sent, in order
        self.sent_depth = {s: [] for s in self.scripts}   # (U, u, pu) sent, in send order
        self.applied_depth = {s: [] for s in self.scripts}
        self.snapshots_served = []          # (symbol, lastUpdateId, stale)
        self.http_status = []               # statuses of REST answers
        self.connections = 0
        self.injected = []                  # (kind, symbol, ids)
        # the played sequence: the scripts interleaved in proportion to their lengths
        seq = []
        for s in scripts:
            n = len(s.items)
            seq += [((i + 0.5) / max(n, 1), s.symbol, it) for i, it in enumerate(s.items)]
        seq.sort(key=lambda x: x[0])
        self.seq = [(sym, it) for _, sym, it in seq]
        self._server = None
        self._task = None
        # a test may set fault_ready to a callable: a due fault waits (the stream goes on)
        # until it returns True, e.g. until the client is synced again after the last fault
        self.fault_ready = None

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self):
        self._server = await serve(self._handler, "127.0.0.1", 0, process_request=self._process_request,
                                   ping_interval=None, max_size=None)
        port = self._server.sockets[0].getsockname()[1]
        self.ws_url = f"ws://127.0.0.1:{port}"
        self.rest_url = f"http://127.0.0.1:{port}"
        self._task = asyncio.create_task(self._produce())
        return self

    async def __aexit__(self, *exc):
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass
        self._server.close()
        await self._server.wait_closed()

    # ---------------------------------------------------------------- HTTP

    def _process_request(self, connection, request):
        parts = urlsplit(request.path)
        if parts.path.endswith("/depth"):
            q = parse_qs(parts.query)
            sym = (q.get("symbol") or [""])[0].upper()
            limit = int((q.get("limit") or ["100"])[0])
            if self.rest_429.get(sym, 0) > 0 or self.rest_429["*"] > 0:
                key = sym if self.rest_429.get(sym, 0) > 0 else "*"
                self.rest_429[key] -= 1
                return self._respond(connection, 429, '{"code":-1003,"msg":"Too many requests."}',
                                     {"Retry-After": self.retry_after})
            book = self.books.get(sym)
            if book is None:
                return self._respond(connection, 400, '{"code":-1121,"msg":"Invalid symbol."}')
            if sym in self.stale_armed:
                self.stale_armed.discard(sym)
                stale = _Book(self.scripts[sym].snapshot)
                self.snapshots_served.append((sym, stale.L, True))
                return self._respond(connection, 200, stale.body(self.market, None))
            self.snapshots_served.append((sym, book.L, False))
            return self._respond(connection, 200, book.body(self.market, limit if self.apply_limit else None))
        if self.ws_429 > 0:
            self.ws_429 -= 1
            return self._respond(connection, 429, "Too many requests", {"Retry-After": self.retry_after})
        return None

    def _respond(self, connection, status, text, headers=None):
        self.http_status.append(status)
        r = connection.respond(status, text)
        if text.startswith("{"):
            r.headers["Content-Type"] = "application/json"
        for k, v in (headers or {}).items():
            r.headers[k] = v
        return r

    # ---------------------------------------------------------------- websocket

    async def _handler(self, ws):
        parts = urlsplit(ws.request.path)
        q = parse_qs(parts.query)
        if "streams" in q:
            streams = [s for s in q["streams"][0].split("/") if s]
        else:
            streams = [s for s in parts.path.split("/ws/", 1)[-1].split("/") if s]
        client = _Client(ws, streams)
        self.connections += 1
        self.clients.add(client)
        self._have_client.set()
        try:
            await ws.wait_closed()
        finally:
            self.clients.discard(client)
            if not self.clients:
                self._have_client.clear()

    async def _send(self, sym, kind, text):
        for c in list(self.clients):
            name = c.by_kind.get((sym, kind))
            if name is None:
                continue
            msg = '{"stream":"%s","data":%s}' % (name, text)
            try:
                await c.ws.send(msg)
            except ConnectionClosed:
                continue
        self.sent.append((sym, kind, text))

    async def _broadcast_raw(self, msg):
        for c in list(self.clients):
            try:
                await c.ws.send(msg)
            except ConnectionClosed:
                pass

    async def _close_all(self, code, reason, clients=None):
        for c in list(self.clients if clients is None else clients):
            await c.ws.close(code, reason)
            self.clients.discard(c)
        if not self.clients:
            self._have_client.clear()

    def _apply(self, sym, item):
        self.books[sym].apply(json.loads(item.data, parse_float=str))
        self.applied_depth[sym].append(item.ids)

    async def _produce(self):
        seq = self.seq
        faults = list(self.faults)
        pending = []   # faults waiting for their symbol's next depth event
        skip = 0
        consumed = set()
        batch = max(1, int(self.rate / 100))
        for idx, (sym, item) in enumerate(seq):
            if idx % batch == 0:
                await asyncio.sleep(batch / self.rate)
            await self._have_client.wait()
            while faults and faults[0].at <= idx and (self.fault_ready is None or self.fault_ready()):
                f = faults.pop(0)
                if f.kind in ("disconnect", "shutdown"):
                    if f.kind == "shutdown":
                        told = list(self.clients)
                        await self._broadcast_raw('{"stream":"!serverShutdown","data":{"e":"serverShutdown",'
                                                  '"E":%d}}' % 1_700_000_000_000)
                        await asyncio.sleep(0.05)
                        await self._close_all(1001, "server shutdown", told)
                    else:
                        await self._close_all(1011, "fake disconnect")
                    self.injected.append((f.kind, None, None))
                    skip = self.skip_on_disconnect
                else:
                    pending.append(f)
            if idx in consumed:
                continue
            if item.kind != "depth":
                if skip:
                    continue
                await self._send(sym, item.kind, item.data)
                continue
            if skip:
                skip -= 1
                self._apply(sym, item)
                continue
            fault = None
            if pending and (self.fault_ready is None or self.fault_ready()):
                fault = next((f for f in pending if (f.symbol or sym).upper() == sym), None)
            if fault is not None:
                pending.remove(fault)
            if fault is None:
                self._apply(sym, item)
                await self._send(sym, "depth", item.data)
                self.sent_depth[sym].append(item.ids)
                continue
            k = fault.kind
            self.injected.append((k, sym, item.ids))
            if k in ("drop", "stale", "rate_limit"):
                self._apply(sym, item)
                if k == "stale":
                    self.stale_armed.add(sym)
                elif k == "rate_limit":
                    self.rest_429[sym] = self.rest_429.get(sym, 0) + 1
            elif k == "dup":
                self._apply(sym, item)
                for _ in range(2):
                    await self._send(sym, "depth", item.data)
                    self.sent_depth[sym].append(item.ids)
            elif k == "garbage":
                self._apply(sym, item)
                await self._send(sym, "depth", item.data[: len(item.data) // 2])
            elif k == "swap":
                nxt = next((j for j in range(idx + 1, len(seq)) if seq[j][0] == sym and seq[j][1].kind == "depth"),
                           None)
                self._apply(sym, item)
                if nxt is None:
                    await self._send(sym, "depth", item.data)
                    self.sent_depth[sym].append(item.ids)
                else:
                    n_item = seq[nxt][1]
                    consumed.add(nxt)
                    self._apply(sym, n_item)
                    await self._send(sym, "depth", n_item.data)
                    self.sent_depth[sym].append(n_item.ids)
                    await self._send(sym, "depth", item.data)
                    self.sent_depth[sym].append(item.ids)
            else:
                raise ValueError(f"unknown fault {k!r}")
        self.done.set()
