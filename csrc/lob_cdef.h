/* The part of lob.h that cffi sees (csrc/build_core.py reads this file).
 * Numbers are written as "..." so each is defined once, in lob.h; structs are
 * written out in full because numpy shares their layout. */

#define LOB_OK ...
#define LOB_EUNKNOWN_ID ...
#define LOB_EDUP_ID ...
#define LOB_EBAND ...
#define LOB_EFULL ...
#define LOB_EQTY ...
#define LOB_EPRICE ...
#define LOB_EKIND ...
#define LOB_EINSTRUMENT ...
#define LOB_EEXECFULL ...
#define LOB_EARG ...
#define LOB_ENOMEM ...
#define LOB_ECORRUPT ...
#define LOB_EFRAME ...
#define LOB_NEW ...
#define LOB_CANCEL ...
#define LOB_REDUCE ...
#define LOB_REPLACE ...
#define LOB_EXEC ...
#define LOB_STATE ...
#define LOB_F_FEED ...
#define LOB_F_PRICE ...
#define LOB_F_NOCHECK ...
#define LOB_F_NOTIONAL ...
#define LOB_F_STP_CANCEL_RESTING ...
#define LOB_F_STP_CANCEL_INCOMING ...
#define LOB_F_STP_CANCEL_BOTH ...
#define LOB_D_FILL_ORDER ...
#define LOB_D_QTY ...
#define LOB_D_CROSSED ...
#define LOB_D_EXEC_PRICE ...
#define LOB_BUY ...
#define LOB_SELL ...
#define LOB_GTC ...
#define LOB_IOC ...
#define LOB_FOK ...
#define LOB_MARKET ...
#define LOB_HIST_SUB_BITS ...
#define LOB_HIST_MAX_BITS ...
#define LOB_HIST_BUCKETS ...
#define LOB_BOOK_HIST_BUCKETS ...
#define LOB_HIST_KINDS ...

typedef struct lob_event {
    uint64_t id;
    uint64_t new_id;
    int64_t price;
    int64_t qty;
    uint32_t instrument;
    uint8_t kind;
    uint8_t side;
    uint8_t tif;
    uint8_t flags;
} lob_event;

typedef struct lob_exec {
    uint64_t maker_id;
    uint64_t taker_id;
    int64_t price;
    int64_t qty;
    int64_t maker_remaining;
    uint32_t event_index;
    uint32_t instrument;
} lob_exec;

typedef struct lob_result {
    int64_t filled;
    int64_t resting;
    uint32_t n_exec;
    int32_t status;
} lob_result;

typedef struct lob_desync {
    uint64_t order_id;
    uint64_t found_id;
    int64_t expected_qty;
    int64_t found_qty;
    int64_t expected_price;
    int64_t found_price;
    uint32_t event_index;
    uint32_t instrument;
    uint32_t cause;
    uint32_t reserved;
} lob_desync;

typedef struct lob_bbo {
    int64_t bid_price;
    int64_t bid_qty;
    int64_t ask_price;
    int64_t ask_qty;
    uint32_t bid_count;
    uint32_t ask_count;
    uint32_t instrument;
    uint32_t changed;
} lob_bbo;

typedef struct lob_book lob_book;
typedef struct lob_session lob_session;

const char *lob_strerror(int status);

lob_book *lob_book_new(int64_t band_low, int64_t band_high, int64_t tick, uint32_t capacity, int *status);
void lob_book_free(lob_book *b);
void lob_book_clear(lob_book *b);
void lob_book_info(const lob_book *b, int64_t *band_low, int64_t *band_high, int64_t *tick, uint32_t *capacity);
uint32_t lob_book_order_count(const lob_book *b);
int lob_book_best(const lob_book *b, uint8_t side, int64_t *price, int64_t *qty, uint32_t *count);
uint32_t lob_book_depth(const lob_book *b, uint8_t side, uint32_t n, int64_t *prices, int64_t *qtys, uint32_t *counts);
int64_t lob_book_level_orders(const lob_book *b, int64_t price, uint64_t *ids, int64_t *qtys, uint32_t cap, uint8_t *side);
size_t lob_book_orders(const lob_book *b, uint8_t side, uint64_t *ids, int64_t *qtys, int64_t *prices, size_t cap);
int lob_book_find(const lob_book *b, uint64_t id, uint8_t *side, int64_t *price, int64_t *qty);
int lob_book_participant(const lob_book *b, uint64_t id, uint32_t *participant);
int lob_book_validate(const lob_book *b, char *msg, size_t msglen);
enum {
    LOB_BREAK_LEVEL_TOTAL = 1, LOB_BREAK_LEVEL_COUNT, LOB_BREAK_PREV_LINK, LOB_BREAK_LEVEL_BIT,
    LOB_BREAK_SUMMARY_BIT, LOB_BREAK_BEST_BID, LOB_BREAK_INDEX_TAG, LOB_BREAK_ORDER_QTY,
    LOB_BREAK_LIVE_COUNT, LOB_BREAK_FREE_LIST, LOB_BREAK_PARTICIPANT, LOB_BREAK_PARK_LINK
};
int lob_book_break(lob_book *b, int what);
int lob_book_halted(const lob_book *b);
uint32_t lob_book_parked(const lob_book *b);

