/*
 * bnsync.h -- the Binance depth sync machine (docs/binance.md): the one owner of every
 * symbol's sync state for the live capture and the JSONL -> .lobc conversion.
 *
 * The driver (lobreplay.binance.sync.DepthSync) decodes what arrived and hands it over in
 * arrival order, each with its local receive time: depth events, REST snapshots, trades and
 * tickers, a failed snapshot request, a lost connection, a malformed message. A batch of
 * lines decoded in C (bnjson.h) goes through lob_bn_sync_lines in one call, up to the first
 * line the decoder left to Python. The machine writes the .lobc records (in order, into its
 * own buffer: lob_bn_sync_take) and the events the driver may react to (gap, synced, resync).
 *
 * The rules (docs/binance.md; the pure-Python reference in tests/reference_sync.py):
 * events are buffered until a snapshot is there; a snapshot with L + 1 < U of the first
 * buffered event (spot) or L < U (USD-M) is stale: GAP(stale snapshot); buffered events with
 * u <= L (spot) / u < L (USD-M) are dropped; the first event applied must have
 * U <= L + 1 <= u (spot) / U <= L <= u (USD-M); then every event must continue the previous
 * one: U == last u + 1 (spot), pu == last u (USD-M); an event with u <= the book's id is old
 * or a duplicate and is ignored; anything else is GAP(sequence), a new buffer, a new snapshot,
 * and on the next sync SNAPSHOT, RESYNC, then the diffs.
 */
#ifndef LOB_BNSYNC_H
#define LOB_BNSYNC_H

#include "bnjson.h"
#include "l2.h"
#include "lob.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cdef-begin */

typedef struct lob_bn_machine lob_bn_machine;

/* One symbol's state and counts, as the driver reads them (lob_bn_sync_symbols). */
typedef struct lob_bn_symbol {
    uint64_t last_u;           /* the book's last update id */
    uint64_t first_L;          /* the lastUpdateId of its first sync (synced > 0) */
    uint64_t synced;           /* times synced (first sync + resyncs) */
    uint64_t depth;            /* depth events */
    uint64_t applied;          /* diffs written */
    uint64_t dropped_covered;  /* buffered events the snapshot already held */
    uint64_t duplicates;       /* events the book had already (u <= last_u) */
    uint64_t gaps, resyncs;
    uint64_t snapshots;        /* snapshots taken for it */
    uint64_t snapshots_stale;  /* ... older than its buffer */
    uint64_t snapshots_unused; /* ... that came while it was live */
    uint64_t buffered;         /* events waiting in its buffer */
    uint8_t live;              /* synced: diffs are applied */
    uint8_t requested;         /* a snapshot was asked for (the driver's mark) */
    uint8_t gap_open;          /* a GAP was written and no RESYNC since */
    uint8_t fresh;             /* a depth event arrived since the last GAP */
    uint8_t has_snapshot;      /* a snapshot waits for an event */
    uint8_t last_gap;          /* the reason of its last GAP */
    uint8_t reserved[2];
} lob_bn_symbol;

enum { LOB_BN_REASONS = 16 }; /* GAP reasons 0 .. 15 (lobc.GAP_REASONS) */

/* The machine's counts over every symbol. */
typedef struct lob_bn_totals {
    uint64_t messages;        /* decoded lines lob_bn_sync_lines took */
    uint64_t unknown_symbol;  /* ... of none of the machine's symbols */
    uint64_t trades, tickers; /* trade and ticker messages written */
    uint64_t depth;           /* depth events */
    uint64_t gaps, resyncs;
    uint64_t diff_levels, snapshot_levels; /* level records written */
    uint64_t gaps_by_reason[LOB_BN_REASONS];
    uint8_t gap_order[LOB_BN_REASONS]; /* the reasons in the order of their first GAP */
    uint32_t n_gap_order;
    uint32_t reserved;
} lob_bn_totals;

enum { LOB_BN_EV_GAP = 1, LOB_BN_EV_SYNCED = 2, LOB_BN_EV_RESYNC = 3 };

/* What happened, for the driver: a GAP (value: its reason), a sync (value: L), a sync
 * after a GAP (LOB_BN_EV_RESYNC, then LOB_BN_EV_SYNCED). */
typedef struct lob_bn_event {
    int32_t kind;
    int32_t symbol;
    uint64_t value;
} lob_bn_event;

/* A machine of n_symbols (1 .. 65536) symbols, spot or USD-M (flags & LOB_BN_USDM); a
 * symbol keeps at most max_buffer (>= 1) events waiting for a snapshot (the oldest go).
 * NULL with *status LOB_EARG or LOB_ENOMEM. */
