// bench_core.cpp -- the core benchmark of lobreplay on the "seed workload".
//
// 1. Record a seeded, closed-loop order flow (the generator drives a model of
//    the book -- the textbook book below -- so it knows which orders are live).
// 2. Replay the recorded stream on FRESH sessions of the C core
//    (lob_session_apply in chunks and in one whole-array call) and on a
//    textbook book (std::map levels of std::list orders, std::unordered_map
//    index, default allocators), alternating runs in one process.
// 3. Single-shot tail: one event per lob_session_apply call with the core's
//    per-event timing on; percentiles from the core's histograms.
// 4. Allocations in the timed region: lob_alloc_count() for the core, a
//    counting global operator new for the textbook.
// 5. CHECK that both books produced the same per-event results, the same
//    executions and the same final state; exit non-zero if not.
// 6. Floors: parts of the work (reading and dispatching the events, the id
//    index and order records) timed alone on the same stream, in the same
//    alternating runs, as a bound on what any core can reach here.
//    (namespace floors below.)
//
// Build (see run_core.sh):
//   gcc -O2 -std=c11 -c csrc/core/lob.c -o build/lob.o
//   g++ -O2 -std=c++17 -Icsrc/core benchmarks/bench_core.cpp build/lob.o -o build/bench_core
//
// The generator never runs in a timed region: the whole stream is recorded
// into memory first.

#include "lob.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/mman.h>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

// ---------------------------------------------------------------------------
// Allocation counting for the C++ side (the textbook book). Every operator
// new in this program is counted; the harness itself never allocates inside a
// timed region, so the count taken around a timed region is the textbook's.
// The core's allocations go through its own counting malloc wrapper
// (lob_alloc_count) and are not seen here.
// ---------------------------------------------------------------------------
static uint64_t g_new_count = 0;

void *operator new(std::size_t n) {
    ++g_new_count;
    void *p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
void *operator new[](std::size_t n) {
    ++g_new_count;
    void *p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }

// ---------------------------------------------------------------------------
// PRNG: splitmix64 (own implementation), integer-only helpers so the stream
// is identical on every platform for a given seed.
// ---------------------------------------------------------------------------
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    // uniform in [0, n) (multiply-shift; bias < n / 2^64)
    uint64_t below(uint64_t n) { return (uint64_t)(((unsigned __int128)next() * n) >> 64); }
    // true with probability thresh / 2^64
    bool hit(uint64_t thresh) { return next() < thresh; }
    // number of successes before the first failure, success prob thresh/2^64, capped
    int geometric(uint64_t thresh, int cap) {
        int k = 0;
        while (k < cap && next() < thresh) ++k;
        return k;
    }
};

static uint64_t prob(double p) {  // probability -> 64-bit threshold
    if (p <= 0) return 0;
    if (p >= 1) return ~0ULL;
    return (uint64_t)(p * 18446744073709551616.0);
}

static inline int64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// ---------------------------------------------------------------------------
// The textbook book: std::map<price, level> per side, level = std::list of
// orders (FIFO), std::unordered_map<id, ref> index; default allocators, so
// one malloc per list node, per map node and per hash node. Same semantics
// as lob.h for NEW (GTC/IOC/FOK/MARKET), CANCEL, REDUCE and REPLACE; trades
// at the maker's price, FIFO within a level.
// ---------------------------------------------------------------------------
namespace textbook {

struct Order {
    uint64_t id;
    int64_t qty;
};
using Queue = std::list<Order>;
struct Level {
    Queue q;
    int64_t total = 0;
};
struct Ref {
    Level *lvl;
    Queue::iterator it;
    int64_t price;
    uint8_t side;
};

class Book {
public:
    Book(int64_t low, int64_t high, int64_t tick, uint32_t cap)
        : low_(low), high_(high), tick_(tick), cap_(cap) {}

    uint32_t order_count() const { return (uint32_t)index_.size(); }

    // Best level of a side: 1 and price/qty/count, or 0 if empty.
    int best(uint8_t side, int64_t *price, int64_t *qty, uint32_t *count) const {
        if (side == LOB_BUY) return best_of(bids_, price, qty, count);
        return best_of(asks_, price, qty, count);
    }

    // Apply one event; executions appended at execs[*n_exec...].
    lob_result apply(const lob_event &e, uint32_t idx, lob_exec *execs, size_t *n_exec) {
        lob_result r{0, 0, 0, LOB_OK};
        switch (e.kind) {
        case LOB_NEW: {
            if (e.side != LOB_BUY && e.side != LOB_SELL) return reject(r, LOB_EKIND);
            if (e.tif > LOB_MARKET) return reject(r, LOB_EKIND);
            if (e.qty <= 0) return reject(r, LOB_EQTY);
            if (e.tif != LOB_MARKET) {
                int st = check_price(e.price);
                if (st) return reject(r, st);
            }
            if (index_.count(e.id)) return reject(r, LOB_EDUP_ID);
            const bool market = e.tif == LOB_MARKET;
            if (e.tif == LOB_FOK) {
                if (available(e.side, e.price, false, e.qty) < e.qty) {
                    r.resting = 0;  // killed, nothing changes
                    return r;
                }
            }
            if (e.tif == LOB_GTC && index_.size() >= cap_) {
                if (available(e.side, e.price, false, e.qty) < e.qty) return reject(r, LOB_EFULL);
            }
            size_t before = *n_exec;
            int64_t left = match(e.side, e.price, market, e.id, e.qty, idx, e.instrument, execs, n_exec);
            r.filled = e.qty - left;
            r.n_exec = (uint32_t)(*n_exec - before);
            if (left > 0 && e.tif == LOB_GTC) {
                rest(e.side, e.price, e.id, left);
                r.resting = left;
            }
            return r;
        }
        case LOB_CANCEL: {
            auto it = index_.find(e.id);
            if (it == index_.end()) return reject(r, LOB_EUNKNOWN_ID);
            remove(it);
            return r;
        }
        case LOB_REDUCE: {
            auto it = index_.find(e.id);
            if (it == index_.end()) return reject(r, LOB_EUNKNOWN_ID);
            Ref &ref = it->second;
            if (e.qty <= 0 || e.qty > ref.it->qty) return reject(r, LOB_EQTY);
            if (e.qty == ref.it->qty) {
                remove(it);
                r.resting = 0;
            } else {
                ref.it->qty -= e.qty;
                ref.lvl->total -= e.qty;
                r.resting = ref.it->qty;
            }
            return r;
        }
        case LOB_REPLACE: {
            auto it = index_.find(e.id);
            if (it == index_.end()) return reject(r, LOB_EUNKNOWN_ID);
            if (index_.count(e.new_id)) return reject(r, LOB_EDUP_ID);
            if (e.qty <= 0) return reject(r, LOB_EQTY);
            int st = check_price(e.price);
            if (st) return reject(r, st);
            uint8_t side = it->second.side;
            remove(it);
            size_t before = *n_exec;
            int64_t left = match(side, e.price, false, e.new_id, e.qty, idx, e.instrument, execs, n_exec);
            r.filled = e.qty - left;
            r.n_exec = (uint32_t)(*n_exec - before);
            if (left > 0) {
                rest(side, e.price, e.new_id, left);
                r.resting = left;
            }
            return r;
        }
        default:
            return reject(r, LOB_EKIND);
        }
    }

    // --- read access for the generator (not used in timed regions) ---
    // Quantity an aggressive order on `side` limited at `limit` would need to
    // fill the first n whole resting orders it can reach, plus `partial_of`
    // applied to the (n+1)-th order's remaining size (a fraction in 1/2^32).
    // Returns 0 when nothing is reachable.
    int64_t qty_to_take(uint8_t side, int64_t limit, int n, Rng &rng) const {
        if (side == LOB_BUY) return take(asks_, [&](int64_t p) { return p <= limit; }, n, rng);
        return take(bids_, [&](int64_t p) { return p >= limit; }, n, rng);
    }
    size_t level_count(uint8_t side) const { return side == LOB_BUY ? bids_.size() : asks_.size(); }

private:
    using Bids = std::map<int64_t, Level, std::greater<int64_t>>;
    using Asks = std::map<int64_t, Level>;
    using Index = std::unordered_map<uint64_t, Ref>;

    static lob_result &reject(lob_result &r, int st) {
        r.status = st;
        return r;
    }
    int check_price(int64_t p) const {
        if (p < low_ || p > high_) return LOB_EBAND;
        if ((p - low_) % tick_ != 0) return LOB_EPRICE;
        return LOB_OK;
    }
    template <class Map>
    static int best_of(const Map &m, int64_t *price, int64_t *qty, uint32_t *count) {
        if (m.empty()) {
            *price = 0; *qty = 0; *count = 0;
            return 0;
        }
        auto it = m.begin();
        *price = it->first;
        *qty = it->second.total;
        *count = (uint32_t)it->second.q.size();
        return 1;
    }

