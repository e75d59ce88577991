/*
 * itch.c -- ITCH 5.0 framing, first-pass scan and event conversion (itch.h).
 * Field offsets (itch.h, LOB_ITCH_AT_*) and lengths (LENGTHS below) are the spec's:
 * tests/test_layout.py holds both to lobreplay/itch/spec.py, the table the Python
 * decoder reads.
 */
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE in hugemem.h */
#include "itch.h"
#include "hugemem.h"
#include "prefetch.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- big-endian reads ------------------------------------------------------- */

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

static inline uint32_t be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static inline uint64_t be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline int64_t be48(const uint8_t *p) { return (int64_t)(((uint64_t)be16(p) << 32) | be32(p + 2)); }

/* Offsets from the type byte (ITCH 5.0; itch.h). */
enum {
    O_LOCATE = LOB_ITCH_AT_LOCATE, O_TS = LOB_ITCH_AT_TIMESTAMP, O_REF = LOB_ITCH_AT_REF,
    O_A_SIDE = LOB_ITCH_AT_A_SIDE, O_A_SHARES = LOB_ITCH_AT_A_SHARES, O_A_PRICE = LOB_ITCH_AT_A_PRICE,
    O_E_SHARES = LOB_ITCH_AT_E_SHARES, O_C_PRINTABLE = LOB_ITCH_AT_C_PRINTABLE, O_C_PRICE = LOB_ITCH_AT_C_PRICE,
    O_X_SHARES = LOB_ITCH_AT_X_SHARES, O_U_NEW = LOB_ITCH_AT_U_NEW, O_U_SHARES = LOB_ITCH_AT_U_SHARES,
    O_U_PRICE = LOB_ITCH_AT_U_PRICE
};

static const uint8_t LENGTHS[256] = {
    ['S'] = 12, ['R'] = 39, ['H'] = 25, ['Y'] = 20, ['L'] = 26, ['V'] = 35, ['W'] = 12, ['K'] = 28,
    ['J'] = 35, ['h'] = 21, ['A'] = 36, ['F'] = 40, ['E'] = 31, ['C'] = 36, ['X'] = 23, ['D'] = 19,
    ['U'] = 35, ['P'] = 44, ['Q'] = 40, ['B'] = 19, ['I'] = 50, ['N'] = 20, ['O'] = 48,
};

uint32_t lob_itch_length(uint8_t type) { return LENGTHS[type]; }

/* ---- framing ------------------------------------------------------------------ */

int lob_itch_frames(const uint8_t *buf, size_t len, uint32_t *offsets, uint8_t *types, size_t cap,
                    uint64_t *type_counts, size_t *n_out, size_t *consumed, int *end, size_t *bad)
{
    size_t pos = 0, n = 0;
    int rc = LOB_OK;
    *end = 0;
    *bad = 0;
    if ((len && !buf) || (cap && (!offsets || !types)) || len >= (1ULL << 32)) {
        *n_out = *consumed = 0;
        return LOB_EARG;
    }
    while (n < cap && pos + 2 <= len) {
        uint32_t flen = be16(buf + pos);
        if (flen == 0) {
            pos += 2;
            *end = 1;
            break;
        }
        if (pos + 2 + flen > len) break; /* incomplete: the caller brings more bytes */
        uint8_t t = buf[pos + 2];
        /* a known type at its spec length; an unknown one at least the 11-byte header
         * (type, locate, tracking, timestamp) every ITCH 5.0 message starts with */
        if (LENGTHS[t] ? LENGTHS[t] != flen : flen < 11) {
            *bad = pos;
            rc = LOB_EFRAME;
            break;
        }
        offsets[n] = (uint32_t)(pos + 2);
        types[n] = t;
        n++;
        pos += 2 + flen;
    }
    if (type_counts)
        for (size_t i = 0; i < n; i++) type_counts[types[i]]++;
    *n_out = n;
    *consumed = pos;
    return rc;
}

/* ---- pass 1 ------------------------------------------------------------------- */

typedef struct ref_slot {
    uint64_t ref;      /* 0: empty (ITCH order references are never 0) */
    uint32_t shares;
    uint16_t locate;
} ref_slot;

