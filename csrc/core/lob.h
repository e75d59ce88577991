/*
 * lob.h -- the contract of lobreplay's matching core.
 *
 * A price-time priority limit order book per instrument over a fixed price
 * band in integer ticks, and a session that holds many books keyed by a small
 * instrument id and applies whole arrays of events in one call.
 *
 * Rules that hold everywhere:
 *  - Prices are int64 in the feed's integer units. A book's band is
 *    [band_low, band_high] and every limit price must be band_low + k * tick.
 *  - Nothing allocates after creation. When an order pool is full the call
 *    returns LOB_EFULL and nothing changes; the book never grows.
 *  - An event that is rejected changes nothing. FOK is decided before
 *    anything changes. A GTC order that would leave a remainder on a full
 *    book is rejected with LOB_EFULL before anything changes.
 *  - Trades print at the resting (maker) order's price. The book is never
 *    left crossed.
 *  - Library code never prints, exits or aborts, and keeps no mutable global
 *    state except the allocation counters (atomics). One book/session must
 *    not be used from two threads at once.
 *
 * Python (cffi) sees what lies between the cdef-begin and cdef-end comments of
 * this header and the other public ones, read at build time (csrc/cdef.py): put
 * every declaration there, and helpers with bodies in a private header.
 */
#ifndef LOB_H
#define LOB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cdef-begin */

/* Status codes. 0 is success; each other value is one kind of reject. */
typedef enum lob_status {
    LOB_OK = 0,
    LOB_EUNKNOWN_ID = 1,   /* CANCEL/REDUCE/REPLACE/EXEC names an id not live in the book */
    LOB_EDUP_ID = 2,       /* NEW (or REPLACE's new id) names an id already live */
    LOB_EBAND = 3,         /* limit price outside [band_low, band_high] */
    LOB_EFULL = 4,         /* order pool full: the order would have to rest */
    LOB_EQTY = 5,          /* quantity <= 0, or REDUCE by more than remains */
    LOB_EPRICE = 6,        /* limit price not on the tick grid of the band */
    LOB_EKIND = 7,         /* unknown event kind, side, time in force or flag bit; FEED on a non-GTC NEW */
    LOB_EINSTRUMENT = 8,   /* no book for this instrument id */
    LOB_EEXECFULL = 9,     /* batch stopped: an output array (executions, desyncs) too small for the next event */
    LOB_EARG = 10,         /* bad argument to a creation/query function */
    LOB_ENOMEM = 11,       /* allocation failed at creation */
    LOB_ECORRUPT = 12,     /* lob_book_validate found a broken invariant */
    LOB_EFRAME = 13        /* a feed frame is corrupt (e.g. its length disagrees with its type) */
} lob_status;

/* Event kinds (lob_event.kind). */
enum {
    LOB_NEW = 1,      /* id, side, price, qty, tif; new_id = participant (0 .. 2^32-1, 0: none) */
    LOB_CANCEL = 2,   /* id */
    LOB_REDUCE = 3,   /* id, qty = shares to remove (1..remaining); keeps priority */
    LOB_REPLACE = 4,  /* id = old id, new_id, price, qty; same side, GTC, back of queue; may trade */
    LOB_EXEC = 5,     /* a feed reports that resting order id traded qty shares (ITCH E/C);
                         price = the feed's execution price when LOB_F_PRICE is set */
    LOB_STATE = 6     /* the book's trading state: qty 1 = halted, 0 = continuous (below); id,
                         side, tif ignored; price free for the caller (ITCH: its state letter) */
};