    template <class Map, class Crosses>
    static int64_t avail_in(const Map &m, Crosses crosses, int64_t need) {
        int64_t sum = 0;
        for (auto it = m.begin(); it != m.end() && sum < need; ++it) {
            if (!crosses(it->first)) break;
            sum += it->second.total;
        }
        return sum;
    }
    int64_t available(uint8_t side, int64_t limit, bool market, int64_t need) const {
        if (side == LOB_BUY)
            return avail_in(asks_, [&](int64_t p) { return market || p <= limit; }, need);
        return avail_in(bids_, [&](int64_t p) { return market || p >= limit; }, need);
    }

    template <class Map, class Crosses>
    int64_t match_in(Map &opp, Crosses crosses, uint64_t taker, int64_t qty, uint32_t idx,
                     uint32_t instr, lob_exec *execs, size_t *n_exec) {
        while (qty > 0 && !opp.empty()) {
            auto lit = opp.begin();
            const int64_t price = lit->first;
            if (!crosses(price)) break;
            Level &lvl = lit->second;
            while (qty > 0 && !lvl.q.empty()) {
                Order &m = lvl.q.front();
                const int64_t t = qty < m.qty ? qty : m.qty;
                m.qty -= t;
                lvl.total -= t;
                qty -= t;
                lob_exec &x = execs[(*n_exec)++];
                x.maker_id = m.id;
                x.taker_id = taker;
                x.price = price;
                x.qty = t;
                x.maker_remaining = m.qty;
                x.event_index = idx;
                x.instrument = instr;
                if (m.qty == 0) {
                    index_.erase(m.id);
                    lvl.q.pop_front();
                }
            }
            if (lvl.q.empty()) opp.erase(lit);
        }
        return qty;
    }
    int64_t match(uint8_t side, int64_t limit, bool market, uint64_t taker, int64_t qty,
                  uint32_t idx, uint32_t instr, lob_exec *execs, size_t *n_exec) {
        if (side == LOB_BUY)
            return match_in(asks_, [&](int64_t p) { return market || p <= limit; }, taker, qty, idx,
                            instr, execs, n_exec);
        return match_in(bids_, [&](int64_t p) { return market || p >= limit; }, taker, qty, idx,
                        instr, execs, n_exec);
    }

    void rest(uint8_t side, int64_t price, uint64_t id, int64_t qty) {
        Level &lvl = side == LOB_BUY ? bids_[price] : asks_[price];
        lvl.q.push_back(Order{id, qty});
        lvl.total += qty;
        index_.emplace(id, Ref{&lvl, std::prev(lvl.q.end()), price, side});
    }
    void remove(Index::iterator it) {
        Ref &ref = it->second;
        Level *lvl = ref.lvl;
        lvl->total -= ref.it->qty;
        lvl->q.erase(ref.it);
        if (lvl->q.empty()) {
            if (ref.side == LOB_BUY) bids_.erase(ref.price);
            else asks_.erase(ref.price);
        }
        index_.erase(it);
    }

    template <class Map, class Crosses>
    static int64_t take(const Map &m, Crosses crosses, int n, Rng &rng) {
        int64_t sum = 0;
        for (auto it = m.begin(); it != m.end(); ++it) {
            if (!crosses(it->first)) break;
            for (const Order &o : it->second.q) {
                if (n > 0) {
                    sum += o.qty;
                    --n;
                } else {
                    // a part of the next order: 1 .. qty-1 when it has more than one share
                    if (o.qty > 1) sum += 1 + (int64_t)rng.below((uint64_t)(o.qty - 1));
                    return sum;
                }
            }
        }
        return sum;
    }

    int64_t low_, high_, tick_;
    uint32_t cap_;
    Bids bids_;
    Asks asks_;
    Index index_;
};

// A session of textbook books, keyed by instrument (same shape as lob_session).
class Session {
public:
    explicit Session(uint32_t max_instrument) : books_(max_instrument + 1) {}
    void add_book(uint32_t instr, int64_t low, int64_t high, int64_t tick, uint32_t cap) {
        books_[instr].reset(new Book(low, high, tick, cap));
    }
    Book *book(uint32_t instr) { return instr < books_.size() ? books_[instr].get() : nullptr; }

    // Same calling convention as lob_session_apply (bbo not supported).
    // The exec array must have room for all executions (the harness sizes it so).
    int apply(const lob_event *ev, size_t n, lob_result *res, lob_exec *execs, size_t exec_cap,
              size_t *n_done, size_t *n_exec_out) {
        (void)exec_cap;
        size_t nx = 0;
        for (size_t i = 0; i < n; ++i) {
            const lob_event &e = ev[i];
            Book *b = e.instrument < books_.size() ? books_[e.instrument].get() : nullptr;
            if (!b) {
                res[i] = lob_result{0, 0, 0, LOB_EINSTRUMENT};
                continue;
            }
            res[i] = b->apply(e, (uint32_t)i, execs, &nx);
        }
        *n_done = n;
        *n_exec_out = nx;
        return LOB_OK;
    }

private:
    std::vector<std::unique_ptr<Book>> books_;
};

}  // namespace textbook

// ---------------------------------------------------------------------------
// The seed workload generator.
// ---------------------------------------------------------------------------
struct Params {
    uint64_t seed = 1;
    size_t warmup = 100000;
    size_t timed = 1000000;
    uint32_t instruments = 1;
    uint32_t resting = 10000;      // target live orders in steady state (all instruments)
    int64_t band_low = 1000000;    // feed units
    int64_t tick = 100;            // feed units per tick
    int64_t levels = 20000;        // band = [band_low, band_low + levels*tick]
    uint32_t capacity = 0;         // per book; 0: 4 x the per-book target + 1024
    // mix (steady state): adds 48%, cancels 37%, IOC takers 10%, modifies (REPLACE) 5%
    double p_add = 0.48, p_cancel = 0.37, p_ioc = 0.10, p_mod = 0.05;
    double p_mid_step = 0.02;      // random-walk step of the mid, per event of the instrument
    double dist_mean = 8.0;        // passive distance from the mid: geometric (ticks), this mean
    int max_dist = 400;
};

struct Stream {
    Params P;
    std::vector<lob_event> ev;  // warmup + timed
    // statistics from recording (model = textbook book)
    uint64_t kind_count[8] = {0};  // timed region: 1..4 by kind, 5 = IOC NEW
    uint64_t timed_execs = 0, timed_filled = 0, warm_execs = 0;
    uint64_t rejects = 0;
    uint32_t live_at_warm_end = 0, live_min = ~0u, live_max = 0;
    double live_mean = 0, spread_mean = 0, levels_mean = 0, best_count_mean = 0;
    size_t max_execs_per_event = 0;
};

struct LiveSet {  // live order ids of one instrument, O(1) add/remove/pick
    std::vector<uint64_t> ids;
    std::unordered_map<uint64_t, uint32_t> pos;
    void add(uint64_t id) {
        pos.emplace(id, (uint32_t)ids.size());
        ids.push_back(id);
    }
    void del(uint64_t id) {
        auto it = pos.find(id);
        if (it == pos.end()) return;
        uint32_t i = it->second;
        uint64_t last = ids.back();
        ids[i] = last;
        pos[last] = i;
        ids.pop_back();
        pos.erase(id);
    }
};

struct InstrState {
    int64_t mid;  // tick index; bids at mid - d, asks at mid + 1 + d (d >= 0)
    LiveSet live;
    std::unordered_map<uint64_t, uint8_t> side;  // side of each live order
    std::unordered_map<uint64_t, int64_t> price;  // price of each live order
};