/* The live-order map: open addressing, linear probing in Robin Hood order,
 * backward-shift deletion.
 * A feed numbers its orders in sequence (NASDAQ: one counter for the day), and
 * most messages name an order added shortly before. So a reference's home slot
 * is first the reference itself (modulo the size): the orders of a stretch of
 * the feed sit together, and a lookup finds its slot among recently touched
 * ones instead of anywhere in a map that outgrows the cache (pass 1 on a 1,000
 * symbol day: -30 %, benchmarks/RESULTS.md). References that collide in their
 * low bits would pile up there, so when probes average more than SCRAMBLE_PROBES
 * slots past home per lookup (over a window of PROBE_WINDOW lookups, checked
 * before each insertion, with PROBE_SLACK spare), the map is rebuilt with a
 * multiplicative hash (Fibonacci hashing: the top bits of ref * 2^64/phi) and
 * keeps it: a pathological feed costs a few thousand long probes, not a
 * quadratic pile-up. home = ref & mask while sequential (shift 0), else
 * (ref * FIB) >> shift.
 * Sequential homes also make long runs of occupied slots (every order of a
 * stretch of the feed still live), each at its home. A lookup or a deletion
 * that walked such a run to its end would cost its length (80,000 live
 * consecutive orders deleted oldest first: 7 s instead of milliseconds). Robin
 * Hood order keeps the entries of a run in the order of their homes (an
 * insertion takes the slot of the first entry nearer its own home than the new
 * one would be, and places that entry further on), so a lookup stops at the
 * first entry nearer its home than the reference would be there, and a deletion
 * shifts entries back only up to the first empty slot or entry at its home: in
 * a run of entries at their homes, both stop at once. (It replaced a bound on
 * every walk by the largest displacement since the last rebuild, which made a
 * deletion in such a run step that many slots: pass 1 on the 1,000-symbol day
 * about -14 % CPU time; benchmarks/RESULTS.md has the figures.)
 * The scan's loop copies the map's fields into a local ref_map and writes them
 * back when it returns or rebuilds the map, so that they stay in registers
 * (through s they would be loaded and stored again at each message: the stores
 * of the per-locate counts might alias them), and it is compiled twice, for
 * sequential and for scrambled homes, so that neither tests the mode per message. */
typedef struct ref_map {
    ref_slot *slots;
    uint64_t mask, used;
    uint64_t lookups, probes;     /* in the current window: probes, and slots stepped past home (sequential only) */
    int shift;                    /* 0: sequential homes; 64 - log2(size): scrambled */
} ref_map;

/* One locate's running figures (lob_itch_scan_stats writes them out as a lob_itch_locate).
 * All zero is the state before the locate's first message, so the table is calloc'd and
 * only the locates a feed names are ever touched. The first cache line holds what an add
 * (A, F) or a delete (D), nearly every message, reads and writes; the second the rest. */
typedef struct scan_loc {
    int64_t last_ts;
    uint64_t messages;
    uint64_t adds, deletes;
    uint32_t live, peak_live;
    uint64_t last_px;             /* the last A/F/U price + 1 (0: no price yet) */
    uint32_t min_not, max_price;  /* ~ the least price (0 before any: ~UINT32_MAX), the greatest */
    uint64_t gcd_div;             /* UINT64_MAX / gcd (0 while gcd is 0): see_price's divisibility test */
    /* second line */
    int64_t first_ts;             /* valid once messages > 0 */
    uint32_t gcd, unused;         /* gcd of the prices (0 while every one is 0) */
    uint64_t replaces, executions, cancels, executed_shares, unknown_refs;
    uint64_t pad;
} scan_loc;
_Static_assert(sizeof(scan_loc) == 128 && offsetof(scan_loc, first_ts) == 64, "scan_loc: two cache lines");

enum { OFF_WORDS = 64 };         /* 4,096 bits a locate: lob_itch_locate.distinct_min */

struct lob_itch_scan {
    scan_loc *loc;                /* [65536], 64-byte aligned in loc_block */
    void *loc_block;
    uint64_t seen[65536 / 64];    /* the locates with a message (the others' loc entries are never read) */
    ref_map map;
    uint64_t (*offbits)[OFF_WORDS]; /* per locate: a hash of its prices (distinct_min) */
};

#define FIB 0x9E3779B97F4A7C15ULL
enum { SCRAMBLE_PROBES = 4, PROBE_SLACK = 4096, PROBE_WINDOW = 1 << 16 };

/* scrambled: the caller's knowledge of m->shift != 0 (a constant where it is known) */
static inline uint64_t ref_home(const ref_map *m, uint64_t ref, int scrambled)
{
    return scrambled ? (ref * FIB) >> m->shift : ref & m->mask;
}

