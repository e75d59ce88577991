/*
 * l2.c -- L2 replay of .lobc records (l2.h, docs/l2.md).
 *
 * Pass 1 (lob_l2_scan_*) keeps a hash map of (symbol, price) levels. Pass 2
 * (lob_l2_*) walks the records once, in order: structure checks, trades,
 * bookTicker history, and for each whole message the level entries, turned
 * into events from a mirror of every level's quantity (mq, indexed by level
 * key = 2 * g + is_ask) and applied with lob_session_apply, one call per
 * message. The call gets no desync array, so an event that meets stale levels
 * stops it before that event (LOB_EEXECFULL); that event is then applied alone
 * with a desync array, the stale levels it removed are zeroed in the mirror,
 * and the rest of the message is computed again from the mirror.
 */
#include "l2.h"

#include <stdlib.h>
#include <string.h>

#define NSYM 65536u
#define ID_SHIFT 48
#define ID_LEVEL_MASK ((UINT64_C(1) << ID_SHIFT) - 1)
enum { ST_NONE = 0, ST_SYNCED = 1, ST_GAPPED = 2 };

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static inline uint64_t level_hash(uint16_t sym, int64_t price)
{
    return mix64((uint64_t)price * UINT64_C(0x9E3779B97F4A7C15) + sym);
}

static inline int is_level_kind(uint8_t k) { return k == LOB_L2_DIFF_LEVEL || k == LOB_L2_SNAPSHOT_LEVEL; }

static inline int valid_level(const lob_l2_record *x)
{
    return (x->side == 'B' || x->side == 'S') && x->price > 0 && x->qty >= 0;
}

/* How pass 2 groups records (lob_l2_feed; pass 1 and the depth samples follow it). A BEGIN
 * rec[i]'s levels are the records after it of its level kind, or of a symbol index >= nsym,
 * up to the first other record: its END if that is one of its symbol (the message is whole),
 * else the message is incomplete; so is one with more than LOB_L2_MAX_MESSAGE records between
 * its BEGIN and its END (group_complete). group_stop returns that record's index (n: none yet). */
static inline size_t group_stop(const lob_l2_record *rec, size_t n, size_t i, uint32_t nsym)
{
    uint8_t lk = (uint8_t)(rec[i].kind + 1);
    size_t j = i + 1;
    while (j < n && (rec[j].symbol >= nsym || rec[j].kind == lk)) j++;
    return j;
}

static inline int group_whole(const lob_l2_record *rec, size_t n, size_t i, size_t j)
{
    return j < n && rec[j].kind == rec[i].kind + 2 && rec[j].symbol == rec[i].symbol;
}

/* A whole message (group_whole) of at most max records between its BEGIN rec[i] and its END
 * rec[j] (LOB_L2_MAX_MESSAGE): one that is applied. */
static inline int group_complete(const lob_l2_record *rec, size_t n, size_t i, size_t j, uint32_t max)
{
    return group_whole(rec, n, i, j) && j - i - 1 <= max;
}

/* The TICKER_ASK that pairs with the TICKER_BID rec[i] (the first record after it of a symbol
 * index < nsym, if it is an ask of the same symbol and id), or 0. */
static inline size_t ticker_pair(const lob_l2_record *rec, size_t n, size_t i, uint32_t nsym)
{
    size_t j = i + 1;
    while (j < n && rec[j].symbol >= nsym) j++;
    return j < n && rec[j].kind == LOB_L2_TICKER_ASK && rec[j].symbol == rec[i].symbol &&
                   rec[j].first_id == rec[i].first_id ? j : 0;
}

/* Grow *p (of *cap elements of size sz) to at least need elements. 0 on failure. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

void lob_l2_records_check(const lob_l2_record *rec, size_t n, uint32_t n_symbols, size_t *bad_symbol,
                          size_t *bad_kind)
{
    size_t bs = n, bk = n;
    for (size_t i = 0; i < n && (bs == n || bk == n); i++) {
        const lob_l2_record *x = &rec[i];
        if (bs == n && x->symbol >= n_symbols) bs = i;
        if (bk == n && (x->kind < LOB_L2_SNAPSHOT_BEGIN || x->kind > LOB_L2_TICKER_ASK ||
                        (x->side != 0 && x->side != 'B' && x->side != 'S')))
            bk = i;
    }
    *bad_symbol = bs;
    *bad_kind = bk;
}

/* ==================================================================== pass 1 */

typedef struct scan_entry {
    int64_t price;
    uint16_t symbol;
    uint8_t live[2]; /* bid, ask */
    uint8_t used;
    uint8_t pad[3];
} scan_entry;

/* A level record of the message being matched, kept until its END decides whether pass 2
 * applies it. */
typedef struct scan_pending {
    int64_t price;
    int64_t qty;
    uint8_t side;
    uint8_t pad[7];
} scan_pending;

struct lob_l2_scan {
    scan_entry *tab;
    size_t mask, used;
    lob_l2_scan_symbol *sym; /* [NSYM] */
    uint8_t *state;          /* [NSYM] the symbol's state as pass 2 will have it: ST_* */
    uint32_t nsym;           /* symbols of the file: an index >= nsym is pass 2's unknown_symbol */
    int open;                /* a BEGIN (of osym, okind) is being matched with its END */
    uint16_t osym;
    uint8_t okind;
    uint32_t max_message;    /* LOB_L2_MAX_MESSAGE */
    size_t nopen;            /* the records of the open message so far, after its BEGIN */
    scan_pending *pend;      /* its level records of symbol osym */
    size_t npend, cappend;
    uint64_t kinds[256];     /* records by kind */
};

lob_l2_scan *lob_l2_scan_new(uint32_t n_symbols, uint32_t max_message, int *status)
{
    if (n_symbols > NSYM) {
        if (status) *status = LOB_EARG;
        return NULL;
    }
    lob_l2_scan *s = calloc(1, sizeof *s);
    if (s) {
        s->nsym = n_symbols;
        s->max_message = max_message ? max_message : LOB_L2_MAX_MESSAGE;
        s->mask = 1023;
        s->tab = calloc(s->mask + 1, sizeof *s->tab);
        s->sym = calloc(NSYM, sizeof *s->sym);
        s->state = calloc(NSYM, sizeof *s->state);
    }
    if (!s || !s->tab || !s->sym || !s->state) {
        lob_l2_scan_free(s);
        if (status) *status = LOB_ENOMEM;
        return NULL;
    }
    if (status) *status = LOB_OK;
    return s;
}

void lob_l2_scan_free(lob_l2_scan *s)
{
    if (!s) return;
    free(s->tab);
    free(s->sym);
    free(s->state);
    free(s->pend);
    free(s);
}

static int scan_rehash(lob_l2_scan *s)
{
    size_t nm = 2 * (s->mask + 1) - 1;
    scan_entry *t = calloc(nm + 1, sizeof *t);
    if (!t) return 0;
    for (size_t i = 0; i <= s->mask; i++) {
        if (!s->tab[i].used) continue;
        size_t h = (size_t)level_hash(s->tab[i].symbol, s->tab[i].price) & nm;
        while (t[h].used) h = (h + 1) & nm;
        t[h] = s->tab[i];
    }
    free(s->tab);
    s->tab = t;
    s->mask = nm;
    return 1;
}

/* One valid level record of symbol sym: its price is seen; the level is live after it if
 * qty > 0, and not live if qty == 0 and `applied` (pass 2 applies the record). A zero that
 * pass 2 may not apply leaves the level as it was: the live levels here stay a superset of
 * pass 2's book, so their peak bounds the book's. */