lob_session *lob_session_new(uint32_t max_instrument, int *status);
void lob_session_free(lob_session *s);
int lob_session_add_book(lob_session *s, uint32_t instrument, int64_t band_low, int64_t band_high, int64_t tick, uint32_t capacity);
void lob_session_depth(const lob_session *s, const uint32_t *instruments, size_t k, uint32_t n, int64_t *prices,
                       int64_t *qtys, uint32_t *counts);
lob_book *lob_session_book(lob_session *s, uint32_t instrument);
typedef struct lob_outputs {
    lob_result *results;
    lob_exec *execs;
    size_t exec_cap;
    lob_bbo *bbo;
    lob_desync *desyncs;
    size_t desync_cap;
    size_t n_done;
    size_t n_exec;
    size_t n_desync;
    uint32_t depth_levels;
    uint32_t *depth_event;
    int64_t *depth_prices;
    int64_t *depth_qtys;
    uint32_t *depth_counts;
    size_t depth_cap;
    size_t n_depth;
    uint32_t *bbo_event;
    size_t n_bbo;
} lob_outputs;

int lob_session_apply(lob_session *s, const lob_event *events, size_t n, lob_outputs *out);

int lob_session_set_timing(lob_session *s, int every);
int lob_session_book_histogram(const lob_session *s, uint32_t instrument, int kind, uint32_t *counts);
int lob_session_book_histograms(const lob_session *s, const uint32_t *instruments, size_t n, uint32_t *counts);
uint32_t lob_book_hist_index(uint64_t value_ns);
uint64_t lob_book_hist_lowest(uint32_t index);
void lob_session_set_prefetch(lob_session *s, int mode);
uint64_t lob_session_book_bytes(const lob_session *s);
int lob_session_histogram(const lob_session *s, int kind, uint64_t *counts);
void lob_session_reset_histograms(lob_session *s);
uint32_t lob_hist_index(uint64_t value_ns);
uint64_t lob_hist_lowest(uint32_t index);
void lob_hist_lows(uint64_t *lows);
void lob_clock_probe(uint32_t iterations, double *cost_ns, int64_t *min_step_ns, int64_t *os_resolution_ns);
int64_t lob_clock_ns(void);
enum { LOB_CLOCK_MONOTONIC = 0, LOB_CLOCK_TSC = 1 };
int lob_session_clock(const lob_session *s, uint32_t iterations, double *cost_ns, int64_t *min_step_ns,
                      double *ns_per_tick);
uint64_t lob_session_clock_ticks(const lob_session *s);

uint64_t lob_alloc_count(void);
void lob_alloc_stats(uint64_t *allocs, uint64_t *bytes, uint64_t *frees, uint64_t *bytes_freed);

/* itch.h */
uint32_t lob_itch_length(uint8_t type);
int lob_itch_frames(const uint8_t *buf, size_t len, uint32_t *offsets, uint8_t *types, size_t cap,
                    uint64_t *type_counts, size_t *n_out, size_t *consumed, int *end, size_t *bad);

typedef struct lob_itch_locate {
    int64_t min_price, max_price;
    uint64_t price_gcd;
    uint64_t messages;
    uint64_t adds, deletes, replaces, executions, cancels;
    uint64_t executed_shares;
    uint64_t unknown_refs;
    uint32_t live, peak_live;
    int64_t first_ts, last_ts;
    uint32_t distinct_min;
    uint32_t reserved;
} lob_itch_locate;

typedef struct lob_itch_scan lob_itch_scan;
lob_itch_scan *lob_itch_scan_new(int *status);
void lob_itch_scan_free(lob_itch_scan *s);
int lob_itch_scan_feed(lob_itch_scan *s, const uint8_t *buf, const uint32_t *offsets, const uint8_t *types,
                       size_t n, const uint8_t *select);
void lob_itch_partition(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                        const uint8_t *owner, uint32_t parts, uint32_t *out_offsets, uint8_t *out_types, size_t cap,
                        size_t *counts);