/* How far the entry in slot j sits past its home. */
static inline uint64_t ref_dist(const ref_map *m, uint64_t j, int scrambled)
{
    return (j - ref_home(m, m->slots[j].ref, scrambled)) & m->mask;
}

/* The slot that holds ref, or NULL: the walk from its home stops at an empty slot or
 * at an entry nearer its own home than ref would be there (Robin Hood order: ref
 * would have taken that slot). */
static inline ref_slot *ref_find(ref_map *m, uint64_t ref, int scrambled)
{
    uint64_t i = ref_home(m, ref, scrambled);
    if (!scrambled) m->lookups++;
    for (uint64_t d = 0;; d++) {
        uint64_t r = m->slots[i].ref;
        if (r == ref) return &m->slots[i];
        if (r == 0 || (d && ref_dist(m, i, scrambled) < d)) return NULL;
        i = (i + 1) & m->mask;
        if (!scrambled) m->probes++;
    }
}

/* Insert ref unless it is there already (returns 0 then, 1 when inserted). Robin Hood:
 * an entry nearer its home than the one being placed gives up its slot and is placed
 * further on, so the entries of a run sit in the order of their homes. */
static inline int ref_insert(ref_map *m, ref_slot e, int scrambled)
{
    uint64_t i = ref_home(m, e.ref, scrambled);
    if (!scrambled) m->lookups++;
    int first = 1; /* still placing ref itself (not an entry it displaced) */
    for (uint64_t d = 0;; d++) {
        uint64_t r = m->slots[i].ref;
        if (r == 0) {
            m->slots[i] = e;
            m->used++;
            return 1;
        }
        if (first && r == e.ref) return 0;
        uint64_t rd = d ? ref_dist(m, i, scrambled) : 0;
        if (rd < d) {
            ref_slot t = m->slots[i];
            m->slots[i] = e;
            e = t;
            d = rd;
            first = 0;
        }
        i = (i + 1) & m->mask;
        if (!scrambled) m->probes++;
    }
}

/* Backward shift: the entries after the slot move back one until an empty slot or one
 * at its home. */
static inline void ref_delete(ref_map *m, ref_slot *slot, int scrambled)
{
    uint64_t i = (uint64_t)(slot - m->slots);
    for (;;) {
        uint64_t j = (i + 1) & m->mask;
        if (m->slots[j].ref == 0 || ref_dist(m, j, scrambled) == 0) break;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i].ref = 0;
    m->used--;
}

/* Rebuild the map with n slots (a power of two), scrambled or not. */
static int ref_rebuild(ref_map *m, uint64_t n, int scrambled)
{
    uint64_t old_n = m->mask + 1;
    ref_slot *old = m->slots;
    ref_slot *fresh = huge_calloc(n, sizeof *fresh);
    if (!fresh) return LOB_ENOMEM;
    m->slots = fresh;
    m->mask = n - 1;
    m->shift = scrambled ? 64 - __builtin_ctzll(n) : 0;
    m->used = 0;
    for (uint64_t i = 0; i < old_n; i++)
        if (old[i].ref) ref_insert(m, old[i], scrambled);
    huge_free(old, old_n, sizeof *old);
    m->lookups = m->probes = 0;
    return LOB_OK;
}

int lob_itch_scan_scrambled(const lob_itch_scan *s)
{
    return s->map.shift != 0;
}

lob_itch_scan *lob_itch_scan_new(int *status)
{
    lob_itch_scan *s = calloc(1, sizeof *s);
    if (s) {
        s->map.mask = (1u << 20) - 1; /* 16 MiB: grows past 512k live orders (a 1,000-symbol day
                                         has 360k) */
        s->map.slots = huge_calloc(s->map.mask + 1, sizeof *s->map.slots);
        s->offbits = calloc(65536, sizeof *s->offbits); /* (32 MiB of zero pages: 512 B touched a locate with prices) */
        s->loc_block = calloc(1, 65536 * sizeof *s->loc + 64); /* (8 MiB of zero pages, likewise) */
        if (s->loc_block) s->loc = (scan_loc *)(((uintptr_t)s->loc_block + 63) & ~(uintptr_t)63);
    }
    if (!s || !s->map.slots || !s->offbits || !s->loc_block) {
        lob_itch_scan_free(s);
        if (status) *status = LOB_ENOMEM;
        return NULL;
    }
    if (status) *status = LOB_OK;
    return s;
}