static inline __attribute__((always_inline)) int scan_level(lob_l2_scan *s, uint16_t sym, int64_t price, int64_t qty,
                                                           uint8_t side, int applied)
{
    if (2 * (s->used + 1) > s->mask + 1 && !scan_rehash(s)) return LOB_ENOMEM;
    size_t h = (size_t)level_hash(sym, price) & s->mask;
    scan_entry *e;
    for (;;) {
        e = &s->tab[h];
        if (!e->used) {
            e->used = 1;
            e->price = price;
            e->symbol = sym;
            s->used++;
            s->sym[sym].prices++;
            break;
        }
        if (e->price == price && e->symbol == sym) break;
        h = (h + 1) & s->mask;
    }
    int sd = side == 'S';
    uint8_t live = qty > 0;
    if (!live && !applied) return LOB_OK;
    if (live != e->live[sd]) {
        lob_l2_scan_symbol *y = &s->sym[sym];
        e->live[sd] = live;
        if (live) {
            if (++y->live > y->peak) y->peak = y->live;
        } else {
            y->live--;
        }
    }
    return LOB_OK;
}

/* A message of `kind` (its BEGIN's) for sym, whole (its END came) or not: whether pass 2
 * applies its levels (a whole snapshot always, a whole diff while the symbol is synced), and
 * the symbol's state as pass 2 leaves it (its levels do not depend on the state: set now). */
static int scan_decide(lob_l2_scan *s, uint16_t sym, uint8_t kind, int whole)
{
    uint8_t *st = &s->state[sym];
    int snapshot = kind == LOB_L2_SNAPSHOT_BEGIN;
    int applied = whole && (snapshot || *st == ST_SYNCED);
    if (whole && snapshot && *st == ST_NONE) *st = ST_SYNCED;
    return applied;
}

/* The message being matched (its BEGIN in an earlier chunk) ends: its level records in
 * record order, applied if pass 2 applies them (scan_decide). */
static int scan_close(lob_l2_scan *s, int whole)
{
    int applied = scan_decide(s, s->osym, s->okind, whole);
    for (size_t i = 0; i < s->npend; i++) {
        const scan_pending *p = &s->pend[i];
        int rc = scan_level(s, s->osym, p->price, p->qty, p->side, applied);
        if (rc != LOB_OK) return rc;
    }
    s->open = 0;
    s->npend = 0;
    return LOB_OK;
}

/* Pass 2 matches a BEGIN with its END as lob_l2_feed does: the records after the BEGIN of
 * its level kind, or of a symbol beyond the file's, up to the first other record, which is
 * its END (same symbol) or leaves the message incomplete, as does its record number
 * max_message + 1 after the BEGIN (the open message is then closed unapplied: nothing is
 * held past it). */
int lob_l2_scan_feed(lob_l2_scan *s, const lob_l2_record *rec, size_t n)
{
    if (!s || (n && !rec)) return LOB_EARG;
    for (size_t i = 0; i < n; i++) {
        const lob_l2_record *x = &rec[i];
        uint8_t k = x->kind;
        uint16_t sym = x->symbol;
        s->kinds[k]++;
        int rc;
        if (s->open && (sym >= s->nsym || k == s->okind + 1) && ++s->nopen > s->max_message) {
            rc = scan_close(s, 0); /* too long: incomplete (its levels from here on: outside a message) */
            if (rc != LOB_OK) return rc;
        }
        if (sym >= s->nsym) continue; /* unknown_symbol in pass 2: no book, not part of any message */
        if (s->open) {
            if (k == s->okind + 1) { /* a level of the open message's kind */
                if (!valid_level(x)) continue;
                if (sym == s->osym) {
                    if (!grow((void **)&s->pend, &s->cappend, s->npend + 1, sizeof *s->pend)) return LOB_ENOMEM;
                    s->pend[s->npend++] = (scan_pending){x->price, x->qty, x->side, {0}};
                    continue;
                }
                rc = scan_level(s, sym, x->price, x->qty, x->side, 0); /* another symbol's: an orphan */
                if (rc != LOB_OK) return rc;
                continue;
            }
            int whole = k == s->okind + 2 && sym == s->osym;
            rc = scan_close(s, whole);
            if (rc != LOB_OK) return rc;
            if (whole) continue;
        }
        switch (k) {
        case LOB_L2_SNAPSHOT_BEGIN:
        case LOB_L2_DIFF_BEGIN: {
            s->sym[sym].has_book = 1;
            /* the record that decides the message, as lob_l2_feed finds it: when it is in this
             * chunk, the levels are applied from the records at once (no copy to `pend`) */
            size_t j = group_stop(rec, n, i, s->nsym);
            if (j == n && j - i - 1 <= s->max_message) {
                /* the chunk ends first: its levels wait for the next chunk */
                s->open = 1;
                s->osym = sym;
                s->okind = k;
                s->nopen = 0;
                break;
            }
            int whole = group_complete(rec, n, i, j, s->max_message);
            int applied = scan_decide(s, sym, k, whole);
            for (size_t q = i + 1; q < j; q++) {
                const lob_l2_record *z = &rec[q];
                s->kinds[z->kind]++;
                if (z->symbol >= s->nsym || !valid_level(z)) continue;
                rc = scan_level(s, z->symbol, z->price, z->qty, z->side, z->symbol == sym && applied);
                if (rc != LOB_OK) return rc;
            }
            if (whole) s->kinds[k + 2]++;
            i = whole ? j : j - 1; /* (an END that is not this message's: the loop takes it next) */
            break;
        }
        case LOB_L2_SNAPSHOT_LEVEL:
        case LOB_L2_DIFF_LEVEL: /* outside a message (or after an incomplete one's BEGIN): not applied */
            if (valid_level(x) && (rc = scan_level(s, sym, x->price, x->qty, x->side, 0)) != LOB_OK) return rc;
            break;
        case LOB_L2_GAP:
            s->state[sym] = ST_GAPPED;
            break;
        case LOB_L2_RESYNC: /* (pass 2: if the symbol has a book; one without has no size to get) */
            s->state[sym] = ST_SYNCED;
            break;
        default:
            break;
        }
    }
    return LOB_OK;
}

int lob_l2_scan_finish(lob_l2_scan *s)
{
    if (!s) return LOB_EARG;
    return s->open ? scan_close(s, 0) : LOB_OK;
}

void lob_l2_scan_symbols(const lob_l2_scan *s, lob_l2_scan_symbol *out)
{
    memcpy(out, s->sym, NSYM * sizeof *out);
}

void lob_l2_scan_kinds(const lob_l2_scan *s, uint64_t *out) { memcpy(out, s->kinds, sizeof s->kinds); }

size_t lob_l2_scan_levels(const lob_l2_scan *s, uint16_t *symbols, int64_t *prices, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i <= s->mask; i++) {
        if (!s->tab[i].used) continue;
        if (k < cap) {
            symbols[k] = s->tab[i].symbol;
            prices[k] = s->tab[i].price;
        }
        k++;
    }
    return k;
}

/* ==================================================================== pass 2 */

typedef struct point {
    uint64_t u;
    int64_t top[4];
    int64_t record, recv_ns;
} point;

typedef struct tick {
    uint64_t u;
    int64_t top[4];
} tick;

typedef struct symstate {
    uint8_t state, has_book, ladder, touched;
    uint8_t changed;         /* applied a message since the last depth sample */
    uint8_t queued;          /* in lob_l2.changed: looked at by the next depth sample */
    uint8_t row_synced;      /* `synced` of its last depth row (0 before one) */
    int64_t *shown;          /* --every change: the levels of its last depth row (NULL: none yet) */
    uint32_t count;          /* levels of the book */
    size_t base;             /* its first level g */
    int64_t band_low, tick;
    int has_snapshot;
    uint64_t snapshot_id;
    uint64_t last_u;         /* of the last message applied */
    int after_snapshot;      /* that message was a snapshot (last_u: its lastUpdateId) */
    int64_t last_bbo[4];
    uint64_t messages, skipped;
    point *pts;
    size_t npts, cappts;
    tick *hist;              /* ring, sorted by u from hhead: the bookTicker history ... */
    size_t hhead, hlen, hcap;
    tick *late;              /* ... but for the tickers that came below its last u: here, sorted, */
    size_t nlate;            /* [HIST_LATE], merged into the ring when full (hist_add) */
} symstate;

typedef struct entry {
    int64_t key;             /* 2 * g + is_ask */
    int64_t q;               /* the level's new quantity */
    size_t pos;              /* record position (a snapshot's zeros: its BEGIN) */
    int64_t prev0;           /* the mirror before the message */
    uint8_t dead;            /* superseded by a later entry of the same level */
} entry;