/* Halted books (LOB_STATE). A venue that halts or pauses a symbol, or holds it in an IPO's
 * quotation period, keeps accepting and displaying orders without matching them until its
 * cross; the book it displays may then be crossed. While a book is halted:
 *  - every NEW (GTC) and REPLACE rests whole without matching and without removing the
 *    opposite orders it meets (no LOB_D_CROSSED): it is "parked", in arrival order, behind
 *    every order that rested before the halt. IOC, FOK and MARKET NEWs are cancelled with
 *    nothing filled. A GTC NEW on a full book is LOB_EFULL as always.
 *  - CANCEL, REDUCE and EXEC work on parked orders as on any other. An EXEC of a parked
 *    order has no priority to check (as with LOB_F_NOCHECK); the PRICE check stays.
 *  - best, depth, level and order queries, the bbo and depth outputs see parked orders
 *    (a parked order at a price comes after the other orders there), so the book they
 *    show may be crossed or locked.
 * A LOB_STATE with qty 0 ends the halt: the parked orders rest, in arrival order, at the back
 * of their levels, each as a LOB_F_FEED order (should one still meet the opposite side, the
 * orders it meets are removed with a LOB_D_CROSSED desync each: the cross left the book
 * crossed). Its result's resting is the number of orders still parked (0 after a resume).
 * A LOB_STATE with any other qty is LOB_EQTY. The event needs desync room for the live
 * orders (else LOB_EEXECFULL). Orders that rested before the halt keep their places. */

/* Flags (lob_event.flags): how to treat an event whose source is a feed that
 * is the truth about the book (ITCH, L2 replays). */
enum {
    LOB_F_FEED = 1,      /* NEW/REPLACE: the feed says this order rests. If it meets the opposite
                            side, the orders it meets are stale: they are removed (a LOB_D_CROSSED
                            desync each) and it rests without trading.
                            REDUCE: by more than remains removes the order (a LOB_D_QTY desync). */
    LOB_F_PRICE = 2,     /* EXEC: price holds the feed's execution price (ITCH C) */
    LOB_F_NOCHECK = 4,   /* EXEC: not an aggressor's fill (a cross, at the cross price): skip the
                            priority and price checks */
    /* Order flags. Unlike the three above (ignored where they mean nothing), these are
     * checked strictly: anywhere else they are LOB_EKIND. */
    LOB_F_NOTIONAL = 8,  /* MARKET NEW only: qty is a budget in price x quantity units (see below) */
    LOB_F_STP_CANCEL_RESTING = 16,   /* NEW/REPLACE without FEED: self-trade prevention (below) */
    LOB_F_STP_CANCEL_INCOMING = 32,
    LOB_F_STP_CANCEL_BOTH = 48       /* = RESTING | INCOMING */
};

/* Notional market orders (NEW, tif LOB_MARKET, LOB_F_NOTIONAL). qty is a budget B > 0 in
 * price x quantity units; price is ignored. The order walks the opposite side as any market
 * order does (best price first, front of the queue first) and takes from each maker
 * min(maker's size, floor(budget left / maker's price)) shares, paying price x shares out of
 * the budget. It stops at the first maker it cannot afford one share of (also any maker at
 * a price <= 0), or when the side is empty; it does not skip ahead to cheaper makers (a sell
 * order, walking down the bids, stops at the first bid above the budget left). A maker it
 * takes only part of is one it cannot afford another share of: it stops there too, even
 * if a cheaper bid behind it is affordable. So at most one maker is filled partly, the last. result.filled = shares bought or sold;
 * result.resting = 0 (nothing rests; the unspent budget is qty minus the sum of price x qty
 * of the event's trades, which never exceeds qty). No overflow is possible: shares <=
 * floor(left / price), so price x shares <= left <= INT64_MAX. */