void lob_itch_scan_free(lob_itch_scan *s)
{
    if (!s) return;
    huge_free(s->map.slots, s->map.mask + 1, sizeof *s->map.slots);
    free(s->offbits);
    free(s->loc_block);
    free(s);
}

static inline uint32_t gcd32(uint32_t a, uint32_t b)
{
    while (b) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Prices are ITCH Price(4): 32-bit. A repeat of the last price changes nothing.
 * The gcd only changes when px is not a multiple of it, which a multiplication tells
 * without a division (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
 * 2019): for 32-bit px and g > 0, with c = UINT64_MAX / g + 1 (mod 2^64), g divides px
 * exactly when px * c (mod 2^64) <= c - 1. With gcd_div = c - 1 = 0 while the gcd is 0,
 * the test says "a multiple" exactly when px is 0, as gcd(0, px) = px wants. */
static inline __attribute__((always_inline)) void see_price(uint64_t *bits, scan_loc *L, uint32_t px)
{
    uint64_t p1 = (uint64_t)px + 1;
    if (p1 == L->last_px) return;
    L->last_px = p1;
    if (~px > L->min_not) L->min_not = ~px;
    if (px > L->max_price) L->max_price = px;
    if ((uint64_t)px * (L->gcd_div + 1) > L->gcd_div) {
        uint32_t g = gcd32(L->gcd, px); /* px > 0 here, so g > 0 */
        L->gcd = g;
        L->gcd_div = UINT64_MAX / g;
    }
    uint32_t h = (px * 0x9E3779B1u) >> 20; /* 12 bits */
    bits[h >> 6] |= 1ULL << (h & 63);
}

/* Add ref unless it is live already (a duplicate reference is not a second order).
 * The map may be rebuilt: m is written back to s->map for that and read again. */
static inline __attribute__((always_inline)) int order_added(lob_itch_scan *s, ref_map *m, scan_loc *L,
                                                             uint64_t ref, uint32_t shares, uint16_t locate,
                                                             int scrambled)
{
    if (!ref) return LOB_OK;
    if (2 * (m->used + 1) > m->mask + 1) {
        s->map = *m;
        int rc = ref_rebuild(&s->map, 2 * (m->mask + 1), scrambled);
        *m = s->map;
        if (rc != LOB_OK) return rc;
    }
    if (!scrambled) {
        if (m->probes > SCRAMBLE_PROBES * m->lookups + PROBE_SLACK) {
            s->map = *m;
            int rc = ref_rebuild(&s->map, m->mask + 1, 1);
            *m = s->map;
            if (rc != LOB_OK) return rc;
            scrambled = 1;
        }
        if (m->lookups >= PROBE_WINDOW) m->lookups = m->probes = 0;
    }
    ref_slot e = {ref, shares, locate};
    if (!(scrambled ? ref_insert(m, e, 1) : ref_insert(m, e, 0))) return LOB_OK;
    if (++L->live > L->peak_live) L->peak_live = L->live;
    return LOB_OK;
}

/* The order messages: the types whose reference the scan follows and that become events. */
static const uint8_t ORDER_MSG[256] = {['A'] = 1, ['F'] = 1, ['E'] = 1, ['C'] = 1, ['X'] = 1, ['D'] = 1, ['U'] = 1};

enum { SCAN_PF = 16 }; /* messages ahead whose order slot is fetched (the map outgrows the cache) */

/* lob_itch_scan_feed's loop from message k, with the map sequential (scrambled 0) or
 * scrambled (1): to n, or to just past the insertion that scrambled a sequential map
 * (the caller goes on with the other loop). Returns where it stopped; *rc LOB_ENOMEM
 * if the map could not grow. */
static inline __attribute__((always_inline)) size_t scan_run(lob_itch_scan *s, const uint8_t *buf,
                                                             const uint32_t *offsets, const uint8_t *types,
                                                             size_t k, size_t n, const uint8_t *select,
                                                             const int scrambled, int *rc)
{
    ref_map m = s->map;
    scan_loc *loc = s->loc;
    for (; k < n; k++) {
        if (k + SCAN_PF < n && ORDER_MSG[types[k + SCAN_PF]]) {
            const uint8_t *ahead = buf + offsets[k + SCAN_PF];
            if (!select || select[be16(ahead + O_LOCATE)]) { /* another part's order: not needed here */
                uint64_t ha = ref_home(&m, be64(ahead + O_REF), scrambled);
                prefetch(&m.slots[ha]);
                prefetch(&m.slots[(ha + 1) & m.mask]); /* a deletion looks at the next slot too */
            }
        }
        const uint8_t *m8 = buf + offsets[k];
        uint16_t locate = be16(m8 + O_LOCATE);
        if (select && !select[locate]) continue;
        scan_loc *L = &loc[locate];
        int64_t ts = (int64_t)(be64(m8 + O_TS - 2) & 0xFFFFFFFFFFFFULL); /* the 6 bytes at O_TS */
        if (!L->messages) {
            L->first_ts = ts;
            s->seen[locate >> 6] |= 1ULL << (locate & 63);
        }
        L->last_ts = ts;
        L->messages++;
        uint8_t t = types[k];
        if (!ORDER_MSG[t]) continue;
        uint64_t ref = be64(m8 + O_REF);
        switch (t) {
        case 'A':
        case 'F':
            see_price(s->offbits[locate], L, be32(m8 + O_A_PRICE));
            L->adds++;
            if (order_added(s, &m, L, ref, be32(m8 + O_A_SHARES), locate, scrambled) != LOB_OK) goto nomem;
            break;
        case 'D': {
            ref_slot *o = ref_find(&m, ref, scrambled);
            L->deletes++;
            if (!o) L->unknown_refs++;
            else {
                loc[o->locate].live--;
                ref_delete(&m, o, scrambled);
            }
            break;
        }
        case 'U': {
            ref_slot *o = ref_find(&m, ref, scrambled);
            see_price(s->offbits[locate], L, be32(m8 + O_U_PRICE));
            L->replaces++;
            if (!o) L->unknown_refs++;
            else {
                loc[o->locate].live--;
                ref_delete(&m, o, scrambled);
                if (order_added(s, &m, L, be64(m8 + O_U_NEW), be32(m8 + O_U_SHARES), locate, scrambled) != LOB_OK)
                    goto nomem;
            }
            break;
        }
        default: { /* E, C, X */
            uint32_t q = be32(m8 + (t == 'X' ? O_X_SHARES : O_E_SHARES));
            ref_slot *o = ref_find(&m, ref, scrambled);
            if (t == 'X') L->cancels++;
            else {
                L->executions++;
                L->executed_shares += q;
            }
            if (!o) L->unknown_refs++;
            else if (q >= o->shares) {
                loc[o->locate].live--;
                ref_delete(&m, o, scrambled);
            } else o->shares -= q;
            break;
        }
        }
        if (!scrambled && m.shift) { /* this insertion scrambled the map */
            k++;
            break;
        }
    }
    s->map = m;
    return k;
nomem:
    s->map = m;
    *rc = LOB_ENOMEM;
    return k;
}

int lob_itch_scan_feed(lob_itch_scan *s, const uint8_t *buf, const uint32_t *offsets, const uint8_t *types,
                       size_t n, const uint8_t *select)
{
    int rc = LOB_OK;
    for (size_t k = 0; k < n && rc == LOB_OK;)
        k = s->map.shift ? scan_run(s, buf, offsets, types, k, n, select, 1, &rc)
                         : scan_run(s, buf, offsets, types, k, n, select, 0, &rc);
    return rc;
}

void lob_itch_partition(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                        const uint8_t *owner, uint32_t parts, uint32_t *out_offsets, uint8_t *out_types, size_t cap,
                        size_t *counts)
{
    for (uint32_t k = 0; k < parts; k++) counts[k] = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t k = owner[be16(buf + offsets[i] + O_LOCATE)];
        if (k >= parts) continue;
        size_t j = (size_t)k * cap + counts[k]++;
        out_offsets[j] = offsets[i];
        out_types[j] = types[i];
    }
}