/* A level g: its price in feed units and in the book, its order id (bid; | 1: ask),
 * its symbol. One cache line holds two. */
typedef struct level {
    int64_t real;
    int64_t core;
    uint64_t id;
    uint32_t symbol;
    uint32_t reserved;
} level;

/* Per level key (2 * g + is_ask): the quantity the book has, and which entry of the
 * current message names it (stamp = the message's serial). */
typedef struct keyinfo {
    int64_t mq;
    uint32_t stamp;
    uint32_t slot;
} keyinfo;

struct lob_l2 {
    lob_session *session;
    uint32_t nsym, hist_max;
    uint32_t max_message;    /* LOB_L2_MAX_MESSAGE */
    int compare;
    uint32_t sequence;       /* LOB_L2_SEQ_* */
    size_t g;
    level *lv;               /* [g] */
    keyinfo *ki;             /* [2g] the mirror of the book's level quantities, and dedup */
    uint32_t serial;
    uint32_t *htab;          /* (symbol, price) -> g + 1 (0: empty) */
    size_t hmask;
    symstate *sym;           /* [nsym] */
    uint32_t *touched;       /* symbols with new tickers or points since the last resolution */
    size_t ntouched;
    size_t total_pts;
    entry *ent;
    size_t ent_cap;
    uint32_t *order;         /* the entries in the order they are applied */
    size_t order_cap;
    uint32_t *later;         /* scratch: the entries that add or grow a level */
    size_t later_cap;
    lob_event *ev;
    lob_result *res;
    uint32_t *ev_entry;
    size_t ev_cap;
    lob_desync *dbuf;
    size_t dcap;
    int owner;               /* the last BEGIN/END so far (across ranges: a cut changes nothing): OWN_* */
    uint32_t depth_n;        /* depth samples: levels per side (0: none) ... */
    int64_t depth_every;     /* ... every this many ns of receive time (0: after every change) */
    int64_t next_sample;     /* the next sample time (INT64_MIN: no record yet) */
    int64_t t_max;           /* the latest receive time so far */
    int64_t last_record;     /* the index of the last record fed */
    uint32_t *changed;       /* symbols with `changed` set, in the order they were */
    size_t nchanged;
    int64_t *dp, *dq;        /* scratch: one side's levels */
    lob_l2_counts c;
};

enum { OWN_NONE = 0, OWN_BAD_BEGIN = 1, OWN_END = 2 };

void lob_l2_free(lob_l2 *r)
{
    if (!r) return;
    if (r->sym) {
        for (uint32_t s = 0; s < r->nsym; s++) {
            free(r->sym[s].pts);
            free(r->sym[s].hist);
            free(r->sym[s].late);
            free(r->sym[s].shown);
        }
    }
    free(r->sym);
    free(r->lv);
    free(r->ki);
    free(r->htab);
    free(r->touched);
    free(r->changed);
    free(r->dp);
    free(r->dq);
    free(r->ent);
    free(r->order);
    free(r->later);
    free(r->ev);
    free(r->res);
    free(r->ev_entry);
    free(r->dbuf);
    free(r);
}

lob_l2 *lob_l2_new(lob_session *session, const lob_l2_config *cfg, int *status)
{
    int st = LOB_ENOMEM;
    if (!session || !cfg || cfg->n_symbols > NSYM || cfg->n_levels >= (UINT64_C(1) << 31) ||
        cfg->sequence > LOB_L2_SEQ_USDM || cfg->depth_every_ns < 0 || (!cfg->depth_levels && cfg->depth_every_ns) ||
        cfg->depth_levels > 100000 ||
        (cfg->n_levels && (!cfg->symbol || !cfg->real || !cfg->core || !cfg->id)) || !cfg->has_book ||
        !cfg->ladder || !cfg->band_low || !cfg->tick) {
        if (status) *status = LOB_EARG;
        return NULL;
    }
    size_t g = cfg->n_levels, nk = 2 * g + 1;
    lob_l2 *r = calloc(1, sizeof *r);
    if (!r) goto fail;
    r->session = session;
    r->nsym = cfg->n_symbols;
    r->hist_max = cfg->ticker_history;
    r->max_message = cfg->max_message ? cfg->max_message : LOB_L2_MAX_MESSAGE;
    r->compare = cfg->compare_tickers != 0;
    r->sequence = cfg->sequence;
    r->depth_n = cfg->depth_levels;
    r->depth_every = cfg->depth_every_ns;
    r->next_sample = INT64_MIN;
    r->t_max = INT64_MIN;
    r->last_record = -1;
    r->g = g;
    r->lv = calloc(g + 1, sizeof *r->lv);
    r->ki = calloc(nk, sizeof *r->ki);
    r->sym = calloc(r->nsym ? r->nsym : 1, sizeof *r->sym); /* (no symbols: every record is unknown_symbol) */
    r->touched = malloc((r->nsym ? r->nsym : 1) * sizeof *r->touched);
    r->changed = malloc((r->nsym ? r->nsym : 1) * sizeof *r->changed);
    r->dp = malloc((r->depth_n ? r->depth_n : 1) * sizeof *r->dp);
    r->dq = malloc((r->depth_n ? r->depth_n : 1) * sizeof *r->dq);
    r->hmask = 15;
    while (r->hmask + 1 < 2 * g) r->hmask = 2 * r->hmask + 1;
    r->htab = calloc(r->hmask + 1, sizeof *r->htab);
    if (!r->lv || !r->ki || !r->sym || !r->touched || !r->htab || !r->changed || !r->dp || !r->dq) goto fail;
    for (size_t i = 0; i < g; i++)
        r->lv[i] = (level){cfg->real[i], cfg->core[i], cfg->id[i], cfg->symbol[i], 0};
    uint32_t max_cap = 0;
    for (uint32_t s = 0; s < r->nsym; s++) {
        symstate *S = &r->sym[s];
        S->has_book = cfg->has_book[s] != 0;
        S->ladder = cfg->ladder[s] != 0;
        S->band_low = cfg->band_low[s];
        S->tick = cfg->tick[s] > 0 ? cfg->tick[s] : 1;
        if (S->has_book) {
            lob_book *b = lob_session_book(session, s);
            if (!b) {
                st = LOB_EARG;
                goto fail;
            }
            int64_t lo, hi, tk;
            uint32_t cap;
            lob_book_info(b, &lo, &hi, &tk, &cap);
            if (cap > max_cap) max_cap = cap;
        }
    }
    for (size_t i = 0; i < g; i++) {
        uint32_t s = r->lv[i].symbol;
        if (s >= r->nsym ||
            (i && (s < r->lv[i - 1].symbol || (s == r->lv[i - 1].symbol && r->lv[i].real <= r->lv[i - 1].real)))) {
            st = LOB_EARG; /* not grouped by symbol and sorted by price */
            goto fail;
        }
        symstate *S = &r->sym[s];
        if (!S->count) S->base = i;
        S->count++;
        size_t h = (size_t)level_hash((uint16_t)s, r->lv[i].real) & r->hmask;
        while (r->htab[h]) h = (h + 1) & r->hmask;
        r->htab[h] = (uint32_t)i + 1;
    }
    r->dcap = (size_t)max_cap + 8;
    r->dbuf = malloc(r->dcap * sizeof *r->dbuf);
    if (!r->dbuf) goto fail;
    if (status) *status = LOB_OK;
    return r;
fail:
    lob_l2_free(r);
    if (status) *status = st;
    return NULL;
}

static inline long level_of(const lob_l2 *r, uint16_t sym, int64_t price)
{
    size_t h = (size_t)level_hash(sym, price) & r->hmask;
    for (;;) {
        uint32_t g1 = r->htab[h];
        if (!g1) return -1;
        const level *l = &r->lv[g1 - 1];
        if (l->real == price && l->symbol == sym) return (long)g1 - 1;
        h = (h + 1) & r->hmask;
    }
}