/* Self-trade prevention (STP). A NEW's new_id is its participant id (0: none; above
 * 2^32-1: LOB_EKIND); the order keeps it while it rests. A REPLACE keeps the old order's
 * participant. An incoming NEW/REPLACE with a non-zero participant P and an STP flag does
 * not trade with a resting order of participant P that it would otherwise trade with next:
 *   LOB_F_STP_CANCEL_RESTING:  that resting order is cancelled; matching goes on;
 *   LOB_F_STP_CANCEL_INCOMING: the incoming order stops there; what it has not filled is
 *                              cancelled (a GTC/REPLACE remainder does not rest);
 *   LOB_F_STP_CANCEL_BOTH:     both.
 * The resting side's flags do not matter: the incoming order's instruction decides. With
 * participant 0 the STP flags change nothing. STP with FEED is LOB_EKIND.
 * Each STP action writes one record to the executions, in order with the trades, telling
 * it apart from a trade by its qty (trades have qty > 0):
 *   qty = -n (n > 0): resting order maker_id (n shares, at price) was cancelled by STP;
 *                     maker_remaining = 0.
 *   qty = 0:          the incoming order was stopped by STP at resting order maker_id
 *                     (price = its price; maker_remaining = its size afterwards: 0 with BOTH,
 *                     which writes the qty = -n record for it first).
 * taker_id, event_index and instrument are filled as for a trade; n_exec counts these records.
 * FOK with STP: the fill check simulates the walk with STP (orders cancel-resting would
 * cancel do not count; cancel-incoming stops the count at the first own order), and a killed
 * FOK changes nothing (no STP cancellations either). A GTC NEW on a full book is LOB_EFULL
 * when its remainder would rest, decided the same way (a remainder STP cancels does not
 * rest). */

/* An EXEC is checked against price-time priority: the synthetic aggressor the
 * feed does not publish takes the opposite side from the best price, front of
 * the queue first, so each reported fill must be of the order at the front of
 * the best level of its side after the fills before it. The core writes the
 * fill it expected (taker_id 0) to the executions, a LOB_D_FILL_ORDER desync
 * if the feed named another order, then applies the feed's fill (the feed is
 * the truth), so one divergence does not cascade. A fill of more than the
 * order holds removes it with a LOB_D_QTY desync; a LOB_F_PRICE price other
 * than the order's gives a LOB_D_EXEC_PRICE desync. */

/* Desync causes (lob_desync.cause). */
enum {
    LOB_D_FILL_ORDER = 1,  /* the feed filled order_id; priority says found_id was next */
    LOB_D_QTY = 2,         /* the feed removed expected_qty shares; the order had found_qty */
    LOB_D_CROSSED = 3,     /* a feed order (found_id, expected_price/qty) met stale order_id
                              (found_price/qty), which was removed */
    LOB_D_EXEC_PRICE = 4   /* the feed's execution price expected_price differs from the
                              order's price found_price */
};

/* Sides (lob_event.side), ASCII as in DBN. */
enum { LOB_BUY = 'B', LOB_SELL = 'S' };

/* Time in force for LOB_NEW (lob_event.tif). */
enum {
    LOB_GTC = 0,      /* match what crosses, rest the remainder */
    LOB_IOC = 1,      /* match what crosses, cancel the remainder */
    LOB_FOK = 2,      /* all of qty at or better than price, or nothing */
    LOB_MARKET = 3    /* match at any price, cancel the remainder; price ignored */
};

/* One input event: 40 bytes, little-endian, shared with numpy. */
typedef struct lob_event {
    uint64_t id;          /* order id (REPLACE: the old id) */
    uint64_t new_id;      /* REPLACE: the new id; NEW: the participant (STP); otherwise ignored */
    int64_t price;        /* limit price in feed units */
    int64_t qty;          /* NEW/REPLACE: size; REDUCE: shares removed */
    uint32_t instrument;  /* book key, 0 .. max_instrument */
    uint8_t kind;         /* LOB_NEW .. LOB_EXEC */
    uint8_t side;         /* LOB_BUY / LOB_SELL (NEW only; REPLACE keeps the old side) */
    uint8_t tif;          /* LOB_GTC .. LOB_MARKET (NEW only) */
    uint8_t flags;        /* LOB_F_* (other bits: LOB_EKIND) */
} lob_event;

/* One trade: 48 bytes. Written in the order trades happen. */
typedef struct lob_exec {
    uint64_t maker_id;        /* resting order */
    uint64_t taker_id;        /* incoming order (REPLACE: the new id) */
    int64_t price;            /* the maker's price */
    int64_t qty;              /* shares traded (> 0); <= 0: an STP record (see above) */
    int64_t maker_remaining;  /* maker's size after this trade (0: it left the book) */
    uint32_t event_index;     /* index of the event in its batch */
    uint32_t instrument;
} lob_exec;