static Stream record(const Params &P) {
    Stream S;
    S.P = P;
    const size_t total = P.warmup + P.timed;
    S.ev.reserve(total);
    Rng rng(P.seed);
    const int64_t band_high = P.band_low + P.levels * P.tick;
    const uint32_t K = P.instruments;
    const double target = (double)P.resting / K;

    textbook::Session model(K - 1);
    std::vector<InstrState> st(K);
    for (uint32_t k = 0; k < K; ++k) {
        model.add_book(k, P.band_low, band_high, P.tick, P.capacity);
        st[k].mid = P.levels / 2;
    }
    std::vector<lob_exec> ex(std::max<size_t>(1 << 16, (size_t)P.capacity + 1));  // >= execs of one event

    const uint64_t t_mid = prob(P.p_mid_step), t_dist = prob(P.dist_mean / (1.0 + P.dist_mean)), t_half = prob(0.5);
    const uint64_t t_oddlot = prob(0.10), t_lots = prob(0.65), t_modd = prob(0.5);
    const int64_t margin = 1000;  // mid stays this many ticks inside the band
    bool ramped = false;          // reached the target once (ends the build-up mix)
    uint64_t next_id = 1;
    double sum_live = 0, sum_spread = 0, sum_levels = 0, sum_bestc = 0;
    uint64_t n_spread = 0;
    uint32_t live_total = 0;

    auto rand_qty = [&]() -> int64_t {
        if (rng.hit(t_oddlot)) return 1 + (int64_t)rng.below(99);
        return 100 * (1 + rng.geometric(t_lots, 49));
    };
    auto px = [&](int64_t idx) { return P.band_low + idx * P.tick; };
    auto clamp_idx = [&](int64_t idx) { return std::max<int64_t>(0, std::min<int64_t>(P.levels, idx)); };

    for (size_t i = 0; i < total; ++i) {
        const bool timed = i >= P.warmup;
        const uint32_t k = K == 1 ? 0 : (uint32_t)rng.below(K);
        InstrState &I = st[k];
        textbook::Book &B = *model.book(k);
        if (rng.hit(t_mid)) {
            I.mid += rng.hit(t_half) ? 1 : -1;
            if (I.mid < margin) I.mid = margin;
            if (I.mid > P.levels - margin) I.mid = P.levels - margin;
        }
        const double live_k = (double)I.live.ids.size();
        if (!ramped && live_total >= P.resting) ramped = true;
        // event kind
        double pa = P.p_add, pc = P.p_cancel, pi = P.p_ioc;
        if (!ramped) { pa = 0.70; pc = 0.15; }  // build-up during warm-up only
        uint64_t u = rng.next();
        int kind;  // 0 add, 1 cancel, 2 ioc, 3 modify
        if (u < prob(pa)) kind = 0;
        else if (u < prob(pa + pc)) kind = 1;
        else if (u < prob(pa + pc + pi)) kind = 2;
        else kind = 3;
        if ((kind == 1 || kind == 3) && I.live.ids.empty()) kind = 0;

        int64_t bb = 0, bq = 0, ba = 0, aq = 0;
        uint32_t bc = 0, ac = 0;
        const bool has_bid = B.best(LOB_BUY, &bb, &bq, &bc);
        const bool has_ask = B.best(LOB_SELL, &ba, &aq, &ac);
        lob_event e;
        std::memset(&e, 0, sizeof e);
        e.instrument = k;
        if (kind == 0) {  // passive GTC at a geometric distance from the mid
            const uint8_t side = rng.hit(t_half) ? LOB_BUY : LOB_SELL;
            const int64_t d = rng.geometric(t_dist, P.max_dist);
            int64_t p = side == LOB_BUY ? px(clamp_idx(I.mid - d)) : px(clamp_idx(I.mid + 1 + d));
            // stay passive: never cross the opposite best
            if (side == LOB_BUY && has_ask && p >= ba) p = ba - P.tick;
            if (side == LOB_SELL && has_bid && p <= bb) p = bb + P.tick;
            p = std::max(P.band_low, std::min(band_high, p));
            e.kind = LOB_NEW; e.id = next_id++; e.side = side; e.price = p;
            e.qty = rand_qty(); e.tif = LOB_GTC;
        } else if (kind == 1) {  // cancel a live order (uniform)
            e.kind = LOB_CANCEL;
            e.id = I.live.ids[rng.below(I.live.ids.size())];
        } else if (kind == 2) {  // IOC taker crossing the opposite best by 1..6 ticks
            const uint8_t side = rng.hit(t_half) ? LOB_BUY : LOB_SELL;
            const bool opp = side == LOB_BUY ? has_ask : has_bid;
            const int64_t cross = (1 + (int64_t)rng.below(6)) * P.tick;
            int64_t limit;
            if (opp) limit = side == LOB_BUY ? ba + cross : bb - cross;
            else limit = side == LOB_BUY ? px(I.mid + 1) + cross : px(I.mid) - cross;
            limit = std::max(P.band_low, std::min(band_high, limit));
            // closed loop: how many whole orders this taker should remove; mean
            // 1.1 (= (adds - cancels) / takers) corrected by the distance to target.
            double m = 1.1 + (live_k - target) / (target * 0.02);
            m = std::max(0.05, std::min(20.0, m));
            const int n = rng.geometric(prob(m / (1.0 + m)), 200);
            int64_t q = B.qty_to_take(side, limit, n, rng);
            if (q <= 0) q = rand_qty();
            e.kind = LOB_NEW; e.id = next_id++; e.side = side; e.price = limit;
            e.qty = q; e.tif = LOB_IOC;
        } else {  // modify: REPLACE with a new id, a price near the old one, a new size
            const uint64_t old = I.live.ids[rng.below(I.live.ids.size())];
            const uint8_t side = I.side[old];
            const int64_t d = (1 + rng.geometric(t_modd, 20)) * (rng.hit(t_half) ? 1 : -1);
            int64_t p = I.price[old] + d * P.tick;
            if (side == LOB_BUY && has_ask && p >= ba) p = ba - P.tick;
            if (side == LOB_SELL && has_bid && p <= bb) p = bb + P.tick;
            p = std::max(P.band_low, std::min(band_high, p));
            e.kind = LOB_REPLACE; e.id = old; e.new_id = next_id++; e.price = p;
            e.qty = rand_qty();
        }
        // drive the model and track what is live
        size_t nx = 0;
        const uint8_t rside = e.kind == LOB_REPLACE ? I.side[e.id] : e.side;
        lob_result r = B.apply(e, 0, ex.data(), &nx);
        if (r.status != LOB_OK) {
            ++S.rejects;
        } else {
            for (size_t j = 0; j < nx; ++j)
                if (ex[j].maker_remaining == 0) {
                    I.live.del(ex[j].maker_id);
                    I.side.erase(ex[j].maker_id);
                    I.price.erase(ex[j].maker_id);
                    --live_total;
                }
            if (e.kind == LOB_CANCEL || e.kind == LOB_REPLACE) {
                I.live.del(e.id);
                I.side.erase(e.id);
                I.price.erase(e.id);
                --live_total;
            }
            const uint64_t rid = e.kind == LOB_REPLACE ? e.new_id : e.id;
            if ((e.kind == LOB_NEW || e.kind == LOB_REPLACE) && r.resting > 0) {
                I.live.add(rid);
                I.side[rid] = rside;
                I.price[rid] = e.price;
                ++live_total;
            }
        }
        S.max_execs_per_event = std::max(S.max_execs_per_event, nx);
        if (timed) {
            S.kind_count[e.kind]++;
            if (e.kind == LOB_NEW && e.tif == LOB_IOC) S.kind_count[5]++;
            S.timed_execs += nx;
            for (size_t j = 0; j < nx; ++j) S.timed_filled += (uint64_t)ex[j].qty;
            S.live_min = std::min(S.live_min, live_total);
            S.live_max = std::max(S.live_max, live_total);
            sum_live += live_total;
            if ((i & 63) == 0) {  // book shape, sampled
                int64_t b2, q2, a2, q3;
                uint32_t c2, c3;
                if (B.best(LOB_BUY, &b2, &q2, &c2) && B.best(LOB_SELL, &a2, &q3, &c3)) {
                    sum_spread += (double)(a2 - b2) / P.tick;
                    sum_levels += (double)(B.level_count(LOB_BUY) + B.level_count(LOB_SELL));
                    sum_bestc += 0.5 * (c2 + c3);
                    ++n_spread;
                }
            }
        } else {
            S.warm_execs += nx;
            if (i + 1 == P.warmup) S.live_at_warm_end = live_total;
        }
        S.ev.push_back(e);
    }
    S.live_mean = sum_live / (double)P.timed;
    if (n_spread) {
        S.spread_mean = sum_spread / n_spread;
        S.levels_mean = sum_levels / n_spread;
        S.best_count_mean = sum_bestc / n_spread;
    }
    return S;
}

// ---------------------------------------------------------------------------
// Replay harness
// ---------------------------------------------------------------------------
struct Final {  // state of one book after a run
    int64_t bid, bid_qty, ask, ask_qty;
    uint32_t bid_count, ask_count, orders;
    bool operator==(const Final &o) const {
        return bid == o.bid && bid_qty == o.bid_qty && ask == o.ask && ask_qty == o.ask_qty &&
               bid_count == o.bid_count && ask_count == o.ask_count && orders == o.orders;
    }
};

struct Run {
    std::string name;
    double ns_per_msg = 0;
    uint64_t allocs = 0;        // allocations in the timed region
    size_t n_exec = 0;          // executions in the timed region
    uint64_t filled = 0;        // sum of exec qty in the timed region
    uint64_t rejects = 0;       // results with status != 0 in the timed region
    uint64_t hash = 0;          // results + execs (event_index excluded)
    std::vector<Final> fin;
};