/* The level key of a synthetic order id (-1 if it is not one of ours). */
static int64_t key_of_id(const lob_l2 *r, uint64_t id)
{
    uint64_t s1 = id >> ID_SHIFT;
    if (s1 == 0 || s1 > r->nsym) return -1;
    const symstate *S = &r->sym[s1 - 1];
    int64_t cp = S->band_low + (int64_t)((id & ID_LEVEL_MASK) >> 1) * S->tick;
    size_t lo = S->base, hi = S->base + S->count;
    while (lo < hi) { /* lower bound of cp among the symbol's core prices */
        size_t m = lo + (hi - lo) / 2;
        if (r->lv[m].core < cp) lo = m + 1;
        else hi = m;
    }
    if (lo >= S->base + S->count) return -1;
    return (int64_t)(2 * lo + (id & 1));
}

/* ---- output rows ---- */

typedef struct ctx {
    lob_l2 *r;
    const lob_l2_record *rec;
    int64_t first;
    lob_l2_outputs *out;
} ctx;

static lob_l2_desync *desync_row(ctx *x, size_t pos, uint16_t cause)
{
    const lob_l2_record *y = &x->rec[pos];
    lob_l2_desync *d = &x->out->desyncs[x->out->n_desync++];
    memset(d, 0, sizeof *d);
    d->record = x->first + (int64_t)pos;
    d->recv_ns = y->recv_ns;
    d->exch_ns = y->exch_ns;
    d->first_id = y->first_id;
    d->last_id = y->last_id;
    d->price = y->price;
    d->qty = y->qty;
    d->symbol = y->symbol;
    d->side = y->side;
    d->cause = cause;
    return d;
}

static void top_of(const lob_l2 *r, uint16_t s, int64_t top[4])
{
    const symstate *S = &r->sym[s];
    lob_book *b = lob_session_book(r->session, s);
    for (int side = 0; side < 2; side++) {
        int64_t p = 0, q = 0;
        uint32_t cnt;
        if (b && lob_book_best(b, side ? LOB_SELL : LOB_BUY, &p, &q, &cnt) && q > 0) {
            if (S->ladder) {
                int64_t k = p < 0 ? 0 : p;
                if (S->count == 0) p = 0;
                else p = r->lv[S->base + (size_t)(k >= (int64_t)S->count ? S->count - 1 : k)].real;
            }
        } else {
            p = q = 0;
        }
        top[2 * side] = p;
        top[2 * side + 1] = q;
    }
}

/* With depth samples at intervals: the book of s is looked at by the next sample (a row if
 * it applied a message since the last, or its sync state is not its last row's). */
static void depth_queue(lob_l2 *r, uint16_t s)
{
    symstate *S = &r->sym[s];
    if (r->depth_n && r->depth_every && S->has_book && !S->queued) {
        S->queued = 1;
        r->changed[r->nchanged++] = s;
    }
}

static void touch(lob_l2 *r, uint16_t s)
{
    if (!r->sym[s].touched) {
        r->sym[s].touched = 1;
        r->touched[r->ntouched++] = s;
    }
}

/* ---- bookTicker history and comparison points ----
 *
 * The history of a symbol is every ticker kept, in the order of u, a ticker after those of
 * an equal u that came before it; past hist_max the first goes. Tickers come in the order of
 * u but for a few (ids that go back): each goes to the end of the ring, or, when it comes
 * below the ring's last u, into `late`, a sorted array of at most HIST_LATE that is merged
 * into the ring when full. So a ticker costs O(1), or O(HIST_LATE) plus its share of a merge,
 * however the ids go (inserting in the ring moved up to half of it: quadratic on ids that
 * interleave far apart). Every ticker in `late` is below the ring's last u, which only grows:
 * the ring's last is the history's, and the ring is never emptied while `late` holds any. */

enum { HIST_LATE = 64 };

static inline tick *hist_at(symstate *S, size_t i) { return &S->hist[(S->hhead + i) & (S->hcap - 1)]; }

/* How many of the n sorted tickers a[(head + i) & mask] are below or at u (the ring:
 * its head and capacity - 1; `late`: 0 and all ones). */
static size_t upper(const tick *a, size_t head, size_t mask, size_t n, uint64_t u)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (a[(head + m) & mask].u <= u) lo = m + 1;
        else hi = m;
    }
    return lo;
}

static size_t ring_upper(const symstate *S, uint64_t u) { return upper(S->hist, S->hhead, S->hcap - 1, S->hlen, u); }
static size_t late_upper(const symstate *S, uint64_t u) { return upper(S->late, 0, SIZE_MAX, S->nlate, u); }

/* The ring and `late` as one sorted ring in a new array with room for `more` after them (a
 * power of two): of equal u, the ring's first (they came before: a later one of that u would
 * have gone to the ring's end). */
static int hist_merge(symstate *S, size_t more)
{
    size_t cap = S->hcap ? S->hcap : 64;
    while (cap < S->hlen + S->nlate + more) cap *= 2;
    tick *h = malloc(cap * sizeof *h);
    if (!h) return 0;
    size_t i = 0, j = 0, k = 0;
    while (i < S->hlen || j < S->nlate) {
        if (j == S->nlate || (i < S->hlen && hist_at(S, i)->u <= S->late[j].u)) h[k++] = *hist_at(S, i++);
        else h[k++] = S->late[j++];
    }
    free(S->hist);
    S->hist = h;
    S->hcap = cap;
    S->hhead = 0;
    S->hlen = k;
    S->nlate = 0;
    return 1;
}

static int hist_add(lob_l2 *r, symstate *S, uint64_t u, const int64_t top[4])
{
    tick *t;
    if (!S->hlen || hist_at(S, S->hlen - 1)->u <= u) { /* in order: at the end of the ring */
        if (S->hlen + 1 > S->hcap && !hist_merge(S, 1)) return 0; /* (twice the room, at least) */
        t = hist_at(S, S->hlen++);
    } else { /* below the ring's last: into `late`, after those <= u */
        if (!S->late && !(S->late = malloc(HIST_LATE * sizeof *S->late))) return 0;
        if (S->nlate == HIST_LATE && !hist_merge(S, 0)) return 0;
        size_t at = late_upper(S, u);
        memmove(&S->late[at + 1], &S->late[at], (S->nlate - at) * sizeof *S->late);
        S->nlate++;
        t = &S->late[at];
    }
    t->u = u;
    memcpy(t->top, top, sizeof t->top);
    if (r->hist_max && S->hlen + S->nlate > r->hist_max) { /* keep the last hist_max: the first goes */
        if (S->nlate && S->late[0].u < hist_at(S, 0)->u) { /* (of equal u, the ring's came first) */
            memmove(&S->late[0], &S->late[1], --S->nlate * sizeof *S->late);
        } else {
            S->hhead = (S->hhead + 1) & (S->hcap - 1);
            S->hlen--;
        }
    }
    return 1;
}

/* The last ticker of the history with u' <= u, or NULL (of equal u', `late`'s came after). */
static const tick *hist_find(symstate *S, uint64_t u)
{
    size_t i = ring_upper(S, u), j = S->nlate ? late_upper(S, u) : 0;
    const tick *a = i ? hist_at(S, i - 1) : NULL, *b = j ? &S->late[j - 1] : NULL;
    return !a ? b : !b ? a : b->u >= a->u ? b : a;
}

