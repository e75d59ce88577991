/*
 * bnjson.c -- depthUpdate, trade, aggTrade and bookTicker messages decoded in C
 * (bnjson.h).
 *
 * A strict reader of the exact shape Binance sends (no blanks inside the
 * message, known keys once each, unescaped ASCII strings, plain integers):
 * whatever it does not take is left, whole, to the Python path.
 */
#define _GNU_SOURCE /* memmem */
#include "bnjson.h"

#include <string.h>

typedef struct cur {
    const uint8_t *p, *end;
    int full; /* the level arrays ran out of room */
} cur;

static const uint64_t POW10[20] = {1ULL,
                                   10ULL,
                                   100ULL,
                                   1000ULL,
                                   10000ULL,
                                   100000ULL,
                                   1000000ULL,
                                   10000000ULL,
                                   100000000ULL,
                                   1000000000ULL,
                                   10000000000ULL,
                                   100000000000ULL,
                                   1000000000000ULL,
                                   10000000000000ULL,
                                   100000000000000ULL,
                                   1000000000000000ULL,
                                   10000000000000000ULL,
                                   100000000000000000ULL,
                                   1000000000000000000ULL,
                                   10000000000000000000ULL};

static inline int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static inline int lit(cur *c, const char *s, size_t n)
{
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n)) return 0;
    c->p += n;
    return 1;
}

/* A JSON integer as Python's json reads it (no sign, no leading zero, no fraction
 * or exponent), 0 .. 2^64 - 1. */
static int json_u64(cur *c, uint64_t *out)
{
    const uint8_t *p = c->p;
    if (p >= c->end || !is_digit(*p)) return 0;
    if (*p == '0' && p + 1 < c->end && is_digit(p[1])) return 0;
    uint64_t v = 0;
    while (p < c->end && is_digit(*p)) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
        p++;
    }
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E')) return 0;
    c->p = p;
    *out = v;
    return 1;
}

/* A string of printable ASCII without escapes: its span. */
static int json_str(cur *c, const uint8_t **s, size_t *n)
{
    const uint8_t *p = c->p;
    if (p >= c->end || *p != '"') return 0;
    const uint8_t *q = ++p;
    while (q < c->end && *q != '"') {
        if (*q < 0x20 || *q > 0x7e || *q == '\\') return 0;
        q++;
    }
    if (q >= c->end) return 0;
    *s = p;
    *n = (size_t)(q - p);
    c->p = q + 1;
    return 1;
}

/* A decimal string ("64123.45", "0.00100000") as an integer of 10^-digits units,
 * exactly as lobreplay.l2.lobc.parse_decimal takes it: digits, at most one point with
 * digits after it; more significant decimals than the scale holds, or a value
 * beyond int64, are refused (0). */
static int json_decimal(cur *c, uint32_t digits, int64_t *out)
{
    const uint8_t *p = c->p, *end = c->end;
    if (p >= end || *p != '"') return 0;
    p++;
    if (p >= end || !is_digit(*p)) return 0;
    while (p < end && *p == '0') p++; /* leading zeros */
    uint64_t whole = 0;
    int nw = 0;
    while (p < end && is_digit(*p)) {
        if (++nw > 19) return 0;
        whole = whole * 10 + (uint64_t)(*p - '0');
        p++;
    }
    uint64_t frac = 0;
    uint32_t nf = 0;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) return 0;
        while (p < end && is_digit(*p)) {
            if (nf < digits) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                nf++;
            } else if (*p != '0') {
                return 0; /* a significant decimal beyond the scale: refused, never rounded */
            }
            p++;
        }
    }
    if (p >= end || *p != '"') return 0;
    /* whole * 10^digits + frac * 10^(digits - nf) <= INT64_MAX */
    unsigned __int128 v = (unsigned __int128)whole * POW10[digits] + (unsigned __int128)frac * POW10[digits - nf];
    if (v > (unsigned __int128)INT64_MAX) return 0;
    *out = (int64_t)v;
    c->p = p + 1;
    return 1;
}

