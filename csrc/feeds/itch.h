/*
 * itch.h -- NASDAQ TotalView-ITCH 5.0 in C: framing, the first-pass scan and
 * the conversion of order messages to lob_events. Knows bytes, not files:
 * the caller reads (and decompresses) the file in chunks.
 *
 * Framing is BinaryFILE's (and MoldUDP64's message blocks): a 2-byte
 * big-endian length, then that many bytes of message, whose first byte is
 * its type. A zero length marks the end of a session.
 */
#ifndef LOB_ITCH_H
#define LOB_ITCH_H

#include "lob.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cdef-begin */

/* The ITCH 5.0 length of a message type, or 0 for a type the spec does not define
 * (itch.c's table; tests/test_layout.py holds it to lobreplay/itch/spec.py). */
uint32_t lob_itch_length(uint8_t type);

/* The byte offsets, from the type byte, of the fields itch.c reads (the order messages A, F,
 * E, C, X, D, U and the state messages H, h; F's fields are at A's, C's shares at E's).
 * tests/test_layout.py holds each to lobreplay/itch/spec.py's layout of its messages. */
enum {
    LOB_ITCH_AT_LOCATE = 1, LOB_ITCH_AT_TIMESTAMP = 5, LOB_ITCH_AT_REF = 11,
    LOB_ITCH_AT_A_SIDE = 19, LOB_ITCH_AT_A_SHARES = 20, LOB_ITCH_AT_A_PRICE = 32,
    LOB_ITCH_AT_E_SHARES = 19, LOB_ITCH_AT_C_PRINTABLE = 31, LOB_ITCH_AT_C_PRICE = 32,
    LOB_ITCH_AT_X_SHARES = 19, LOB_ITCH_AT_U_NEW = 19, LOB_ITCH_AT_U_SHARES = 27, LOB_ITCH_AT_U_PRICE = 31,
    LOB_ITCH_AT_H_STATE = 19, LOB_ITCH_AT_h_MARKET = 19, LOB_ITCH_AT_h_ACTION = 20
};

/* Walk frames in buf[0..len). For each complete message writes the offset of
 * its type byte (relative to buf; len must be < 2^32) and its type, up to cap,
 * and adds one to type_counts[type] (type_counts: 256 counters, or NULL).
 * Stops at cap, at the first frame that is not complete (*consumed = its
 * offset; everything before it was walked), or at a zero-length frame
 * (*end = 1; *consumed is past it). Returns LOB_OK, LOB_EARG, or LOB_EFRAME
 * when a defined type's frame length is not its spec length (*bad = that
 * frame's offset; the messages before it are in the outputs). Unknown types
 * are framed like any other (skipped by length). Can't fail otherwise. */
int lob_itch_frames(const uint8_t *buf, size_t len, uint32_t *offsets, uint8_t *types, size_t cap,
                    uint64_t *type_counts, size_t *n_out, size_t *consumed, int *end, size_t *bad);

/* Pass 1: a scan that keeps, per stock locate, what sizing a book needs:
 * the range and common divisor of the order prices (A, F, U), the live order
 * count and its peak, and message counts. It follows each order's remaining
 * shares by reference in its own hash map (which grows: this is a scan, not a
 * book). References it never saw added (a capture that starts mid-day) are
 * counted and otherwise ignored. */
typedef struct lob_itch_locate {
    int64_t min_price, max_price;   /* Price(4) of A, F, U; min > max when none */
    uint64_t price_gcd;             /* gcd of those prices (0 when none) */
    uint64_t messages;              /* messages with this locate */
    uint64_t adds, deletes, replaces, executions, cancels;
    uint64_t executed_shares;
    uint64_t unknown_refs;          /* E/C/X/D/U naming an order not seen added */
    uint32_t live, peak_live;       /* live orders now, and at most */
    int64_t first_ts, last_ts;      /* ns since midnight; first_ts -1 when no message */
    uint32_t distinct_min;          /* a lower bound on its distinct prices (the set bits of a
                                       4,096-bit hash of them: each bit is one price at least) */
    uint32_t reserved;              /* 0 */
} lob_itch_locate;

typedef struct lob_itch_scan lob_itch_scan;

/* Returns NULL with *status LOB_ENOMEM. Free with lob_itch_scan_free. */
lob_itch_scan *lob_itch_scan_new(int *status);
void lob_itch_scan_free(lob_itch_scan *s);
/* Scan n framed messages of buf (offsets and types from lob_itch_frames),
 * only those of locates with select[locate] != 0 (select may be NULL: all).
 * Returns LOB_OK, or LOB_ENOMEM if the order map could not grow (the scan
 * is then incomplete). */
int lob_itch_scan_feed(lob_itch_scan *s, const uint8_t *buf, const uint32_t *offsets, const uint8_t *types,
                       size_t n, const uint8_t *select);