/* Compare the pending points of s that a later ticker makes final. */
static void resolve(ctx *x, uint16_t s)
{
    lob_l2 *r = x->r;
    symstate *S = &r->sym[s];
    if (!S->npts || !S->hlen) return;
    uint64_t maxu = hist_at(S, S->hlen - 1)->u;
    size_t keep = 0;
    for (size_t i = 0; i < S->npts; i++) {
        point *p = &S->pts[i];
        if (p->u >= maxu) {
            S->pts[keep++] = *p;
            continue;
        }
        const tick *t = hist_find(S, p->u);
        r->total_pts--;
        if (!t) {
            r->c.no_ticker++;
            continue;
        }
        int eq[4];
        for (int f = 0; f < 4; f++) eq[f] = t->top[f] == p->top[f];
        r->c.comparable++;
        if (eq[0] && eq[2]) r->c.price_matches++;
        if (eq[0] && eq[1] && eq[2] && eq[3]) {
            r->c.matches++;
            continue;
        }
        lob_l2_mismatch *m = &x->out->mismatches[x->out->n_mismatch++];
        memset(m, 0, sizeof *m);
        m->record = p->record;
        m->recv_ns = p->recv_ns;
        m->update_id = p->u;
        m->ticker_id = t->u;
        memcpy(m->book, p->top, sizeof m->book);
        memcpy(m->ticker, t->top, sizeof m->ticker);
        m->symbol = s;
    }
    S->npts = keep;
}

static void resolve_touched(ctx *x)
{
    lob_l2 *r = x->r;
    for (size_t i = 0; i < r->ntouched; i++) {
        uint16_t s = (uint16_t)r->touched[i];
        r->sym[s].touched = 0;
        resolve(x, s);
    }
    r->ntouched = 0;
}

static void drop_points(ctx *x, uint16_t s, uint64_t *counter)
{
    symstate *S = &x->r->sym[s];
    resolve(x, s);
    *counter += S->npts;
    x->r->total_pts -= S->npts;
    S->npts = 0;
}

/* ---- applying one message ---- */

/* Room for n events (and their results and entry indexes). 0 on failure. */
static int ensure_events(lob_l2 *r, size_t n)
{
    if (n <= r->ev_cap) return 1;
    size_t c = r->ev_cap ? r->ev_cap : 64;
    while (c < n) c *= 2;
    lob_event *ev = realloc(r->ev, c * sizeof *ev);
    if (ev) r->ev = ev;
    lob_result *res = realloc(r->res, c * sizeof *res);
    if (res) r->res = res;
    uint32_t *ee = realloc(r->ev_entry, c * sizeof *ee);
    if (ee) r->ev_entry = ee;
    if (!ev || !res || !ee) return 0;
    r->ev_cap = c;
    return 1;
}

/* Events for order[k0..): from the mirror as it is now. */
static size_t build_events(lob_l2 *r, size_t k0, size_t nord, uint16_t s)
{
    size_t ne = 0;
    for (size_t k = k0; k < nord; k++) {
        const entry *e = &r->ent[r->order[k]];
        int64_t prev = r->ki[e->key].mq, q = e->q;
        uint8_t kind;
        if (prev == 0 && q > 0) kind = LOB_NEW;
        else if (prev > 0 && q == 0) kind = LOB_CANCEL;
        else if (q > 0 && q < prev) kind = LOB_REDUCE;
        else if (prev > 0 && q > prev) kind = LOB_REPLACE;
        else continue;
        const level *l = &r->lv[e->key >> 1];
        lob_event *ev = &r->ev[ne];
        ev->id = l->id | (uint64_t)(e->key & 1);
        ev->new_id = kind == LOB_REPLACE ? ev->id : 0;
        ev->price = l->core;
        ev->qty = kind == LOB_REDUCE ? prev - q : q;
        ev->instrument = s;
        ev->kind = kind;
        ev->side = (e->key & 1) ? LOB_SELL : LOB_BUY;
        ev->tif = LOB_GTC;
        ev->flags = kind == LOB_CANCEL ? 0 : LOB_F_FEED;
        r->ev_entry[ne] = (uint32_t)k;
        ne++;
    }
    return ne;
}

static void event_rejected(ctx *x, size_t i, size_t begin, const entry *e);

/* After event i of the batch was applied (or rejected). */
static inline void event_done(ctx *x, size_t i, size_t begin)
{
    lob_l2 *r = x->r;
    const entry *e = &r->ent[r->order[r->ev_entry[i]]];
    r->c.events[r->ev[i].kind]++;
    if (__builtin_expect(r->res[i].status == LOB_OK, 1)) r->ki[e->key].mq = e->q;
    else event_rejected(x, i, begin, e);
}

/* Event i was rejected: a row, and the mirror takes what the book has. */
static __attribute__((noinline)) void event_rejected(ctx *x, size_t i, size_t begin, const entry *e)
{
    lob_l2 *r = x->r;
    const lob_event *ev = &r->ev[i];
    int st = r->res[i].status;
    lob_l2_desync *d = desync_row(x, begin, LOB_L2D_REJECTED);
    d->detail = (uint32_t)st;
    uint8_t side;
    int64_t p, q;
    lob_book *b = lob_session_book(r->session, ev->instrument);
    r->ki[e->key].mq = (b && lob_book_find(b, ev->id, &side, &p, &q)) ? q : 0;
}

static void crossed_rows(ctx *x, size_t nd, size_t begin, int snapshot)
{
    lob_l2 *r = x->r;
    for (size_t i = 0; i < nd; i++) {
        const lob_desync *d = &r->dbuf[i];
        int64_t stale = key_of_id(r, d->order_id);
        if (stale >= 0) r->ki[stale].mq = 0;
        if (d->cause != LOB_D_CROSSED) {
            lob_l2_desync *row = desync_row(x, begin, LOB_L2D_CORE);
            row->detail = d->cause;
            continue;
        }
        int64_t inc = key_of_id(r, d->found_id);
        int ask = inc >= 0 ? (int)(inc & 1) : (int)(d->found_id & 1);
        lob_l2_desync *row = desync_row(x, begin, snapshot ? LOB_L2D_CROSSED_BY_SNAPSHOT
                                                          : ask ? LOB_L2D_CROSSED_BY_ASK_UPDATE
                                                                : LOB_L2D_CROSSED_BY_BID_UPDATE);
        row->side = ask ? 'S' : 'B';
        row->price = inc >= 0 ? r->lv[inc >> 1].real : 0;
        row->qty = d->expected_qty;
        row->other_price = stale >= 0 ? r->lv[stale >> 1].real : 0;
        row->other_qty = d->found_qty;
    }
}

/* Apply the whole message rec[begin .. end] (END at end) of symbol s; clean: every record
 * between is a valid level of s (the caller's check found nothing to report). */