/* [["p","q"],...] into levels[2 * (*n) ..]: 0 if not that shape or out of room. */
static int json_levels(cur *c, uint32_t pd, uint32_t qd, int64_t *levels, size_t cap, size_t *n, uint32_t *count)
{
    if (!lit(c, "[", 1)) return 0;
    uint32_t k = 0;
    if (lit(c, "]", 1)) {
        *count = 0;
        return 1;
    }
    for (;;) {
        if (*n >= cap) {
            c->full = 1;
            return 0;
        }
        if (!lit(c, "[", 1) || !json_decimal(c, pd, &levels[2 * *n]) || !lit(c, ",", 1) ||
            !json_decimal(c, qd, &levels[2 * *n + 1]) || !lit(c, "]", 1))
            return 0;
        (*n)++;
        k++;
        if (lit(c, "]", 1)) break;
        if (!lit(c, ",", 1)) return 0;
    }
    *count = k;
    return 1;
}

/* A time in ms since the epoch: a JSON integer whose ns still fit int64 (MAX_MS of
 * lobreplay.binance.sync), into ln->exch_ms. */
static int json_ms(cur *c, lob_bn_line *ln)
{
    uint64_t v;
    if (!json_u64(c, &v) || v > UINT64_C(9223372036853)) return 0;
    ln->exch_ms = (int64_t)v;
    return 1;
}

/* "s": the symbol, its span in buf into ln. */
static int json_symbol(cur *c, const uint8_t *buf, lob_bn_line *ln)
{
    const uint8_t *s;
    size_t sn;
    if (!json_str(c, &s, &sn)) return 0;
    ln->sym_start = (uint32_t)(s - buf);
    ln->sym_len = (int32_t)sn;
    return 1;
}

enum { K_E = 1, K_EMS = 2, K_T = 4, K_S = 8, K_UU = 16, K_LU = 32, K_PU = 64, K_B = 128, K_A = 256 };

/* The data object of a depthUpdate. 1: decoded into *ln (levels appended). */
static int depth_object(cur *c, const uint8_t *buf, int usdm, uint32_t pd, uint32_t qd, lob_bn_line *ln,
                        int64_t *levels, size_t cap, size_t *n)
{
    if (!lit(c, "{", 1)) return 0;
    unsigned seen = 0;
    size_t n0 = *n;
    uint32_t nb = 0, na = 0;
    for (;;) {
        const uint8_t *k;
        size_t kn;
        if (!json_str(c, &k, &kn) || !lit(c, ":", 1)) return 0;
        unsigned key = 0;
        if (kn == 1) {
            switch (k[0]) {
            case 'e': key = K_E; break;
            case 'E': key = K_EMS; break;
            case 'T': key = K_T; break;
            case 's': key = K_S; break;
            case 'U': key = K_UU; break;
            case 'u': key = K_LU; break;
            case 'b': key = K_B; break;
            case 'a': key = K_A; break;
            default: return 0;
            }
        } else if (kn == 2 && k[0] == 'p' && k[1] == 'u') {
            key = K_PU;
        } else {
            return 0;
        }
        if (seen & key) return 0; /* a key twice: Python keeps the last, let it */
        seen |= key;
        uint64_t v;
        const uint8_t *s;
        size_t sn;
        switch (key) {
        case K_E:
            if (!json_str(c, &s, &sn) || sn != 11 || memcmp(s, "depthUpdate", 11)) return 0;
            break;
        case K_EMS:
            if (!json_ms(c, ln)) return 0;
            break;
        case K_T:
            if (!json_u64(c, &v)) return 0;
            break;
        case K_S:
            if (!json_symbol(c, buf, ln)) return 0;
            break;
        case K_UU:
            if (!json_u64(c, &ln->first_id)) return 0;
            break;
        case K_LU:
            if (!json_u64(c, &ln->last_id)) return 0;
            break;
        case K_PU:
            if (!json_u64(c, &v)) return 0;
            ln->prev_id = usdm ? v : 0;
            break;
        case K_B:
            if (seen & K_A) return 0; /* the asks first: not the usual shape */
            if (!json_levels(c, pd, qd, levels, cap, n, &nb)) return 0;
            break;
        case K_A:
            if (!(seen & K_B)) return 0;
            if (!json_levels(c, pd, qd, levels, cap, n, &na)) return 0;
            break;
        }
        if (lit(c, "}", 1)) break;
        if (!lit(c, ",", 1)) return 0;
    }
    unsigned need = K_E | K_UU | K_LU | K_B | K_A | (usdm ? K_PU : 0);
    if ((seen & need) != need || ln->first_id > ln->last_id) return 0;
    ln->level = n0;
    ln->n_bids = nb;
    ln->n_asks = na;
    return 1;
}