void lob_itch_scan_stats(const lob_itch_scan *s, lob_itch_locate *out);
int lob_itch_scan_scrambled(const lob_itch_scan *s);
size_t lob_itch_order_prices(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                             const uint8_t *select, uint16_t *locates, uint32_t *prices);
typedef struct lob_itch_pmap {
    int64_t low, tick;
    uint32_t n, n_extra, first, reserved;
} lob_itch_pmap;
void lob_itch_map_prices(const uint16_t *book_map, const lob_itch_pmap *maps, const int64_t *extras,
                         const uint32_t *ranks, lob_event *ev, size_t n, uint64_t *outside);
int lob_itch_group(const lob_event *ev, const int64_t *ts, const uint32_t *msg_index, size_t n, uint32_t *counts,
                   lob_event *ev_out, int64_t *ts_out, uint32_t *msg_out);
size_t lob_itch_events(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                       const uint8_t *select, lob_event *ev, int64_t *ts, uint32_t *msg_index,
                       uint16_t *state);

/* itch_synth.h */
#define LOB_SYNTH_HALTS ...
#define LOB_SYNTH_IPO ...
#define LOB_SYNTH_OPERATIONAL ...
#define LOB_SYNTH_FAR_OFF ...
#define LOB_SYNTH_MWCB ...
#define LOB_SYNTH_MAX_PRICE ...
#define LOB_SYNTH_MIN_CAP ...
typedef struct lob_synth_config {
    uint64_t n_messages;
    uint64_t seed;
    uint32_t n_symbols;
    uint32_t resting_per_symbol;
    uint32_t features;
    uint32_t reserved;
} lob_synth_config;
typedef struct lob_synth_plant {
    uint64_t start;
    uint64_t end;
    uint64_t ref;
    int64_t price;
    uint64_t shares;
    uint32_t locate;
    uint32_t executions;
    uint8_t kind;
    uint8_t side;
    uint8_t why;
    uint8_t reserved[5];
} lob_synth_plant;
typedef struct lob_synth_stats {
    uint64_t counts[128];
    uint64_t messages;
    uint64_t bytes;
    uint64_t peak_live;
    uint64_t live;
    uint64_t last_order_ref;
    uint64_t last_match;
    uint64_t executed_shares;
    uint64_t book_bytes;
    uint32_t n_plants;
    uint32_t done;
} lob_synth_stats;
typedef struct lob_synth lob_synth;
lob_synth *lob_synth_new(const lob_synth_config *cfg, int *status);
void lob_synth_free(lob_synth *s);
size_t lob_synth_fill(lob_synth *s, uint8_t *out, size_t cap, uint64_t *n_messages);
void lob_synth_get_stats(const lob_synth *s, lob_synth_stats *st);
size_t lob_synth_plants(const lob_synth *s, lob_synth_plant *out, size_t cap);
int lob_synth_symbol(const lob_synth *s, uint32_t locate, char *name8, uint32_t *tick, int *test);

/* l2.h */
#define LOB_L2D_UNKNOWN_SYMBOL ...
#define LOB_L2D_END_ID_MISMATCH ...
#define LOB_L2D_INCOMPLETE_MESSAGE ...
#define LOB_L2D_ORPHAN_RECORD ...
#define LOB_L2D_MALFORMED_LEVEL ...
#define LOB_L2D_UNPAIRED_TICKER ...
#define LOB_L2D_UNKNOWN_KIND ...
#define LOB_L2D_UPDATE_BEFORE_SNAPSHOT ...
#define LOB_L2D_UNSYNCED_UPDATE_SKIPPED ...
#define LOB_L2D_NO_BOOK ...
#define LOB_L2D_PRICE_NOT_IN_BOOK ...
#define LOB_L2D_CROSSED_BY_BID_UPDATE ...
#define LOB_L2D_CROSSED_BY_ASK_UPDATE ...
#define LOB_L2D_CROSSED_BY_SNAPSHOT ...
#define LOB_L2D_GAP ...
#define LOB_L2D_RESYNC_WITHOUT_SNAPSHOT ...
#define LOB_L2D_RESYNC_ID_MISMATCH ...
#define LOB_L2D_REJECTED ...
#define LOB_L2D_CORE ...
#define LOB_L2D_SEQUENCE_BREAK ...
#define LOB_L2_SEQ_NONE ...
#define LOB_L2_SEQ_SPOT ...
#define LOB_L2_SEQ_USDM ...

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