struct Buffers {  // preallocated and pre-touched outside timed regions
    std::vector<lob_result> res, warm_res;
    std::vector<lob_exec> ex, warm_ex;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "bench_core: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::exit(2);
}

// Apply ev[0..n) in calls of `chunk` events (0: one call), restarting after
// LOB_EEXECFULL. Returns the number of executions written.
template <class Apply>
static size_t apply_chunks(Apply &&apply, const lob_event *ev, size_t n, size_t chunk,
                           lob_result *res, lob_exec *ex, size_t excap) {
    if (chunk == 0) chunk = n;
    size_t i = 0, ne = 0;
    while (i < n) {
        const size_t m = std::min(chunk, n - i);
        size_t done = 0, nx = 0;
        const int rc = apply(ev + i, m, res + i, ex + ne, excap - ne, &done, &nx);
        if (rc != LOB_OK && rc != LOB_EEXECFULL) die("apply failed: %s (%d)", lob_strerror(rc), rc);
        if (rc == LOB_EEXECFULL && done == 0) die("apply: %s with no progress (%d)", lob_strerror(rc), rc);
        if (rc == LOB_OK && done != m) die("apply: LOB_OK but n_done %zu != n %zu", done, m);
        i += done;
        ne += nx;
    }
    return ne;
}

