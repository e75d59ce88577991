"""A deliberately naive reference limit order book: the oracle for lobreplay.

This module shares no code with lobreplay and must never import it.  It is
written to be *obviously* correct rather than fast:

  * every live order is an ``Order`` in one dict keyed by id;
  * each side is a dict ``price -> list of Order`` (front of the queue first);
  * the best price is found by scanning the keys (``min``/``max``);
  * level totals and counts are recomputed from the queue whenever they are
    needed -- there is no cached aggregate that could drift.

The semantics are the contract of ``csrc/core/lob.h`` as spelled out for the test
suite (docs/core.md, "Rejects" and "Feed replays").  Per event, the checks run
in this order and the first failing one wins; a rejected event changes nothing
and reports filled = resting = 0, no executions and no desyncs:

  1. no book for the instrument (or instrument > max_instrument)  EINSTRUMENT
  2. kind not NEW/CANCEL/REDUCE/REPLACE/EXEC, or a flag bit
     outside FEED | PRICE | NOCHECK | NOTIONAL | STP bits;
     NOTIONAL on anything but a MARKET NEW; STP bits on anything but
     a NEW or REPLACE, or with FEED                                 EKIND
  3. NEW: side not 'B'/'S', tif not GTC/IOC/FOK/MARKET, FEED
     with a tif other than GTC, or new_id (the participant) > 2^32-1 EKIND
  4. NEW/REDUCE/REPLACE/EXEC: qty <= 0                             EQTY
  5. NEW (not MARKET) and REPLACE: price outside [low, high]        EBAND
                                   price off the tick grid          EPRICE
  6. CANCEL/REDUCE/REPLACE/EXEC: id not live                       EUNKNOWN_ID
  7. NEW: id live; REPLACE: new_id live and new_id != id           EDUP_ID
  8. REDUCE without FEED: qty > remaining                          EQTY
  9. NEW FOK: crossing opposite quantity < qty -> OK, killed, nothing changes
 10. NEW GTC: book full and crossing quantity < qty                EFULL
     (FEED: book full and it meets no stale order -- it rests whole,
     and removing a stale order it meets makes room for it.  docs/core.md
     does not say; this is what lob.c does, where a GTC that trades
     partially on a full book is EFULL even if its makers leave)

Flags that mean nothing for a kind (PRICE on a NEW, FEED on a CANCEL, ...) are
accepted and ignored -- except the order flags (NOTIONAL, STP_*), checked strictly.

Participants and self-trade prevention (STP): a NEW's new_id is its participant
(0: none), kept while the order rests; a REPLACE (also FEED) keeps the old
order's.  An incoming NEW/REPLACE with participant P != 0 and STP bits does not
trade with a resting order of P it would otherwise trade with next: RESTING
cancels that resting order and goes on, INCOMING stops the incoming order (its
remainder is dropped, even a GTC's), BOTH does both.  Each such action is an
"execution" tuple with qty <= 0: (resting id, taker, price, -its qty, 0) for a
cancelled resting order; (resting id, taker, price, 0, its qty afterwards) for
the incoming order stopped there.

Notional MARKET orders (NOTIONAL): qty is a budget; from each maker in
priority order it takes min(maker qty, budget left // maker price) shares and
pays price x shares; it stops at the first maker where that is 0 (or whose
price is <= 0), and also right after a maker it took only part of: what is
left cannot buy one more share of that maker, so it stops there and never
skips ahead to a cheaper maker behind it (a sell walks down the bids, where
the next bid may be cheaper).  So at most the last maker is filled in part.
filled = shares, resting = 0.

These "extended" orders (STP with a participant, or NOTIONAL) are done here in
two steps: list the opposite orders the order could meet, in priority order;
walk that list to decide the actions (trade, cancel, stop); then apply them.
FOK and EFULL are decided from the same action list before anything changes
(FOK: the shares traded by the plan >= qty; EFULL: a GTC on a full book whose
plan leaves a remainder that is not stopped by STP).

Matching walks the opposite side best price first, FIFO within a price, and
prints every trade at the maker's price.  A GTC remainder rests at the back of
its price's queue; IOC/FOK/MARKET remainders are dropped.  REPLACE removes the
old order and then enters ``new_id`` on the old order's side as a GTC order at
the new price and quantity (it may trade, it loses priority, never EFULL).
REDUCE keeps the order's place in the queue.

Feed events (the feed is the truth; each divergence is a *desync*):

  * NEW/REPLACE with FEED never trade: every opposite order at a price the
    incoming order crosses is stale and removed, best price first, FIFO, each
    with a CROSSED desync; then the incoming order rests whole.
  * REDUCE with FEED by more than remains removes the order with a QTY desync.
  * EXEC (a resting order traded): unless NOCHECK, the execution priority
    gives (maker = front of the best level on the order's side, taker 0, that
    level's price, min(its size, qty)) and a FILL_ORDER desync if the feed
    named another order; with PRICE and without NOCHECK (a cross prints every
    order at the cross price), an EXEC_PRICE desync if the price is not the
    order's; then the order loses qty shares and keeps its place, leaving the
    book at 0, and with a QTY desync if qty is more than it had.

Halted books (STATE, qty 1 = halted, 0 = continuous; any other qty EQTY,
checked right after the kind and flags): while halted, a NEW GTC and a REPLACE
do not match and remove nothing: the order is "parked" (kept in arrival order
in a list of its own, not on the levels that matching walks); a NEW IOC, FOK or
MARKET is cancelled with nothing filled; a NEW GTC on a full book is EFULL.
CANCEL, REDUCE and EXEC work on parked orders; an EXEC of a parked order checks
no priority (the PRICE check stays).  Every query (best, depth, level orders,
bbo, snapshot) shows the displayed book: at each price the level's queue, then
the parked orders there in arrival order -- so it may be crossed.  STATE 0 on a
halted book rests the parked orders one by one in arrival order as FEED orders
do (removing what they meet, CROSSED desyncs); its resting = parked orders left.

Desync tuples, (order_id, found_id, expected_qty, found_qty, expected_price,
found_price, cause).  docs/core.md spells out CROSSED and FILL_ORDER; the
other fields follow lob.h ("expected" = what the feed said, "found" = what
the book had, found_id 0) as lob.c fills them:

  CROSSED       stale id, incoming id, incoming qty, stale qty, incoming price, stale price
  FILL_ORDER    feed's id, front id, feed qty, order's qty, order's price, front's price
  EXEC_PRICE    feed's id, 0, feed qty, order's qty, feed price, order's price
  QTY (EXEC)    feed's id, 0, feed qty, order's qty, event's price field, order's price
  QTY (REDUCE)  feed's id, 0, feed qty, order's qty, 0, order's price

Outputs use plain Python ints only:

  ``RefSession.apply(event)`` returns ``(status, filled, resting, execs, bbo,
  desyncs)`` where ``execs`` is a list of ``(maker_id, taker_id, price, qty,
  maker_remaining)`` tuples in trade order, ``bbo`` is ``(bid_price,
  bid_qty, ask_price, ask_qty, bid_count, ask_count, changed)`` for the
  event's instrument after the event and ``desyncs`` is a list of
  ``(order_id, found_id, expected_qty, found_qty, expected_price,
  found_price, cause)`` tuples in the order they were found.
"""

