"""A naive ground-truth ITCH book for tests, independent of lobreplay.

It applies the feed as it stands, message by message: a dict order_ref ->
[locate, side, price, shares] over A/F (add), D (delete), X (cancel part), E and
C (execute part or all, at any price: a cross's C "N" is applied like any other),
U (replace: the old order goes, the new one rests on its side at the new price).
It never matches, never checks priority and never removes anything the feed did
not remove, so a book may be crossed (as NASDAQ displays it while a symbol is
halted, paused or in an IPO's quotation period). Messages are decoded by
tests/itch_ref.py (struct.unpack, no lobreplay code).

    truth = TruthBook()
    for i, m in enumerate(messages):
        truth.apply(m)
        truth.bbo(locate)        # ((bid_price, bid_qty, bid_count), (ask_price, ask_qty, ask_count))
        truth.depth(locate, 5)   # [(price, qty, count), ...] per side, best first

``bbo_changes(messages)`` runs a whole day and returns {(message index, locate):
bbo after it} for every message that changed its locate's bbo; ``compare_replay``
checks a replay's bbo.parquet (and the residual_order rows of its desyncs.parquet)
against that, row by row.
"""
from __future__ import annotations

import gzip
import os
import sys
from bisect import bisect_left, insort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import itch_ref  # noqa: E402

EMPTY = (0, 0, 0)


class TruthBook:
    def __init__(self):
        self.orders: dict[int, list] = {}                # ref -> [locate, side, price, shares]
        self.levels: dict[tuple, dict] = {}              # (locate, side) -> price -> [qty, count]
        self.prices: dict[tuple, list] = {}              # (locate, side) -> sorted prices with orders
        self.problems: list = []                         # what the feed did that a book cannot follow

    # -- book ---------------------------------------------------------------------------------

    def _rest(self, ref, loc, side, price, shares):
        self.orders[ref] = [loc, side, price, shares]
        lv = self.levels.setdefault((loc, side), {})
        lvl = lv.get(price)
        if lvl is None:
            lv[price] = [shares, 1]
            insort(self.prices.setdefault((loc, side), []), price)
        else:
            lvl[0] += shares
            lvl[1] += 1

    def _take(self, ref, shares):
        """Take `shares` from an order (all of them: it leaves the book)."""
        o = self.orders[ref]
        loc, side, price = o[0], o[1], o[2]
        lvl = self.levels[(loc, side)][price]
        lvl[0] -= shares
        o[3] -= shares
        if o[3] <= 0:
            del self.orders[ref]
            lvl[1] -= 1
            if lvl[1] == 0:
                del self.levels[(loc, side)][price]
                ps = self.prices[(loc, side)]
                ps.pop(bisect_left(ps, price))

    def apply(self, m: dict) -> int | None:
        """Apply one decoded message; the locate whose book it touched (None for others)."""
        t = m["type"]
        if t in ("A", "F"):
            ref = m["order_ref"]
            if ref in self.orders:
                self.problems.append(("duplicate_reference", ref))
                return None
            self._rest(ref, m["stock_locate"], m["side"], m["price"], m["shares"])
            return m["stock_locate"]
        if t not in ("D", "X", "E", "C", "U"):
            return None
        ref = m["order_ref"]
        o = self.orders.get(ref)
        if o is None:
            self.problems.append(("unknown_reference", ref))
            return None
        if t == "D":
            self._take(ref, o[3])
        elif t == "X":
            self._take(ref, min(o[3], m["cancelled_shares"]))
        elif t in ("E", "C"):
            self._take(ref, min(o[3], m["executed_shares"]))
        else:  # U
            loc, side = o[0], o[1]
            self._take(ref, o[3])
            self._rest(m["new_order_ref"], loc, side, m["price"], m["shares"])
        return o[0]

    # -- views ----------------------------------------------------------------------------------

    def _side(self, loc, side, n):
        ps = self.prices.get((loc, side)) or []
        lv = self.levels.get((loc, side), {})
        seq = reversed(ps) if side == "B" else iter(ps)
        out = []
        for p in seq:
            if len(out) == n:
                break
            q, c = lv[p]
            out.append((p, q, c))
        return out

    def bbo(self, loc):
        b, a = self._side(loc, "B", 1), self._side(loc, "S", 1)
        return (b[0] if b else EMPTY), (a[0] if a else EMPTY)

    def depth(self, loc, n):
        return self._side(loc, "B", n), self._side(loc, "S", n)

    def crossed(self, loc) -> bool:
        (bp, _, _), (ap, _, _) = self.bbo(loc)
        return bool(bp and ap and bp >= ap)

    def live(self) -> dict:
        """ref -> (locate, side, price, shares) of every order still in the book."""
        return {r: tuple(o) for r, o in self.orders.items()}


