"""Fault injection for tests of the ITCH replay: take a clean day (a list of
message payloads, or a file such as one written by :mod:`lobreplay.testing.itch_synth`),
change it in exactly one place, and say what a checker must find.

Each fault function takes the payloads (messages without their length prefix)
and returns ``(new_payloads, Fault)``. :func:`inject` does the same from a file
(or a :class:`~lobreplay.testing.itch_synth.DayTruth`) to a new file.

========================  ==================  =========================================================
function                  expected cause      what changes
========================  ==================  =========================================================
swap_executions           fill_order          two E of one aggressor group change places (both
                                              fully execute their orders); names the order that now
                                              comes first although it was second in priority
overfill_execution        quantity_mismatch   one E (alone in its group, the order's last
                                              execution) executes more shares than the order has
drop_add                  unknown_reference   one A whose order is later deleted (and nothing else
                                              refers to it) is removed; names the D
crossed_replace           crossed_replace     a U is inserted just before an order's final D, moving
                                              it through the opposite best; the D then deletes the
                                              new reference. Names the U's (original) order_ref
crossed_add               crossed_add         an A through the opposite best is inserted, followed by
                                              a D of it at the same nanosecond
drop_final_delete         residual_order      one end-of-day D is removed; the order is left at the
                                              end of the day (timestamp: the last message's)
off_price_execution       execution_price     one E (alone in its group) becomes a C, printable "Y",
                                              one tick away from the order's price, outside a cross
========================  ==================  =========================================================

``Fault.order_ref`` is the order_ref field of the message at which the finding
arises (for residual_order: the order left over); ``Fault.index`` is that
message's index in the new list (``len(new)`` for residual_order);
``Fault.detail`` has the rest (the other order of a swap, the new reference of a
replace, the changed field's old and new values).
"""
from __future__ import annotations

import gzip as _gzip
import os
import random
from bisect import bisect_left, insort
from dataclasses import dataclass, field

from lobreplay.itch.writer import ItchWriter, encode, unpack

__all__ = ["Fault", "FAULTS", "inject", "read_payloads", "write_payloads", "swap_executions",
           "overfill_execution", "drop_add", "crossed_replace", "crossed_add", "drop_final_delete",
           "off_price_execution"]

_ORDER_TYPES = frozenset(b"AFECXDU")
_MARKET_OPEN = 34_200 * 10**9   # 09:30
_MARKET_CLOSE = 57_600 * 10**9  # 16:00


@dataclass(frozen=True)
class Fault:
    kind: str
    cause: str
    order_ref: int
    locate: int
    timestamp: int
    index: int
    detail: dict = field(default_factory=dict)