static inline uint64_t mix64(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static void summarize(Run &R, const lob_result *res, size_t n, const lob_exec *ex, size_t ne) {
    uint64_t h = 0, filled = 0, rej = 0;
    for (size_t i = 0; i < n; ++i) {
        h = mix64(h, (uint64_t)res[i].filled);
        h = mix64(h, (uint64_t)res[i].resting);
        h = mix64(h, res[i].n_exec);
        h = mix64(h, (uint32_t)res[i].status);
        rej += res[i].status != 0;
    }
    for (size_t j = 0; j < ne; ++j) {
        h = mix64(h, ex[j].maker_id);
        h = mix64(h, ex[j].taker_id);
        h = mix64(h, (uint64_t)ex[j].price);
        h = mix64(h, (uint64_t)ex[j].qty);
        h = mix64(h, (uint64_t)ex[j].maker_remaining);
        h = mix64(h, ex[j].instrument);
        filled += (uint64_t)ex[j].qty;
    }
    R.hash = h;
    R.filled = filled;
    R.n_exec = ne;
    R.rejects = rej;
}

static size_t exec_cap(const Stream &S, bool warm) {
    // enough for every execution plus the core's worst-case bound for one event
    return (warm ? S.warm_execs : S.timed_execs) + (size_t)S.P.capacity * S.P.instruments + 64;
}

// The core's batch call in the harness's calling convention (no bbo, no desyncs:
// the seed workload has no feed events).
static int core_apply(lob_session *s, const lob_event *e, size_t m, lob_result *r, lob_exec *x, size_t cap,
                      size_t *done, size_t *nx) {
    lob_outputs out{};
    out.results = r;
    out.execs = x;
    out.exec_cap = cap;
    const int rc = lob_session_apply(s, e, m, &out);
    *done = out.n_done;
    *nx = out.n_exec;
    return rc;
}

static lob_session *core_session(const Stream &S) {
    int st = 0;
    lob_session *s = lob_session_new(S.P.instruments - 1, &st);
    if (!s) die("lob_session_new: %s (%d)", lob_strerror(st), st);
    const int64_t high = S.P.band_low + S.P.levels * S.P.tick;
    for (uint32_t k = 0; k < S.P.instruments; ++k) {
        st = lob_session_add_book(s, k, S.P.band_low, high, S.P.tick, S.P.capacity);
        if (st != LOB_OK) die("lob_session_add_book: %s (%d)", lob_strerror(st), st);
    }
    return s;
}

static int g_invalid_books = 0;  // core books that failed lob_book_validate after a run

static std::vector<Final> core_final(lob_session *s, uint32_t K) {
    std::vector<Final> f(K);
    for (uint32_t k = 0; k < K; ++k) {
        lob_book *b = lob_session_book(s, k);
        char msg[256];
        if (lob_book_validate(b, msg, sizeof msg) != LOB_OK) {
            std::printf("  CHECK FAILED: lob_book_validate(book %u): %s\n", k, msg);
            ++g_invalid_books;
        }
        if (!lob_book_best(b, LOB_BUY, &f[k].bid, &f[k].bid_qty, &f[k].bid_count)) {
            f[k].bid = f[k].bid_qty = 0; f[k].bid_count = 0;
        }
        if (!lob_book_best(b, LOB_SELL, &f[k].ask, &f[k].ask_qty, &f[k].ask_count)) {
            f[k].ask = f[k].ask_qty = 0; f[k].ask_count = 0;
        }
        f[k].orders = lob_book_order_count(b);
    }
    return f;
}

static std::vector<Final> textbook_final(textbook::Session &t, uint32_t K) {
    std::vector<Final> f(K);
    for (uint32_t k = 0; k < K; ++k) {
        textbook::Book *b = t.book(k);
        b->best(LOB_BUY, &f[k].bid, &f[k].bid_qty, &f[k].bid_count);
        b->best(LOB_SELL, &f[k].ask, &f[k].ask_qty, &f[k].ask_count);
        f[k].orders = b->order_count();
    }
    return f;
}

// One batch run of the core on a fresh session: warm-up untimed, then the
// timed events in calls of `chunk` events (0 = one whole-array call).
static Run run_core(const Stream &S, Buffers &B, size_t chunk, bool timing, const char *name) {
    Run R;
    R.name = name;
    lob_session *s = core_session(S);
    auto apply = [s](const lob_event *e, size_t m, lob_result *r, lob_exec *x, size_t cap, size_t *d,
                     size_t *nx) { return core_apply(s, e, m, r, x, cap, d, nx); };
    apply_chunks(apply, S.ev.data(), S.P.warmup, chunk, B.warm_res.data(), B.warm_ex.data(), exec_cap(S, true));
    lob_session_set_timing(s, timing ? 1 : 0);
    const lob_event *ev = S.ev.data() + S.P.warmup;
    const size_t cap = exec_cap(S, false);
    const uint64_t a0 = lob_alloc_count();
    const int64_t t0 = now_ns();
    const size_t ne = apply_chunks(apply, ev, S.P.timed, chunk, B.res.data(), B.ex.data(), cap);
    const int64_t t1 = now_ns();
    const uint64_t a1 = lob_alloc_count();
    R.ns_per_msg = (double)(t1 - t0) / (double)S.P.timed;
    R.allocs = a1 - a0;
    summarize(R, B.res.data(), S.P.timed, B.ex.data(), ne);
    R.fin = core_final(s, S.P.instruments);
    lob_session_free(s);
    return R;
}

static Run run_textbook(const Stream &S, Buffers &B, size_t chunk, const char *name) {
    Run R;
    R.name = name;
    auto *t = new textbook::Session(S.P.instruments - 1);
    const int64_t high = S.P.band_low + S.P.levels * S.P.tick;
    for (uint32_t k = 0; k < S.P.instruments; ++k) t->add_book(k, S.P.band_low, high, S.P.tick, S.P.capacity);
    auto apply = [t](const lob_event *e, size_t m, lob_result *r, lob_exec *x, size_t cap, size_t *d,
                     size_t *nx) { return t->apply(e, m, r, x, cap, d, nx); };
    apply_chunks(apply, S.ev.data(), S.P.warmup, chunk, B.warm_res.data(), B.warm_ex.data(), exec_cap(S, true));
    const lob_event *ev = S.ev.data() + S.P.warmup;
    const size_t cap = exec_cap(S, false);
    const uint64_t a0 = g_new_count;
    const int64_t t0 = now_ns();
    const size_t ne = apply_chunks(apply, ev, S.P.timed, chunk, B.res.data(), B.ex.data(), cap);
    const int64_t t1 = now_ns();
    const uint64_t a1 = g_new_count;
    R.ns_per_msg = (double)(t1 - t0) / (double)S.P.timed;
    R.allocs = a1 - a0;
    summarize(R, B.res.data(), S.P.timed, B.ex.data(), ne);
    R.fin = textbook_final(*t, S.P.instruments);
    delete t;
    return R;
}

// ---- histograms ----
struct Pcts {
    uint64_t n = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
};
static Pcts percentiles(const std::vector<uint64_t> &c) {
    Pcts p;
    for (uint64_t v : c) p.n += v;
    if (!p.n) return p;
    const uint64_t r50 = (p.n * 50 + 99) / 100, r99 = (p.n * 99 + 99) / 100, r999 = (p.n * 999 + 999) / 1000;
    uint64_t cum = 0;
    bool g50 = false, g99 = false, g999 = false;
    for (size_t i = 0; i < c.size(); ++i) {
        if (!c[i]) continue;
        cum += c[i];
        if (!g50 && cum >= r50) { p.p50 = lob_hist_lowest((uint32_t)i); g50 = true; }
        if (!g99 && cum >= r99) { p.p99 = lob_hist_lowest((uint32_t)i); g99 = true; }
        if (!g999 && cum >= r999) { p.p999 = lob_hist_lowest((uint32_t)i); g999 = true; }
        p.max = lob_hist_lowest((uint32_t)i);
    }
    return p;
}
static const char *kind_name(int k) {
    switch (k) {
    case LOB_NEW: return "NEW (GTC+IOC)";
    case LOB_CANCEL: return "CANCEL";
    case LOB_REDUCE: return "REDUCE";
    case LOB_REPLACE: return "REPLACE";
    default: return "all";
    }
}
static void print_pcts(const char *label, const Pcts &p) {
    std::printf("    %-16s %9" PRIu64 " %7" PRIu64 " %7" PRIu64 " %8" PRIu64 " %9" PRIu64 "\n", label, p.n, p.p50,
                p.p99, p.p999, p.max);
}
static void print_hist_header() {
    std::printf("    %-16s %9s %7s %7s %8s %9s   (ns; bucket lower bounds, exact below %d ns)\n", "kind", "events",
                "p50", "p99", "p99.9", "max", 1 << LOB_HIST_SUB_BITS);
}
static void print_core_hists(lob_session *s) {
    std::vector<uint64_t> all(LOB_HIST_BUCKETS, 0), c(LOB_HIST_BUCKETS);
    print_hist_header();
    for (int k = LOB_NEW; k <= LOB_REPLACE; ++k) {
        if (lob_session_histogram(s, k, c.data()) != LOB_OK) die("lob_session_histogram(kind %d) failed", k);
        Pcts p = percentiles(c);
        if (p.n) print_pcts(kind_name(k), p);
        for (size_t i = 0; i < c.size(); ++i) all[i] += c[i];
    }
    print_pcts("all", percentiles(all));
}

// Single-shot: one event per lob_session_apply call, per-event timing on.
static Run run_core_single(const Stream &S, Buffers &B, double *wall_ns) {
    Run R;
    R.name = "core single-shot (1 event/call, timing on)";
    lob_session *s = core_session(S);
    auto apply = [s](const lob_event *e, size_t m, lob_result *r, lob_exec *x, size_t cap, size_t *d,
                     size_t *nx) { return core_apply(s, e, m, r, x, cap, d, nx); };
    apply_chunks(apply, S.ev.data(), S.P.warmup, 4096, B.warm_res.data(), B.warm_ex.data(), exec_cap(S, true));
    lob_session_reset_histograms(s);
    lob_session_set_timing(s, 1);
    const lob_event *ev = S.ev.data() + S.P.warmup;
    const size_t cap = exec_cap(S, false);
    const uint64_t a0 = lob_alloc_count();
    const int64_t t0 = now_ns();
    const size_t ne = apply_chunks(apply, ev, S.P.timed, 1, B.res.data(), B.ex.data(), cap);
    const int64_t t1 = now_ns();
    const uint64_t a1 = lob_alloc_count();
    lob_session_set_timing(s, 0);
    *wall_ns = (double)(t1 - t0) / (double)S.P.timed;
    R.ns_per_msg = *wall_ns;
    R.allocs = a1 - a0;
    summarize(R, B.res.data(), S.P.timed, B.ex.data(), ne);
    R.fin = core_final(s, S.P.instruments);
    std::printf("  core, single-shot: one lob_session_apply call per event, lob_session_set_timing(s,1)\n");
    std::printf("    wall mean %.1f ns/message (includes the per-event clock reads and the call)\n", *wall_ns);
    print_core_hists(s);
    lob_session_free(s);
    return R;
}

// Textbook single-shot: each event timed by the harness around Book::apply
// with the same clock (CLOCK_MONOTONIC), into the same bucket layout.
static void run_textbook_single(const Stream &S, Buffers &B) {
    textbook::Session t(S.P.instruments - 1);
    const int64_t high = S.P.band_low + S.P.levels * S.P.tick;
    for (uint32_t k = 0; k < S.P.instruments; ++k) t.add_book(k, S.P.band_low, high, S.P.tick, S.P.capacity);
    size_t d, nx;
    t.apply(S.ev.data(), S.P.warmup, B.warm_res.data(), B.warm_ex.data(), 0, &d, &nx);
    std::vector<std::vector<uint64_t>> h(5, std::vector<uint64_t>(LOB_HIST_BUCKETS, 0));
    const lob_event *ev = S.ev.data() + S.P.warmup;
    size_t ne = 0;
    for (size_t i = 0; i < S.P.timed; ++i) {
        textbook::Book *b = t.book(ev[i].instrument);
        const int64_t t0 = now_ns();
        B.res[i] = b->apply(ev[i], 0, B.ex.data(), &ne);
        const int64_t t1 = now_ns();
        const uint32_t k = ev[i].kind <= 4 ? ev[i].kind : 0;
        h[k][lob_hist_index((uint64_t)(t1 - t0))]++;
    }
    std::printf("  textbook, single-shot: each Book::apply timed by the harness (same clock, same buckets)\n");
    print_hist_header();
    std::vector<uint64_t> all(LOB_HIST_BUCKETS, 0);
    for (int k = LOB_NEW; k <= LOB_REPLACE; ++k) {
        Pcts p = percentiles(h[k]);
        if (p.n) print_pcts(kind_name(k), p);
        for (size_t i = 0; i < all.size(); ++i) all[i] += h[k][i];
    }
    print_pcts("all", percentiles(all));
}

// Detailed first-difference report between two result/exec sets.
static bool diff_runs(const Stream &S, const std::vector<lob_result> &ra, const std::vector<lob_exec> &xa, size_t na,
                      const std::vector<lob_result> &rb, const std::vector<lob_exec> &xb, size_t nb,
                      const char *a, const char *b, bool compare_event_index) {
    bool ok = true;
    size_t j = 0;
    for (size_t i = 0; i < S.P.timed && ok; ++i) {
        const lob_result &x = ra[i], &y = rb[i];
        if (x.filled != y.filled || x.resting != y.resting || x.n_exec != y.n_exec || x.status != y.status) {
            const lob_event &e = S.ev[S.P.warmup + i];
            std::printf("  FIRST DIFFERENCE at timed event %zu (stream index %zu): kind=%d id=%" PRIu64
                        " new_id=%" PRIu64 " side=%c price=%" PRId64 " qty=%" PRId64 " tif=%d instr=%u\n",
                        i, S.P.warmup + i, e.kind, e.id, e.new_id, e.side ? e.side : '-', e.price, e.qty, e.tif,
                        e.instrument);
            std::printf("    %s: filled=%" PRId64 " resting=%" PRId64 " n_exec=%u status=%d\n", a, x.filled,
                        x.resting, x.n_exec, x.status);
            std::printf("    %s: filled=%" PRId64 " resting=%" PRId64 " n_exec=%u status=%d\n", b, y.filled,
                        y.resting, y.n_exec, y.status);
            ok = false;
            break;
        }
        for (uint32_t k = 0; k < x.n_exec; ++k, ++j) {
            if (j >= na || j >= nb) { ok = false; break; }
            const lob_exec &p = xa[j], &q = xb[j];
            if (p.maker_id != q.maker_id || p.taker_id != q.taker_id || p.price != q.price || p.qty != q.qty ||
                p.maker_remaining != q.maker_remaining || p.instrument != q.instrument ||
                (compare_event_index && p.event_index != q.event_index)) {
                std::printf("  FIRST EXEC DIFFERENCE at exec %zu (timed event %zu):\n", j, i);
                std::printf("    %s: maker=%" PRIu64 " taker=%" PRIu64 " price=%" PRId64 " qty=%" PRId64
                            " maker_remaining=%" PRId64 " event_index=%u\n", a, p.maker_id, p.taker_id, p.price,
                            p.qty, p.maker_remaining, p.event_index);
                std::printf("    %s: maker=%" PRIu64 " taker=%" PRIu64 " price=%" PRId64 " qty=%" PRId64
                            " maker_remaining=%" PRId64 " event_index=%u\n", b, q.maker_id, q.taker_id, q.price,
                            q.qty, q.maker_remaining, q.event_index);
                ok = false;
                break;
            }
        }
    }
    if (ok && na != nb) {
        std::printf("  executions differ in number: %s %zu, %s %zu\n", a, na, b, nb);
        ok = false;
    }
    return ok;
}

// ---------------------------------------------------------------------------
// Floors: parts of what a book must do with this stream, each timed alone on
// the same recorded events (warm-up untimed, as for the books). A core cannot
// cost less than the parts it cannot avoid, so these bound what the ratio
// target can reach on this machine.
//   dispatch: read each event, branch on its kind, and walk the resting orders
//             it filled completely (their ids: from the core's own run of the
//             stream, below);
//   index:    the same, plus the id index and the order records as the core
//             keeps them (8-byte slots: a 32-bit hash tag and a record number,
//             home at the tag's top bits, linear probing, backward-shift
//             deletion; 32-byte records from a LIFO free list): an insert for
//             an order that rests, a find and a delete for a CANCEL, a REPLACE's
//             old id and every filled order. No price levels, queues, bitmap,
//             matching or per-event results;
//   direct:   as index, with an array indexed by the id itself instead of the
//             hash index (the ids are 64-bit and assigned by the feed,
//             so no core may rely on it: a bound for any index).
// Each floor ends with as many live orders as the core's books (checked).
// ---------------------------------------------------------------------------
namespace floors {

constexpr uint32_t NIL = 0xFFFFFFFFu;

// n values of T on transparent huge pages where the kernel gives them (2 MiB-aligned,
// advised MADV_HUGEPAGE), as the core's arena keeps its books: the floors' tables and
// records get the same pages as the core's.
template <class T>
class Huge {
    struct Free {
        void operator()(T *p) const { std::free(p); }
    };
    std::unique_ptr<T[], Free> p_;
    size_t n_ = 0;

public:
    explicit Huge(size_t n, T fill = T{}) : n_(n) {
        const size_t page = size_t{2} << 20, bytes = (n * sizeof(T) + page - 1) / page * page;
        void *p = nullptr;
        if (posix_memalign(&p, page, bytes ? bytes : page)) die("floors: out of memory");
#ifdef MADV_HUGEPAGE
        madvise(p, bytes, MADV_HUGEPAGE);
#endif
        p_.reset(static_cast<T *>(p));
        std::fill(p_.get(), p_.get() + n, fill);
    }
    T &operator[](size_t i) { return p_[i]; }
    const T &operator[](size_t i) const { return p_[i]; }
    size_t size() const { return n_; }
    T *begin() { return p_.get(); }
    T *end() { return p_.get() + n_; }
};

struct Fills {                    // what the core's run of the stream did, per event
    std::vector<uint32_t> start;  // event i filled ids[start[i] .. start[i + 1]) completely
    std::vector<uint64_t> ids;
    std::vector<uint32_t> instr;  // the book of each of those orders
    std::vector<uint8_t> rests;   // event i applied (1) and left an order resting (2)
    uint64_t max_id = 0;
};

static Fills of(const Stream &S) {
    lob_session *s = core_session(S);
    const size_t n = S.ev.size();
    std::vector<lob_result> res(n);
    std::vector<lob_exec> ex(exec_cap(S, true) + exec_cap(S, false));
    lob_outputs out{};
    out.results = res.data();
    out.execs = ex.data();
    out.exec_cap = ex.size();
    const int rc = lob_session_apply(s, S.ev.data(), n, &out);
    if (rc != LOB_OK || out.n_done != n) die("floors: the core's run of the stream: %s (%d)", lob_strerror(rc), rc);
    lob_session_free(s);
    Fills F;
    F.start.assign(n + 1, 0);
    F.rests.resize(n);
    for (size_t i = 0; i < n; ++i) {
        F.rests[i] = res[i].status != LOB_OK ? 0 : res[i].resting > 0 ? 2 : 1;
        F.max_id = std::max({F.max_id, S.ev[i].id, S.ev[i].kind == LOB_REPLACE ? S.ev[i].new_id : 0});
    }
    for (size_t j = 0; j < out.n_exec; ++j)
        if (ex[j].maker_remaining == 0) F.start[ex[j].event_index + 1]++;
    for (size_t i = 0; i < n; ++i) F.start[i + 1] += F.start[i];
    F.ids.resize(F.start[n]);
    F.instr.resize(F.start[n]);
    std::vector<uint32_t> at(F.start.begin(), F.start.end() - 1);
    for (size_t j = 0; j < out.n_exec; ++j)
        if (ex[j].maker_remaining == 0) {
            const uint32_t k = at[ex[j].event_index]++;
            F.ids[k] = ex[j].maker_id;
            F.instr[k] = ex[j].instrument;
        }
    return F;
}

struct Order {  // the core's record layout
    uint64_t id;
    int64_t qty;
    uint32_t next, prev, level, slot;
};
static_assert(sizeof(Order) == 32, "a record as the core's");

struct Pool {  // records from a LIFO free list
    Huge<Order> orders;
    uint32_t free_head = 0, live = 0;
    explicit Pool(uint32_t capacity) : orders(capacity) {}
    void reset() {
        const uint32_t n = (uint32_t)orders.size();
        for (uint32_t i = 0; i < n; ++i) orders[i] = Order{0, 0, i + 1 < n ? i + 1 : NIL, NIL, NIL, NIL};
        free_head = 0;
        live = 0;
    }
    uint32_t take(uint64_t id, int64_t qty) {
        const uint32_t oi = free_head;
        if (oi == NIL) die("floors: book full");
        Order &o = orders[oi];
        free_head = o.next;
        o.id = id;
        o.qty = qty;
        ++live;
        return oi;
    }
    void give(uint32_t oi) {
        Order &o = orders[oi];
        o.qty = 0;
        o.next = free_head;
        free_head = oi;
        --live;
    }
};

struct Dispatch {  // no state but a count and a checksum
    uint64_t sum = 0;
    uint32_t live = 0;
    Dispatch(uint32_t, uint64_t) {}
    uint32_t count() const { return live; }
    void reset() { sum = 0, live = 0; }
    void add(uint64_t id, int64_t qty) { sum += id ^ (uint64_t)qty, ++live; }
    void remove(uint64_t id) { sum += id, --live; }
};

struct Slot {
    uint32_t tag, order;
};

struct Hashed {
    Pool pool;
    Huge<Slot> slots;
    uint32_t mask = 0;
    int shift = 0;
    static int bits_for(uint32_t capacity) {  // the core's: the next power of two >= 2 x capacity, at least 16
        int bits = 4;
        while ((1ULL << bits) < 2ULL * capacity) ++bits;
        return bits;
    }
    Hashed(uint32_t capacity, uint64_t) : pool(capacity), slots(size_t{1} << bits_for(capacity)) {
        mask = (uint32_t)(slots.size() - 1);
        shift = 32 - bits_for(capacity);
    }
    uint32_t count() const { return pool.live; }
    void reset() {
        pool.reset();
        for (auto &s : slots) s.order = NIL;
    }
    static uint32_t tag_of(uint64_t id) { return (uint32_t)((id * 0x9E3779B97F4A7C15ULL) >> 32); }
    uint32_t probe(uint64_t id, uint32_t tag, bool *found) const {  // the slot of id, or where it belongs
        for (uint32_t i = tag >> shift;; i = (i + 1) & mask) {
            const auto &s = slots[i];
            if (s.order == NIL) return *found = false, i;
            if (s.tag == tag && pool.orders[s.order].id == id) return *found = true, i;
        }
    }
    void add(uint64_t id, int64_t qty) {
        const uint32_t tag = tag_of(id);
        bool found;
        const uint32_t i = probe(id, tag, &found);
        if (found) die("floors: id %" PRIu64 " twice", id);
        const uint32_t oi = pool.take(id, qty);
        slots[i] = {tag, oi};
        pool.orders[oi].slot = i;
    }
    void remove(uint64_t id) {
        bool found;
        uint32_t i = probe(id, tag_of(id), &found);
        if (!found) die("floors: id %" PRIu64 " is not live", id);
        pool.give(slots[i].order);
        for (uint32_t j = i;;) {  // backward shift, as the core's index_remove_at
            j = (j + 1) & mask;
            const auto sj = slots[j];
            if (sj.order == NIL) break;
            const uint32_t k = sj.tag >> shift;
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
            slots[i] = sj;
            pool.orders[sj.order].slot = i;
            i = j;
        }
        slots[i].order = NIL;
    }
};

struct Direct {
    Pool pool;
    Huge<uint32_t> at;  // id -> record
    Direct(uint32_t capacity, uint64_t max_id) : pool(capacity), at(max_id + 1, NIL) {}
    uint32_t count() const { return pool.live; }
    void reset() {
        pool.reset();
        std::fill(at.begin(), at.end(), NIL);
    }
    void add(uint64_t id, int64_t qty) {
        if (at[id] != NIL) die("floors: id %" PRIu64 " twice", id);
        at[id] = pool.take(id, qty);
    }
    void remove(uint64_t id) {
        const uint32_t oi = at[id];
        if (oi == NIL || pool.orders[oi].id != id) die("floors: id %" PRIu64 " is not live", id);
        pool.give(oi);
        at[id] = NIL;
    }
};

// ns per timed event; *live: the orders left in all books at the end.
template <class Book>
static double run(const Stream &S, const Fills &F, std::vector<Book> &books, uint64_t *live, uint64_t *sum) {
    for (auto &b : books) b.reset();
    const size_t n = S.ev.size();
    int64_t t0 = now_ns();
    for (size_t i = 0; i < n; ++i) {
        if (i == S.P.warmup) t0 = now_ns();
        const lob_event &e = S.ev[i];
        Book &b = books[e.instrument];
        const uint8_t r = F.rests[i];
        switch (e.kind) {
        case LOB_NEW:
            if (r == 2) b.add(e.id, e.qty);
            break;
        case LOB_CANCEL:
            if (r) b.remove(e.id);
            break;
        case LOB_REPLACE:
            if (r) b.remove(e.id);
            if (r == 2) b.add(e.new_id, e.qty);
            break;
        default:
            die("floors: event kind %d", e.kind);
        }
        for (uint32_t k = F.start[i]; k < F.start[i + 1]; ++k) books[F.instr[k]].remove(F.ids[k]);
    }
    const int64_t t1 = now_ns();
    *live = 0;
    for (auto &b : books) *live += b.count();
    if constexpr (std::is_same_v<Book, Dispatch>)
        for (auto &b : books) *sum += b.sum;
    return (double)(t1 - t0) / (double)S.P.timed;
}

struct All {  // the three floors' books, made once (outside the timed regions)
    std::vector<Dispatch> d;
    std::vector<Hashed> h;
    std::vector<Direct> x;
    All(const Stream &S, const Fills &F) {
        for (uint32_t k = 0; k < S.P.instruments; ++k) {
            d.emplace_back(S.P.capacity, F.max_id);
            h.emplace_back(S.P.capacity, F.max_id);
            x.emplace_back(S.P.capacity, F.max_id);
        }
    }
};

}  // namespace floors

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static double best(const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); }