/* true / false */
static int json_bool(cur *c, uint8_t *out)
{
    if (lit(c, "true", 4)) {
        *out = 1;
        return 1;
    }
    if (lit(c, "false", 5)) {
        *out = 0;
        return 1;
    }
    return 0;
}

enum { T_E = 1, T_EMS = 2, T_T = 4, T_S = 8, T_ID = 16, T_P = 32, T_Q = 64, T_M = 128, T_MM = 256, T_X = 512,
       T_A = 1024, T_F = 2048, T_L = 4096 };

/* The data object of a trade or aggTrade, from just after `{"e":"trade",` / `{"e":"aggTrade",`
 * (the keys lobreplay.binance.sync reads: t or f, l; p, q, m, T, s; E, M, X, a only checked).
 * 1: decoded into *ln, its price, qty pair at levels[2 * *n]. */
static int trade_object(cur *c, const uint8_t *buf, int agg, uint32_t pd, uint32_t qd, lob_bn_line *ln,
                        int64_t *levels, size_t cap, size_t *n)
{
    if (*n >= cap) {
        c->full = 1;
        return 0;
    }
    unsigned seen = T_E;
    for (;;) {
        const uint8_t *k;
        size_t kn;
        if (!json_str(c, &k, &kn) || kn != 1 || !lit(c, ":", 1)) return 0;
        unsigned key = 0;
        switch (k[0]) {
        case 'E': key = T_EMS; break;
        case 'T': key = T_T; break;
        case 's': key = T_S; break;
        case 't': key = agg ? 0 : T_ID; break;
        case 'p': key = T_P; break;
        case 'q': key = T_Q; break;
        case 'm': key = T_M; break;
        case 'M': key = T_MM; break;
        case 'X': key = agg ? 0 : T_X; break;
        case 'a': key = agg ? T_A : 0; break;
        case 'f': key = agg ? T_F : 0; break;
        case 'l': key = agg ? T_L : 0; break;
        default: break;
        }
        if (!key || (seen & key)) return 0; /* unknown, or a key twice (Python keeps the last) */
        seen |= key;
        uint64_t v;
        uint8_t b;
        const uint8_t *s;
        size_t sn;
        switch (key) {
        case T_EMS:
        case T_A:
            if (!json_u64(c, &v)) return 0;
            break;
        case T_T:
            if (!json_ms(c, ln)) return 0;
            break;
        case T_S:
            if (!json_symbol(c, buf, ln)) return 0;
            break;
        case T_ID:
            if (!json_u64(c, &ln->first_id)) return 0;
            ln->last_id = ln->first_id;
            break;
        case T_F:
            if (!json_u64(c, &ln->first_id)) return 0;
            break;
        case T_L:
            if (!json_u64(c, &ln->last_id)) return 0;
            break;
        case T_P:
            if (!json_decimal(c, pd, &levels[2 * *n])) return 0;
            break;
        case T_Q:
            if (!json_decimal(c, qd, &levels[2 * *n + 1])) return 0;
            break;
        case T_M:
            if (!json_bool(c, &ln->maker)) return 0;
            break;
        case T_MM:
            if (!json_bool(c, &b)) return 0;
            break;
        case T_X:
            if (!json_str(c, &s, &sn)) return 0;
            break;
        }
        if (lit(c, "}", 1)) break;
        if (!lit(c, ",", 1)) return 0;
    }
    unsigned need = T_P | T_Q | T_M | (agg ? (T_F | T_L) : T_ID);
    if ((seen & need) != need) return 0;
    ln->level = *n;
    ln->n_bids = 1;
    (*n)++;
    return 1;
}

enum { B_U = 1, B_S = 2, B_B = 4, B_BQ = 8, B_A = 16, B_AQ = 32, B_T = 64, B_EMS = 128 };