/* Per-event outcome: 24 bytes. */
typedef struct lob_result {
    int64_t filled;    /* shares this event traded as the incoming order */
    int64_t resting;   /* shares of the event's order left on the book afterwards
                          (CANCEL: 0; REDUCE: what remains) */
    uint32_t n_exec;   /* executions this event wrote (STP records included) */
    int32_t status;    /* lob_status; non-zero means rejected, nothing changed */
} lob_result;

/* One divergence between the feed and the book: 64 bytes. */
typedef struct lob_desync {
    uint64_t order_id;        /* the order the feed named */
    uint64_t found_id;        /* the other order involved (FILL_ORDER: the one priority gives;
                                 CROSSED: the incoming order), else 0 */
    int64_t expected_qty;     /* what the feed said */
    int64_t found_qty;        /* what the book had */
    int64_t expected_price;
    int64_t found_price;
    uint32_t event_index;     /* index of the event in its batch */
    uint32_t instrument;
    uint32_t cause;           /* LOB_D_* */
    uint32_t reserved;        /* 0 */
} lob_desync;

/* Top of book after an event: 48 bytes. Prices are 0 and sizes 0 when a side is empty. */
typedef struct lob_bbo {
    int64_t bid_price;
    int64_t bid_qty;     /* total shares at the best bid */
    int64_t ask_price;
    int64_t ask_qty;
    uint32_t bid_count;  /* orders at the best bid */
    uint32_t ask_count;
    uint32_t instrument;
    uint32_t changed;    /* 1 if this event changed any field above for its instrument */
} lob_bbo;

typedef struct lob_book lob_book;
typedef struct lob_session lob_session;

/* Human-readable text for a status code; a static string, never NULL. */
const char *lob_strerror(int status);

/* ---- books ---------------------------------------------------------- */

/* Create a book over [band_low, band_high] with the given tick (> 0) and
 * room for `capacity` live orders (1 .. 2^30). (band_high - band_low) must
 * be a multiple of tick and span at most 2^31 levels.
 * Returns NULL and sets *status (if non-NULL) to LOB_EARG or LOB_ENOMEM.
 * The caller owns the book and frees it with lob_book_free. */
lob_book *lob_book_new(int64_t band_low, int64_t band_high, int64_t tick,
                       uint32_t capacity, int *status);
/* Free a book; NULL is allowed. Can't fail. */
void lob_book_free(lob_book *b);
/* Remove every order; sizes stay. Can't fail. */
void lob_book_clear(lob_book *b);

/* Band and sizes as created. Can't fail. */
void lob_book_info(const lob_book *b, int64_t *band_low, int64_t *band_high,
                   int64_t *tick, uint32_t *capacity);
/* Live orders. Can't fail. */
uint32_t lob_book_order_count(const lob_book *b);
/* Best level of a side: returns 1 and fills price/qty/count, or 0 if the side is empty. */
int lob_book_best(const lob_book *b, uint8_t side, int64_t *price, int64_t *qty,
                  uint32_t *count);
/* Up to n best levels of a side, best first. Returns how many were written. */
uint32_t lob_book_depth(const lob_book *b, uint8_t side, uint32_t n, int64_t *prices,
                        int64_t *qtys, uint32_t *counts);
/* The orders resting at one price, front of queue first, up to cap.
 * Returns the number of orders at that price (may exceed cap; only cap written),
 * 0 for an empty level, or -LOB_EBAND / -LOB_EPRICE for a bad price.
 * side is written if non-NULL and the level is not empty. */
int64_t lob_book_level_orders(const lob_book *b, int64_t price, uint64_t *ids,
                              int64_t *qtys, uint32_t cap, uint8_t *side);
/* Every live order of one side, best price first and front of each queue first,
 * up to cap: ids, qtys and prices (each may be NULL). Returns how many orders rest
 * on that side (may exceed cap; only cap written), 0 for a bad side. */
size_t lob_book_orders(const lob_book *b, uint8_t side, uint64_t *ids, int64_t *qtys, int64_t *prices,
                       size_t cap);
