/*
 * l2.h -- L2 (price level) replay of .lobc records in C (docs/l2.md is the
 * contract): pass 1 sizes the books, pass 2 turns level changes into core
 * events, applies them through a lob_session and writes the report rows.
 *
 * Knows records, not files: the caller reads the .lobc file (lobreplay.l2.lobc)
 * and hands over arrays of 64-byte records, one call per chunk.
 *
 * One synthetic order per (symbol, side, price) level: a level that appears is
 * a NEW (GTC, LOB_F_FEED), one that shrinks a REDUCE (FEED), one that grows a
 * REPLACE (same id, FEED), one that goes to zero a CANCEL. A diff message
 * (DIFF_BEGIN .. DIFF_END) is applied as a unit: its last entry per level,
 * those that remove or shrink a level first, then those that add or grow one,
 * each group in record order; a whole snapshot also removes every level it
 * does not hold. Each event is computed from the level quantities as the
 * events before it left them (a feed order that meets stale levels removes
 * them, which can change the events after it in the same message).
 */
#ifndef LOB_L2_H
#define LOB_L2_H

#include "lob.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cdef-begin */

/* A .lobc record (docs/lobc.md): 64 bytes, little-endian. */
typedef struct lob_l2_record {
    int64_t recv_ns;
    int64_t exch_ns;
    uint64_t first_id;
    uint64_t last_id;
    uint64_t prev_id;
    int64_t price;
    int64_t qty;
    uint8_t kind;
    uint8_t side;
    uint16_t symbol;
    uint32_t flags;
} lob_l2_record;

/* Record kinds (docs/lobc.md). */
enum {
    LOB_L2_SNAPSHOT_BEGIN = 1, LOB_L2_SNAPSHOT_LEVEL = 2, LOB_L2_SNAPSHOT_END = 3,
    LOB_L2_DIFF_BEGIN = 4, LOB_L2_DIFF_LEVEL = 5, LOB_L2_DIFF_END = 6,
    LOB_L2_TRADE = 7, LOB_L2_GAP = 8, LOB_L2_RESYNC = 9, LOB_L2_TICKER_BID = 10, LOB_L2_TICKER_ASK = 11
};

/* The first record of rec[0 .. n) whose symbol is n_symbols or more (*bad_symbol), and the
 * first whose kind is none of the kinds above or whose side is not 0, 'B' or 'S'
 * (*bad_kind); n where there is none. What a .lobc writer may write (lobreplay.l2.lobc). */
void lob_l2_records_check(const lob_l2_record *rec, size_t n, uint32_t n_symbols, size_t *bad_symbol,
                          size_t *bad_kind);

/* ---- pass 1 ---------------------------------------------------------- */

/* Per symbol: whether it has a book (a SNAPSHOT_BEGIN or DIFF_BEGIN record),
 * its distinct level prices (of the valid level records: kind SNAPSHOT_LEVEL
 * or DIFF_LEVEL, side 'B'/'S', price > 0, qty >= 0, whatever message they are
 * in), and the peak number of live levels when those records are applied in
 * record order (a level is live while its last quantity is > 0), where a zero
 * removes a level only if pass 2 applies the record: it is in a whole message
 * (BEGIN .. END as lob_l2_feed matches them) that pass 2 applies (a snapshot;
 * a diff while the symbol is synced: after its first snapshot, and not between
 * a GAP and the next RESYNC). Any other level record can only add a level, so
 * the live levels are a superset of pass 2's book at every message boundary
 * and the peak an upper bound of its size. Records of a symbol index >=
 * n_symbols (pass 2's unknown_symbol) are counted by kind and nothing else.
 * The scan keeps a hash map of the levels, which grows, and the level records
 * of the message being matched: this is a scan, not a book. */
typedef struct lob_l2_scan lob_l2_scan;

typedef struct lob_l2_scan_symbol {
    uint64_t prices;      /* distinct level prices */
    uint64_t peak;        /* live levels at most */
    uint64_t live;        /* live levels now */
    uint32_t has_book;    /* 1 if a SNAPSHOT_BEGIN or DIFF_BEGIN was seen */
    uint32_t reserved;
} lob_l2_scan_symbol;

/* A message (BEGIN .. END) may hold at most this many records between its BEGIN and its END
 * (its levels, and any record of a symbol index beyond the file's among them, as
 * lob_l2_feed matches a BEGIN with its END). One that goes on past it is an incomplete
 * message, whether its END comes or not, so that no reader holds more of one message:
 * Binance's largest (a 5,000-level snapshot) is 1/100 of it. Both passes take the same. */