typedef struct lob_l2_scan lob_l2_scan;
typedef struct lob_l2_scan_symbol {
    uint64_t prices;
    uint64_t peak;
    uint64_t live;
    uint32_t has_book;
    uint32_t reserved;
} lob_l2_scan_symbol;
#define LOB_L2_MAX_MESSAGE 1048576
lob_l2_scan *lob_l2_scan_new(uint32_t n_symbols, uint32_t max_message, int *status);
void lob_l2_scan_free(lob_l2_scan *s);
int lob_l2_scan_feed(lob_l2_scan *s, const lob_l2_record *rec, size_t n);
int lob_l2_scan_finish(lob_l2_scan *s);
void lob_l2_scan_symbols(const lob_l2_scan *s, lob_l2_scan_symbol *out);
void lob_l2_scan_kinds(const lob_l2_scan *s, uint64_t *out);
size_t lob_l2_scan_levels(const lob_l2_scan *s, uint16_t *symbols, int64_t *prices, size_t cap);
void lob_l2_records_check(const lob_l2_record *rec, size_t n, uint32_t n_symbols, size_t *bad_symbol,
                          size_t *bad_kind);

typedef struct lob_l2_config {
    uint32_t n_symbols;
    uint32_t ticker_history;
    uint32_t compare_tickers;
    uint32_t sequence;
    uint32_t depth_levels;
    uint32_t max_message;
    int64_t depth_every_ns;
    size_t n_levels;
    const uint16_t *symbol;
    const int64_t *real;
    const int64_t *core;
    const uint64_t *id;
    const uint8_t *has_book;
    const uint8_t *ladder;
    const int64_t *band_low;
    const int64_t *tick;
} lob_l2_config;

typedef struct lob_l2_bbo {
    int64_t record;
    int64_t recv_ns;
    int64_t exch_ns;
    uint64_t update_id;
    int64_t bid_price, bid_qty, ask_price, ask_qty;
    uint32_t symbol;
    uint32_t reserved;
} lob_l2_bbo;

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

typedef struct lob_l2_mismatch {
    int64_t record;
    int64_t recv_ns;
    uint64_t update_id;
    uint64_t ticker_id;
    int64_t book[4];
    int64_t ticker[4];
    uint32_t symbol;
    uint32_t reserved;
} lob_l2_mismatch;

typedef struct lob_l2_depth {
    int64_t record;
    int64_t recv_ns;
    uint64_t update_id;
    uint32_t symbol;
    uint8_t synced;
    uint8_t reserved[3];
} lob_l2_depth;

typedef struct lob_l2_outputs {
    lob_l2_bbo *bbo;
    size_t bbo_cap, n_bbo;
    lob_l2_desync *desyncs;
    size_t desync_cap, n_desync;
    lob_l2_trade *trades;
    size_t trade_cap, n_trade;
    lob_l2_mismatch *mismatches;
    size_t mismatch_cap, n_mismatch;
    lob_l2_depth *depth;
    int64_t *depth_book;
    size_t depth_cap, n_depth;
    size_t need_bbo, need_desync, need_trade, need_mismatch, need_depth;
} lob_l2_outputs;

typedef struct lob_l2_counts {
    uint64_t messages_applied, snapshots_applied, levels_applied, levels_skipped;
    uint64_t events[6];
    uint64_t unchanged_levels, zero_qty_unknown_level;
    uint64_t skipped_before_snapshot, skipped_unsynced, skipped_sequence_break;
    uint64_t trades, tickers, bbo_changes;
    uint64_t core_calls;
    uint64_t crossing_events;
    uint64_t points, comparable, matches, price_matches;
    uint64_t no_ticker, unresolved_at_gap, unresolved_at_end;
} lob_l2_counts;

typedef struct lob_l2 lob_l2;
lob_l2 *lob_l2_new(lob_session *session, const lob_l2_config *cfg, int *status);
void lob_l2_free(lob_l2 *r);
int lob_l2_feed(lob_l2 *r, const lob_l2_record *rec, size_t n, int64_t first_index, size_t *pos,
                lob_l2_outputs *out);
int lob_l2_finish(lob_l2 *r, lob_l2_outputs *out);
void lob_l2_counts_get(const lob_l2 *r, lob_l2_counts *out);
void lob_l2_symbols(const lob_l2 *r, uint8_t *state, int64_t *snapshot_id, uint64_t *last_u,
                    uint64_t *messages, uint64_t *skipped);

/* bnjson.h */
#define LOB_BN_USDM ...
#define LOB_BN_BARE ...
#define LOB_BN_OTHER ...
#define LOB_BN_DEPTH ...
#define LOB_BN_TRADE ...
#define LOB_BN_AGGTRADE ...
#define LOB_BN_TICKER ...
#define LOB_BN_NAMES ...