static void dump_stream(const Stream &S, const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) die("cannot open %s for writing", path.c_str());
    if (std::fwrite(S.ev.data(), sizeof(lob_event), S.ev.size(), f) != S.ev.size()) die("short write to %s", path.c_str());
    std::fclose(f);
    const std::string meta = path + ".json";
    f = std::fopen(meta.c_str(), "w");
    if (!f) die("cannot open %s for writing", meta.c_str());
    std::fprintf(f,
                 "{\"seed\": %" PRIu64 ", \"warmup\": %zu, \"timed\": %zu, \"instruments\": %u, "
                 "\"band_low\": %" PRId64 ", \"band_high\": %" PRId64 ", \"tick\": %" PRId64 ", \"capacity\": %u, "
                 "\"record_size\": %zu, \"timed_execs\": %" PRIu64 ", \"timed_filled\": %" PRIu64 "}\n",
                 S.P.seed, S.P.warmup, S.P.timed, S.P.instruments, S.P.band_low,
                 S.P.band_low + S.P.levels * S.P.tick, S.P.tick, S.P.capacity, sizeof(lob_event), S.timed_execs,
                 S.timed_filled);
    std::fclose(f);
    std::printf("stream written: %s (%zu records of %zu bytes) + %s\n", path.c_str(), S.ev.size(), sizeof(lob_event),
                meta.c_str());
}