#define LOB_L2_MAX_MESSAGE 1048576

/* n_symbols: the file's symbols (at most 65536); max_message: the limit above (0: the
 * default). Returns NULL with *status LOB_ENOMEM or LOB_EARG. Free with lob_l2_scan_free. */
lob_l2_scan *lob_l2_scan_new(uint32_t n_symbols, uint32_t max_message, int *status);
void lob_l2_scan_free(lob_l2_scan *s);
/* Scan n records (chunks in record order). LOB_OK, LOB_EARG, or LOB_ENOMEM
 * (the map could not grow; the scan is then incomplete). */
int lob_l2_scan_feed(lob_l2_scan *s, const lob_l2_record *rec, size_t n);
/* After the last record: a message still open is incomplete (pass 2 drops it)
 * and its level records are counted as such. Call it before the figures. */
int lob_l2_scan_finish(lob_l2_scan *s);
/* The figures of symbols 0 .. 65535 into out[65536]. Can't fail. */
void lob_l2_scan_symbols(const lob_l2_scan *s, lob_l2_scan_symbol *out);
/* Records by kind (0 .. 255) into out[256]. Can't fail. */
void lob_l2_scan_kinds(const lob_l2_scan *s, uint64_t *out);
/* Every distinct (symbol, price), unsorted, into symbols/prices[cap];
 * returns how many there are (only cap written). Can't fail. */
size_t lob_l2_scan_levels(const lob_l2_scan *s, uint16_t *symbols, int64_t *prices, size_t cap);

/* ---- pass 2 ---------------------------------------------------------- */

/* The level table: the books' levels, g = 0 .. n_levels-1, grouped by symbol
 * (ascending) and within a symbol by price (ascending). Level g of symbol s is
 * the price real[g] in feed units, core[g] in the book of instrument s, and
 * its synthetic order id is id[g] (bid) or id[g] | 1 (ask). Per symbol
 * (0 .. n_symbols-1): has_book (a book for instrument s is in the session),
 * ladder (1: core prices are level ranks 0 .. count-1; 0: core = real),
 * band_low and tick of the book (an order id's level bits, (id & (2^48 - 1)) >> 1,
 * are (core - band_low) / tick). */
typedef struct lob_l2_config {
    uint32_t n_symbols;
    uint32_t ticker_history;    /* bookTicker history kept per symbol (65536) */
    uint32_t compare_tickers;   /* 1: comparison points after each applied message */
    uint32_t sequence;          /* the update-id rule diff messages are checked by: LOB_L2_SEQ_* */
    uint32_t depth_levels;      /* > 0 with depth_every_ns > 0: depth samples of this many levels ... */
    uint32_t max_message;       /* LOB_L2_MAX_MESSAGE (0: that), as pass 1 took it */
    int64_t depth_every_ns;     /* ... at each multiple of this much receive time (lob_l2_depth) */
    size_t n_levels;
    const uint16_t *symbol;     /* [n_levels] */
    const int64_t *real;        /* [n_levels] */
    const int64_t *core;        /* [n_levels] */
    const uint64_t *id;         /* [n_levels] */
    const uint8_t *has_book;    /* [n_symbols] */
    const uint8_t *ladder;      /* [n_symbols] */
    const int64_t *band_low;    /* [n_symbols] */
    const int64_t *tick;        /* [n_symbols] */
} lob_l2_config;

/* lob_l2_config.sequence: how a synced symbol's next diff message must follow the
 * last one applied (its update ids U = first_id, u = last_id, pu = prev_id), as
 * Binance documents it for each market (docs/binance-depth.md). Right after a
 * snapshot of lastUpdateId L: spot U <= L + 1 <= u, USD-M U <= L <= u; after a
 * diff of u = last: spot U == last + 1, USD-M pu == last. A message that does
 * not follow is a sequence_break row (first_id: the id expected, last_id: the
 * one received, as in a GAP record) and the symbol is unsynced as after a GAP
 * until a RESYNC. NONE: not checked (a feed whose ids mean something else). */
enum { LOB_L2_SEQ_NONE = 0, LOB_L2_SEQ_SPOT = 1, LOB_L2_SEQ_USDM = 2 };

/* Report rows (lobreplay.l2.ladder turns them into the tables of docs/l2.md).
 * record: the record's index in the file (first_index + its position). */
