/*
 * itch_synth.h -- a fast, seeded generator of a synthetic NASDAQ TotalView-ITCH 5.0 day
 * (BinaryFILE framing), for full-size days: hundreds of millions of messages, thousands of
 * symbols, the real day's message mix, written in minutes.
 *
 * It follows the same plan as the Python generator (lobreplay/testing/itch_synth.py; not the same
 * bytes): a directory spin, order flow from 04:00 to 20:00 shaped by an intensity profile,
 * opening and closing crosses, NOII before them, then a delete for every live order. Each
 * symbol has a naive book (a dense window of price levels per side, FIFO lists of orders, and
 * a short list of far-off orders outside it), so every execution takes the front order of
 * the best level (price-time priority), adds and replaces never cross the book while the
 * symbol trades, and a replay of the day finds nothing wrong. Optional real-day features
 * (LOB_SYNTH_*): LULD pauses and halts whose displayed orders cross, an IPO, and their halt
 * crosses; an operational halt; an MWCB status; far-off orders. Deterministic per seed.
 *
 * The caller drives it in chunks: lob_synth_fill writes whole frames into its buffer until
 * the buffer has less than LOB_SYNTH_MIN_CAP bytes left or the day is done (0 bytes).
 */
#ifndef LOB_ITCH_SYNTH_H
#define LOB_ITCH_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cdef-begin */

#define LOB_SYNTH_HALTS 1u        /* LULD pauses and halts with crossing orders, halt crosses */
#define LOB_SYNTH_IPO 2u          /* one IPO: halted from the start, K, H "Q", crossing orders, its cross */
#define LOB_SYNTH_OPERATIONAL 4u  /* one operational halt (h "H" then "T") */
#define LOB_SYNTH_FAR_OFF 8u      /* far-off orders (8x, 1/8, $199,999.99, $1,000 in a sub-dollar stock) */
#define LOB_SYNTH_MWCB 16u        /* one MWCB status (W, level 1) */
#define LOB_SYNTH_MAX_PRICE 32u   /* with FAR_OFF: also the $199,999.99 orders (0: left out) */
#define LOB_SYNTH_MIN_CAP (1u << 22) /* lob_synth_fill needs at least this much room */

typedef struct lob_synth_config {
    uint64_t n_messages;
    uint64_t seed;
    uint32_t n_symbols;           /* 1..65535 */
    uint32_t resting_per_symbol;  /* live orders per symbol the flow steers to; 0: from the day's size */
    uint32_t features;            /* LOB_SYNTH_* bits */
    uint32_t reserved;
} lob_synth_config;

/* What was planted, one row each: kind 1 pause, 2 halt, 3 IPO, 4 operational halt (start, end,
 * cross price and shares; executions = C "N" messages of the cross), 5 a crossing order
 * (start = when added, ref, side, price, shares), 6 a far-off order (start = added, end =
 * deleted or 0, ref, side, price, shares, why: 1 x8, 2 1/8, 3 max price, 4 $1,000 sub-penny,
 * 5 best and trades, executions = shares executed). */
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
    uint64_t counts[128];         /* messages by type byte */
    uint64_t messages;
    uint64_t bytes;
    uint64_t peak_live;
    uint64_t live;
    uint64_t last_order_ref;
    uint64_t last_match;
    uint64_t executed_shares;
    uint64_t book_bytes;          /* memory of the generator's books and orders */
    uint32_t n_plants;
    uint32_t done;
} lob_synth_stats;

typedef struct lob_synth lob_synth;

/* NULL on bad arguments (*status = LOB_EARG) or no memory (LOB_ENOMEM). */
lob_synth *lob_synth_new(const lob_synth_config *cfg, int *status);
void lob_synth_free(lob_synth *s);
/* Whole frames into out[0..cap); returns the bytes written (0: the day is done) and adds the
 * messages written to *n_messages. cap must be at least LOB_SYNTH_MIN_CAP. */
size_t lob_synth_fill(lob_synth *s, uint8_t *out, size_t cap, uint64_t *n_messages);
void lob_synth_get_stats(const lob_synth *s, lob_synth_stats *st);
/* Copies up to cap planted rows; returns how many there are. */
size_t lob_synth_plants(const lob_synth *s, lob_synth_plant *out, size_t cap);
/* The symbol of a locate (8 bytes, space-padded), its tick and whether it is a test issue. */
int lob_synth_symbol(const lob_synth *s, uint32_t locate, char *name8, uint32_t *tick, int *test);

/* cdef-end */

#ifdef __cplusplus
}
#endif

#endif