from __future__ import annotations

# ---- constants (values from csrc/core/lob.h; duplicated on purpose) --------------

OK = 0
EUNKNOWN_ID = 1
EDUP_ID = 2
EBAND = 3
EFULL = 4
EQTY = 5
EPRICE = 6
EKIND = 7
EINSTRUMENT = 8

STATUS_NAMES = {
    OK: "OK",
    EUNKNOWN_ID: "EUNKNOWN_ID",
    EDUP_ID: "EDUP_ID",
    EBAND: "EBAND",
    EFULL: "EFULL",
    EQTY: "EQTY",
    EPRICE: "EPRICE",
    EKIND: "EKIND",
    EINSTRUMENT: "EINSTRUMENT",
    9: "EEXECFULL",
    10: "EARG",
    11: "ENOMEM",
    12: "ECORRUPT",
}

NEW = 1
CANCEL = 2
REDUCE = 3
REPLACE = 4
EXEC = 5
STATE = 6
KIND_NAMES = {NEW: "NEW", CANCEL: "CANCEL", REDUCE: "REDUCE", REPLACE: "REPLACE", EXEC: "EXEC", STATE: "STATE"}

# event flags
FEED = 1
PRICE = 2
NOCHECK = 4
NOTIONAL = 8
STP_RESTING = 16
STP_INCOMING = 32
STP_BOTH = STP_RESTING | STP_INCOMING
ORDER_FLAGS = NOTIONAL | STP_BOTH
KNOWN_FLAGS = FEED | PRICE | NOCHECK | ORDER_FLAGS
MAX_PARTICIPANT = 2**32 - 1