/* Look up a live order: returns 1 and fills side/price/qty, or 0 if not live. */
int lob_book_find(const lob_book *b, uint64_t id, uint8_t *side, int64_t *price,
                  int64_t *qty);
/* The participant of a live order (0: none): returns 1 and fills *participant
 * (if non-NULL), or 0 if the id is not live. */
int lob_book_participant(const lob_book *b, uint64_t id, uint32_t *participant);
/* Check every structural invariant (links both ways, level totals and counts,
 * bitmaps vs emptiness, cached best vs reality, index vs lists, free list,
 * not crossed). Returns LOB_OK, or LOB_ECORRUPT with a description in msg
 * (NUL-terminated, truncated to msglen; msg may be NULL). Read-only. */
int lob_book_validate(const lob_book *b, char *msg, size_t msglen);
/* For tests of lob_book_validate only: break one invariant of a book that holds at
 * least one order (what: LOB_BREAK_*). Returns LOB_OK, or LOB_EARG if the book has no
 * order or `what` is unknown. A broken book must not be used for anything but
 * lob_book_validate and lob_book_free. */
enum {
    LOB_BREAK_LEVEL_TOTAL = 1, LOB_BREAK_LEVEL_COUNT, LOB_BREAK_PREV_LINK, LOB_BREAK_LEVEL_BIT,
    LOB_BREAK_SUMMARY_BIT, LOB_BREAK_BEST_BID, LOB_BREAK_INDEX_TAG, LOB_BREAK_ORDER_QTY,
    LOB_BREAK_LIVE_COUNT, LOB_BREAK_FREE_LIST, LOB_BREAK_PARTICIPANT,
    LOB_BREAK_PARK_LINK,  /* needs a parked order */
    LOB_BREAK_BBO_TOP     /* the bbo output's copy of the top (a session's book only) */
};
/* 1 while the book is halted (LOB_STATE), else 0; and the number of parked orders. Can't fail. */
int lob_book_halted(const lob_book *b);
uint32_t lob_book_parked(const lob_book *b);
int lob_book_break(lob_book *b, int what);

/* ---- sessions ------------------------------------------------------- */

/* A session holds books for instrument ids 0 .. max_instrument (<= 2^24).
 * Returns NULL on LOB_EARG / LOB_ENOMEM (in *status). Caller frees with
 * lob_session_free, which frees the books too. */
lob_session *lob_session_new(uint32_t max_instrument, int *status);
void lob_session_free(lob_session *s);
/* Create the book for one instrument (arguments as lob_book_new). Returns
 * LOB_OK, LOB_EARG (bad arguments, instrument out of range or already has a
 * book) or LOB_ENOMEM. */
int lob_session_add_book(lob_session *s, uint32_t instrument, int64_t band_low,
                         int64_t band_high, int64_t tick, uint32_t capacity);
/* The n best levels of both sides of k books at once: for book j, side 0 (bid)
 * and 1 (ask), level i goes to prices/qtys/counts[(j * 2 + side) * n + i],
 * zeros past a side's last level and for instruments without a book. The
 * arrays hold k * 2 * n values. Can't fail. */
void lob_session_depth(const lob_session *s, const uint32_t *instruments, size_t k, uint32_t n, int64_t *prices,
                       int64_t *qtys, uint32_t *counts);
/* The book of an instrument, or NULL. The session keeps ownership. */
lob_book *lob_session_book(lob_session *s, uint32_t instrument);