def read_payloads(path) -> list[bytes]:
    """The messages of a BinaryFILE stream (gzip detected by its magic bytes); stops at a 0-length frame."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = _gzip.decompress(data)
    out, off, n = [], 0, len(data)
    while off + 2 <= n:
        ln = int.from_bytes(data[off:off + 2], "big")
        if ln == 0:
            break
        if off + 2 + ln > n:
            raise ValueError(f"{path}: truncated frame at offset {off}")
        out.append(data[off + 2:off + 2 + ln])
        off += 2 + ln
    else:
        if off != n:
            raise ValueError(f"{path}: truncated frame at offset {off}")
    return out


def write_payloads(path, payloads, gzip: bool = False) -> None:
    with ItchWriter(path, gzip=gzip) as w:
        for p in payloads:
            w.write_raw(p)


# -- a small book that follows the feed (enough to find targets) ---------------------------------

class _Book:
    def __init__(self):
        self.orders: dict[int, list] = {}        # ref -> [locate, side, price, shares]
        self.levels: dict[tuple, dict] = {}      # (locate, side) -> {price: number of orders}
        self.keys: dict[tuple, list] = {}        # (locate, side) -> sorted prices

    def add(self, ref, loc, side, price, shares):
        self.orders[ref] = [loc, side, price, shares]
        lv = self.levels.setdefault((loc, side), {})
        if price in lv:
            lv[price] += 1
        else:
            lv[price] = 1
            insort(self.keys.setdefault((loc, side), []), price)

    def remove(self, ref):
        o = self.orders.pop(ref)
        k = (o[0], o[1])
        lv = self.levels[k]
        lv[o[2]] -= 1
        if not lv[o[2]]:
            del lv[o[2]]
            keys = self.keys[k]
            keys.pop(bisect_left(keys, o[2]))
        return o

    def best(self, loc, side):
        keys = self.keys.get((loc, side))
        if not keys:
            return None
        return keys[-1] if side == "B" else keys[0]

    def apply(self, m: dict) -> None:
        t = m["type"]
        if t in ("A", "F"):
            self.add(m["order_ref"], m["stock_locate"], m["side"], m["price"], m["shares"])
        elif t in ("E", "C", "X"):
            o = self.orders.get(m["order_ref"])
            if o is None:
                return
            o[3] -= m["executed_shares"] if t != "X" else m["cancelled_shares"]
            if o[3] <= 0:
                self.remove(m["order_ref"])
        elif t == "D":
            if m["order_ref"] in self.orders:
                self.remove(m["order_ref"])
        elif t == "U":
            o = self.orders.get(m["order_ref"])
            if o is None:
                return
            self.remove(m["order_ref"])
            self.add(m["new_order_ref"], o[0], o[1], m["price"], m["shares"])


def _tick(price: int) -> int:
    return 100 if price >= 10_000 else 1


def _decoded(payloads):
    return [unpack(p) if p[0] in _ORDER_TYPES else None for p in payloads]


def _exec_groups(msgs, book_sides):
    """Aggressor groups: runs of consecutive E/C-"Y" with one timestamp, locate and resting side."""
    groups, cur, key = [], [], None
    for i, m in enumerate(msgs):
        if m is not None and (m["type"] == "E" or (m["type"] == "C" and m["printable"] == "Y")):
            k = (m["timestamp"], m["stock_locate"], book_sides.get(i))
            if cur and k == key:
                cur.append(i)
            else:
                if cur:
                    groups.append(cur)
                cur, key = [i], k
        else:
            if cur:
                groups.append(cur)
            cur, key = [], None
    if cur:
        groups.append(cur)
    return groups


def _walk(msgs):
    """Replay the feed once: for each E/C index, the side of the order it hits and its shares before it."""
    book = _Book()
    side_at, remaining_at = {}, {}
    for i, m in enumerate(msgs):
        if m is None:
            continue
        if m["type"] in ("E", "C"):
            o = book.orders.get(m["order_ref"])
            if o is not None:
                side_at[i], remaining_at[i] = o[1], o[3]
        book.apply(m)
    return side_at, remaining_at


def _pick(rng: random.Random, cands, what: str):
    if not cands:
        raise ValueError(f"no candidate for {what} in this stream (is it a whole synthetic day?)")
    return cands[int(rng.random() * len(cands))]


# -- the faults -------------------------------------------------------------------------------------

def swap_executions(payloads, *, seed: int = 0):
    msgs = _decoded(payloads)
    side_at, rem_at = _walk(msgs)
    cands = []
    for g in _exec_groups(msgs, side_at):
        if len(g) >= 2 and all(msgs[i]["type"] == "E" for i in g[:2]) and \
                all(i in rem_at and msgs[i]["executed_shares"] == rem_at[i] for i in g[:2]):
            cands.append(g[0])
    i = _pick(random.Random(f"swap_executions:{seed}"), cands, "swap_executions")
    new = list(payloads)
    new[i], new[i + 1] = payloads[i + 1], payloads[i]
    m = msgs[i + 1]
    return new, Fault("swap_executions", "fill_order", m["order_ref"], m["stock_locate"], m["timestamp"], i,
                      {"other_ref": msgs[i]["order_ref"], "swapped_indices": (i, i + 1)})


def overfill_execution(payloads, *, seed: int = 0):
    msgs = _decoded(payloads)
    side_at, rem_at = _walk(msgs)
    cands = [g[0] for g in _exec_groups(msgs, side_at)
             if len(g) == 1 and msgs[g[0]]["type"] == "E" and g[0] in rem_at
             and msgs[g[0]]["executed_shares"] == rem_at[g[0]]]
    i = _pick(random.Random(f"overfill_execution:{seed}"), cands, "overfill_execution")
    m = dict(msgs[i])
    old = m["executed_shares"]
    m["executed_shares"] = old + 100
    new = list(payloads)
    new[i] = encode(m)
    return new, Fault("overfill_execution", "quantity_mismatch", m["order_ref"], m["stock_locate"], m["timestamp"],
                      i, {"order_shares": old, "executed_shares": old + 100})


def drop_add(payloads, *, seed: int = 0):
    msgs = _decoded(payloads)
    refs: dict[int, list] = {}
    for i, m in enumerate(msgs):
        if m is None:
            continue
        refs.setdefault(m["order_ref"], []).append(i)
        if m["type"] == "U":
            refs.setdefault(m["new_order_ref"], []).append(i)
    cands = []
    for ref, idx in refs.items():
        if len(idx) == 2 and msgs[idx[0]]["type"] == "A" and msgs[idx[1]]["type"] == "D" and ref != 0:
            cands.append(idx)
    ia, idel = _pick(random.Random(f"drop_add:{seed}"), cands, "drop_add")
    new = payloads[:ia] + payloads[ia + 1:]
    m = msgs[idel]
    return new, Fault("drop_add", "unknown_reference", m["order_ref"], m["stock_locate"], m["timestamp"], idel - 1,
                      {"dropped_index": ia})


def crossed_replace(payloads, *, seed: int = 0):
    msgs = _decoded(payloads)
    book = _Book()
    max_ref = 0
    cands = []
    last_ref_at: dict[int, int] = {}
    for i, m in enumerate(msgs):
        if m is None:
            continue
        last_ref_at[m["order_ref"]] = i
        if m["type"] == "U":
            last_ref_at[m["new_order_ref"]] = i
            max_ref = max(max_ref, m["new_order_ref"])
        elif m["type"] in ("A", "F"):
            max_ref = max(max_ref, m["order_ref"])
    for i, m in enumerate(msgs):
        if m is None:
            continue
        if m["type"] == "D" and last_ref_at.get(m["order_ref"]) == i and m["order_ref"] in book.orders:
            o = book.orders[m["order_ref"]]
            opp = book.best(o[0], "S" if o[1] == "B" else "B")
            if opp is not None and _MARKET_OPEN <= m["timestamp"] < _MARKET_CLOSE:
                cands.append((i, o[1], o[3], opp))
        book.apply(m)
    i, side, shares, opp = _pick(random.Random(f"crossed_replace:{seed}"), cands, "crossed_replace")
    d = msgs[i]
    price = opp + _tick(opp) if side == "B" else opp - _tick(opp)
    new_ref = max_ref + 1
    u = {"type": "U", "stock_locate": d["stock_locate"], "tracking": 0, "timestamp": d["timestamp"],
         "order_ref": d["order_ref"], "new_order_ref": new_ref, "shares": shares, "price": price}
    d2 = dict(d, order_ref=new_ref)
    new = payloads[:i] + [encode(u), encode(d2)] + payloads[i + 1:]
    return new, Fault("crossed_replace", "crossed_replace", d["order_ref"], d["stock_locate"], d["timestamp"], i,
                      {"new_ref": new_ref, "side": side, "price": price, "opposite_best": opp})


def crossed_add(payloads, *, seed: int = 0):
    msgs = _decoded(payloads)
    book = _Book()
    max_ref = 0
    for m in msgs:
        if m is not None:
            max_ref = max(max_ref, m["order_ref"], m.get("new_order_ref", 0))
    rng = random.Random(f"crossed_add:{seed}")
    cands = []
    for i, m in enumerate(msgs):
        if m is None:
            continue
        if m["type"] == "A" and _MARKET_OPEN <= m["timestamp"] < _MARKET_CLOSE:
            loc = m["stock_locate"]
            side = "B" if rng.random() < 0.5 else "S"
            opp = book.best(loc, "S" if side == "B" else "B")
            if opp is not None and (side == "B" or opp > _tick(opp)):
                cands.append((i, side, opp, m["stock"]))
        book.apply(m)
    i, side, opp, stock = _pick(rng, cands, "crossed_add")
    m = msgs[i]
    price = opp + _tick(opp) if side == "B" else opp - _tick(opp)
    ref = max_ref + 1
    a = {"type": "A", "stock_locate": m["stock_locate"], "tracking": 0, "timestamp": m["timestamp"],
         "order_ref": ref, "side": side, "shares": 100, "stock": stock, "price": price}
    d = {"type": "D", "stock_locate": m["stock_locate"], "tracking": 0, "timestamp": m["timestamp"],
         "order_ref": ref}
    new = payloads[:i] + [encode(a), encode(d)] + payloads[i:]
    return new, Fault("crossed_add", "crossed_add", ref, m["stock_locate"], m["timestamp"], i,
                      {"side": side, "price": price, "opposite_best": opp})


def drop_final_delete(payloads, *, seed: int = 0):
    msgs = _decoded(payloads)
    last_other = -1
    for i, m in enumerate(msgs):
        if m is not None and m["type"] != "D":
            last_other = i
    cands = [i for i in range(last_other + 1, len(msgs)) if msgs[i] is not None and msgs[i]["type"] == "D"]
    i = _pick(random.Random(f"drop_final_delete:{seed}"), cands, "drop_final_delete")
    m = msgs[i]
    new = payloads[:i] + payloads[i + 1:]
    last_ts = unpack(new[-1])["timestamp"]
    return new, Fault("drop_final_delete", "residual_order", m["order_ref"], m["stock_locate"], last_ts, len(new),
                      {"dropped_index": i, "delete_timestamp": m["timestamp"]})


def off_price_execution(payloads, *, seed: int = 0):
    msgs = _decoded(payloads)
    book = _Book()
    side_at, _ = _walk(msgs)
    single = {g[0] for g in _exec_groups(msgs, side_at) if len(g) == 1 and msgs[g[0]]["type"] == "E"}
    cands = []
    for i, m in enumerate(msgs):
        if m is None:
            continue
        if i in single and m["order_ref"] in book.orders:
            cands.append((i, book.orders[m["order_ref"]][2]))
        book.apply(m)
    i, order_price = _pick(random.Random(f"off_price_execution:{seed}"), cands, "off_price_execution")
    m = msgs[i]
    price = order_price + _tick(order_price)
    c = {"type": "C", "stock_locate": m["stock_locate"], "tracking": m["tracking"], "timestamp": m["timestamp"],
         "order_ref": m["order_ref"], "executed_shares": m["executed_shares"], "match_number": m["match_number"],
         "printable": "Y", "execution_price": price}
    new = list(payloads)
    new[i] = encode(c)
    return new, Fault("off_price_execution", "execution_price", m["order_ref"], m["stock_locate"], m["timestamp"], i,
                      {"order_price": order_price, "execution_price": price})


FAULTS = {
    "swap_executions": swap_executions,
    "overfill_execution": overfill_execution,
    "drop_add": drop_add,
    "crossed_replace": crossed_replace,
    "crossed_add": crossed_add,
    "drop_final_delete": drop_final_delete,
    "off_price_execution": off_price_execution,
}


def inject(kind: str, src, dst, *, seed: int = 0, gzip: bool | None = None) -> Fault:
    """Read ``src`` (a path, or a DayTruth: its path), apply fault ``kind``, write ``dst``.

    ``gzip`` defaults to: compress when ``dst`` ends in ".gz"."""
    if kind not in FAULTS:
        raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(FAULTS)})")
    path = getattr(src, "path", src)
    new, fault = FAULTS[kind](read_payloads(path), seed=seed)
    if gzip is None:
        gzip = os.fspath(dst).endswith(".gz")
    write_payloads(dst, new, gzip=gzip)
    return fault