# desync causes
FILL_ORDER = 1
QTY = 2
CROSSED = 3
EXEC_PRICE = 4
CAUSE_NAMES = {FILL_ORDER: "FILL_ORDER", QTY: "QTY", CROSSED: "CROSSED", EXEC_PRICE: "EXEC_PRICE"}

BUY = ord("B")
SELL = ord("S")

GTC = 0
IOC = 1
FOK = 2
MARKET = 3
TIF_NAMES = {GTC: "GTC", IOC: "IOC", FOK: "FOK", MARKET: "MARKET"}

EMPTY_BBO = (0, 0, 0, 0, 0, 0)


class RefError(AssertionError):
    """The reference book found itself inconsistent (a bug in the oracle)."""


class Order:
    __slots__ = ("id", "side", "price", "qty", "participant")

    def __init__(self, oid: int, side: int, price: int, qty: int, participant: int = 0):
        self.id = oid
        self.side = side
        self.price = price
        self.qty = qty
        self.participant = participant

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Order(id={self.id}, side={chr(self.side)}, price={self.price}, qty={self.qty})"


class RefBook:
    """One instrument's book over the band [low, high] with a tick and a capacity."""

    def __init__(self, low: int, high: int, tick: int, capacity: int):
        if tick <= 0 or high < low or (high - low) % tick != 0 or capacity < 1:
            raise ValueError("bad book parameters")
        self.low = low
        self.high = high
        self.tick = tick
        self.capacity = capacity
        self.orders: dict[int, Order] = {}
        # side -> {price: [Order, ...]} with the front of the queue first
        self.levels: dict[int, dict[int, list[Order]]] = {BUY: {}, SELL: {}}
        self.halted = False
        self.parked: list[Order] = []  # orders that arrived while halted, arrival order

    def view(self, side: int) -> dict[int, list[Order]]:
        """The displayed levels of a side: each price's queue, then its parked orders."""
        out = {p: list(q) for p, q in self.levels[side].items()}
        for o in self.parked:
            if o.side == side:
                out.setdefault(o.price, []).append(o)
        return out

    # ---- queries ---------------------------------------------------------

    @property
    def order_count(self) -> int:
        return len(self.orders)

    def best_price(self, side: int, displayed: bool = True):
        lv = self.view(side) if displayed else self.levels[side]
        if not lv:
            return None
        return max(lv) if side == BUY else min(lv)

    def best(self, side: int):
        """(price, total qty, order count) of the best level, or None."""
        p = self.best_price(side)
        if p is None:
            return None
        q = self.view(side)[p]
        return (p, sum(o.qty for o in q), len(q))

    def depth(self, side: int, n: int | None = None):
        """[(price, qty, count), ...] best first."""
        lv = self.view(side)
        prices = sorted(lv, reverse=(side == BUY))
        if n is not None:
            prices = prices[:n]
        return [(p, sum(o.qty for o in lv[p]), len(lv[p])) for p in prices]

    def level_orders(self, price: int):
        """[(id, qty), ...] at one price, front of the queue first."""
        side = self.level_side(price)
        return [] if side is None else [(o.id, o.qty) for o in self.view(side)[price]]

    def level_side(self, price: int):
        """The side of the queue at a price, else of the first order parked there."""
        for side in (BUY, SELL):
            if self.levels[side].get(price):
                return side
        for o in self.parked:
            if o.price == price:
                return o.side
        return None

    def find(self, oid: int):
        o = self.orders.get(oid)
        if o is None:
            return None
        return (o.side, o.price, o.qty)

    def participant(self, oid: int):
        o = self.orders.get(oid)
        return None if o is None else o.participant

    def bbo(self):
        """(bid_price, bid_qty, ask_price, ask_qty, bid_count, ask_count); empty side -> 0s."""
        b = self.best(BUY)
        a = self.best(SELL)
        bp, bq, bc = b if b is not None else (0, 0, 0)
        ap, aq, ac = a if a is not None else (0, 0, 0)
        return (bp, bq, ap, aq, bc, ac)

    def snapshot(self):
        """{side: [(price, [(id, qty), ...]), ...] best first} -- a deep, immutable copy."""
        out = {}
        for side in (BUY, SELL):
            lv = self.view(side)
            out[side] = [
                (p, [(o.id, o.qty) for o in lv[p]])
                for p in sorted(lv, reverse=(side == BUY))
            ]
        return out

    def check(self) -> None:
        """Recompute every invariant from scratch; raise RefError if one fails."""
        seen = {}
        for side in (BUY, SELL):
            for p, q in self.levels[side].items():
                if not q:
                    raise RefError(f"empty level {p} kept on side {chr(side)}")
                if p < self.low or p > self.high or (p - self.low) % self.tick:
                    raise RefError(f"level price {p} not a valid band price")
                for o in q:
                    if o.side != side or o.price != p:
                        raise RefError(f"order {o.id} filed under the wrong level")
                    if o.qty <= 0:
                        raise RefError(f"order {o.id} with qty {o.qty} still resting")
                    if o.id in seen:
                        raise RefError(f"order {o.id} queued twice")
                    if self.orders.get(o.id) is not o:
                        raise RefError(f"order {o.id} queued but not indexed")
                    seen[o.id] = o
        for o in self.parked:
            if o.id in seen or self.orders.get(o.id) is not o:
                raise RefError(f"parked order {o.id} queued twice or not indexed")
            seen[o.id] = o
        if self.parked and not self.halted:
            raise RefError("parked orders in a book that is not halted")
        if len(seen) != len(self.orders):
            raise RefError("indexed orders missing from the levels")
        if len(self.orders) > self.capacity:
            raise RefError("more live orders than capacity")
        bb, ba = self.best_price(BUY, False), self.best_price(SELL, False)  # the matching book
        if bb is not None and ba is not None and bb >= ba:
            raise RefError(f"book crossed: bid {bb} >= ask {ba}")

    # ---- mutation helpers -------------------------------------------------

    def _remove(self, o: Order) -> None:
        del self.orders[o.id]
        if o in self.parked:
            self.parked.remove(o)
            return
        q = self.levels[o.side][o.price]
        q.remove(o)
        if not q:
            del self.levels[o.side][o.price]

    def _rest(self, oid: int, side: int, price: int, qty: int, participant: int = 0) -> None:
        o = Order(oid, side, price, qty, participant)
        self.orders[oid] = o
        self.levels[side].setdefault(price, []).append(o)

    @staticmethod
    def _crosses(side: int, limit, maker_price: int) -> bool:
        if limit is None:  # MARKET: any price
            return True
        return maker_price <= limit if side == BUY else maker_price >= limit

    def crossing_qty(self, side: int, limit) -> int:
        """Total opposite quantity an incoming order on `side` could trade with."""
        opp = self.levels[SELL if side == BUY else BUY]
        return sum(
            o.qty
            for p, q in opp.items()
            if self._crosses(side, limit, p)
            for o in q
        )

    def _match(self, taker_id: int, side: int, limit, qty: int):
        """Trade an incoming order against the opposite side. Returns (filled, execs)."""
        opp_side = SELL if side == BUY else BUY
        opp = self.levels[opp_side]
        execs = []
        remaining = qty
        while remaining > 0 and opp:
            p = min(opp) if side == BUY else max(opp)
            if not self._crosses(side, limit, p):
                break
            q = opp[p]
            while remaining > 0 and q:
                maker = q[0]
                t = min(remaining, maker.qty)
                maker.qty -= t
                remaining -= t
                execs.append((maker.id, taker_id, p, t, maker.qty))
                if maker.qty == 0:
                    q.pop(0)
                    del self.orders[maker.id]
            if not q:
                del opp[p]
        return qty - remaining, execs

    def _plan(self, side: int, limit, qty: int, notional: bool, participant: int, stp: int):
        """What an extended order (STP and/or NOTIONAL) would do, without doing it.
        Returns (actions, filled, stopped); actions are ("trade", order, shares),
        ("cancel", order) and ("stop", order), in order."""
        opp_side = SELL if side == BUY else BUY
        opp = self.levels[opp_side]
        prices = sorted((p for p in opp if self._crosses(side, limit, p)), reverse=(opp_side == BUY))
        makers = [o for p in prices for o in opp[p]]  # every order it could meet, priority order
        actions, filled, stopped = [], 0, False
        left = qty  # shares, or the budget
        for o in makers:
            if notional:
                can = min(o.qty, left // o.price) if o.price > 0 else 0
            else:
                can = min(o.qty, left)
            if can == 0:
                break
            if stp and o.participant == participant:
                if stp & STP_RESTING:
                    actions.append(("cancel", o))
                if stp & STP_INCOMING:
                    actions.append(("stop", o))
                    stopped = True
                    break
                continue
            actions.append(("trade", o, can))
            filled += can
            left -= can * o.price if notional else can
            if can < o.qty:  # a maker filled in part: it cannot take another share of it, so it stops
                break
        return actions, filled, stopped

    def _do(self, actions, taker_id: int):
        """Carry out a plan; the execution tuples (STP records have qty <= 0)."""
        execs = []
        for a in actions:
            o = a[1]
            if a[0] == "trade":
                o.qty -= a[2]
                execs.append((o.id, taker_id, o.price, a[2], o.qty))
                if o.qty == 0:
                    self._remove(o)
            elif a[0] == "cancel":
                execs.append((o.id, taker_id, o.price, -o.qty, 0))
                self._remove(o)
            else:  # stop: the resting order stays unless cancelled just before
                execs.append((o.id, taker_id, o.price, 0, o.qty if o.id in self.orders else 0))
        return execs

    # ---- the event -------------------------------------------------------

    def _price_status(self, price: int) -> int:
        if price < self.low or price > self.high:
            return EBAND
        if (price - self.low) % self.tick != 0:
            return EPRICE
        return OK

    def _rest_feed(self, oid: int, side: int, price: int, qty: int, participant: int = 0):
        """A FEED order rests whole: every opposite order it crosses is stale
        and removed first (best price first, FIFO), one CROSSED desync each."""
        opp_side = SELL if side == BUY else BUY
        desyncs = []
        while True:
            p = self.best_price(opp_side, False)
            if p is None or not self._crosses(side, price, p):
                break
            stale = self.levels[opp_side][p][0]
            desyncs.append((stale.id, oid, qty, stale.qty, price, stale.price, CROSSED))
            self._remove(stale)
        self._rest(oid, side, price, qty, participant)
        return desyncs

    def _exec(self, o: Order, qty: int, price: int, flags: int):
        """A feed's fill of resting order o. Returns (status, filled, resting, execs, desyncs)."""
        execs, desyncs = [], []
        if not flags & NOCHECK and o not in self.parked:  # (parked orders have no priority)
            # the fill price-time priority gives: the front of the best level of o's side
            bp = self.best_price(o.side, False)
            front = self.levels[o.side][bp][0]
            t = min(front.qty, qty)
            execs.append((front.id, 0, bp, t, front.qty - t))
            if front is not o:
                desyncs.append((o.id, front.id, qty, o.qty, o.price, front.price, FILL_ORDER))
        if flags & PRICE and not flags & NOCHECK and price != o.price:
            desyncs.append((o.id, 0, qty, o.qty, price, o.price, EXEC_PRICE))
        # the feed is the truth: o loses qty shares and keeps its place
        had = o.qty
        if qty > had:
            # expected_price: the event's price field as given (with or without PRICE)
            desyncs.append((o.id, 0, qty, had, price, o.price, QTY))
        taken = min(qty, had)
        o.qty = had - taken
        if o.qty == 0:
            self._remove(o)
        return (OK, taken, o.qty, execs, desyncs)

    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        """Apply one event. Returns (status, filled, resting, execs, desyncs)."""
        # 2./3. kind and flag bits, then side/tif/participant of a NEW
        if kind not in (NEW, CANCEL, REDUCE, REPLACE, EXEC, STATE) or flags & ~KNOWN_FLAGS:
            return (EKIND, 0, 0, [], [])
        feed = bool(flags & FEED)
        if flags & ORDER_FLAGS:
            if kind not in (NEW, REPLACE):
                return (EKIND, 0, 0, [], [])
            if flags & STP_BOTH and feed:
                return (EKIND, 0, 0, [], [])
            if flags & NOTIONAL and not (kind == NEW and tif == MARKET):
                return (EKIND, 0, 0, [], [])
        if kind == NEW and (
            side not in (BUY, SELL) or tif not in (GTC, IOC, FOK, MARKET) or (feed and tif != GTC)
            or new_id > MAX_PARTICIPANT
        ):
            return (EKIND, 0, 0, [], [])
        if kind == STATE:
            return self._state(qty)
        # 4. quantity
        if kind != CANCEL and qty <= 0:
            return (EQTY, 0, 0, [], [])
        # 5. band and tick grid
        if (kind == NEW and tif != MARKET) or kind == REPLACE:
            st = self._price_status(price)
            if st != OK:
                return (st, 0, 0, [], [])
        # 6. unknown id
        if kind != NEW and oid not in self.orders:
            return (EUNKNOWN_ID, 0, 0, [], [])
        # 7. duplicate id
        if kind == NEW and oid in self.orders:
            return (EDUP_ID, 0, 0, [], [])
        if kind == REPLACE and new_id != oid and new_id in self.orders:
            return (EDUP_ID, 0, 0, [], [])

        if kind == CANCEL:
            self._remove(self.orders[oid])
            return (OK, 0, 0, [], [])

        if kind == EXEC:
            return self._exec(self.orders[oid], qty, price, flags)

        if kind == REDUCE:
            o = self.orders[oid]
            # 8. reduce by more than remains: a reject, or (FEED) the order leaves
            if qty > o.qty:
                if not feed:
                    return (EQTY, 0, 0, [], [])
                desync = (oid, 0, qty, o.qty, 0, o.price, QTY)  # a REDUCE has no price: 0
                self._remove(o)
                return (OK, 0, 0, [], [desync])
            o.qty -= qty  # keeps its place in the queue
            if o.qty == 0:
                self._remove(o)
            return (OK, 0, o.qty, [], [])

        if self.halted:  # nothing matches: the order is parked
            if kind == REPLACE:
                old = self.orders[oid]
                self._remove(old)
                side, participant = old.side, old.participant
            else:
                if tif != GTC:
                    return (OK, 0, 0, [], [])
                if len(self.orders) >= self.capacity:
                    return (EFULL, 0, 0, [], [])
                participant, new_id = new_id, oid
            o = Order(new_id, side, price, qty, participant)
            self.orders[new_id] = o
            self.parked.append(o)
            return (OK, 0, qty, [], [])

        stp = flags & STP_BOTH
        notional = bool(flags & NOTIONAL)

        if kind == REPLACE:
            old = self.orders[oid]
            side = old.side
            participant = old.participant  # a replace keeps the participant
            self._remove(old)
            if feed:
                return (OK, 0, qty, [], self._rest_feed(new_id, side, price, qty, participant))
            if stp and participant:
                actions, filled, stopped = self._plan(side, price, qty, False, participant, stp)
                execs = self._do(actions, new_id)
            else:
                (filled, execs), stopped = self._match(new_id, side, price, qty), False
            resting = 0 if stopped else qty - filled
            if resting > 0:
                self._rest(new_id, side, price, resting, participant)
            return (OK, filled, resting, execs, [])

        # NEW
        participant = new_id
        if not participant:
            stp = 0  # no participant: the STP bits change nothing
        limit = None if tif == MARKET else price
        if notional or stp:
            actions, filled, stopped = self._plan(side, limit, qty, notional, participant, stp)
            if tif == FOK and filled < qty:
                return (OK, 0, 0, [], [])  # killed: nothing changes, no STP either
            if tif == GTC and len(self.orders) >= self.capacity and not stopped and filled < qty:
                return (EFULL, 0, 0, [], [])
            execs = self._do(actions, oid)
            resting = 0
            if tif == GTC and filled < qty and not stopped:
                resting = qty - filled
                self._rest(oid, side, price, resting, participant)
            return (OK, filled, resting, execs, [])
        if tif == FOK and self.crossing_qty(side, limit) < qty:
            return (OK, 0, 0, [], [])  # killed: all or nothing
        if feed:
            # 10. it never trades and rests whole: on a full book it is EFULL
            # unless it meets a stale order, whose removal makes room for it
            if len(self.orders) >= self.capacity and self.crossing_qty(side, limit) == 0:
                return (EFULL, 0, 0, [], [])
            return (OK, 0, qty, [], self._rest_feed(oid, side, price, qty, participant))
        if (
            tif == GTC
            and len(self.orders) >= self.capacity
            and self.crossing_qty(side, limit) < qty
        ):
            return (EFULL, 0, 0, [], [])
        filled, execs = self._match(oid, side, limit, qty)
        resting = 0
        if tif == GTC and filled < qty:
            resting = qty - filled
            self._rest(oid, side, price, resting, participant)
        return (OK, filled, resting, execs, [])


    def _state(self, qty: int):
        if qty not in (0, 1):
            return (EQTY, 0, 0, [], [])
        desyncs = []
        if qty == 1:
            self.halted = True
        elif self.halted:
            self.halted = False
            while self.parked:
                o = self.parked.pop(0)
                del self.orders[o.id]
                desyncs += self._rest_feed(o.id, o.side, o.price, o.qty, o.participant)
        return (OK, 0, len(self.parked), [], desyncs)


class RefSession:
    """Books keyed by instrument id 0..max_instrument."""

    def __init__(self, max_instrument: int):
        if max_instrument < 0:
            raise ValueError("max_instrument must be >= 0")
        self.max_instrument = max_instrument
        self.books: dict[int, RefBook] = {}

    def add_book(self, instrument: int, low: int, high: int, tick: int, capacity: int) -> RefBook:
        if instrument < 0 or instrument > self.max_instrument or instrument in self.books:
            raise ValueError("bad instrument")
        b = RefBook(low, high, tick, capacity)
        self.books[instrument] = b
        return b

    def book(self, instrument: int):
        return self.books.get(instrument)

    def apply(self, event):
        """event = (id, new_id, price, qty, instrument, kind, side, tif, flags).

        Returns (status, filled, resting, execs, bbo, desyncs) -- see the module docstring.
        """
        oid, new_id, price, qty, instrument, kind, side, tif, flags = event
        book = self.books.get(instrument) if instrument <= self.max_instrument else None
        if book is None:
            return (EINSTRUMENT, 0, 0, [], (0, 0, 0, 0, 0, 0, 0), [])
        before = book.bbo()
        status, filled, resting, execs, desyncs = book.apply(
            kind, oid, new_id, price, qty, side, tif, flags)
        after = book.bbo()
        return (status, filled, resting, execs, after + (int(after != before),), desyncs)

    def snapshot(self):
        return {i: b.snapshot() for i, b in self.books.items()}

    def participants(self):
        """{instrument: {order id: participant}} for the live orders with one."""
        return {i: {o.id: o.participant for o in b.orders.values() if o.participant}
                for i, b in self.books.items()}

    def check(self) -> None:
        for b in self.books.values():
            b.check()


def load_events(snapshot_of_book):
    """NEW GTC events (as (id, side, price, qty) tuples) that rebuild a book
    snapshot from empty: every level's orders in queue order.  Because a
    snapshot is never crossed, none of them trades."""
    out = []
    for side in (BUY, SELL):
        for price, orders in snapshot_of_book[side]:
            for oid, qty in orders:
                out.append((oid, side, price, qty))
    return out