/* Where lob_session_apply writes. The caller owns every array. */
typedef struct lob_outputs {
    lob_result *results;      /* required: one per event */
    lob_exec *execs;          /* executions, in trade order */
    size_t exec_cap;
    lob_bbo *bbo;             /* optional (NULL): top of the event's book after each event
                                 (or after each change of it: bbo_event below) */
    lob_desync *desyncs;      /* optional (NULL, then desync_cap must be 0): feed divergences */
    size_t desync_cap;
    size_t n_done;            /* out: events applied */
    size_t n_exec;            /* out: executions written */
    size_t n_desync;          /* out: desyncs written */
    /* Optional (depth_levels 0: off): after each event that changes any of the N =
     * depth_levels best levels (price, total, order count) of either side of its book,
     * a row: depth_event[r] = the event's index, and 2N levels in depth_prices,
     * depth_qtys, depth_counts[r * 2N ...]: the N bids best first, then the N asks
     * best first, zeros past a side's last level. Each event needs room for 2 rows
     * (the second is scratch). */
    uint32_t depth_levels;
    uint32_t *depth_event;
    int64_t *depth_prices;
    int64_t *depth_qtys;
    uint32_t *depth_counts;
    size_t depth_cap;         /* rows */
    size_t n_depth;           /* out: rows written */
    /* Optional (NULL: off), with bbo: the changes only. A row is written only for an
     * event that changes the top of its book (changed = 1), at bbo[r], and
     * bbo_event[r] = the event's index; n_bbo rows. bbo and bbo_event need room for one
     * row per event all the same (the row after the last is scratch). */
    uint32_t *bbo_event;
    size_t n_bbo;             /* out: rows written (with bbo_event) */
} lob_outputs;

/* Apply events[0..n) in order, one call per chunk.
 *  - out->results[i] gets event i's outcome; rejects are per event and do not
 *    stop the batch.
 *  - executions, desyncs and (if asked) the top of book go to the arrays in out.
 * Returns LOB_OK when all n events were applied, or LOB_EEXECFULL when the
 * next event could write more executions or desyncs than there is room left
 * for: the batch stops before that event (which is untouched) and n_done says
 * how many were applied; drain and call again from there. Room for the live
 * order count plus three rows in each array always suffices for one event
 * (an STP order writes at most one record per resting order plus one).
 * Feed events (EXEC, and FEED-flagged orders that meet stale orders or reduce
 * by too much) need the desync array: without one they stop the batch with
 * LOB_EEXECFULL. LOB_EARG if s, out or a needed array is NULL. */
int lob_session_apply(lob_session *s, const lob_event *events, size_t n, lob_outputs *out);

/* ---- latency (per-event service time inside lob_session_apply) ------- */

/* Histogram layout: log-linear (HDR style) over nanoseconds. Values below
 * 2^LOB_HIST_SUB_BITS are exact; above, each power of two is split into
 * 2^(LOB_HIST_SUB_BITS-1) equal buckets (relative bucket width <= 2^-(SUB_BITS-1),
 * about 3 significant figures). Values above 2^LOB_HIST_MAX_BITS ns are clamped. */
enum { LOB_HIST_SUB_BITS = 11, LOB_HIST_MAX_BITS = 40, LOB_HIST_BUCKETS = 32768 };
/* Each book also keeps a coarse histogram per kind while timing is on: exact
 * below 4 ns, then 4 buckets per power of two (each 25 % wide), uint32 counts. */
enum { LOB_BOOK_HIST_BUCKETS = 160 };
/* Histograms per session and per book: one per event kind, index = kind (1..6),
 * index 0 for events of an unknown kind. */
enum { LOB_HIST_KINDS = 7 };

/* Turn per-event timing on or off for a session (off at creation): every = 0 off, 1 every
 * event (one clock reading per event: see lob_session_clock), N every Nth event of the
 * session (counted across calls; two readings per timed event). A timed event is counted
 * in the session's histogram of its kind (index = kind, 1..6; 0 for unknown
 * kinds) and in its book's coarse one. Turning it on allocates the books'
 * histograms (the only allocation after creation, never inside apply);
 * returns LOB_OK or LOB_ENOMEM (timing then stays off). Books added later
 * get theirs at the next call. */
int lob_session_set_timing(lob_session *s, int every); /* LOB_EARG if every < 0 */
/* Copy one book's coarse histogram of one kind into counts[LOB_BOOK_HIST_BUCKETS]
 * (zeros if timing was never on). LOB_OK, LOB_EARG or LOB_EINSTRUMENT. */