/* The data object of a bookTicker, from just after `{` or `{"e":"bookTicker",` (has_e):
 * u, s, b, B, a, A, E read; T only checked. 1: decoded into *ln, the pairs b, B then a, A
 * at levels[2 * *n ..]. */
static int ticker_object(cur *c, const uint8_t *buf, uint32_t pd, uint32_t qd, lob_bn_line *ln, int64_t *levels,
                         size_t cap, size_t *n)
{
    if (*n + 2 > cap) {
        c->full = 1;
        return 0;
    }
    int64_t *lv = &levels[2 * *n];
    unsigned seen = 0;
    for (;;) {
        const uint8_t *k;
        size_t kn;
        if (!json_str(c, &k, &kn) || kn != 1 || !lit(c, ":", 1)) return 0;
        unsigned key = 0;
        switch (k[0]) {
        case 'u': key = B_U; break;
        case 's': key = B_S; break;
        case 'b': key = B_B; break;
        case 'B': key = B_BQ; break;
        case 'a': key = B_A; break;
        case 'A': key = B_AQ; break;
        case 'T': key = B_T; break;
        case 'E': key = B_EMS; break;
        default: break;
        }
        if (!key || (seen & key)) return 0;
        seen |= key;
        uint64_t v;
        switch (key) {
        case B_U:
            if (!json_u64(c, &ln->first_id)) return 0;
            break;
        case B_S:
            if (!json_symbol(c, buf, ln)) return 0;
            break;
        case B_B:
            if (!json_decimal(c, pd, &lv[0])) return 0;
            break;
        case B_BQ:
            if (!json_decimal(c, qd, &lv[1])) return 0;
            break;
        case B_A:
            if (!json_decimal(c, pd, &lv[2])) return 0;
            break;
        case B_AQ:
            if (!json_decimal(c, qd, &lv[3])) return 0;
            break;
        case B_T:
            if (!json_u64(c, &v)) return 0;
            break;
        case B_EMS:
            if (!json_ms(c, ln)) return 0;
            break;
        }
        if (lit(c, "}", 1)) break;
        if (!lit(c, ",", 1)) return 0;
    }
    unsigned need = B_U | B_B | B_BQ | B_A | B_AQ;
    if ((seen & need) != need) return 0;
    ln->level = *n;
    ln->n_bids = ln->n_asks = 1;
    *n += 2;
    return 1;
}

/* The data object of one message: a trade, an aggTrade, a bookTicker (told by how it
 * starts) or else a depthUpdate. Its status, or LOB_BN_OTHER. */
static int data_object(cur *c, const uint8_t *buf, int usdm, uint32_t pd, uint32_t qd, lob_bn_line *ln,
                       int64_t *levels, size_t cap, size_t *n)
{
    if (lit(c, "{\"e\":\"trade\",", 13))
        return trade_object(c, buf, 0, pd, qd, ln, levels, cap, n) ? LOB_BN_TRADE : LOB_BN_OTHER;
    if (lit(c, "{\"e\":\"aggTrade\",", 16))
        return trade_object(c, buf, 1, pd, qd, ln, levels, cap, n) ? LOB_BN_AGGTRADE : LOB_BN_OTHER;
    if (lit(c, "{\"e\":\"bookTicker\",", 18) ||
        ((size_t)(c->end - c->p) > 5 && !memcmp(c->p, "{\"u\":", 5) && lit(c, "{", 1)))
        return ticker_object(c, buf, pd, qd, ln, levels, cap, n) ? LOB_BN_TICKER : LOB_BN_OTHER;
    return depth_object(c, buf, usdm, pd, qd, ln, levels, cap, n) ? LOB_BN_DEPTH : LOB_BN_OTHER;
}

