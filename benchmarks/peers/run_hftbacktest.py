"""hftbacktest: Level-3 replay of the day's event arrays (prep_hftbacktest.py) through
its Rust backtester, HashMapMarketDepthBacktest (l3_fifo_queue_model,
no_partial_fill_exchange, tick 1, lot 1), elapsed to the checkpoint and then to the
end of the data.

    --assets per-symbol   one single-asset backtest per symbol, one after the other
                          (symbols are independent, so the books are the same)
    --assets all          one backtest holding every symbol as an asset, as a
                          multi-asset strategy would run it
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

EMPTY_BID, EMPTY_ASK = -(2 ** 63), 2 ** 63 - 1


def main() -> int:
    ap = common.parser(__doc__)
    ap.add_argument("--npz", required=True)
    ap.add_argument("--assets", choices=("per-symbol", "all"), default="per-symbol")
    a = ap.parse_args()
    import numpy as np
    import hftbacktest as hb
    from hftbacktest import binding as B

    symbols = common.load_symbols(a.symbols)
    target = 2 * a.checkpoint_message + 1       # event timestamps are 2 x 1-based sequence

    def bbo(depth) -> list[int]:
        b, a_ = B.hashmapdepth_best_bid_tick(depth), B.hashmapdepth_best_ask_tick(depth)
        return [0 if b == EMPTY_BID else int(b), 0 if b == EMPTY_BID else int(B.hashmapdepth_best_bid_qty(depth)),
                0 if a_ == EMPTY_ASK else int(a_), 0 if a_ == EMPTY_ASK else int(B.hashmapdepth_best_ask_qty(depth))]

    clock = common.Clock()
    with np.load(a.npz) as z:
        events, bounds = z["events"], z["bounds"]
    clock.lap("load npz")
    checkpoint, final = {}, {}
    replayed = 0

    def asset(rows):
        return (hb.BacktestAsset().data(rows).linear_asset(1.0).constant_order_latency(0, 0)
                .l3_fifo_queue_model().no_partial_fill_exchange().tick_size(1.0).lot_size(1.0))

    def run(bt, names: list[str]) -> None:
        B.hashmapbt_elapse(bt, 0)                 # starts the clock at the first event
        now = B.hashmapbt_current_timestamp(bt)
        if target > now:
            B.hashmapbt_elapse(bt, target - now)
        for i, sym in enumerate(names):
            checkpoint[sym] = bbo(B.hashmapbt_depth(bt, i))
        B.hashmapbt_goto_end(bt)
        for i, sym in enumerate(names):
            final[sym] = bbo(B.hashmapbt_depth(bt, i))
        B.hashmapbt_close(bt)

    names, assets = [], []
    for locate, sym in symbols.items():
        rows = events[bounds[locate]:bounds[locate + 1]]
        if len(rows) == 0:
            checkpoint[sym] = final[sym] = [0, 0, 0, 0]
            continue
        replayed += len(rows)
        if a.assets == "per-symbol":
            run(hb.build_hashmap_backtest([asset(rows)]), [sym])
        else:
            names.append(sym)
            assets.append(asset(rows))
    if assets:
        run(hb.build_hashmap_backtest(assets), names)
    clock.lap("replay")
    common.write(a.out, tool="hftbacktest", version=common.version("hftbacktest"),
                 mode=f"L3 replay of converted events, assets={a.assets}", messages=None, seconds=clock.total(),
                 phases=clock.phases, checkpoint=checkpoint, final=final, stats={"events": replayed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