void lob_itch_scan_stats(const lob_itch_scan *s, lob_itch_locate *out)
{
    for (size_t i = 0; i < 65536; i++) {
        lob_itch_locate *o = &out[i];
        memset(o, 0, sizeof *o);
        o->min_price = INT64_MAX;
        o->max_price = INT64_MIN;
        o->first_ts = -1;
        if (!(s->seen[i >> 6] >> (i & 63) & 1)) continue; /* no message */
        const scan_loc *l = &s->loc[i];
        if (l->last_px) {
            o->min_price = (uint32_t)~l->min_not;
            o->max_price = l->max_price;
        }
        o->price_gcd = l->gcd;
        o->messages = l->messages;
        o->adds = l->adds;
        o->deletes = l->deletes;
        o->replaces = l->replaces;
        o->executions = l->executions;
        o->cancels = l->cancels;
        o->executed_shares = l->executed_shares;
        o->unknown_refs = l->unknown_refs;
        o->live = l->live;
        o->peak_live = l->peak_live;
        o->first_ts = l->first_ts;
        o->last_ts = l->last_ts;
        if (!l->gcd) continue; /* no price but 0: no bit (and distinct_min 0 from the scan) */
        uint32_t b = 0;
        for (int w = 0; w < OFF_WORDS; w++) b += (uint32_t)__builtin_popcountll(s->offbits[i][w]);
        o->distinct_min = b;
    }
}