typedef struct lob_l2_bbo {
    int64_t record;            /* the message's END */
    int64_t recv_ns;           /* of its BEGIN */
    int64_t exch_ns;
    uint64_t update_id;        /* u; a snapshot's lastUpdateId */
    int64_t bid_price, bid_qty, ask_price, ask_qty;   /* feed units; 0, 0 for an empty side */
    uint32_t symbol;
    uint32_t reserved;
} lob_l2_bbo;

/* Desync causes (lob_l2_desync.cause); lobreplay.l2.ladder names them (docs/l2.md). */
enum {
    LOB_L2D_UNKNOWN_SYMBOL = 1, LOB_L2D_END_ID_MISMATCH = 2, LOB_L2D_INCOMPLETE_MESSAGE = 3,
    LOB_L2D_ORPHAN_RECORD = 4, LOB_L2D_MALFORMED_LEVEL = 5, LOB_L2D_UNPAIRED_TICKER = 6, LOB_L2D_UNKNOWN_KIND = 7,
    LOB_L2D_UPDATE_BEFORE_SNAPSHOT = 8, LOB_L2D_UNSYNCED_UPDATE_SKIPPED = 9, LOB_L2D_NO_BOOK = 10,
    LOB_L2D_PRICE_NOT_IN_BOOK = 11, LOB_L2D_CROSSED_BY_BID_UPDATE = 12, LOB_L2D_CROSSED_BY_ASK_UPDATE = 13,
    LOB_L2D_CROSSED_BY_SNAPSHOT = 14,
    LOB_L2D_GAP = 15,                      /* detail = the GAP record's reason (flags) */
    LOB_L2D_RESYNC_WITHOUT_SNAPSHOT = 16, LOB_L2D_RESYNC_ID_MISMATCH = 17,
    LOB_L2D_REJECTED = 18,                 /* detail = the core's status */
    LOB_L2D_CORE = 19,                     /* detail = the core's desync cause (not CROSSED) */
    LOB_L2D_SEQUENCE_BREAK = 20            /* first_id: the update id expected, last_id: the one received */
};

/* One anomaly. Fields as the record at `record` has them, except: crossed
 * rows (side, price, qty of the incoming level; other_price, other_qty of the
 * stale one it removed), at the message's BEGIN. */
typedef struct lob_l2_desync {
    int64_t record;
    int64_t recv_ns;
    int64_t exch_ns;
    uint64_t first_id;
    uint64_t last_id;
    int64_t price;
    int64_t qty;
    int64_t other_price;
    int64_t other_qty;
    uint32_t symbol;
    uint32_t detail;
    uint16_t cause;
    uint8_t side;
    uint8_t reserved[5];
} lob_l2_desync;

typedef struct lob_l2_trade {
    int64_t record;
    int64_t recv_ns;
    int64_t exch_ns;
    uint64_t trade_id;
    int64_t price;
    int64_t qty;
    uint32_t symbol;
    uint8_t side;
    uint8_t reserved[3];
} lob_l2_trade;

/* A comparison point whose top of book differs from the bookTicker's. */
typedef struct lob_l2_mismatch {
    int64_t record;            /* the message's END */
    int64_t recv_ns;
    uint64_t update_id;
    uint64_t ticker_id;
    int64_t book[4];           /* bid price, bid qty, ask price, ask qty */
    int64_t ticker[4];
    uint32_t symbol;
    uint32_t reserved;
} lob_l2_mismatch;

/* A depth sample of one book (docs/l2.md "Depth samples"): at each multiple T of
 * depth_every_ns, every book that applied a message since the sample before, or whose sync
 * state (synced) is not its last row's. (depth_every_ns 0: a row after each applied message
 * that changed its N best levels, and after each change of its sync state.) The
 * sample holds the records before the first unit of records whose receive time
 * (the latest so far: a time that goes back counts as the one before it) reaches T,
 * where a unit is a whole message (BEGIN .. END), a BEGIN with the levels after it
 * when its END is missing (up to its record max_message + 1 after the BEGIN, where a
 * longer message is found incomplete: the records after that are units alone), a
 * TICKER_BID with its TICKER_ASK, or any other record.
 * Its levels go to depth_book[row * 4 * L ..]: L bid prices, L bid quantities, L ask
 * prices, L ask quantities (feed units, best first, 0 past a side's last level). */
