"""Trading states in an ITCH replay (issue 25): while a symbol is halted, paused, in an IPO's
quotation period or under an operational halt, NASDAQ displays orders without matching them,
so the displayed book may be crossed until the cross. Hand-made files; the truth after every
message is the feed's own live orders (a dict of references, sharing nothing with lobreplay),
and the replay's bbo rows must follow it exactly, with no desync but those planted."""
from __future__ import annotations

import json
import os

import pyarrow.parquet as pq

from lobreplay.itch.replay import ReplayConfig, replay_itch
from lobreplay.itch.writer import ItchWriter

SEC = 1_000_000_000
T0 = 10 * 3600 * SEC


class Feed:
    """Writes ITCH messages for one symbol (locate 1) and keeps the truth: the live orders."""

    def __init__(self, path, stock="HALTY"):
        self.w = ItchWriter(path)
        self.stock = stock
        self.ts = T0
        self.orders = {}  # ref -> [side, price, shares]
        self.truth = []   # (bid_price, bid_qty, bid_count, ask_price, ask_qty, ask_count, state) per message
        self.state = "T"
        self.match = 0
        self.put({"type": "S", "stock_locate": 0, "event_code": "O"})
        self.put({"type": "R", "stock": stock, "market_category": "Q", "financial_status": "N",
                  "round_lot_size": 100, "round_lots_only": "N", "issue_classification": "C",
                  "issue_subtype": "C", "authenticity": "P", "short_sale_threshold": "N", "ipo_flag": " ",
                  "luld_tier": "1", "etp_flag": "N", "etp_leverage_factor": 0, "inverse_indicator": "N"})

    def put(self, msg):
        self.ts += 1000
        m = {"stock_locate": 1, "tracking": 0, "timestamp": self.ts, **msg}
        self.w.write(m)
        t = m["type"]
        if t in "AF":
            self.orders[m["order_ref"]] = [m["side"], m["price"], m["shares"]]
        elif t == "D":
            del self.orders[m["order_ref"]]
        elif t in "ECX":
            o = self.orders[m["order_ref"]]
            o[2] -= m["cancelled_shares"] if t == "X" else m["executed_shares"]
            if o[2] == 0:
                del self.orders[m["order_ref"]]
        elif t == "U":
            side = self.orders.pop(m["order_ref"])[0]
            self.orders[m["new_order_ref"]] = [side, m["price"], m["shares"]]
        elif t == "H":
            self.state = m["trading_state"]
        self.truth.append(self.top())

    def top(self):
        out = []
        for side, best in (("B", max), ("S", min)):
            prices = [p for s, p, _ in self.orders.values() if s == side]
            if not prices:
                out += [0, 0, 0]
                continue
            p = best(prices)
            at = [q for s, pp, q in self.orders.values() if s == side and pp == p]
            out += [p, sum(at), len(at)]
        return tuple(out) + (self.state,)

    def add(self, ref, side, price, shares):
        self.put({"type": "A", "order_ref": ref, "side": side, "shares": shares, "stock": self.stock,
                  "price": price})

    def halt(self, state, reason="LUDP"):
        self.put({"type": "H", "stock": self.stock, "trading_state": state, "reserved": " ", "reason": reason})

    def cross(self, price, fills, cross_type="H"):
        """The halt (or IPO) cross: a non-printable C for every order it executes, then Q."""
        self.match += 1
        for ref, shares in fills:
            self.put({"type": "C", "order_ref": ref, "executed_shares": shares, "match_number": self.match,
                      "printable": "N", "execution_price": price})
        self.put({"type": "Q", "shares": sum(s for _, s in fills) // 2, "stock": self.stock, "cross_price": price,
                  "match_number": self.match, "cross_type": cross_type})

    def close(self):
        self.w.close()


def replay(tmp_path, feed):
    feed.close()
    out = str(tmp_path / "out")
    summary = replay_itch(feed.w.path, out, ReplayConfig(cache=False), force=True)
    return out, summary


def planted(summary):
    """The desyncs but residual_order (the orders still live at the end, one row each)."""
    return {k: v for k, v in summary["desyncs_by_cause"].items() if k != "residual_order"}


def assert_follows_truth(out, feed):
    """The bbo rows are the truth's changes, message by message, with the state."""
    t = pq.read_table(os.path.join(out, "bbo.parquet")).to_pydict()
    got = list(zip(t["sequence"], t["bid_price"], t["bid_qty"], t["bid_count"], t["ask_price"], t["ask_qty"],
                   t["ask_count"], t["trading_state"]))
    want, prev = [], None
    for i, top in enumerate(feed.truth):
        book = top[:6]
        if prev is not None and book != prev:
            want.append((i, *book, top[6]))
        prev = book
    assert got == want