size_t lob_itch_order_prices(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                             const uint8_t *select, uint16_t *locates, uint32_t *prices)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t t = types[i];
        if (t != 'A' && t != 'F' && t != 'U') continue;
        const uint8_t *m = buf + offsets[i];
        uint16_t locate = be16(m + O_LOCATE);
        if (select && !select[locate]) continue;
        locates[k] = locate;
        prices[k++] = be32(m + (t == 'U' ? O_U_PRICE : O_A_PRICE));
    }
    return k;
}

/* ---- pass 2: events ------------------------------------------------------------------ */

/* Trading state per locate (lob_itch_events' state array): the letter of the last H
 * (0: none yet, trading) in the low byte, OP_HALT while an h of NASDAQ ('Q') halts it. */
enum { O_H_STATE = LOB_ITCH_AT_H_STATE, O_h_MARKET = LOB_ITCH_AT_h_MARKET, O_h_ACTION = LOB_ITCH_AT_h_ACTION,
       OP_HALT = 0x100 };
static const uint8_t STATE_MSG[256] = {['H'] = 1, ['h'] = 1};

/* The state letter a replay reports ('T', 'H', 'P', 'Q'; 'h': an operational halt only). */
static inline uint8_t state_letter(uint16_t st)
{
    uint8_t c = (uint8_t)st;
    if (c == 'H' || c == 'P' || c == 'Q') return c;
    return (st & OP_HALT) ? 'h' : 'T';
}

/* An H or h message: the locate's new state; a LOB_STATE event into *e when its letter
 * changes (returns 1), else 0. */
static int state_event(const uint8_t *m, uint8_t t, uint16_t locate, uint16_t *state, lob_event *e)
{
    uint16_t old = state[locate], st = old;
    if (t == 'H') {
        st = (uint16_t)((old & OP_HALT) | m[O_H_STATE]);
    } else if (m[O_h_MARKET] == 'Q') { /* an operational halt of another market leaves NASDAQ's book */
        if (m[O_h_ACTION] == 'H') st = (uint16_t)(old | OP_HALT);
        else if (m[O_h_ACTION] == 'T') st = (uint16_t)(old & ~OP_HALT);
    }
    state[locate] = st;
    uint8_t was = state_letter(old), now = state_letter(st);
    if (was == now) return 0;
    memset(e, 0, sizeof *e);
    e->kind = LOB_STATE;
    e->instrument = locate;
    e->qty = now != 'T';
    e->price = now;
    return 1;
}