static int apply_message(ctx *x, size_t begin, size_t end, int snapshot, int clean)
{
    lob_l2 *r = x->r;
    const lob_l2_record *rec = x->rec;
    uint16_t s = rec[begin].symbol;
    symstate *S = &r->sym[s];
    uint8_t lk = (uint8_t)(rec[begin].kind + 1);
    if (++r->serial == 0) {
        for (size_t k = 0; k < 2 * r->g + 1; k++) r->ki[k].stamp = 0;
        r->serial = 1;
    }
    uint32_t serial = r->serial;
    size_t zeros = snapshot ? S->count * 2 : 0;
    if (!grow((void **)&r->ent, &r->ent_cap, end - begin + zeros, sizeof *r->ent) ||
        !grow((void **)&r->order, &r->order_cap, end - begin + zeros, sizeof *r->order) ||
        !grow((void **)&r->later, &r->later_cap, end - begin, sizeof *r->later))
        return LOB_ENOMEM;
    size_t ne = 0;
    for (size_t p = begin + 1; p < end; p++) {
        const lob_l2_record *y = &rec[p];
        if (!clean && (y->symbol != s || y->kind != lk || !valid_level(y))) continue; /* reported by the caller */
        long g = level_of(r, s, y->price);
        if (g < 0) {
            desync_row(x, p, LOB_L2D_PRICE_NOT_IN_BOOK);
            continue;
        }
        int64_t key = 2 * (int64_t)g + (y->side == 'S');
        keyinfo *k = &r->ki[key];
        if (k->stamp == serial) r->ent[k->slot].dead = 1;
        k->stamp = serial;
        k->slot = (uint32_t)ne;
        r->ent[ne++] = (entry){key, y->qty, p, k->mq, 0};
    }
    size_t nord = 0;
    if (snapshot) { /* every live level the snapshot does not hold goes to zero, first, in key order */
        for (size_t key = 2 * S->base; key < 2 * (S->base + S->count); key++) {
            if (r->ki[key].mq > 0 && r->ki[key].stamp != serial) {
                r->ent[ne] = (entry){(int64_t)key, 0, begin, r->ki[key].mq, 0};
                r->order[nord++] = (uint32_t)ne++;
            }
        }
    }
    /* then the entries that remove or shrink a level, then those that add or grow one (the
     * latter gathered in later[] meanwhile), each in record order */
    size_t nz = nord, nlater = 0;
    for (size_t i = 0; i < ne - nz; i++) {
        const entry *e = &r->ent[i];
        if (e->dead) continue;
        if (e->q > 0 && e->q >= e->prev0) {
            r->later[nlater++] = (uint32_t)i;
            r->c.unchanged_levels += e->q == e->prev0;
        } else {
            r->order[nord++] = (uint32_t)i;
            r->c.zero_qty_unknown_level += e->q == 0 && e->prev0 == 0;
        }
    }
    memcpy(&r->order[nord], r->later, nlater * sizeof *r->later);
    nord += nlater;
    r->c.levels_applied += nord;
    if (!ensure_events(r, nord)) return LOB_ENOMEM;
    size_t k0 = 0;
    while (k0 < nord) {
        size_t nev = build_events(r, k0, nord, s);
        if (!nev) break;
        lob_outputs o;
        memset(&o, 0, sizeof o);
        o.results = r->res;
        int rc = lob_session_apply(r->session, r->ev, nev, &o);
        r->c.core_calls++;
        for (size_t i = 0; i < o.n_done; i++) event_done(x, i, begin);
        if (rc == LOB_OK) break;
        if (rc != LOB_EEXECFULL) return rc;
        /* event n_done meets stale levels: alone, with room for what it removes */
        size_t i = o.n_done;
        lob_outputs o1;
        memset(&o1, 0, sizeof o1);
        o1.results = &r->res[i];
        o1.desyncs = r->dbuf;
        o1.desync_cap = r->dcap;
        rc = lob_session_apply(r->session, &r->ev[i], 1, &o1);
        r->c.core_calls++;
        if (rc != LOB_OK) return rc == LOB_EEXECFULL ? LOB_ENOMEM : rc;
        r->c.crossing_events++;
        event_done(x, i, begin);
        crossed_rows(x, o1.n_desync, begin, snapshot);
        k0 = r->ev_entry[i] + 1;
    }
    /* the message's top of book, bbo row, comparison point */
    int64_t top[4];
    top_of(r, s, top);
    const lob_l2_record *b = &rec[begin];
    uint64_t u = snapshot ? b->first_id : b->last_id;
    if (memcmp(top, S->last_bbo, sizeof top)) {
        lob_l2_bbo *o = &x->out->bbo[x->out->n_bbo++];
        memset(o, 0, sizeof *o);
        o->record = x->first + (int64_t)end;
        o->recv_ns = b->recv_ns;
        o->exch_ns = b->exch_ns;
        o->update_id = u;
        o->bid_price = top[0];
        o->bid_qty = top[1];
        o->ask_price = top[2];
        o->ask_qty = top[3];
        o->symbol = s;
        r->c.bbo_changes++;
        memcpy(S->last_bbo, top, sizeof top);
    }
    S->last_u = u;
    S->after_snapshot = snapshot;
    S->messages++;
    S->changed = 1; /* (read by the depth samples at intervals only) */
    depth_queue(r, s);
    if (r->compare) {
        if (!grow((void **)&S->pts, &S->cappts, S->npts + 1, sizeof *S->pts)) return LOB_ENOMEM;
        point *p = &S->pts[S->npts++];
        p->u = u;
        memcpy(p->top, top, sizeof top);
        p->record = x->first + (int64_t)end;
        p->recv_ns = b->recv_ns;
        r->total_pts++;
        r->c.points++;
        touch(r, s);
    }
    if (!snapshot) r->c.messages_applied++;
    return LOB_OK;
}

/* ---- the record walk ---- */

static int room(lob_l2_outputs *o, size_t b, size_t d, size_t t, size_t m)
{
    int ok = o->bbo_cap - o->n_bbo >= b && o->desync_cap - o->n_desync >= d && o->trade_cap - o->n_trade >= t &&
             o->mismatch_cap - o->n_mismatch >= m;
    if (!ok) {
        o->need_bbo = b;
        o->need_desync = d;
        o->need_trade = t;
        o->need_mismatch = m;
    }
    return ok;
}

static size_t live_of(const lob_l2 *r, uint16_t s)
{
    lob_book *b = r->sym[s].has_book ? lob_session_book(r->session, s) : NULL;
    return b ? lob_book_order_count(b) : 0;
}

/* Does diff message y follow the last message applied to S by the rule (LOB_L2_SEQ_*;
 * l2.h)? If not, the update id expected and the one received, for the row. */
static int in_sequence(uint32_t rule, const symstate *S, const lob_l2_record *y, uint64_t *expected,
                       uint64_t *received)
{
    uint64_t want = rule == LOB_L2_SEQ_SPOT ? S->last_u + 1 : S->last_u, U = y->first_id, u = y->last_id;
    *expected = want;
    if (S->after_snapshot) {
        *received = U > want ? U : u;
        return U <= want && want <= u;
    }
    *received = rule == LOB_L2_SEQ_SPOT ? U : y->prev_id;
    return *received == want;
}

/* Will pass 2 find diff message rec[i] out of sequence (and treat it as a control)? */
static int breaks_sequence(const lob_l2 *r, const lob_l2_record *y)
{
    const symstate *S = &r->sym[y->symbol];
    uint64_t e, g;
    return r->sequence && y->kind == LOB_L2_DIFF_BEGIN && S->state == ST_SYNCED && S->has_book &&
           !in_sequence(r->sequence, S, y, &e, &g);
}

/* The book of s is not known from here (a GAP, a sequence break): unsynced until a
 * RESYNC; its pending comparison points and ticker history go. */
static void lose_sync(ctx *x, uint16_t s)
{
    symstate *S = &x->r->sym[s];
    S->state = ST_GAPPED;
    S->has_snapshot = 0;
    drop_points(x, s, &x->r->c.unresolved_at_gap);
    S->hlen = 0;
    S->hhead = 0;
    S->nlate = 0;
    depth_queue(x->r, s);
}

/* ---- depth samples ---- */

/* The last record of the unit that starts at rec[i] (l2.h, lob_l2_depth), as the walk
 * below takes it: a whole message, a BEGIN with the records after it up to the one that
 * makes it incomplete (the last before the record that is not its END, or its record
 * max_message + 1: a longer message is incomplete there, and its records after that are
 * units alone, as they are when the caller's chunks hand them over later), a TICKER_BID
 * with its TICKER_ASK, else the record alone. */
static size_t unit_end(const lob_l2 *r, const lob_l2_record *rec, size_t n, size_t i, size_t *stop)
{
    const lob_l2_record *y = &rec[i];
    if (y->symbol >= r->nsym) return i;
    if (y->kind == LOB_L2_SNAPSHOT_BEGIN || y->kind == LOB_L2_DIFF_BEGIN) {
        size_t j = *stop = group_stop(rec, n, i, r->nsym);
        if (group_complete(rec, n, i, j, r->max_message)) return j;
        return j - i - 1 > r->max_message ? i + r->max_message + 1 : j - 1;
    }
    size_t j = y->kind == LOB_L2_TICKER_BID ? ticker_pair(rec, n, i, r->nsym) : 0;
    return j ? j : i;
}

/* The first sample time after receive time t. */
static int64_t sample_after(const lob_l2 *r, int64_t t)
{
    int64_t e = r->depth_every, k = t / e - (t % e < 0); /* floor */
    return (k + 1) * e;
}

static int depth_room(lob_l2_outputs *o, size_t rows)
{
    if (o->depth_cap - o->n_depth >= rows && (o->depth_book || !rows)) return 1;
    o->need_depth = rows;
    return 0;
}

