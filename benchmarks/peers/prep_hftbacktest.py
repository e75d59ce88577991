"""ITCH day -> hftbacktest Level-3 (market-by-order) event arrays, one per symbol.

hftbacktest reads no ITCH: it replays its own event rows (hftbacktest.types.event_dtype),
as its converters for other feeds (e.g. hftbacktest.data.utils.databento) produce.
This conversion decodes the day with itch-book's `messages` table (order by order,
with the resting order's side and price already looked up for E/C/X/D/U) and maps:

    A, F                      -> ADD_ORDER_EVENT (side, price, shares)
    E, C, X leaving shares    -> MODIFY_ORDER_EVENT (same price, the shares left)
    E, C, X leaving none; D   -> CANCEL_ORDER_EVENT
    U                         -> CANCEL_ORDER_EVENT (old reference) + ADD_ORDER_EVENT (new)

Events carry LOCAL_EVENT only (the book a strategy sees; EXCH_EVENT would also
have the exchange model keep a second copy of every book for fill simulation).
Timestamps are 2 x the message's 1-based sequence number, so the harness can stop
every book exactly after message K (at 2K + 1). Prices are ITCH integers with
tick size 1. Writes OUT.npz: events sorted by locate (stable) and bounds[locate].
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--npz", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import numpy as np
    import hftbacktest as hb
    from itch_book._core import Session

    clock = common.Clock()
    session = Session(tables=["messages"], depth=0, symbols=[])
    session.reserve(1 << 20)
    parts = []
    with open(a.file, "rb") as f:
        while buf := f.read(8 << 20):
            session.feed(buf)
            if session.rows() >= 1_000_000:
                parts.append(session.take_messages())
    parts.append(session.take_messages())
    stats = session.stats()
    keep = ("seq", "locate", "type", "action", "side", "px", "size", "remaining", "order_id", "old_order_id")
    cols = {k: np.concatenate([p[k] for p in parts]) for k in keep}
    del parts
    clock.lap("decode (itch-book messages)")

    typ, act, side, px, rem = cols["type"], cols["action"], cols["side"], cols["px"], cols["remaining"]
    oid, old, loc = cols["order_id"], cols["old_order_id"], cols["locate"]
    seq = cols["seq"].astype(np.int64)
    known = side != ord("N")                         # unknown references changed nothing
    is_u = (typ == ord("U")) & known
    is_add = ((act == ord("A")) & known) | is_u
    reduce = ((act == ord("F")) | (act == ord("C"))) & known
    gone = reduce & ((typ == ord("D")) | (rem == 0))
    modify = reduce & ~gone
    # the resting price of every order (E/C/X keep it; C's px is the execution price)
    ids, idpx = oid[is_add], px[is_add]
    o = np.argsort(ids)
    ids, idpx = ids[o], idpx[o]
    rest_px = idpx[np.clip(np.searchsorted(ids, oid[modify]), 0, len(ids) - 1)]
    keep_row = is_add | reduce
    cnt = (keep_row.astype(np.int64) + is_u)
    pos = np.cumsum(cnt) - 1                          # each row's last event
    ev = np.zeros(int(cnt.sum()), hb.types.event_dtype)
    sidef = np.where(side == ord("B"), hb.BUY_EVENT, hb.SELL_EVENT).astype(np.uint64) | np.uint64(hb.LOCAL_EVENT)
    code = np.zeros(len(typ), np.uint64)
    code[is_add] = hb.ADD_ORDER_EVENT
    code[modify] = hb.MODIFY_ORDER_EVENT
    code[gone] = hb.CANCEL_ORDER_EVENT
    r = keep_row
    p = pos[r]
    ev["ev"][p] = code[r] | sidef[r]
    price = px.astype(np.float64)
    price[modify] = rest_px
    qty = cols["size"].astype(np.float64)
    qty[modify] = rem[modify]
    ev["px"][p] = price[r]
    ev["qty"][p] = qty[r]
    ev["order_id"][p] = oid[r]
    ev["local_ts"][p] = ev["exch_ts"][p] = 2 * seq[r]
    u = pos[is_u] - 1                                 # U: the cancel of the old reference first
    ev["ev"][u] = np.uint64(hb.CANCEL_ORDER_EVENT) | sidef[is_u]
    ev["order_id"][u] = old[is_u]
    ev["px"][u] = price[is_u]
    ev["local_ts"][u] = ev["exch_ts"][u] = 2 * seq[is_u]
    evloc = np.repeat(loc[r], cnt[r])
    order = np.argsort(evloc, kind="stable")
    ev = ev[order]
    bounds = np.searchsorted(evloc[order], np.arange(65537))
    clock.lap("map to events")
    np.savez(a.npz, events=ev, bounds=bounds)
    clock.lap("write npz")
    common.write(a.out, tool="hftbacktest conversion", version=common.version("hftbacktest"),
                 mode="itch-book messages -> L3 events", messages=stats["messages"], seconds=clock.total(),
                 phases=clock.phases, events=len(ev), checkpoint={}, final={},
                 stats={"missing_ref": stats["missing_ref"], "rows": int(len(typ))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