def read_messages(path) -> list[dict]:
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [m for _, m in itch_ref.iter_messages(data)]


def bbo_changes(messages, on_message=None):
    """Run the day; {(message index, locate): (bid_price, bid_qty, bid_count, ask_price, ask_qty,
    ask_count)} for each message that changed its locate's bbo, and the book at the end.
    on_message(i, m, book, locate) is called after each message (for extra checks)."""
    book = TruthBook()
    last: dict[int, tuple] = {}
    out = {}
    for i, m in enumerate(messages):
        loc = book.apply(m)
        if on_message is not None:
            on_message(i, m, book, loc)
        if loc is None:
            continue
        b, a = book.bbo(loc)
        row = (*b, *a)
        if last.get(loc, (0,) * 6) != row:
            out[(i, loc)] = row
            last[loc] = row
    return out, book


_COLS = ["bid_price", "bid_qty", "bid_count", "ask_price", "ask_qty", "ask_count"]


def replay_bbo_changes(bbo) -> dict:
    """A replay's bbo.parquet (a DataFrame) as the same mapping: the state after the last row of
    each (message, locate), kept where it differs from the locate's state before the message
    (a message can change the book and put it back, as a replace at the same place does)."""
    out, last = {}, {}
    rows = bbo[["sequence", "instrument", *_COLS]].to_numpy()
    n = len(rows)
    for k in range(n):
        msg, loc = int(rows[k][0]), int(rows[k][1])
        if k + 1 < n and int(rows[k + 1][0]) == msg and int(rows[k + 1][1]) == loc:
            continue   # not the message's last row for this locate
        row = tuple(int(x) for x in rows[k][2:])
        if last.get(loc, (0,) * 6) != row:
            out[(msg, loc)] = row
            last[loc] = row
    return out


def compare_replay(out_dir, messages, *, locates=None) -> list[str]:
    """Differences between a replay's reports and the truth, as readable lines (empty: equal).

    bbo.parquet must hold exactly the truth's bbo after every message (for `locates`, default
    all); the residual_order rows of desyncs.parquet must be exactly the orders live in the
    truth at the end (reference, locate, shares, price)."""
    import pandas as pd

    truth, book = bbo_changes(messages)
    bbo = pd.read_parquet(os.path.join(out_dir, "bbo.parquet"))
    got = replay_bbo_changes(bbo)
    if locates is not None:
        keep = set(locates)
        truth = {k: v for k, v in truth.items() if k[1] in keep}
        got = {k: v for k, v in got.items() if k[1] in keep}
    lines = []
    for k in sorted(set(truth) | set(got)):
        if truth.get(k) != got.get(k):
            i, loc = k
            m = messages[i]
            lines.append(f"message {i} ({m['type']} locate {loc} ref {m.get('order_ref')}): "
                         f"truth {truth.get(k, 'unchanged')} replay {got.get(k, 'unchanged')}")
    des = pd.read_parquet(os.path.join(out_dir, "desyncs.parquet"))
    res = des[des.cause == "residual_order"]
    got_res = {(int(r.order_ref), int(r.instrument), int(r.found_qty), int(r.found_price))
               for r in res.itertuples()}
    want_res = {(ref, o[0], o[3], o[2]) for ref, o in book.orders.items()
                if locates is None or o[0] in set(locates)}
    if got_res != want_res:
        lines.append(f"residual_order rows: missing {sorted(want_res - got_res)[:5]}, "
                     f"extra {sorted(got_res - want_res)[:5]}")
    return lines