typedef struct lob_bn_line {
    int64_t recv_ns;
    uint64_t first_id;
    uint64_t last_id;
    uint64_t prev_id;
    int64_t exch_ms;
    uint64_t level;
    uint32_t start;
    uint32_t len;
    uint32_t stream_start;
    int32_t stream_len;
    uint32_t sym_start;
    int32_t sym_len;
    uint32_t n_bids, n_asks;
    uint32_t name_id;
    uint8_t status;
    uint8_t maker;
    uint8_t reserved[2];
} lob_bn_line;

int lob_bn_decode(const uint8_t *buf, size_t len, int flags, uint32_t price_digits, uint32_t qty_digits,
                  lob_bn_line *lines, size_t line_cap, size_t *n_lines, int64_t *levels, size_t level_cap,
                  size_t *n_levels, size_t *consumed, uint32_t *names, size_t *n_names);
#define LOB_BN_VALUES_MAX ...
int lob_bn_values(const uint8_t *buf, size_t len, const uint8_t *key, size_t key_len, int word, uint32_t *starts,
                  uint32_t *lens, size_t cap, size_t *n, int *more);

/* bnsync.h */
typedef struct lob_bn_machine lob_bn_machine;

typedef struct lob_bn_symbol {
    uint64_t last_u;
    uint64_t first_L;
    uint64_t synced;
    uint64_t depth;
    uint64_t applied;
    uint64_t dropped_covered;
    uint64_t duplicates;
    uint64_t gaps, resyncs;
    uint64_t snapshots;
    uint64_t snapshots_stale;
    uint64_t snapshots_unused;
    uint64_t buffered;
    uint8_t live;
    uint8_t requested;
    uint8_t gap_open;
    uint8_t fresh;
    uint8_t has_snapshot;
    uint8_t last_gap;
    uint8_t reserved[2];
} lob_bn_symbol;

#define LOB_BN_REASONS ...

typedef struct lob_bn_totals {
    uint64_t messages;
    uint64_t unknown_symbol;
    uint64_t trades, tickers;
    uint64_t depth;
    uint64_t gaps, resyncs;
    uint64_t diff_levels, snapshot_levels;
    uint64_t gaps_by_reason[16];
    uint8_t gap_order[16];
    uint32_t n_gap_order;
    uint32_t reserved;
} lob_bn_totals;

#define LOB_BN_EV_GAP ...
#define LOB_BN_EV_SYNCED ...
#define LOB_BN_EV_RESYNC ...

typedef struct lob_bn_event {
    int32_t kind;
    int32_t symbol;
    uint64_t value;
} lob_bn_event;

lob_bn_machine *lob_bn_sync_new(size_t n_symbols, int flags, size_t max_buffer, int *status);
void lob_bn_sync_free(lob_bn_machine *m);

const lob_bn_symbol *lob_bn_sync_symbols(const lob_bn_machine *m);
const lob_bn_totals *lob_bn_sync_totals(const lob_bn_machine *m);

int lob_bn_sync_snapshot(lob_bn_machine *m, uint32_t symbol, uint64_t L, int64_t exch_ns, int64_t recv_ns,
                         const int64_t *levels, uint32_t n_bids, uint32_t n_asks);

int lob_bn_sync_bad_snapshot(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns);

int lob_bn_sync_bad_depth(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns);

int lob_bn_sync_snapshot_failed(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns, uint32_t reason);

int lob_bn_sync_disconnected(lob_bn_machine *m, int64_t recv_ns, uint32_t reason, const uint32_t *symbols, size_t n);

int lob_bn_sync_end_file(lob_bn_machine *m, int64_t recv_ns);

int lob_bn_sync_request(lob_bn_machine *m, uint32_t symbol, int requested);

size_t lob_bn_sync_wanted(const lob_bn_machine *m, uint32_t *out, size_t cap);
int32_t lob_bn_sync_guess(const lob_bn_machine *m, uint64_t L);

int lob_bn_sync_lines(lob_bn_machine *m, const lob_bn_line *lines, size_t n_lines, size_t *pos, const int64_t *levels,
                      size_t n_levels, const int32_t *name_sym, size_t n_names);

size_t lob_bn_sync_pending(const lob_bn_machine *m);
int lob_bn_sync_take(lob_bn_machine *m, lob_l2_record *out, size_t out_cap, size_t *n_out);

size_t lob_bn_sync_pending_events(const lob_bn_machine *m);
int lob_bn_sync_take_events(lob_bn_machine *m, lob_bn_event *out, size_t out_cap, size_t *n_out);