/* The N best levels of both sides of the book of s into lv[4N] (l2.h, lob_l2_depth). */
static void fill_levels(lob_l2 *r, uint16_t s, int64_t *lv)
{
    const symstate *S = &r->sym[s];
    uint32_t L = r->depth_n;
    lob_book *b = lob_session_book(r->session, s);
    for (int side = 0; side < 2; side++) {
        uint32_t k = b ? lob_book_depth(b, side ? LOB_SELL : LOB_BUY, L, r->dp, r->dq, NULL) : 0;
        int64_t *px = lv + (size_t)side * 2 * L, *qx = px + L;
        for (uint32_t m = 0; m < L; m++) {
            int64_t p = m < k ? r->dp[m] : 0, q = m < k ? r->dq[m] : 0;
            if (m < k && S->ladder) p = S->count ? r->lv[S->base + (size_t)(p < 0 ? 0 : p >= (int64_t)S->count
                                                                               ? S->count - 1 : p)].real : 0;
            px[m] = p;
            qx[m] = q;
        }
    }
}

/* A depth row of s in the next slot (room checked): its fields, its levels in lv. */
static lob_l2_depth *depth_row(ctx *x, uint16_t s, int64_t when, int64_t record, int64_t **lv)
{
    lob_l2_outputs *o = x->out;
    const symstate *S = &x->r->sym[s];
    lob_l2_depth *d = &o->depth[o->n_depth];
    *lv = o->depth_book + o->n_depth * 4 * (size_t)x->r->depth_n;
    o->n_depth++;
    memset(d, 0, sizeof *d);
    d->record = record;
    d->recv_ns = when;
    d->update_id = S->last_u;
    d->symbol = s;
    d->synced = S->state == ST_SYNCED;
    return d;
}

/* --every change: after a message applied to s (BEGIN at i, END at j), or a change of its
 * sync state (a GAP or RESYNC at i = j; a message at i .. j that broke the sequence), a row if
 * its N best levels or its sync state are not those of its last row (room for one checked).
 * 0: out of memory. */
static int change_row(ctx *x, uint16_t s, size_t i, size_t j)
{
    lob_l2 *r = x->r;
    symstate *S = &r->sym[s];
    size_t w = 4 * (size_t)r->depth_n;
    if (!S->shown && !(S->shown = calloc(w, sizeof *S->shown))) return 0;
    int64_t *lv;
    lob_l2_depth *d = depth_row(x, s, x->rec[i].recv_ns, x->first + (int64_t)j, &lv);
    fill_levels(r, s, lv);
    if (!memcmp(lv, S->shown, w * sizeof *lv) && d->synced == S->row_synced) {
        x->out->n_depth--; /* no change: the row goes */
    } else {
        memcpy(S->shown, lv, w * sizeof *lv);
        S->row_synced = d->synced;
    }
    return 1;
}

/* One row per book that applied a message since the last sample, or whose sync state is
 * not its last row's, in symbol order (room checked). */
static void sample(ctx *x, int64_t when, int64_t record)
{
    lob_l2 *r = x->r;
    uint32_t *c = r->changed;
    for (size_t a = 1; a < r->nchanged; a++) /* (a few symbols: insertion sort) */
        for (size_t b = a; b > 0 && c[b - 1] > c[b]; b--) {
            uint32_t t = c[b - 1];
            c[b - 1] = c[b];
            c[b] = t;
        }
    for (size_t a = 0; a < r->nchanged; a++) {
        uint16_t s = (uint16_t)c[a];
        symstate *S = &r->sym[s];
        uint8_t synced = S->state == ST_SYNCED;
        if (S->changed || synced != S->row_synced) {
            int64_t *lv;
            depth_row(x, s, when, record, &lv);
            fill_levels(r, s, lv);
            S->row_synced = synced;
        }
        S->changed = S->queued = 0;
    }
    r->nchanged = 0;
}

/* Before the unit at rec[i]: the sample its receive time reaches, if a book changed since
 * the last; 0 if the depth rows need more room. *stop: group_stop's answer for a BEGIN at
 * rec[i] (found here for the unit's end, so the walk need not look for it again). */
static int sample_before(ctx *x, size_t n, size_t i, size_t *stop)
{
    lob_l2 *r = x->r;
    size_t j = unit_end(r, x->rec, n, i, stop);
    int64_t t = r->t_max;
    for (size_t p = i; p <= j; p++)
        if (x->rec[p].recv_ns > t) t = x->rec[p].recv_ns;
    if (r->next_sample == INT64_MIN) {
        r->next_sample = sample_after(r, t);
    } else if (t >= r->next_sample) {
        if (r->nchanged) {
            if (!depth_room(x->out, r->nchanged)) return 0;
            sample(x, r->next_sample, x->first + (int64_t)i - 1);
        }
        r->next_sample = sample_after(r, t);
    }
    r->t_max = t;
    return 1;
}

/* A whole group rec[i .. j] (BEGIN .. END): its structure rows, then the message. */
static int group(ctx *x, size_t i, size_t j)
{
    lob_l2 *r = x->r;
    const lob_l2_record *rec = x->rec;
    uint16_t s = rec[i].symbol;
    int snapshot = rec[i].kind == LOB_L2_SNAPSHOT_BEGIN;
    size_t desyncs = x->out->n_desync;
    for (size_t p = i + 1; p < j; p++) {
        const lob_l2_record *y = &rec[p];
        if (y->symbol >= r->nsym) {
            desync_row(x, p, LOB_L2D_UNKNOWN_SYMBOL);
        } else if (y->symbol != s) { /* another symbol's level inside the message */
            desync_row(x, p, LOB_L2D_ORPHAN_RECORD);
            r->c.levels_skipped++;
        } else if (!valid_level(y)) {
            desync_row(x, p, LOB_L2D_MALFORMED_LEVEL);
        }
    }
    int clean = x->out->n_desync == desyncs; /* every level is one of s, and valid */
    if (rec[j].first_id != rec[i].first_id) desync_row(x, j, LOB_L2D_END_ID_MISMATCH);
    symstate *S = &r->sym[s];
    if (snapshot) {
        if (!S->has_book) {
            desync_row(x, i, LOB_L2D_NO_BOOK);
            return LOB_OK;
        }
        int rc = apply_message(x, i, j, 1, clean);
        if (rc != LOB_OK) return rc;
        S->has_snapshot = 1;
        S->snapshot_id = rec[i].first_id;
        r->c.snapshots_applied++;
        if (S->state == ST_NONE) S->state = ST_SYNCED;
        resolve(x, s);
        return LOB_OK;
    }
    if (S->state == ST_SYNCED && S->has_book) {
        uint64_t expected, received;
        if (!r->sequence || in_sequence(r->sequence, S, &rec[i], &expected, &received))
            return apply_message(x, i, j, 0, clean);
        lob_l2_desync *d = desync_row(x, i, LOB_L2D_SEQUENCE_BREAK);
        d->first_id = expected;
        d->last_id = received;
        r->c.skipped_sequence_break++;
        S->skipped++;
        lose_sync(x, s);
        return LOB_OK;
    }
    if (S->state == ST_NONE) {
        r->c.skipped_before_snapshot++;
        S->skipped++;
        desync_row(x, i, LOB_L2D_UPDATE_BEFORE_SNAPSHOT);
    } else if (S->state == ST_GAPPED) {
        r->c.skipped_unsynced++;
        S->skipped++;
        desync_row(x, i, LOB_L2D_UNSYNCED_UPDATE_SKIPPED);
    } else {
        desync_row(x, i, LOB_L2D_NO_BOOK);
    }
    return LOB_OK;
}

static void control(ctx *x, size_t i)
{
    lob_l2 *r = x->r;
    const lob_l2_record *y = &x->rec[i];
    uint16_t s = y->symbol;
    symstate *S = &r->sym[s];
    if (y->kind == LOB_L2_GAP) {
        lob_l2_desync *d = desync_row(x, i, LOB_L2D_GAP);
        d->detail = y->flags;
        lose_sync(x, s);
    } else { /* RESYNC */
        if (!S->has_snapshot) desync_row(x, i, LOB_L2D_RESYNC_WITHOUT_SNAPSHOT);
        else if (S->snapshot_id != y->first_id) desync_row(x, i, LOB_L2D_RESYNC_ID_MISMATCH);
        if (S->has_book) {
            S->state = ST_SYNCED;
            depth_queue(r, s);
        }
    }
}