/* One message: the envelope or the bare payload, then only blanks. Its status. */
static int bn_message(cur *c, const uint8_t *buf, int usdm, uint32_t pd, uint32_t qd, lob_bn_line *ln,
                      int64_t *levels, size_t cap, size_t *n)
{
    ln->stream_len = -1;
    ln->sym_len = -1;
    ln->exch_ms = -1;
    ln->prev_id = 0;
    int st;
    if (lit(c, "{\"stream\":", 10)) {
        const uint8_t *s;
        size_t sn;
        if (!json_str(c, &s, &sn) || !lit(c, ",\"data\":", 8)) return LOB_BN_OTHER;
        ln->stream_start = (uint32_t)(s - buf);
        ln->stream_len = (int32_t)sn;
        st = data_object(c, buf, usdm, pd, qd, ln, levels, cap, n);
        if (st == LOB_BN_OTHER || !lit(c, "}", 1)) return LOB_BN_OTHER;
    } else if ((st = data_object(c, buf, usdm, pd, qd, ln, levels, cap, n)) == LOB_BN_OTHER) {
        return LOB_BN_OTHER;
    }
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++;
    return c->p == c->end ? st : LOB_BN_OTHER;
}

static int span_eq(const uint8_t *buf, uint32_t a, int32_t an, uint32_t b, int32_t bn)
{
    return an == bn && (an < 0 || !memcmp(buf + a, buf + b, (size_t)an));
}

/* Whether lines a and b have the same (stream, s) name. */
static int same_name(const uint8_t *buf, const lob_bn_line *a, const lob_bn_line *b)
{
    return span_eq(buf, a->stream_start, a->stream_len, b->stream_start, b->stream_len) &&
           span_eq(buf, a->sym_start, a->sym_len, b->sym_start, b->sym_len);
}

/* FNV-1a of a span (a length of -1, no span, hashes apart from the empty one). */
static uint32_t span_hash(uint32_t h, const uint8_t *buf, uint32_t a, int32_t an)
{
    h = (h ^ (uint32_t)(an + 1)) * 16777619u;
    for (int32_t i = 0; i < an; i++) h = (h ^ buf[a + (uint32_t)i]) * 16777619u;
    return h;
}

enum { NAME_SLOTS = 4 * LOB_BN_NAMES }; /* the names' hash table: at most a quarter full */

int lob_bn_decode(const uint8_t *buf, size_t len, int flags, uint32_t price_digits, uint32_t qty_digits,
                  lob_bn_line *lines, size_t line_cap, size_t *n_lines, int64_t *levels, size_t level_cap,
                  size_t *n_levels, size_t *consumed, uint32_t *names, size_t *n_names)
{
    if (!n_lines || !n_levels || !consumed || !names || !n_names || (len && !buf) || (line_cap && !lines) || (level_cap && !levels) ||
        len >= (UINT64_C(1) << 32) || price_digits > 18 || qty_digits > 18)
        return LOB_EARG;
    int usdm = (flags & LOB_BN_USDM) != 0, bare = (flags & LOB_BN_BARE) != 0;
    size_t nl = 0, nv = 0, pos = 0, nn = 0;
    uint32_t slot[NAME_SLOTS]; /* name id + 1 (0: empty), by the hash of its (stream, s) */
    memset(slot, 0, sizeof slot);
    while (pos < len && nl < line_cap) {
        const uint8_t *nlp = memchr(buf + pos, '\n', len - pos);
        size_t end = nlp ? (size_t)(nlp - buf) : len;
        lob_bn_line *ln = &lines[nl];
        memset(ln, 0, sizeof *ln);
        ln->start = (uint32_t)pos;
        ln->len = (uint32_t)(end - pos);
        ln->stream_len = ln->sym_len = -1;
        ln->exch_ms = -1;
        cur c = {buf + pos, buf + end, 0};
        int ok = 1;
        if (!bare) { /* <recv ns> and one space, as int() takes them (digits only here) */
            uint64_t v = 0;
            int nd = 0;
            while (c.p < c.end && is_digit(*c.p)) {
                if (++nd > 19) break;
                v = v * 10 + (uint64_t)(*c.p - '0');
                c.p++;
            }
            ok = nd >= 1 && nd <= 19 && v <= (uint64_t)INT64_MAX && c.p < c.end && *c.p == ' ';
            ln->recv_ns = (int64_t)v;
            c.p++;
        }
        size_t n0 = nv;
        int st = ok && c.p < c.end && *c.p == '{'
                     ? bn_message(&c, buf, usdm, price_digits, qty_digits, ln, levels, level_cap, &nv)
                     : LOB_BN_OTHER;
        if (st != LOB_BN_OTHER) { /* its (stream, s) pair: among a few names by a look at each, else by hash */
            size_t k = nn;
            uint32_t h = 0;
            if (nn <= 8) {
                for (k = 0; k < nn && !same_name(buf, ln, &lines[names[k]]); k++) {
                }
            }
            if (k == nn) { /* (a new name needs its slot: found by hash too) */
                h = span_hash(span_hash(2166136261u, buf, ln->stream_start, ln->stream_len), buf, ln->sym_start,
                              ln->sym_len) % NAME_SLOTS;
                for (; slot[h]; h = (h + 1) % NAME_SLOTS) {
                    if (same_name(buf, ln, &lines[names[slot[h] - 1]])) {
                        k = slot[h] - 1;
                        break;
                    }
                }
            }
            if (k == nn) {
                if (nn < LOB_BN_NAMES) {
                    names[nn++] = (uint32_t)nl;
                    slot[h] = (uint32_t)nn;
                } else {
                    st = LOB_BN_OTHER; /* one name too many: the Python path */
                }
            }
            ln->name_id = (uint32_t)k;
        }
        if (st != LOB_BN_OTHER) {
            ln->status = (uint8_t)st;
        } else {
            nv = n0;
            if (c.full) break; /* out of level room: stop before this line */
            ln->status = LOB_BN_OTHER;
            ln->n_bids = ln->n_asks = 0;
            ln->level = 0;
            ln->maker = 0;
            ln->name_id = 0;
        }
        nl++;
        pos = nlp ? end + 1 : end;
    }
    *n_lines = nl;
    *n_levels = nv;
    *consumed = pos;
    *n_names = nn;
    return LOB_OK;
}