/* Split n framed messages among parts by their locate: message i goes to part
 * owner[locate] (0 .. parts-1; a larger value: to none). Part k's offsets and
 * types, in order, go to out_offsets/out_types[k * cap ...], and their number to
 * counts[k]; cap >= n. One pass, so that parts scanning on their own threads
 * (lob_itch_scan_feed with select NULL) do not each walk every message. */
void lob_itch_partition(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                        const uint8_t *owner, uint32_t parts, uint32_t *out_offsets, uint8_t *out_types, size_t cap,
                        size_t *counts);
/* 1 once the scan's order map has switched from sequential homes (a reference's
 * low bits) to a multiplicative hash because references collided there; 0 before. */
int lob_itch_scan_scrambled(const lob_itch_scan *s);
/* Copy the per-locate figures into out[65536]. Can't fail. */
void lob_itch_scan_stats(const lob_itch_scan *s, lob_itch_locate *out);

/* Every A, F and U price of n framed messages of locates with select[locate] != 0,
 * in order, as (locate, price) into locates[] and prices[] (room for n). Returns how
 * many. For the books that could take a price map (lobreplay/itch/prices.py,
 * map_candidate): a look at the file again, for them only. */
size_t lob_itch_order_prices(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                             const uint8_t *select, uint16_t *locates, uint32_t *prices);

/* Pass 2: the order messages among n framed messages, as events, in order:
 *   A, F -> NEW GTC with LOB_F_FEED (id = order reference)
 *   X    -> REDUCE with LOB_F_FEED       D -> CANCEL
 *   U    -> REPLACE with LOB_F_FEED (id = original reference, new_id = new one)
 *   E    -> EXEC                         C -> EXEC with LOB_F_PRICE, and LOB_F_NOCHECK
 *                                             when not printable (a cross)
 * instrument = stock locate. Messages of other types, and of locates whose
 * select[locate] is 0 (select may be NULL: all), are skipped. For each event
 * also writes its timestamp (ns since midnight) and the index of its message
 * among the n. ev, ts and msg_index need room for n. Returns the number of
 * events. Can't fail.
 * state (NULL: none): 65,536 entries, one per locate, zero at the start of a file and kept
 * by the caller from chunk to chunk: the locate's trading state from H (Stock Trading
 * Action: T trading, H halted, P paused, Q quotation only) and h (Operational Halt of
 * market 'Q': H halted, T resumed). When the state's letter changes ('T', 'H', 'P', 'Q',
 * or 'h' for an operational halt of a trading symbol) a LOB_STATE event is written:
 * qty 1 (halted: the book keeps every displayed order without matching) unless 'T',
 * price = the letter. */
size_t lob_itch_events(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                       const uint8_t *select, lob_event *ev, int64_t *ts, uint32_t *msg_index,
                       uint16_t *state);

/* Price maps (docs/itch.md, "Far-off prices"). A mapped book's core prices are ranks:
 * the rank of a price among the sorted union of its grid (low + k * tick, 0 <= k < n;
 * n = 0: none, a ladder) and its extras (extras[first .. first + n_extra), ascending,
 * none on the grid; ranks[first + j] = the rank of extras[first + j]). The rank is
 * monotone in the price, so the core's priority, matching and best prices are the real
 * ones'. */
typedef struct lob_itch_pmap {
    int64_t low, tick;
    uint32_t n, n_extra, first, reserved;
} lob_itch_pmap;
/* The events of mapped books (book_map[instrument] = 1 + index into maps; 0: not mapped,
 * the event is left as it is) to their core prices, in place: a NEW or REPLACE price
 * to its rank; an EXEC with LOB_F_PRICE too, and when the price is not on the map
 * (an execution price need not be an order price) to -1 - price, which no rank equals
 * (the core then reports the price as differing; -1 - value gives it back). A NEW or
 * REPLACE price not on the map (pass 1 saw every order price, so none) also becomes
 * -1 - price, outside the book's band (LOB_EBAND). outside[index] gains one for each
 * NEW or REPLACE at an extra price. Instruments past 65,535 are left as they are. */
void lob_itch_map_prices(const uint16_t *book_map, const lob_itch_pmap *maps, const int64_t *extras,
                         const uint32_t *ranks, lob_event *ev, size_t n, uint64_t *outside);

/* A chunk's events regrouped by book, each book's in their order: ev_out gets
 * instrument 0's events, then instrument 1's, ..., and ts_out, msg_out the
 * timestamps and message indexes that go with them. Books do not interact, so
 * every event has the same outcome applied this way, and the core works on one
 * book's memory at a time instead of a different book's at every event (a day of
 * 1,000 books: a quarter less core time; benchmarks/RESULTS.md). counts: scratch
 * of 65,536 entries. LOB_OK, or LOB_EARG if an instrument is past 65,535 (not a
 * stock locate) or an array is NULL (nothing written). */
int lob_itch_group(const lob_event *ev, const int64_t *ts, const uint32_t *msg_index, size_t n, uint32_t *counts,
                   lob_event *ev_out, int64_t *ts_out, uint32_t *msg_out);

/* cdef-end */

#ifdef __cplusplus
}
#endif

#endif /* LOB_ITCH_H */