def luld_pause(path, resume_crossed=False):
    """Issue 25's example: bid 10.00 x100, ask 10.10 x100; a LULD pause; sell 9.90 x50 and
    buy 10.20 x80 displayed; the halt cross at 10.05 fills the buy from the 9.90 sell (50) and
    the 10.10 ask (30); resumption: bid 10.00 x100 / ask 10.10 x70."""
    f = Feed(path)
    f.halt("T", "    ")
    f.add(1, "B", 100000, 100)
    f.add(2, "S", 101000, 100)
    f.halt("P")
    f.add(3, "S", 99000, 50)
    f.add(4, "B", 102000, 80)
    if not resume_crossed:
        f.cross(100500, [(3, 50), (4, 50), (4, 30), (2, 30)])
    f.halt("T", "    ")
    f.add(5, "B", 100000, 10)  # continuous again: rests behind order 1
    return f


def test_luld_pause_with_crossing_displayed_orders(tmp_path):
    f = luld_pause(str(tmp_path / "luld.itch"))
    out, s = replay(tmp_path, f)
    assert planted(s) == {}
    assert_follows_truth(out, f)
    t = pq.read_table(os.path.join(out, "bbo.parquet")).to_pydict()
    crossed = [i for i, (b, a) in enumerate(zip(t["bid_price"], t["ask_price"])) if b and a and b >= a]
    assert crossed and {t["trading_state"][i] for i in crossed} == {"P"}  # crossed only while paused
    assert f.top()[:6] == (100000, 110, 2, 101000, 70, 1)
    assert s["residual_orders"] == 3 == len(f.orders)
    assert s["trading_states"] == {"state_changes": 2, "books_halted": 1, "books_halted_at_end": 0}


def test_resumption_with_a_book_still_crossed_is_a_desync(tmp_path):
    """A file cut before the cross: at the resumption the parked orders rest as feed orders,
    and each resting order they still meet leaves with a crossed_resume desync: the sell at 9.90
    takes the 10.00 bid away, then the buy at 10.20 both asks (the 9.90 one that just rested)."""
    f = luld_pause(str(tmp_path / "cut.itch"), resume_crossed=True)
    out, s = replay(tmp_path, f)
    assert planted(s) == {"crossed_resume": 3}
    d = pq.read_table(os.path.join(out, "desyncs.parquet")).to_pydict()
    assert sorted((o, x) for o, x, c in zip(d["order_ref"], d["other_ref"], d["cause"])
                  if c == "crossed_resume") == [(1, 3), (2, 4), (3, 4)]


def test_ipo_quotation_period_and_cross(tmp_path):
    f = Feed(str(tmp_path / "ipo.itch"), "NEWCO")
    f.halt("H", "IPO1")
    f.put({"type": "K", "stock": "NEWCO", "release_time": 11 * 3600, "release_qualifier": "A",
           "ipo_price": 200000})
    f.halt("Q", "IPOQ")
    for ref, side, px, q in ((1, "B", 210000, 300), (2, "B", 205000, 200), (3, "S", 195000, 100),
                             (4, "S", 200000, 250), (5, "S", 215000, 100), (6, "B", 190000, 100)):
        f.add(ref, side, px, q)
    f.put({"type": "U", "order_ref": 6, "new_order_ref": 7, "shares": 150, "price": 199000})
    f.put({"type": "X", "order_ref": 2, "cancelled_shares": 50})
    # the IPO cross at 20.00: buys 1 (300) and 2 (50 of 150) against sells 3 (100) and 4 (250)
    f.cross(200000, [(1, 300), (3, 100), (4, 250), (2, 50)], "H")
    f.halt("T", "    ")
    f.add(8, "S", 210000, 40)
    out, s = replay(tmp_path, f)
    assert planted(s) == {}
    assert_follows_truth(out, f)
    assert f.top()[:6] == (205000, 100, 1, 210000, 40, 1)
    assert s["residual_orders"] == 4


def test_operational_halt(tmp_path):
    """h of NASDAQ ('Q') halts the book, h of another market does not; the state reads 'h'."""
    f = Feed(str(tmp_path / "oph.itch"))
    f.add(1, "B", 100000, 100)
    f.add(2, "S", 101000, 100)
    f.put({"type": "h", "stock": f.stock, "market_code": "X", "halt_action": "H"})  # PSX's halt
    f.add(3, "B", 99500, 10)
    f.put({"type": "h", "stock": f.stock, "market_code": "Q", "halt_action": "H"})
    f.add(4, "S", 99000, 30)  # displayed through the bid while NASDAQ is halted
    f.put({"type": "D", "order_ref": 4})
    f.put({"type": "h", "stock": f.stock, "market_code": "Q", "halt_action": "T"})
    f.add(5, "S", 100500, 20)
    out, s = replay(tmp_path, f)
    assert planted(s) == {}
    t = pq.read_table(os.path.join(out, "bbo.parquet")).to_pydict()
    crossed = [st for b, a, st in zip(t["bid_price"], t["ask_price"], t["trading_state"]) if b and a and b >= a]
    assert crossed == ["h"]
    assert t["trading_state"][-1] == "T"
    assert s["trading_states"]["state_changes"] == 2