typedef struct lob_l2_depth {
    int64_t record;            /* the last record the sample holds */
    int64_t recv_ns;           /* the sample time T */
    uint64_t update_id;        /* the book's last message's */
    uint32_t symbol;
    uint8_t synced;            /* 1: synced (0: waiting for a snapshot, or unsynced) */
    uint8_t reserved[3];
} lob_l2_depth;

/* Where lob_l2_feed and lob_l2_finish write; the caller owns the arrays.
 * The n_* counters are set by each call (rows written by that call). */
typedef struct lob_l2_outputs {
    lob_l2_bbo *bbo;
    size_t bbo_cap, n_bbo;
    lob_l2_desync *desyncs;
    size_t desync_cap, n_desync;
    lob_l2_trade *trades;
    size_t trade_cap, n_trade;
    lob_l2_mismatch *mismatches;
    size_t mismatch_cap, n_mismatch;
    lob_l2_depth *depth;       /* with depth samples: depth_cap rows, and 4 * depth_levels values a row */
    int64_t *depth_book;
    size_t depth_cap, n_depth;
    /* out, with LOB_EEXECFULL: rows the next step needs in each array */
    size_t need_bbo, need_desync, need_trade, need_mismatch, need_depth;
} lob_l2_outputs;

/* Cumulative counts since lob_l2_new (summary.json of docs/l2.md). */
typedef struct lob_l2_counts {
    uint64_t messages_applied, snapshots_applied, levels_applied, levels_skipped;
    uint64_t events[6];                   /* events applied, by kind (index LOB_NEW .. LOB_EXEC) */
    uint64_t unchanged_levels, zero_qty_unknown_level;
    uint64_t skipped_before_snapshot, skipped_unsynced, skipped_sequence_break;
    uint64_t trades, tickers, bbo_changes;
    uint64_t core_calls;                  /* lob_session_apply calls */
    uint64_t crossing_events;             /* events that met stale levels (applied one at a time) */
    uint64_t points, comparable, matches, price_matches;
    uint64_t no_ticker, unresolved_at_gap, unresolved_at_end;
} lob_l2_counts;

typedef struct lob_l2 lob_l2;

/* A replay over the books of session (which must outlive it and hold a book
 * for every symbol with has_book). Copies the configuration's arrays.
 * Returns NULL with *status LOB_EARG or LOB_ENOMEM. */
lob_l2 *lob_l2_new(lob_session *session, const lob_l2_config *cfg, int *status);
void lob_l2_free(lob_l2 *r);

/* Replay rec[*pos .. n), records first_index .. of the file, in order.
 * A range is processed as a whole (docs/l2.md): a message is whole if its
 * END is in the range, so the caller cuts ranges after whole groups (a
 * trailing BEGIN with only its levels, or a trailing TICKER_BID, goes to the
 * next range). Records of symbols >= n_symbols are reported and otherwise
 * invisible. Comparison points are resolved before each control record
 * (whole snapshot, GAP, RESYNC) and at the end of the range.
 * With depth samples, a sample is written before the unit of records that
 * reaches its time, and lob_l2_finish writes the last one (after the last record).
 * Returns LOB_OK when the range is done; LOB_EEXECFULL when the next step
 * needs more room in an output array than is left (*pos says where it
 * stopped, need_* what it needs): take the rows and call again with the same
 * range and *pos; LOB_EARG; LOB_ENOMEM (internal buffers could not grow). */
int lob_l2_feed(lob_l2 *r, const lob_l2_record *rec, size_t n, int64_t first_index, size_t *pos,
                lob_l2_outputs *out);
/* The end of the replay: every pending comparison point is resolved if it
 * can be, else counted unresolved_at_end. LOB_OK or LOB_EEXECFULL (as above). */
int lob_l2_finish(lob_l2 *r, lob_l2_outputs *out);

void lob_l2_counts_get(const lob_l2 *r, lob_l2_counts *out);
/* Per symbol (arrays of n_symbols): sync state (0 not yet synced, 1 synced,
 * 2 unsynced after a GAP or a sequence break), the last snapshot's lastUpdateId since the last GAP
 * (-1: none), the last applied message's update id, messages applied
 * (snapshots included) and skipped. Any pointer may be NULL. */
void lob_l2_symbols(const lob_l2 *r, uint8_t *state, int64_t *snapshot_id, uint64_t *last_u,
                    uint64_t *messages, uint64_t *skipped);

/* cdef-end */

#ifdef __cplusplus
}
#endif

#endif /* LOB_L2_H */