/* --every change: the sync state of s is not its last depth row's (a row to write). */
static int sync_moved(const lob_l2 *r, uint16_t s)
{
    const symstate *S = &r->sym[s];
    return S->has_book && (S->state == ST_SYNCED) != S->row_synced;
}

int lob_l2_feed(lob_l2 *r, const lob_l2_record *rec, size_t n, int64_t first_index, size_t *pos,
                lob_l2_outputs *out)
{
    if (!r || !pos || !out || (n && !rec) || *pos > n) return LOB_EARG;
    out->n_bbo = out->n_desync = out->n_trade = out->n_mismatch = out->n_depth = 0;
    out->need_bbo = out->need_desync = out->need_trade = out->need_mismatch = out->need_depth = 0;
    ctx x = {r, rec, first_index, out};
    size_t i = *pos;
    uint32_t nsym = r->nsym;
    int by_change = r->depth_n && !r->depth_every; /* depth rows after each change */
    int rc = LOB_OK;
    if (n) r->last_record = first_index + (int64_t)n - 1;
    while (i < n) {
        const lob_l2_record *y = &rec[i];
        uint16_t s = y->symbol;
        uint8_t k = y->kind;
        size_t stop = SIZE_MAX; /* group_stop(rec, n, i, nsym) for a BEGIN, once known */
        if (r->depth_every && !sample_before(&x, n, i, &stop)) goto full;
        if (s >= nsym) {
            if (!room(out, 0, 1, 0, 0)) goto full;
            desync_row(&x, i++, LOB_L2D_UNKNOWN_SYMBOL);
            continue;
        }
        switch (k) {
        case LOB_L2_SNAPSHOT_BEGIN:
        case LOB_L2_DIFF_BEGIN: {
            size_t j = stop != SIZE_MAX ? stop : group_stop(rec, n, i, nsym);
            if (!group_complete(rec, n, i, j, r->max_message)) {
                if (!room(out, 0, 1, 0, 0)) goto full;
                desync_row(&x, i++, LOB_L2D_INCOMPLETE_MESSAGE);
                r->owner = OWN_BAD_BEGIN;
                continue;
            }
            size_t glen = j - i + 1, live = live_of(r, s);
            if (by_change && !depth_room(out, 1)) goto full;
            if (k == LOB_L2_SNAPSHOT_BEGIN || breaks_sequence(r, y)) { /* a control: points resolved first */
                if (!room(out, 1, 5 * glen + 3 * live + 8, 0, r->total_pts + 1)) goto full;
                resolve_touched(&x);
            } else if (!room(out, 1, 5 * glen + 3 * live + 8, 0, 0)) {
                goto full;
            }
            uint64_t applied = r->sym[s].messages;
            rc = group(&x, i, j);
            if (rc != LOB_OK) goto done;
            if (by_change && (r->sym[s].messages != applied || sync_moved(r, s)) && !change_row(&x, s, i, j)) {
                rc = LOB_ENOMEM;
                goto done;
            }
            r->owner = OWN_END;
            i = j + 1;
            continue;
        }
        case LOB_L2_SNAPSHOT_LEVEL:
        case LOB_L2_DIFF_LEVEL:
            if (r->owner == OWN_BAD_BEGIN) { /* a level of an incomplete message: not applied */
                r->c.levels_skipped++;
            } else {
                if (!room(out, 0, 1, 0, 0)) goto full;
                desync_row(&x, i, LOB_L2D_ORPHAN_RECORD);
                r->c.levels_skipped++;
            }
            i++;
            continue;
        case LOB_L2_SNAPSHOT_END:
        case LOB_L2_DIFF_END:
            if (!room(out, 0, 1, 0, 0)) goto full;
            desync_row(&x, i++, LOB_L2D_ORPHAN_RECORD);
            r->owner = OWN_END;
            continue;
        case LOB_L2_TRADE: {
            if (!room(out, 0, 0, 1, 0)) goto full;
            lob_l2_trade *t = &out->trades[out->n_trade++];
            memset(t, 0, sizeof *t);
            t->record = first_index + (int64_t)i;
            t->recv_ns = y->recv_ns;
            t->exch_ns = y->exch_ns;
            t->trade_id = y->first_id;
            t->price = y->price;
            t->qty = y->qty;
            t->symbol = s;
            t->side = y->side;
            r->c.trades++;
            i++;
            continue;
        }
        case LOB_L2_TICKER_BID: {
            size_t j = ticker_pair(rec, n, i, nsym);
            if (j) {
                if (!room(out, 0, j - i, 0, 0)) goto full;
                for (size_t p = i + 1; p < j; p++) desync_row(&x, p, LOB_L2D_UNKNOWN_SYMBOL);
                int64_t top[4] = {y->price, y->qty, rec[j].price, rec[j].qty};
                if (!hist_add(r, &r->sym[s], y->first_id, top)) {
                    rc = LOB_ENOMEM;
                    goto done;
                }
                r->c.tickers++;
                touch(r, s);
                i = j + 1;
            } else {
                if (!room(out, 0, 1, 0, 0)) goto full;
                desync_row(&x, i++, LOB_L2D_UNPAIRED_TICKER);
            }
            continue;
        }
        case LOB_L2_TICKER_ASK:
            if (!room(out, 0, 1, 0, 0)) goto full;
            desync_row(&x, i++, LOB_L2D_UNPAIRED_TICKER);
            continue;
        case LOB_L2_GAP:
        case LOB_L2_RESYNC:
            if (!room(out, 0, 1, 0, r->total_pts) || (by_change && !depth_room(out, 1))) goto full;
            resolve_touched(&x);
            control(&x, i);
            if (by_change && sync_moved(r, s) && !change_row(&x, s, i, i)) {
                rc = LOB_ENOMEM;
                goto done;
            }
            i++;
            continue;
        default:
            if (!room(out, 0, 1, 0, 0)) goto full;
            desync_row(&x, i++, LOB_L2D_UNKNOWN_KIND);
            continue;
        }
    }
    /* the end of the range ends a segment */
    if (!room(out, 0, 0, 0, r->total_pts)) goto full;
    resolve_touched(&x);
    *pos = n;
    return LOB_OK;
full:
    rc = LOB_EEXECFULL;
done:
    *pos = i;
    return rc;
}

int lob_l2_finish(lob_l2 *r, lob_l2_outputs *out)
{
    if (!r || !out) return LOB_EARG;
    out->n_bbo = out->n_desync = out->n_trade = out->n_mismatch = out->n_depth = 0;
    out->need_bbo = out->need_desync = out->need_trade = out->need_mismatch = out->need_depth = 0;
    if (!room(out, 0, 0, 0, r->total_pts)) return LOB_EEXECFULL;
    ctx x = {r, NULL, 0, out};
    if (r->depth_every && r->nchanged) { /* the last sample: after the last record */
        if (!depth_room(out, r->nchanged)) return LOB_EEXECFULL;
        sample(&x, r->next_sample, r->last_record);
    }
    for (uint32_t s = 0; s < r->nsym; s++) drop_points(&x, (uint16_t)s, &r->c.unresolved_at_end);
    return LOB_OK;
}

void lob_l2_counts_get(const lob_l2 *r, lob_l2_counts *out) { *out = r->c; }

void lob_l2_symbols(const lob_l2 *r, uint8_t *state, int64_t *snapshot_id, uint64_t *last_u, uint64_t *messages,
                    uint64_t *skipped)
{
    for (uint32_t s = 0; s < r->nsym; s++) {
        const symstate *S = &r->sym[s];
        if (state) state[s] = S->state;
        if (snapshot_id) snapshot_id[s] = S->has_snapshot ? (int64_t)S->snapshot_id : -1;
        if (last_u) last_u[s] = S->last_u;
        if (messages) messages[s] = S->messages;
        if (skipped) skipped[s] = S->skipped;
    }
}