size_t lob_itch_events(const uint8_t *buf, const uint32_t *offsets, const uint8_t *types, size_t n,
                       const uint8_t *select, lob_event *ev, int64_t *ts, uint32_t *msg_index, uint16_t *state)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t t = types[i];
        if (!ORDER_MSG[t]) {
            if (!STATE_MSG[t] || !state) continue;
            const uint8_t *m = buf + offsets[i];
            uint16_t locate = be16(m + O_LOCATE);
            if ((select && !select[locate]) || !state_event(m, t, locate, state, &ev[k])) continue;
            ts[k] = be48(m + O_TS);
            msg_index[k] = (uint32_t)i;
            k++;
            continue;
        }
        const uint8_t *m = buf + offsets[i];
        uint16_t locate = be16(m + O_LOCATE);
        if (select && !select[locate]) continue;
        lob_event *e = &ev[k];
        memset(e, 0, sizeof *e);
        e->id = be64(m + O_REF);
        e->instrument = locate;
        switch (t) {
        case 'A':
        case 'F':
            e->kind = LOB_NEW;
            e->side = m[O_A_SIDE] == 'B' ? LOB_BUY : (m[O_A_SIDE] == 'S' ? LOB_SELL : m[O_A_SIDE]);
            e->qty = be32(m + O_A_SHARES);
            e->price = be32(m + O_A_PRICE);
            e->tif = LOB_GTC;
            e->flags = LOB_F_FEED;
            break;
        case 'D':
            e->kind = LOB_CANCEL;
            break;
        case 'X':
            e->kind = LOB_REDUCE;
            e->qty = be32(m + O_X_SHARES);
            e->flags = LOB_F_FEED;
            break;
        case 'U':
            e->kind = LOB_REPLACE;
            e->new_id = be64(m + O_U_NEW);
            e->qty = be32(m + O_U_SHARES);
            e->price = be32(m + O_U_PRICE);
            e->flags = LOB_F_FEED;
            break;
        case 'E':
            e->kind = LOB_EXEC;
            e->qty = be32(m + O_E_SHARES);
            break;
        default: /* 'C' */
            e->kind = LOB_EXEC;
            e->qty = be32(m + O_E_SHARES);
            e->price = be32(m + O_C_PRICE);
            e->flags = (uint8_t)(LOB_F_PRICE | (m[O_C_PRINTABLE] == 'N' ? LOB_F_NOCHECK : 0));
            break;
        }
        ts[k] = be48(m + O_TS);
        msg_index[k] = (uint32_t)i;
        k++;
    }
    return k;
}

/* ---- price maps ------------------------------------------------------------------------- */

/* The core price of px in map m (lob_itch_pmap): its rank, with *extra = 1 for an extra
 * price; or -1 - px when it is not on the map. */
static inline int64_t map_price(const lob_itch_pmap *m, const int64_t *extras, const uint32_t *ranks, int64_t px,
                                int *extra)
{
    const int64_t *e = extras + m->first;
    uint32_t lo = 0, hi = m->n_extra; /* extras below px */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (e[mid] < px) lo = mid + 1;
        else hi = mid;
    }
    *extra = 0;
    if (lo < m->n_extra && e[lo] == px) {
        *extra = 1;
        return ranks[m->first + lo];
    }
    if (m->n && px >= m->low && (px - m->low) % m->tick == 0 && (px - m->low) / m->tick < (int64_t)m->n)
        return (px - m->low) / m->tick + lo;
    return -1 - px;
}

void lob_itch_map_prices(const uint16_t *book_map, const lob_itch_pmap *maps, const int64_t *extras,
                         const uint32_t *ranks, lob_event *ev, size_t n, uint64_t *outside)
{
    for (size_t i = 0; i < n; i++) {
        lob_event *e = &ev[i];
        if (e->instrument > 65535 || !book_map[e->instrument]) continue;
        int order = e->kind == LOB_NEW || e->kind == LOB_REPLACE;
        if (!order && !(e->kind == LOB_EXEC && (e->flags & LOB_F_PRICE))) continue;
        uint32_t j = book_map[e->instrument] - 1u;
        int extra;
        e->price = map_price(&maps[j], extras, ranks, e->price, &extra);
        if (order && extra) outside[j]++;
    }
}

int lob_itch_group(const lob_event *ev, const int64_t *ts, const uint32_t *msg_index, size_t n, uint32_t *counts,
                   lob_event *ev_out, int64_t *ts_out, uint32_t *msg_out)
{
    if (n && (!ev || !ts || !msg_index || !ev_out || !ts_out || !msg_out)) return LOB_EARG;
    if (!counts || n > UINT32_MAX) return LOB_EARG;
    memset(counts, 0, 65536 * sizeof *counts);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].instrument > 65535) return LOB_EARG;
        counts[ev[i].instrument]++;
    }
    uint32_t start = 0; /* each book's first position */
    for (size_t g = 0; g < 65536; g++) {
        uint32_t c = counts[g];
        counts[g] = start;
        start += c;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = counts[ev[i].instrument]++;
        ev_out[k] = ev[i];
        ts_out[k] = ts[i];
        msg_out[k] = msg_index[i];
        /* each book's run is written in order, but a thousand runs at once are more than the
         * hardware follows: ask for the lines its next events will write (a miss each, else) */
        if (k + 16 < n) { /* (a line or two ahead of each: the distances measured best) */
            prefetch_write(&ev_out[k + 4]);
            prefetch_write(&ts_out[k + 8]);
            prefetch_write(&msg_out[k + 16]);
        }
    }
    return LOB_OK;
}