lob_bn_machine *lob_bn_sync_new(size_t n_symbols, int flags, size_t max_buffer, int *status);
void lob_bn_sync_free(lob_bn_machine *m);

/* The symbols' state (n_symbols of them) and the totals, live: valid while m is. */
const lob_bn_symbol *lob_bn_sync_symbols(const lob_bn_machine *m);
const lob_bn_totals *lob_bn_sync_totals(const lob_bn_machine *m);

/* Every call below returns LOB_OK, LOB_EARG (a symbol out of range, a reason >= 16) or
 * LOB_ENOMEM (the machine is then as it was before the call, but for its counts). Levels are
 * price, qty pairs: n_bids bids then n_asks asks. exch_ns, recv_ns: ns since the epoch. Depth
 * messages, trades and tickers come in as decoded lines (lob_bn_sync_lines), from the C
 * decoder or read in Python in the same form. */

/* A REST snapshot (lastUpdateId L) for symbol: clears its requested mark. */
int lob_bn_sync_snapshot(lob_bn_machine *m, uint32_t symbol, uint64_t L, int64_t exch_ns, int64_t recv_ns,
                         const int64_t *levels, uint32_t n_bids, uint32_t n_asks);
/* A snapshot that could not be read, for symbol: GAP(malformed), the book lost (its
 * buffer kept), its requested mark cleared. */
int lob_bn_sync_bad_snapshot(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns);
/* A depth message of symbol that could not be read: GAP(malformed), the book lost, its
 * buffer dropped (the lost message may sit anywhere in it). */
int lob_bn_sync_bad_depth(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns);
/* The snapshot request failed (e.g. GAP_RATE_LIMIT): one GAP per reason until the next sync. */
int lob_bn_sync_snapshot_failed(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns, uint32_t reason);
/* The connection carrying symbols[0 .. n) (symbols NULL: all) ended: a GAP for each that had
 * depth events since its last GAP or is live, its buffer dropped, its requested mark cleared. */
int lob_bn_sync_disconnected(lob_bn_machine *m, int64_t recv_ns, uint32_t reason, const uint32_t *symbols, size_t n);
/* The capture moves on to its next file: lob_bn_sync_disconnected(GAP_ROTATE) for all, then
 * every symbol starts again as in a new capture (no open gap). */
int lob_bn_sync_end_file(lob_bn_machine *m, int64_t recv_ns);
/* The driver's mark: a snapshot was asked for symbol (1) or not (0). */
int lob_bn_sync_request(lob_bn_machine *m, uint32_t symbol, int requested);
/* The symbols whose buffered events wait for a snapshot nobody asked for yet (not live, some
 * events buffered, no snapshot held, not marked requested), in index order, into out[0 ..
 * cap); returns how many there are. */
size_t lob_bn_sync_wanted(const lob_bn_machine *m, uint32_t *out, size_t cap);
/* The symbol a snapshot without one (L) is most likely for: the only symbol; else the one
 * waiting for a snapshot, or of several the one whose buffered ids hold L or come nearest.
 * -1: none waits. */
int32_t lob_bn_sync_guess(const lob_bn_machine *m, uint64_t L);

/* Decoded lines (lob_bn_decode) from line *pos on, in order, through the machine: depth
 * messages, trades and tickers of the symbol name_sym[name_id] (< 0: none of the machine's,
 * counted). Stops at the first line the decoder left to Python (LOB_BN_OTHER): *pos is then
 * that line (n_lines: all taken). */
int lob_bn_sync_lines(lob_bn_machine *m, const lob_bn_line *lines, size_t n_lines, size_t *pos, const int64_t *levels,
                      size_t n_levels, const int32_t *name_sym, size_t n_names);

/* The records written since the last take: how many, and all of them into out (out_cap >=
 * lob_bn_sync_pending), which forgets them. */
size_t lob_bn_sync_pending(const lob_bn_machine *m);
int lob_bn_sync_take(lob_bn_machine *m, lob_l2_record *out, size_t out_cap, size_t *n_out);
/* The same for the events. */
size_t lob_bn_sync_pending_events(const lob_bn_machine *m);
int lob_bn_sync_take_events(lob_bn_machine *m, lob_bn_event *out, size_t out_cap, size_t *n_out);

/* cdef-end */

#ifdef __cplusplus
}
#endif

#endif /* LOB_BNSYNC_H */
