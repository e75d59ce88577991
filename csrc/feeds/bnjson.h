/*
 * bnjson.h -- Binance diff-depth (depthUpdate), trade, aggTrade and bookTicker
 * messages decoded in C, a batch of recorded lines per call, for the JSONL -> .lobc
 * conversion (docs/binance.md).
 *
 * A line is `<recv ns> <message>` (the hftbacktest collector's and our --raw
 * format; with LOB_BN_BARE, just `<message>`). The message is the combined-stream
 * envelope {"stream":"<name>","data":{...}} or the bare payload
 * {"e":"depthUpdate","E":..,"T":..,"s":..,"U":..,"u":..,"pu":..,"b":[[p,q],..],"a":[..]},
 * {"e":"trade","E":..,"s":..,"t":..,"p":..,"q":..,"T":..,"m":..,"M":..} (USD-M: "X" too),
 * {"e":"aggTrade","E":..,"s":..,"a":..,"p":..,"q":..,"f":..,"l":..,"T":..,"m":..,"M":..},
 * {"u":..,"s":..,"b":..,"B":..,"a":..,"A":..} (bookTicker; USD-M: "e" first, "T", "E" last).
 * Prices and quantities (decimal strings) become scaled integers straight from
 * their digits, never through a float.
 *
 * The decoder only takes what it is sure of: a line it decodes gives exactly
 * what the Python path (lobreplay.binance.sync) would take from it. Anything
 * else -- another message type, a field it does not know, a value out of range,
 * a decimal with more significant decimals than the scale holds or that does
 * not fit int64, escapes, blanks, non-ASCII bytes, a malformed line -- is left
 * to the Python path (status 0), which decides, and reports errors, as before.
 */
#ifndef LOB_BNJSON_H
#define LOB_BNJSON_H

#include "lob.h"
#include "l2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cdef-begin */

enum { LOB_BN_USDM = 1, LOB_BN_BARE = 2 };   /* lob_bn_decode flags */
enum { LOB_BN_OTHER = 0, LOB_BN_DEPTH = 1, LOB_BN_TRADE = 2, LOB_BN_AGGTRADE = 3,
       LOB_BN_TICKER = 4 };                 /* lob_bn_line.status */
enum { LOB_BN_NAMES = 1024 };               /* distinct (stream, s) pairs of decoded messages per call */

/* One line of the batch. Offsets are into buf. Trades: first_id = last_id = t (aggTrade:
 * f, l), exch_ms = T, one price, qty pair at `level`, maker = m. Tickers: first_id = u,
 * exch_ms = E, two pairs at `level`: b, B then a, A. */
typedef struct lob_bn_line {
    int64_t recv_ns;          /* the line's <recv ns> (LOB_BN_BARE: 0) */
    uint64_t first_id;        /* U */
    uint64_t last_id;         /* u */
    uint64_t prev_id;         /* pu (USD-M; 0 on spot) */
    int64_t exch_ms;          /* E in ms; -1 when the message has none */
    uint64_t level;           /* its first level in the level arrays: bids, then asks */
    uint32_t start;           /* the line: buf[start .. start + len), without its newline */
    uint32_t len;
    uint32_t stream_start;    /* the envelope's stream name (stream_len = -1: no envelope) */
    int32_t stream_len;
    uint32_t sym_start;       /* "s" (sym_len = -1: none) */
    int32_t sym_len;
    uint32_t n_bids, n_asks;
    uint32_t name_id;         /* decoded lines: index of its (stream, s) pair in names[] */
    uint8_t status;           /* LOB_BN_DEPTH/TRADE/AGGTRADE/TICKER: decoded; LOB_BN_OTHER: for the Python path */
    uint8_t maker;            /* trades: m (1: true) */
    uint8_t reserved[2];
} lob_bn_line;

/* Split buf[0 .. len) (len < 2^32) into lines at '\n' (a last line without one
 * counts) and decode the depthUpdate, trade, aggTrade and bookTicker messages among
 * them. The distinct (stream, s) pairs of the decoded messages are numbered in
 * order of appearance: names[k] is the index of the first line with name_id k
 * (*n_names of them, at most LOB_BN_NAMES; a message with one more is left
 * to the Python path). Writes one
 * lob_bn_line per line (up to line_cap) and the levels of the decoded messages
 * as price, qty pairs into levels[2 * level_cap] (price_digits, qty_digits: the
 * scales' powers of ten, 0 .. 18). Stops before a line that does not fit:
 * *n_lines lines were written, *consumed bytes (whole lines) were walked.
 * Returns LOB_OK or LOB_EARG. */
int lob_bn_decode(const uint8_t *buf, size_t len, int flags, uint32_t price_digits, uint32_t qty_digits,
                  lob_bn_line *lines, size_t line_cap, size_t *n_lines, int64_t *levels, size_t level_cap,
                  size_t *n_levels, size_t *consumed, uint32_t *names, size_t *n_names);

enum { LOB_BN_VALUES_MAX = 4096 };

/* The distinct values of a string field in buf[0 .. len) (len < 2^32), in order of
 * first appearance: every `"<key>":"<value>"` (blanks allowed after the colon; the value
 * runs to the next '"', is not empty and, with word set, holds only [A-Za-z0-9_-]),
 * as the regex "<key>":\s*"([^"]+)" (or "([A-Za-z0-9_\-]+)") finds them, anywhere in the
 * text. buf[starts[k] .. starts[k] + lens[k]) for k < *n; at most cap (<=
 * LOB_BN_VALUES_MAX): *more is 1 if there were more. key: 1 .. 64 bytes. For the scan
 * that finds a recording's streams and symbols. Returns LOB_OK or LOB_EARG. */
int lob_bn_values(const uint8_t *buf, size_t len, const uint8_t *key, size_t key_len, int word, uint32_t *starts,
                  uint32_t *lens, size_t cap, size_t *n, int *more);

/* cdef-end */

#ifdef __cplusplus
}
#endif

#endif /* LOB_BNJSON_H */