static void usage() {
    std::printf(
        "usage: bench_core [--seed N] [--warmup N] [--timed N] [--instruments K] [--resting N]\n"
        "                  [--reps N] [--chunk N] [--dump FILE] [--no-single]\n"
        "                  [--dist-mean TICKS] [--mid-step PROB] [--capacity N]\n");
}

int main(int argc, char **argv) {
    static_assert(sizeof(lob_event) == 40, "lob_event must be 40 bytes");
    static_assert(sizeof(lob_exec) == 48, "lob_exec must be 48 bytes");
    static_assert(sizeof(lob_result) == 24, "lob_result must be 24 bytes");
    Params P;
    int reps = 5;
    size_t chunk = 4096;
    std::string dump;
    bool single = true;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> const char * {
            if (i + 1 >= argc) { usage(); std::exit(2); }
            return argv[++i];
        };
        if (a == "--seed") P.seed = std::strtoull(val(), nullptr, 0);
        else if (a == "--warmup") P.warmup = std::strtoull(val(), nullptr, 0);
        else if (a == "--timed") P.timed = std::strtoull(val(), nullptr, 0);
        else if (a == "--instruments") P.instruments = (uint32_t)std::strtoul(val(), nullptr, 0);
        else if (a == "--resting") P.resting = (uint32_t)std::strtoul(val(), nullptr, 0);
        else if (a == "--reps") reps = std::atoi(val());
        else if (a == "--chunk") chunk = std::strtoull(val(), nullptr, 0);
        else if (a == "--dump") dump = val();
        else if (a == "--dist-mean") P.dist_mean = std::atof(val());
        else if (a == "--capacity") P.capacity = (uint32_t)std::strtoul(val(), nullptr, 0);
        else if (a == "--mid-step") P.p_mid_step = std::atof(val());
        else if (a == "--no-single") single = false;
        else { usage(); return a == "-h" || a == "--help" ? 0 : 2; }
    }
    if (P.instruments < 1 || P.timed < 1 || reps < 1 || chunk < 1) { usage(); return 2; }
    if (P.capacity == 0) P.capacity = 4 * ((P.resting + P.instruments - 1) / P.instruments) + 1024;

    std::printf("== lobreplay core benchmark: seed workload ==\n");
    const int64_t g0 = now_ns();
    Stream S = record(P);
    const int64_t g1 = now_ns();
    const double T = (double)P.timed;
    std::printf("workload: seed %" PRIu64 ", %u instrument(s), band [%" PRId64 ", %" PRId64 "] tick %" PRId64
                " (%" PRId64 " levels), capacity %u/book\n",
                P.seed, P.instruments, P.band_low, P.band_low + P.levels * P.tick, P.tick, P.levels + 1, P.capacity);
    std::printf("  recorded %zu warm-up + %zu timed events in %.2f s (generator drives a textbook model; not timed)\n",
                P.warmup, P.timed, (g1 - g0) * 1e-9);
    std::printf("  timed mix: NEW GTC %.2f%%, CANCEL %.2f%%, IOC taker %.2f%%, REPLACE %.2f%%, REDUCE %.2f%%\n",
                100.0 * (S.kind_count[LOB_NEW] - S.kind_count[5]) / T, 100.0 * S.kind_count[LOB_CANCEL] / T,
                100.0 * S.kind_count[5] / T, 100.0 * S.kind_count[LOB_REPLACE] / T, 100.0 * S.kind_count[LOB_REDUCE] / T);
    std::printf("  live orders: %u at end of warm-up; timed region min %u / mean %.0f / max %u\n", S.live_at_warm_end,
                S.live_min, S.live_mean, S.live_max);
    std::printf("  book shape (sampled, per book): mean spread %.2f ticks, mean %.0f price levels, mean %.1f orders "
                "at the best level\n", S.spread_mean, S.levels_mean, S.best_count_mean);
    std::printf("  timed region: %" PRIu64 " executions, %" PRIu64 " shares filled; max %zu executions in one event; "
                "model rejects (whole stream) %" PRIu64 "\n", S.timed_execs, S.timed_filled, S.max_execs_per_event,
                S.rejects);
    if (S.rejects) std::printf("  WARNING: the generator produced events its model rejected\n");
    if (!dump.empty()) dump_stream(S, dump);

    Buffers B;
    B.res.assign(P.timed, lob_result{});
    B.warm_res.assign(P.warmup ? P.warmup : 1, lob_result{});
    B.ex.assign(exec_cap(S, false), lob_exec{});
    B.warm_ex.assign(exec_cap(S, true), lob_exec{});

    double cost = 0;
    int64_t step = 0, osres = 0;
    lob_clock_probe(1000000, &cost, &step, &osres);
    std::printf("clock (lob_clock_probe, 1e6 readings): %.1f ns per reading, smallest step %" PRId64
                " ns, OS resolution %" PRId64 " ns\n", cost, step, osres);

    // The floors' inputs, from one untimed run of the core over the stream.
    const floors::Fills F = floors::of(S);
    floors::All FL(S, F);

    bool ok = true;
    // Reference pair for the detailed check: core and textbook, same chunking.
    std::vector<lob_result> ref_res_core, ref_res_tb;
    std::vector<lob_exec> ref_ex_core, ref_ex_tb;
    std::vector<Run> cores, tbs, wholes;
    std::vector<double> fd, fh, fx;  // floors: dispatch, index, direct
    uint64_t floor_live[3] = {0, 0, 0}, floor_sum = 0;
    std::printf("\nbatch runs (fresh session + %zu untimed warm-up events each, then %zu timed events), "
                "alternating core/textbook:\n", P.warmup, P.timed);
    char cname[64], wname[64], tname[64];
    std::snprintf(cname, sizeof cname, "core lob_session_apply, %zu/call", chunk);
    std::snprintf(wname, sizeof wname, "core lob_session_apply, 1 call");
    std::snprintf(tname, sizeof tname, "textbook, %zu/call", chunk);
    for (int r = 0; r < reps; ++r) {
        Run c = run_core(S, B, chunk, false, cname);
        if (r == 0) { ref_res_core = B.res; ref_ex_core.assign(B.ex.begin(), B.ex.begin() + c.n_exec); }
        Run t = run_textbook(S, B, chunk, tname);
        if (r == 0) { ref_res_tb = B.res; ref_ex_tb.assign(B.ex.begin(), B.ex.begin() + t.n_exec); }
        Run w = run_core(S, B, 0, false, wname);
        fd.push_back(floors::run(S, F, FL.d, &floor_live[0], &floor_sum));
        fh.push_back(floors::run(S, F, FL.h, &floor_live[1], &floor_sum));
        fx.push_back(floors::run(S, F, FL.x, &floor_live[2], &floor_sum));
        std::printf("  rep %d: core %7.1f ns/msg | textbook %7.1f ns/msg | core whole-array %7.1f ns/msg | floors "
                    "%.1f / %.1f / %.1f\n", r + 1, c.ns_per_msg, t.ns_per_msg, w.ns_per_msg, fd.back(), fh.back(),
                    fx.back());
        std::fflush(stdout);
        cores.push_back(c);
        tbs.push_back(t);
        wholes.push_back(w);
    }
    std::vector<double> vc, vt, vw;
    for (auto &x : cores) vc.push_back(x.ns_per_msg);
    for (auto &x : tbs) vt.push_back(x.ns_per_msg);
    for (auto &x : wholes) vw.push_back(x.ns_per_msg);
    std::printf("\n  %-40s %10s %10s %14s\n", "path (mean ns/message over the timed events)", "best", "median",
                "allocs/msg");
    auto row = [&](const char *n, const std::vector<double> &v, const std::vector<Run> &runs) {
        uint64_t amax = 0;
        for (auto &x : runs) amax = std::max(amax, x.allocs);
        std::printf("  %-40s %10.1f %10.1f %14.3f   (allocs in timed region, max over runs: %" PRIu64 ")\n", n,
                    best(v), median(v), (double)amax / T, amax);
    };
    row(cname, vc, cores);
    row(wname, vw, wholes);
    row(tname, vt, tbs);
    const double ratio_med = median(vc) / median(vt), ratio_best = best(vc) / best(vt);
    std::printf("\n  ratio core/textbook (batch, %zu/call): median %.3f (%.1f%%), best %.3f (%.1f%%); "
                "issue target <= 15%%: %s\n", chunk, ratio_med, 100 * ratio_med, ratio_best, 100 * ratio_best,
                ratio_med <= 0.15 ? "MET" : "NOT MET");
    std::printf("  ratio core whole-array/textbook: median %.3f (%.1f%%)\n", median(vw) / median(vt),
                100 * median(vw) / median(vt));

    // The floors (see namespace floors): what parts of the work cost alone, against the target.
    std::printf("\n  floors: parts of a book's work alone on the same stream (ns/message, median; %% of the textbook's "
                "median)\n");
    const double target = 0.15 * median(vt);
    auto floor_row = [&](const char *n, const std::vector<double> &v) {
        std::printf("  %-58s %7.1f  (%.1f%%)\n", n, median(v), 100 * median(v) / median(vt));
    };
    floor_row("dispatch: read, branch on the kind, walk the filled orders", fd);
    floor_row("index: + the core's id index and order records (no levels)", fh);
    floor_row("direct: + an array by id instead of the index (a bound)", fx);
    std::printf("  %-58s %7.1f  (15.0%%)\n", "issue target for the whole core", target);
    std::printf("  the core itself does the index floor's work plus levels, queues, matching and results: %.1f ns "
                "above it (median)\n", median(vc) - median(fh));

    uint64_t core_allocs = 0;
    for (auto &x : cores) core_allocs += x.allocs;
    for (auto &x : wholes) core_allocs += x.allocs;

    // Single-shot tails.
    std::printf("\nsingle-shot tail (per-event service time; each reading includes about one clock read of overhead,"
                " ~%.0f ns):\n", cost);
    if (single) {
        double wall = 0;
        Run s1 = run_core_single(S, B, &wall);
        core_allocs += s1.allocs;
        if (s1.hash != cores[0].hash || !(s1.fin == cores[0].fin)) {
            std::printf("  CHECK FAILED: single-shot core run differs from the batch core run\n");
            ok = false;
        }
        // batch with timing on, for the cost of timing itself
        Run bt = run_core(S, B, chunk, true, "core batch, timing on");
        core_allocs += bt.allocs;
        std::printf("  core batch (%zu/call) with timing on: %.1f ns/message (timing off, median: %.1f)\n", chunk,
                    bt.ns_per_msg, median(vc));
        run_textbook_single(S, B);
    } else {
        std::printf("  (skipped: --no-single)\n");
    }

    // Allocation check.
    std::printf("\nallocations after warm-up (timed regions): core %" PRIu64 " (lob_alloc_count, all core runs), "
                "textbook %.3f per message\n", core_allocs, (double)tbs[0].allocs / T);
    if (core_allocs != 0) {
        std::printf("  CHECK FAILED: the core allocated in a timed region\n");
        ok = false;
    }

    // Same-results check.
    std::printf("\nCHECK core vs textbook (timed region, same stream):\n");
    const Run &c0 = cores[0], &t0 = tbs[0];
    std::printf("  %-10s executions %9zu  filled %12" PRIu64 "  rejects %" PRIu64 "  hash %016" PRIx64 "\n", "core",
                c0.n_exec, c0.filled, c0.rejects, c0.hash);
    std::printf("  %-10s executions %9zu  filled %12" PRIu64 "  rejects %" PRIu64 "  hash %016" PRIx64 "\n",
                "textbook", t0.n_exec, t0.filled, t0.rejects, t0.hash);
    for (uint32_t k = 0; k < P.instruments && k < 8; ++k) {
        const Final &a = c0.fin[k], &b = t0.fin[k];
        std::printf("  book %u final: core bid %" PRId64 "x%" PRId64 "(%u) ask %" PRId64 "x%" PRId64
                    "(%u) orders %u | textbook bid %" PRId64 "x%" PRId64 "(%u) ask %" PRId64 "x%" PRId64
                    "(%u) orders %u\n", k, a.bid, a.bid_qty, a.bid_count, a.ask, a.ask_qty, a.ask_count, a.orders,
                    b.bid, b.bid_qty, b.bid_count, b.ask, b.ask_qty, b.ask_count, b.orders);
    }
    if (c0.n_exec != t0.n_exec || c0.filled != t0.filled || !(c0.fin == t0.fin) || c0.hash != t0.hash ||
        c0.n_exec != S.timed_execs || c0.filled != S.timed_filled) {
        ok = false;
        std::printf("  CHECK FAILED: the books differ\n");
        diff_runs(S, ref_res_core, ref_ex_core, ref_ex_core.size(), ref_res_tb, ref_ex_tb, ref_ex_tb.size(), "core",
                  "textbook", true);
    }
    for (auto *v : {&cores, &tbs, &wholes})
        for (auto &x : *v)
            if (x.hash != (v == &tbs ? t0.hash : c0.hash) || !(x.fin == (v == &tbs ? t0.fin : c0.fin))) {
                std::printf("  CHECK FAILED: run '%s' is not identical to the first run of its kind\n",
                            x.name.c_str());
                ok = false;
                break;
            }
    uint64_t core_live = 0;
    for (const Final &f : c0.fin) core_live += f.orders;
    for (int k = 0; k < 3; ++k)
        if (floor_live[k] != core_live) {
            std::printf("  CHECK FAILED: floor %d ends with %" PRIu64 " live orders, the core's books with %" PRIu64
                        "\n", k, floor_live[k], core_live);
            ok = false;
        }
    std::printf("  floors end with the core's %" PRIu64 " live orders: %s (checksum %016" PRIx64 ")\n", core_live,
                floor_live[0] == core_live && floor_live[1] == core_live && floor_live[2] == core_live ? "OK" : "NO",
                floor_sum);
    if (g_invalid_books) ok = false;
    std::printf("  lob_book_validate after every core run: %s\n", g_invalid_books ? "FAILED" : "OK");
    std::printf("  per-event results, executions (all fields) and final books %s\n",
                ok ? "IDENTICAL: PASS" : "DIFFER: FAIL");
    return ok ? 0 : 1;
}