/* ---- distinct values of a string field ------------------------------------------------ */

static inline int is_blank(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static inline int is_word(uint8_t c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
}

enum { VALUE_TABLE = 1 << 13 }; /* > 2 * LOB_BN_VALUES_MAX */

int lob_bn_values(const uint8_t *buf, size_t len, const uint8_t *key, size_t key_len, int word, uint32_t *starts,
                  uint32_t *lens, size_t cap, size_t *n, int *more)
{
    *n = 0;
    *more = 0;
    if ((len && !buf) || !key || key_len == 0 || key_len > 64 || len >= (1ULL << 32) || cap > LOB_BN_VALUES_MAX)
        return LOB_EARG;
    uint8_t needle[68];
    needle[0] = '"';
    memcpy(needle + 1, key, key_len);
    needle[key_len + 1] = '"';
    needle[key_len + 2] = ':';
    size_t nlen = key_len + 3;
    uint32_t table[VALUE_TABLE]; /* value index + 1 by hash; 0: empty */
    memset(table, 0, sizeof table);
    const uint8_t *p = buf, *end = buf + len;
    while ((size_t)(end - p) >= nlen) {
        const uint8_t *hit = memmem(p, (size_t)(end - p), needle, nlen);
        if (!hit) break;
        const uint8_t *v = hit + nlen;
        p = v;
        while (v < end && is_blank(*v)) v++;
        if (v >= end || *v != '"') continue;
        const uint8_t *s = ++v;
        while (v < end && *v != '"' && (!word || is_word(*v))) v++;
        if (v >= end || *v != '"' || v == s) continue;
        uint32_t vlen = (uint32_t)(v - s);
        uint32_t h = 2166136261u; /* FNV-1a */
        for (uint32_t i = 0; i < vlen; i++) h = (h ^ s[i]) * 16777619u;
        for (uint32_t i = h & (VALUE_TABLE - 1);; i = (i + 1) & (VALUE_TABLE - 1)) {
            uint32_t k = table[i];
            if (k == 0) {
                if (*n == cap) {
                    *more = 1;
                    return LOB_OK;
                }
                starts[*n] = (uint32_t)(s - buf);
                lens[*n] = vlen;
                table[i] = (uint32_t)++*n;
                break;
            }
            if (lens[k - 1] == vlen && memcmp(buf + starts[k - 1], s, vlen) == 0) break;
        }
        p = v + 1;
    }
    return LOB_OK;
}