int lob_session_book_histogram(const lob_session *s, uint32_t instrument, int kind, uint32_t *counts);
/* Every kind's coarse histogram of n books in one call: counts[n][LOB_HIST_KINDS]
 * [LOB_BOOK_HIST_BUCKETS], book j's from instruments[j] (zeros if timing was never on).
 * LOB_OK, LOB_EARG, or LOB_EINSTRUMENT for an instrument without a book (its rows and
 * later ones are then left as they were). */
int lob_session_book_histograms(const lob_session *s, const uint32_t *instruments, size_t n, uint32_t *counts);
uint32_t lob_book_hist_index(uint64_t value_ns);
uint64_t lob_book_hist_lowest(uint32_t index);
/* Software prefetching of later events' index slots, orders and levels inside
 * lob_session_apply: 1 on, 0 off, -1 (the default) on once the session's books
 * take more than 16 MiB (where the data no longer stays in cache and prefetching
 * pays; below that it costs more than it saves). Can't fail. */
void lob_session_set_prefetch(lob_session *s, int mode);
/* The memory of the session's books in bytes (levels, orders, index, bitmaps: what
 * an event may touch), the figure the prefetch default goes by. Can't fail. */
uint64_t lob_session_book_bytes(const lob_session *s);
/* Copy the histogram of one event kind (1..6) into counts[LOB_HIST_BUCKETS].
 * Returns LOB_OK or LOB_EARG. */
int lob_session_histogram(const lob_session *s, int kind, uint64_t *counts);
/* Zero all histograms. Can't fail. */
void lob_session_reset_histograms(lob_session *s);
/* Bucket index of a value and the lowest value of a bucket. Can't fail. */
uint32_t lob_hist_index(uint64_t value_ns);
uint64_t lob_hist_lowest(uint32_t index);
/* lob_hist_lowest of every bucket into lows[LOB_HIST_BUCKETS]. Can't fail. */
void lob_hist_lows(uint64_t *lows);
/* Probe the clock used for timing: mean cost of one reading (ns, over
 * `iterations` back-to-back readings), the smallest non-zero step seen
 * between readings (ns), and the resolution the OS reports (ns). */
void lob_clock_probe(uint32_t iterations, double *cost_ns, int64_t *min_step_ns,
                     int64_t *os_resolution_ns);
/* Read CLOCK_MONOTONIC (ns). */
int64_t lob_clock_ns(void);
/* The clocks timing can read. */
enum { LOB_CLOCK_MONOTONIC = 0, LOB_CLOCK_TSC = 1 };
/* The clock a session times events with, chosen when timing is turned on: the
 * CPU's time-stamp counter where it is invariant (x86-64 whose CPUID says so;
 * about half the cost of a CLOCK_MONOTONIC reading), converted to ns by a factor
 * measured against CLOCK_MONOTONIC over about 2 ms at that moment; else
 * CLOCK_MONOTONIC. Returns LOB_CLOCK_*, or -LOB_EARG for a NULL session. With
 * iterations > 0 also probes it as lob_clock_probe does (cost of one reading,
 * smallest non-zero step, in ns); ns_per_tick (1 for CLOCK_MONOTONIC) may be NULL. */
int lob_session_clock(const lob_session *s, uint32_t iterations, double *cost_ns, int64_t *min_step_ns,
                      double *ns_per_tick);
/* One reading of that clock, in its ticks (0 for a NULL session). */
uint64_t lob_session_clock_ticks(const lob_session *s);

/* ---- allocation accounting ------------------------------------------ */

/* Every allocation and free the core (lob.c) makes goes through two counting
 * wrappers: calls and bytes, process-wide, relaxed atomics. Creating sessions and
 * books and turning timing on allocate; lob_session_apply never does. */
/* Number of heap allocations the core has made in this process. */
uint64_t lob_alloc_count(void);
/* All four counters (any pointer may be NULL): allocations, bytes allocated,
 * frees (of non-NULL blocks) and bytes freed, since the process started. */
void lob_alloc_stats(uint64_t *allocs, uint64_t *bytes, uint64_t *frees, uint64_t *bytes_freed);

/* cdef-end */

#ifdef __cplusplus
}
#endif

#endif /* LOB_H */
