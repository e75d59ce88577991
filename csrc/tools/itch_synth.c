/*
 * itch_synth.c -- the fast synthetic ITCH 5.0 day (see itch_synth.h).
 *
 * Layout of the state:
 *  - orders: one pool of fixed records (free list), each in one FIFO list of its level (or of
 *    its side's far-off list), and, unless planted by a feature, in `live` (for random picks of
 *    deletes, cancels and replaces; swap-remove through livepos);
 *  - books: per symbol and side a dense window of levels (head/tail order indices) around
 *    where its orders are, grown when an order falls outside; the best level's index; the
 *    far-off orders (outside every window on purpose) in a short sorted list.
 *  - schedule: the day's timed events (system events, crosses, NOII, halts, features), sorted
 *    by time; an event over every symbol runs one symbol per step (cursor), so that a step
 *    never writes more than a few KiB.
 */
#include "itch_synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lob.h"

#define NIL 0xFFFFFFFFu
#define NSEC 1000000000ull
#define HMS(h, m, s) ((((uint64_t)(h) * 60u + (m)) * 60u + (s)) * NSEC)
#define MAXP 1999999900
#define XCAP 4096 /* a halt cross looks at most this many orders per side */

enum { F_INUSE = 1, F_PLANTED = 2, F_FAR = 4 };

typedef struct {
    uint64_t ref;
    uint32_t next, prev;
    uint32_t livepos;
    uint32_t shares;
    int32_t price;
    uint16_t loc;
    uint8_t buy;
    uint8_t flags;
} ord_t;

typedef struct {
    uint32_t head, tail;
} lvl_t;

typedef struct {
    lvl_t *lv;
    int64_t base; /* price index (price / tick) of lv[0] */
    int64_t best; /* index in lv, -1: no level */
    uint32_t size;
    uint32_t nlevels;
    uint32_t far; /* far-off orders, best first (worse than every window order) */
} side_t;

typedef struct {
    side_t side[2]; /* 0 asks, 1 bids */
    uint64_t name;  /* 8 bytes, space padded, big-endian: sorting the integers sorts the names */
    int64_t mid, lo, hi;
    int64_t floor, ceil; /* every order of the flow is in [floor, ceil]; far-off ones are outside */
    int32_t tick, ds;
    uint32_t nlive;
    uint8_t test, halted, blocked, ipo;
} sym_t;

enum {
    EV_S, EV_CROSS, EV_NOII, EV_PAUSE, EV_HALT, EV_PLANT, EV_XRESUME, EV_IPOQ, EV_OHALT, EV_ORESUME, EV_MWCB,
    EV_REGSHO, EV_FARADD, EV_FARDEL, EV_RESUME
};

typedef struct {
    uint64_t t;
    uint32_t seq;
    uint32_t arg;
    uint16_t loc;
    uint8_t prio, kind;
} sev_t;

enum { PH_PRE, PH_FLOW, PH_EOD, PH_END, PH_DONE };

struct lob_synth {
    lob_synth_config cfg;
    uint64_t rng;
    uint32_t n;
    sym_t *sym; /* by locate; [0] unused */
    ord_t *pool;
    uint32_t pool_cap, pool_used, free_head;
    uint32_t *live;
    uint32_t nlive, live_cap;
    uint16_t *sym_table; /* 1 << 20 locates drawn by activity (the spin's L messages) */
    float *alias_p;      /* the same draw by Walker's alias method: small enough to stay in cache */
    uint16_t *alias_i;
    int64_t *unit;       /* tick x price step per locate (the staleness of a delete's candidates) */
    uint8_t depth_table[4096];
    uint16_t size_table[4096];
    uint8_t touch_table[1024];
    int8_t replace_table[1024];
    uint64_t tmap[4098];
    sev_t *ev;
    uint32_t nev, ev_cap, evi, ev_cursor;
    lob_synth_plant *plants;
    uint32_t nplants, plants_cap;
    uint32_t *open_win; /* locate -> plant row of its open window, NIL */
    uint32_t *far_oi;   /* far-off plant k -> order index */
    uint32_t nfar;
    int phase;
    uint32_t cursor;    /* preamble / end-of-day cursor */
    uint64_t t_pre, pre_step;
    uint64_t emitted, last_t, next_ref, match, peak_live, executed, live_count;
    uint64_t eod_t0, eod_n, eod_i;
    uint64_t counts[128];
    uint64_t bytes;
    uint64_t target, f0, t_start;
    double inv_budget;
    uint64_t step, sched_msgs, n_groups, n_cy;
    double p_u, p_x, p_p, p_ag, avg_e, c_y;
    uint32_t ipo_loc;
    uint32_t *xbuf;   /* the halt cross's scratch: 6 x XCAP */
    double *grid;     /* the time map's scratch */
    uint8_t *out; /* current output */
    size_t pos;
};

/* ---- random numbers (splitmix64) ---------------------------------------------------------- */

static inline uint64_t rnext(lob_synth *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double rnd(lob_synth *s) { return (double)(rnext(s) >> 11) * 0x1.0p-53; }
static inline uint32_t rint_(lob_synth *s, uint32_t n) { return (uint32_t)(((rnext(s) >> 32) * (uint64_t)n) >> 32); }
/* a locate drawn in proportion to its activity (one random number: index and coin) */
static inline uint32_t draw_loc(lob_synth *s) {
    uint64_t r = rnext(s);
    uint32_t i = (uint32_t)(((r >> 32) * (uint64_t)s->n) >> 32);
    float u = (float)(uint32_t)r * 0x1.0p-32f;
    return u < s->alias_p[i] ? i + 1 : s->alias_i[i];
}

/* a table of `size` values drawn in proportion to the weights, shuffled */
static void table_fill(lob_synth *s, const double *w, size_t nw, uint32_t *out, size_t size) {
    double acc = 0;
    for (size_t i = 0; i < nw; i++) acc += w[i];
    size_t k = 0;
    double cum = w[0];
    for (size_t i = 0; i < size; i++) {
        double u = ((double)i + 0.5) / (double)size * acc;
        while (k + 1 < nw && u > cum) cum += w[++k];
        out[i] = (uint32_t)k;
    }
    for (size_t i = size - 1; i > 0; i--) {
        size_t j = rint_(s, (uint32_t)(i + 1));
        uint32_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

/* ---- output -------------------------------------------------------------------------------- */

static inline void be16(uint8_t *p, uint64_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void be32(uint8_t *p, uint64_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i)); }
static inline void be48(uint8_t *p, uint64_t v) { for (int i = 0; i < 6; i++) p[i] = (uint8_t)(v >> (40 - 8 * i)); }
static inline void be64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i)); }

/* starts a message of length len and type t; returns its body (after the 11-byte header) */
static uint8_t *msg(lob_synth *s, char t, uint32_t len, uint32_t loc, uint32_t track, uint64_t ts) {
    uint8_t *p = s->out + s->pos;
    be16(p, len);
    p[2] = (uint8_t)t;
    be16(p + 3, loc);
    be16(p + 5, track);
    be48(p + 7, ts);
    s->pos += 2u + len;
    s->counts[(uint8_t)t]++;
    s->emitted++;
    s->last_t = ts;
    return p + 13;
}
static inline void name8(const lob_synth *s, uint32_t loc, uint8_t *p) { be64(p, s->sym[loc].name); }

static void m_s(lob_synth *s, uint64_t ts, char code) { msg(s, 'S', 12, 0, 0, ts)[0] = (uint8_t)code; }
static void m_h(lob_synth *s, uint64_t ts, uint32_t loc, char state, const char *reason) {
    uint8_t *p = msg(s, 'H', 25, loc, 0, ts);
    name8(s, loc, p);
    p[8] = (uint8_t)state;
    p[9] = ' ';
    memcpy(p + 10, reason, 4);
}
static void m_add(lob_synth *s, uint64_t ts, const ord_t *o, int mpid) {
    uint8_t *p = msg(s, mpid >= 0 ? 'F' : 'A', mpid >= 0 ? 40 : 36, o->loc, 0, ts);
    be64(p, o->ref);
    p[8] = o->buy ? 'B' : 'S';
    be32(p + 9, o->shares);
    name8(s, o->loc, p + 13);
    be32(p + 21, (uint32_t)o->price);
    if (mpid >= 0) {
        static const char MP[10][5] = {"GSCO", "UBSS", "VIRT", "FLTU", "CDRG", "NITE", "MAXM", "JPMS", "MSCO", "SUSQ"};
        memcpy(p + 25, MP[mpid], 4);
    }
}
static void m_d(lob_synth *s, uint64_t ts, uint32_t loc, uint64_t ref) { be64(msg(s, 'D', 19, loc, 0, ts), ref); }
static void m_e(lob_synth *s, uint64_t ts, uint32_t loc, uint32_t tr, uint64_t ref, uint32_t x) {
    uint8_t *p = msg(s, 'E', 31, loc, tr, ts);
    be64(p, ref);
    be32(p + 8, x);
    be64(p + 12, ++s->match);
}
static void m_c(lob_synth *s, uint64_t ts, uint32_t loc, uint32_t tr, uint64_t ref, uint32_t x, char printable,
                int64_t price) {
    uint8_t *p = msg(s, 'C', 36, loc, tr, ts);
    be64(p, ref);
    be32(p + 8, x);
    be64(p + 12, ++s->match);
    p[20] = (uint8_t)printable;
    be32(p + 21, (uint32_t)price);
}
static void m_q(lob_synth *s, uint64_t ts, uint32_t loc, uint64_t shares, int64_t price, char type) {
    uint8_t *p = msg(s, 'Q', 40, loc, 1, ts);
    be64(p, shares);
    name8(s, loc, p + 8);
    be32(p + 16, (uint32_t)price);
    be64(p + 20, ++s->match);
    p[28] = (uint8_t)type;
}

/* ---- books ---------------------------------------------------------------------------------- */

static int grow_pool(lob_synth *s) {
    uint32_t cap = s->pool_cap ? s->pool_cap * 2 : 1u << 16;
    ord_t *p = realloc(s->pool, (size_t)cap * sizeof *p);
    if (!p) return -1;
    s->pool = p;
    s->pool_cap = cap;
    return 0;
}

static uint32_t new_order(lob_synth *s) {
    uint32_t oi;
    if (s->free_head != NIL) {
        oi = s->free_head;
        s->free_head = s->pool[oi].next;
    } else {
        if (s->pool_used == s->pool_cap && grow_pool(s)) abort();
        oi = s->pool_used++;
    }
    return oi;
}

static void side_fit(side_t *sd, int64_t pk) {
    if (sd->size && pk >= sd->base && pk < sd->base + (int64_t)sd->size) return;
    int64_t lo, hi;
    if (!sd->size) {
        lo = pk - 128;
        hi = pk + 128;
    } else {
        int64_t extra = sd->size / 2 > 64 ? sd->size / 2 : 64;
        lo = (pk < sd->base ? pk : sd->base) - (pk < sd->base ? extra : 0);
        hi = (pk >= sd->base + (int64_t)sd->size ? pk + 1 : sd->base + (int64_t)sd->size) +
             (pk >= sd->base + (int64_t)sd->size ? extra : 0);
    }
    uint32_t size = (uint32_t)(hi - lo);
    lvl_t *lv = malloc((size_t)size * sizeof *lv);
    if (!lv) abort();
    for (uint32_t i = 0; i < size; i++) lv[i].head = lv[i].tail = NIL;
    if (sd->size) {
        memcpy(lv + (sd->base - lo), sd->lv, (size_t)sd->size * sizeof *lv);
        if (sd->best >= 0) sd->best += sd->base - lo;
        free(sd->lv);
    }
    sd->lv = lv;
    sd->base = lo;
    sd->size = size;
}

static inline void live_add(lob_synth *s, uint32_t oi) {
    if (s->nlive == s->live_cap) {
        uint32_t cap = s->live_cap ? s->live_cap * 2 : 1u << 16;
        uint32_t *p = realloc(s->live, (size_t)cap * sizeof *p);
        if (!p) abort();
        s->live = p;
        s->live_cap = cap;
    }
    s->pool[oi].livepos = s->nlive;
    s->live[s->nlive++] = oi;
}
static inline void live_del(lob_synth *s, uint32_t oi) {
    uint32_t j = s->pool[oi].livepos;
    if (j == NIL) return;
    uint32_t last = s->live[--s->nlive];
    s->live[j] = last;
    s->pool[last].livepos = j;
    s->pool[oi].livepos = NIL;
}

/* the best price of a side (window, else far-off), 0 if none */
static inline int64_t best_price(const lob_synth *s, uint32_t loc, int buy) {
    const sym_t *y = &s->sym[loc];
    const side_t *sd = &y->side[buy];
    if (sd->best >= 0) return (sd->base + sd->best) * y->tick;
    return sd->far != NIL ? s->pool[sd->far].price : 0;
}

/* rest an order: the window, or (far) the far-off list in priority order */
static uint32_t rest(lob_synth *s, uint32_t loc, int buy, int64_t price, uint32_t shares, int flags) {
    sym_t *y = &s->sym[loc];
    side_t *sd = &y->side[buy];
    uint32_t oi = new_order(s);
    ord_t *o = &s->pool[oi];
    s->next_ref += 1 + (s->emitted & 3);
    o->ref = s->next_ref;
    o->shares = shares;
    o->price = (int32_t)price;
    o->loc = (uint16_t)loc;
    o->buy = (uint8_t)buy;
    o->flags = (uint8_t)(F_INUSE | flags);
    o->livepos = NIL;
    o->next = o->prev = NIL;
    if (flags & F_FAR) {
        uint32_t *link = &sd->far, prev = NIL;
        while (*link != NIL) {
            const ord_t *q = &s->pool[*link];
            if (buy ? q->price < price : q->price > price) break;
            prev = *link;
            link = &s->pool[*link].next;
        }
        o->next = *link;
        o->prev = prev;
        if (*link != NIL) s->pool[*link].prev = oi;
        *link = oi;
    } else {
        int64_t pk = price / y->tick;
        side_fit(sd, pk);
        int64_t k = pk - sd->base;
        lvl_t *l = &sd->lv[k];
        if (l->head == NIL) {
            l->head = l->tail = oi;
            sd->nlevels++;
            if (sd->best < 0 || (buy ? k > sd->best : k < sd->best)) sd->best = k;
        } else {
            o->prev = l->tail;
            s->pool[l->tail].next = oi;
            l->tail = oi;
        }
        if (!(flags & F_PLANTED)) live_add(s, oi);
    }
    y->nlive++;
    if (++s->live_count > s->peak_live) s->peak_live = s->live_count;
    return oi;
}

/* take an order out of its list and free it */
static void unrest(lob_synth *s, uint32_t oi) {
    ord_t *o = &s->pool[oi];
    sym_t *y = &s->sym[o->loc];
    side_t *sd = &y->side[o->buy];
    if (o->flags & F_FAR) {
        if (o->prev != NIL) s->pool[o->prev].next = o->next; else sd->far = o->next;
        if (o->next != NIL) s->pool[o->next].prev = o->prev;
    } else {
        int64_t k = o->price / y->tick - sd->base;
        lvl_t *l = &sd->lv[k];
        if (o->prev != NIL) s->pool[o->prev].next = o->next; else l->head = o->next;
        if (o->next != NIL) s->pool[o->next].prev = o->prev; else l->tail = o->prev;
        if (l->head == NIL) {
            sd->nlevels--;
            if (k == sd->best) {
                if (!sd->nlevels) {
                    sd->best = -1;
                } else if (o->buy) {
                    int64_t j = k - 1;
                    while (sd->lv[j].head == NIL) j--;
                    sd->best = j;
                } else {
                    int64_t j = k + 1;
                    while (sd->lv[j].head == NIL) j++;
                    sd->best = j;
                }
            }
        }
        live_del(s, oi);
    }
    y->nlive--;
    s->live_count--;
    o->flags = 0;
    o->next = s->free_head;
    s->free_head = oi;
}


/* ---- plants --------------------------------------------------------------------------------- */

static uint32_t plant(lob_synth *s, uint8_t kind, uint32_t loc, uint64_t start) {
    if (s->nplants == s->plants_cap) {
        uint32_t cap = s->plants_cap ? s->plants_cap * 2 : 256;
        lob_synth_plant *p = realloc(s->plants, (size_t)cap * sizeof *p);
        if (!p) abort();
        s->plants = p;
        s->plants_cap = cap;
    }
    lob_synth_plant *p = &s->plants[s->nplants];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->locate = loc;
    p->start = start;
    return s->nplants++;
}

/* ---- the schedule --------------------------------------------------------------------------- */

static void ev_add(lob_synth *s, uint64_t t, uint8_t prio, uint8_t kind, uint32_t loc, uint32_t arg) {
    if (s->nev == s->ev_cap) {
        uint32_t cap = s->ev_cap ? s->ev_cap * 2 : 1024;
        sev_t *p = realloc(s->ev, (size_t)cap * sizeof *p);
        if (!p) abort();
        s->ev = p;
        s->ev_cap = cap;
    }
    s->ev[s->nev] = (sev_t){t, s->nev, arg, (uint16_t)loc, prio, kind};
    s->nev++;
}
static int ev_cmp(const void *a, const void *b) {
    const sev_t *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

typedef struct {
    double w;
    uint32_t loc;
} act_t;
static int act_cmp(const void *a, const void *b) {
    const act_t *x = a, *y = b;
    if (x->w != y->w) return x->w > y->w ? -1 : 1;
    return x->loc < y->loc ? -1 : 1;
}

static void schedule(lob_synth *s, const double *w) {
    uint32_t n = s->n, f = s->cfg.features;
    uint64_t q_t = HMS(9, 30, 0) + 70000 + rint_(s, 10000), m_t = HMS(16, 0, 0) + 40000 + rint_(s, 10000);
    ev_add(s, q_t, 0, EV_S, 0, 'Q');
    ev_add(s, q_t + 60000, 1, EV_CROSS, 0, 'O');
    ev_add(s, m_t, 0, EV_S, 0, 'M');
    ev_add(s, m_t + 60000, 1, EV_CROSS, 0, 'C');
    /* NOII: every 10 s 09:25-09:28 and 15:50-15:55, every second to the cross */
    uint32_t part = 0;
    for (uint32_t l = 1; l <= n; l++) part += !s->sym[l].test;
    uint64_t budget = (uint64_t)(0.008 * (double)s->cfg.n_messages);
    uint64_t per = budget / (2 * (part ? part : 1));
    if (per < 1) per = 1;
    for (int c = 0; c < 2; c++) {
        uint64_t slots[420];
        uint32_t ns = 0;
        if (c == 0) {
            for (uint32_t k = 0; k < 180; k += 10) slots[ns++] = HMS(9, 25, k);
            for (uint32_t k = 0; k < 120; k++) slots[ns++] = HMS(9, 28, k);
        } else {
            for (uint32_t k = 0; k < 300; k += 10) slots[ns++] = HMS(15, 50, k);
            for (uint32_t k = 0; k < 300; k++) slots[ns++] = HMS(15, 55, k);
        }
        uint64_t kk = per < ns ? per : ns;
        for (uint64_t i = 0; i < kk; i++) ev_add(s, slots[ns - 1 - (i * ns) / kk] + 5000, 2, EV_NOII, 0, c ? 'C' : 'O');
    }
    /* the symbols by activity, tests last */
    uint32_t *act = malloc((size_t)n * sizeof *act), na = 0;
    act_t *aw = malloc((size_t)n * sizeof *aw);
    if (!act || !aw) abort();
    for (uint32_t l = 1; l <= n; l++)
        if (!s->sym[l].test) aw[na].w = w[l], aw[na++].loc = l;
    qsort(aw, na, sizeof *aw, act_cmp);
    for (uint32_t i = 0; i < na; i++) act[i] = aw[i].loc;
    free(aw);
    if (na >= 4) {
        uint64_t t0 = HMS(11, 0, 0) + (uint64_t)(rnd(s) * 3600.0 * NSEC);
        uint64_t t1 = HMS(13, 0, 0) + (uint64_t)(rnd(s) * 1800.0 * NSEC);
        uint64_t wins[2][3] = {{t0, t0 + 300 * NSEC + rint_(s, (uint32_t)NSEC), act[1]},
                               {t1, t1 + 900 * NSEC + rint_(s, (uint32_t)NSEC), act[na > 3 ? 3 : na - 1]}};
        ev_add(s, HMS(10, 15, 0) + (uint64_t)(rnd(s) * 3600.0 * NSEC), 4, EV_REGSHO, act[0], 0);
        ev_add(s, HMS(12, 15, 0) + (uint64_t)(rnd(s) * 3600.0 * NSEC), 4, EV_REGSHO, act[2], 0);
        /* spare symbols for the features: the rest, shuffled */
        uint32_t *spare = act + 4, nsp = na - 4;
        for (uint32_t i = 0; i < nsp; i++) {
            if (spare[i] == s->ipo_loc) {
                spare[i] = spare[--nsp];
                break;
            }
        }
        for (uint32_t i = nsp; i > 1; i--) {
            uint32_t j = rint_(s, i), t = spare[i - 1];
            spare[i - 1] = spare[j];
            spare[j] = t;
        }
        for (int k = 0; k < 2; k++) {
            ev_add(s, wins[k][0], 3, k ? EV_HALT : EV_PAUSE, (uint32_t)wins[k][2], 0);
            if (!(f & LOB_SYNTH_HALTS)) ev_add(s, wins[k][1], 3, EV_RESUME, (uint32_t)wins[k][2], 0);
        }
        if (f & LOB_SYNTH_HALTS) {
            uint32_t extra[2] = {n / 400, n / 3000};
            for (int k = 0; k < 2; k++) {
                uint32_t loc = (uint32_t)wins[k][2];
                uint64_t a = wins[k][0], b = wins[k][1];
                for (uint32_t j = 0;; j++) {
                    uint32_t np = 2 + rint_(s, 3);
                    for (uint32_t q = 0; q < np; q++) ev_add(s, a + (b - a) * (q + 1) / 6, 3, EV_PLANT, loc, q);
                    ev_add(s, b, 3, EV_XRESUME, loc, 0);
                    if (j >= extra[k] || !nsp) break;
                    loc = spare[--nsp];
                    a = HMS(9, 45, 0) + (uint64_t)(rnd(s) * 5.5 * 3600.0 * NSEC);
                    b = a + (k ? 900 : 300) * NSEC + rint_(s, (uint32_t)NSEC);
                    ev_add(s, a, 3, k ? EV_HALT : EV_PAUSE, loc, 0);
                }
            }
        }
        if (s->ipo_loc) {
            uint64_t tq = HMS(10, 0, 0) + (uint64_t)(rnd(s) * 1800.0 * NSEC);
            uint64_t tx = tq + 1800 * NSEC + rint_(s, (uint32_t)NSEC);
            ev_add(s, tq, 3, EV_IPOQ, s->ipo_loc, (uint32_t)(tx / NSEC));
            for (uint32_t q = 0; q < 4; q++) ev_add(s, tq + (tx - tq) * (q + 2) / 7, 3, EV_PLANT, s->ipo_loc, q);
            ev_add(s, tx, 3, EV_XRESUME, s->ipo_loc, 0);
        }
        if ((f & LOB_SYNTH_OPERATIONAL) && nsp) {
            uint32_t loc = spare[--nsp];
            uint64_t t = HMS(13, 30, 0) + (uint64_t)(rnd(s) * 3600.0 * NSEC);
            ev_add(s, t, 3, EV_OHALT, loc, 0);
            ev_add(s, t + 120 * NSEC + rint_(s, (uint32_t)NSEC), 3, EV_ORESUME, loc, 0);
        }
        if (f & LOB_SYNTH_MWCB) ev_add(s, HMS(14, 45, 0) + (uint64_t)(rnd(s) * 600.0 * NSEC), 4, EV_MWCB, 0, '1');
        if (f & LOB_SYNTH_FAR_OFF) {
            uint32_t *penny = malloc((size_t)(nsp + 1) * sizeof *penny), *sub = malloc((size_t)(n + 1) * sizeof *sub);
            uint32_t npen = 0, nsub = 0, k = 0;
            if (!penny || !sub) abort();
            for (uint32_t i = 0; i < nsp; i++)
                if (s->sym[spare[i]].tick == 100) penny[npen++] = spare[i];
            for (uint32_t l = 1; l <= n; l++)
                if (s->sym[l].tick == 1 && !s->sym[l].test && l != s->ipo_loc) sub[nsub++] = l;
            for (uint32_t r = 0; r < 1 + n / 2000; r++) {
                for (uint32_t why = 1; why <= 4; why++) {
                    uint32_t *pool = why == 4 ? sub : penny, np = why == 4 ? nsub : npen;
                    if (!np || (why == 3 && !(f & LOB_SYNTH_MAX_PRICE))) continue;
                    uint32_t loc = pool[rint_(s, np)];
                    uint64_t tf = HMS(9, 35, 0) + (uint64_t)(rnd(s) * 5 * 3600.0 * NSEC);
                    ev_add(s, tf, 5, EV_FARADD, loc, (k << 3) | why);
                    ev_add(s, tf + (1800 + (uint64_t)rint_(s, 3600)) * NSEC, 5, EV_FARDEL, loc, k);
                    k++;
                }
            }
            for (uint32_t l = 1; l <= n; l++) {
                if (s->sym[l].test) {
                    uint64_t tf = HMS(9, 35, 0) + (uint64_t)(rnd(s) * 5 * 3600.0 * NSEC);
                    ev_add(s, tf, 5, EV_FARADD, l, (k << 3) | 5);
                    ev_add(s, tf + (1800 + (uint64_t)rint_(s, 3600)) * NSEC, 5, EV_FARDEL, l, k);
                    k++;
                    break;
                }
            }
            s->nfar = k;
            free(penny);
            free(sub);
        }
    }
    free(act);
    qsort(s->ev, s->nev, sizeof *s->ev, ev_cmp);
}

/* ---- the intensity profile: message fraction -> time ------------------------------------ */

static void time_map(lob_synth *s, uint64_t t_start, uint64_t t_end) {
    static const double K[][2] = {{4.0, 0.25}, {7.0, 0.4}, {8.0, 0.8}, {9.0, 1.2}, {9.49, 2.0}, {9.5, 10.0},
                                  {9.75, 6.0}, {10.5, 4.0}, {12.0, 2.8}, {14.0, 3.0}, {15.5, 4.5}, {15.9, 9.0},
                                  {16.0, 10.0}, {16.02, 2.0}, {16.5, 0.8}, {18.0, 0.35}, {20.0, 0.2}};
    enum { NK = sizeof K / sizeof K[0], G = 20000, NT = 4096 };
    double *gc = s->grid; /* G + 1 */
    double a = (double)t_start / 3.6e12, b = (double)t_end / 3.6e12;
    /* cumulative intensity on a fine grid of [a, b] (hours) */
    double acc = 0, prev = 0;
    for (int g = 0; g <= G; g++) {
        double h = a + (b - a) * g / G, wt = K[NK - 1][1];
        if (h <= K[0][0]) wt = K[0][1];
        for (int k = 0; k + 1 < NK; k++)
            if (h >= K[k][0] && h < K[k + 1][0]) {
                wt = K[k][1] + (K[k + 1][1] - K[k][1]) * (h - K[k][0]) / (K[k + 1][0] - K[k][0]);
                break;
            }
        if (g) acc += (wt + prev) / 2;
        prev = wt;
        gc[g] = acc;
    }
    int k = 0;
    for (int i = 0; i <= NT; i++) {
        double target = acc * i / NT;
        while (k < G && gc[k + 1] < target) k++;
        double fr = gc[k + 1] > gc[k] ? (target - gc[k]) / (gc[k + 1] - gc[k]) : 0;
        if (fr > 1) fr = 1;
        s->tmap[i] = t_start + (uint64_t)(((double)k + fr) / G * (double)(t_end - t_start));
    }
    s->tmap[NT + 1] = s->tmap[NT];
}

/* ---- creation ------------------------------------------------------------------------------- */

static int u64cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static uint64_t pack_name(const char *str) {
    uint64_t v = 0;
    size_t L = strlen(str);
    for (size_t i = 0; i < 8; i++) v = (v << 8) | (uint8_t)(i < L ? str[i] : ' ');
    return v;
}

lob_synth *lob_synth_new(const lob_synth_config *cfg, int *status) {
    int st = LOB_EARG;
    lob_synth *s = NULL;
    if (!cfg || cfg->n_symbols < 1 || cfg->n_symbols > 65535 ||
        cfg->n_messages < 3ull * cfg->n_symbols + 116 || cfg->n_messages > (1ull << 40))
        goto fail;
    st = LOB_ENOMEM;
    s = calloc(1, sizeof *s);
    if (!s) goto fail;
    s->cfg = *cfg;
    s->rng = cfg->seed * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull;
    uint32_t n = s->n = cfg->n_symbols;
    s->sym = calloc(n + 1, sizeof *s->sym);
    s->sym_table = malloc((size_t)(1u << 20) * sizeof *s->sym_table);
    s->open_win = malloc((size_t)(n + 1) * sizeof *s->open_win);
    s->xbuf = malloc((size_t)6 * XCAP * sizeof *s->xbuf);
    s->grid = malloc((size_t)20001 * sizeof *s->grid);
    uint64_t *names = malloc((size_t)n * sizeof *names);
    double *w = malloc((size_t)(n + 1) * sizeof *w);
    uint32_t *tmp = malloc((size_t)(1u << 20) * sizeof *tmp);
    uint32_t *perm = malloc((size_t)(n + 1) * sizeof *perm);
    if (!s->sym || !s->sym_table || !s->open_win || !s->xbuf || !s->grid || !names || !w || !tmp || !perm) {
        free(names); free(w); free(tmp); free(perm);
        goto fail;
    }
    for (uint32_t l = 0; l <= n; l++) s->open_win[l] = NIL;
    s->free_head = NIL;
    /* names: unique, then sorted (locates in alphabetical order); two test issues */
    uint32_t nn = 0;
    if (n >= 8) {
        names[nn++] = pack_name("ZVZZT");
        names[nn++] = pack_name("ZXZZT");
    }
    while (nn < n) {
        static const double LW[] = {2, 8, 35, 50, 5};
        double u = rnd(s) * 100, c = 0;
        uint32_t len = 1;
        for (uint32_t i = 0; i < 5; i++) {
            c += LW[i];
            if (u < c) { len = i + 1; break; }
        }
        char b[9] = {0};
        for (uint32_t i = 0; i < len; i++) b[i] = (char)('A' + rint_(s, 26));
        if (len == 5) b[4] = 'W';
        uint64_t v = pack_name(b);
        int dup = 0;
        for (uint32_t i = 0; i < nn && !dup; i++) dup = names[i] == v;  /* (n^2/2 compares: 40M at 9,000) */
        if (!dup) names[nn++] = v;
    }
    qsort(names, n, sizeof *names, u64cmp);
    for (uint32_t l = 1; l <= n; l++) {
        sym_t *y = &s->sym[l];
        y->name = names[l - 1];
        y->test = n >= 8 && (y->name == pack_name("ZVZZT") || y->name == pack_name("ZXZZT"));
        for (int k = 0; k < 2; k++) y->side[k].best = -1, y->side[k].far = NIL;
        if (!y->test && rnd(s) < 0.06) {
            y->tick = 1;
            y->ds = 3 + (int32_t)rint_(s, 10);
            y->mid = (int64_t)((0.08 + 0.85 * rnd(s)) * 10000);
            y->lo = 200;
            y->hi = 9800;
            y->floor = 1;
            y->ceil = 9999; /* sub-penny prices stay below $1 */
        } else {
            double dollars = exp(log(2.0) + rnd(s) * (log(600.0) - log(2.0)));
            if (rnd(s) < 0.03) dollars *= 8;
            y->tick = 100;
            y->ds = 1;
            int64_t c = (int64_t)(dollars * 100);
            y->mid = (c > 2 ? c : 2) * 100;
            y->lo = y->mid / 4 > 10000 ? y->mid / 4 / 100 * 100 : 10000;
            y->hi = y->mid * 4 < 1999000000 ? y->mid * 4 : 1999000000;
            y->floor = y->lo - 100 * 100 > 100 ? y->lo - 100 * 100 : 100;
            y->ceil = y->hi + 100 * 100;
        }
    }
    /* Zipf-like activity over a random order; the test issues at a middling symbol's */
    uint32_t np = 0;
    for (uint32_t l = 1; l <= n; l++)
        if (!s->sym[l].test) perm[np++] = l;
    for (uint32_t i = np; i > 1; i--) {
        uint32_t j = rint_(s, i), t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    w[0] = 0;
    for (uint32_t r = 0; r < np; r++) w[perm[r]] = 1.0 / pow((double)r + 1, 0.8);
    double wmid = np ? 1.0 / pow((double)np / 2 + 1, 0.8) : 1;
    for (uint32_t l = 1; l <= n; l++)
        if (s->sym[l].test) w[l] = wmid;
    table_fill(s, w + 1, n, tmp, 1u << 20);
    {
        /* Walker's alias table over locates 1..n (index 0 of the arrays = locate 1) */
        s->alias_p = malloc((size_t)n * sizeof *s->alias_p);
        s->alias_i = malloc((size_t)n * sizeof *s->alias_i);
        s->unit = malloc((size_t)(n + 1) * sizeof *s->unit);
        double *pr = malloc((size_t)n * sizeof *pr), tot = 0;
        uint32_t *small = malloc((size_t)n * sizeof *small), *large = malloc((size_t)n * sizeof *large);
        if (!s->alias_p || !s->alias_i || !s->unit || !pr || !small || !large) {
            free(pr); free(small); free(large); free(names); free(w); free(tmp); free(perm);
            goto fail;
        }
        for (uint32_t i = 0; i < n; i++) tot += w[i + 1];
        uint32_t ns = 0, nl = 0;
        for (uint32_t i = 0; i < n; i++) {
            pr[i] = w[i + 1] * n / tot;
            if (pr[i] < 1) small[ns++] = i; else large[nl++] = i;
        }
        while (ns && nl) {
            uint32_t a = small[--ns], b = large[nl - 1];
            s->alias_p[a] = (float)pr[a];
            s->alias_i[a] = (uint16_t)(b + 1);
            pr[b] -= 1 - pr[a];
            if (pr[b] < 1) { nl--; small[ns++] = b; }
        }
        while (nl) { uint32_t b = large[--nl]; s->alias_p[b] = 1.0f; s->alias_i[b] = (uint16_t)(b + 1); }
        while (ns) { uint32_t a = small[--ns]; s->alias_p[a] = 1.0f; s->alias_i[a] = (uint16_t)(a + 1); }
        free(pr); free(small); free(large);
        for (uint32_t l = 1; l <= n; l++) s->unit[l] = s->sym[l].tick * s->sym[l].ds;
        s->unit[0] = 1;
    }
    for (uint32_t i = 0; i < (1u << 20); i++) s->sym_table[i] = (uint16_t)(tmp[i] + 1);
    {
        double dw[50];
        for (int d = 0; d < 50; d++) dw[d] = (0.6 + 0.25 * (d < 3 ? d : 3)) * pow(0.86, d > 3 ? d - 3 : 0);
        table_fill(s, dw, 50, tmp, 4096);
        for (int i = 0; i < 4096; i++) s->depth_table[i] = (uint8_t)tmp[i];
        static const double SV[] = {100, 200, 300, 400, 500, 1000, 2000, 5000, 50, 25, 10, 1, 5, 30, 75, 150, 250,
                                    600, 800};
        static const double SW[] = {40, 12, 6, 3, 6, 3, 1, 0.3, 3, 2, 3, 3, 2, 1, 1, 2, 1, 1, 0.7};
        table_fill(s, SW, 19, tmp, 4096);
        for (int i = 0; i < 4096; i++) s->size_table[i] = (uint16_t)SV[tmp[i]];
        static const double TV[] = {1, 2, 3, 4, 5, 6, 8, 12}, TW[] = {58, 20, 9, 5, 3, 2, 2, 1};
        table_fill(s, TW, 8, tmp, 1024);
        for (int i = 0; i < 1024; i++) s->touch_table[i] = (uint8_t)TV[tmp[i]];
        static const double RV[] = {0, 1, -1, 2, -2, 3, -3, 5, -5}, RW[] = {30, 20, 20, 7, 7, 3, 3, 2, 2};
        table_fill(s, RW, 9, tmp, 1024);
        for (int i = 0; i < 1024; i++) s->replace_table[i] = (int8_t)RV[tmp[i]];
    }
    if ((cfg->features & LOB_SYNTH_IPO) && np >= 8) {
        /* the sixth busiest symbol: halted from the start, no orders until its quotation period */
        s->ipo_loc = perm[5];
        s->sym[s->ipo_loc].halted = s->sym[s->ipo_loc].blocked = s->sym[s->ipo_loc].ipo = 1;
    }
    uint32_t rps = cfg->resting_per_symbol;
    if (!rps) {
        uint64_t r = cfg->n_messages / ((uint64_t)n * 25);
        rps = (uint32_t)(r < 2 ? 2 : r > 200 ? 200 : r);
    }
    s->target = (uint64_t)rps * n;
    s->next_ref = 4000 + rint_(s, 1000);
    s->match = 10000 + rint_(s, 1000);
    schedule(s, w);
    if (s->nfar) {
        s->far_oi = malloc((size_t)s->nfar * sizeof *s->far_oi);
        if (!s->far_oi) { free(names); free(w); free(tmp); free(perm); goto fail; }
        for (uint32_t k = 0; k < s->nfar; k++) s->far_oi[k] = NIL;
    }
    free(names);
    free(w);
    free(tmp);
    free(perm);
    s->phase = PH_PRE;
    s->t_pre = HMS(3, 1, 30) + (uint64_t)(rnd(s) * 180.0 * NSEC);
    uint64_t span = HMS(3, 50, 0) - s->t_pre, st3 = span / (3ull * n + 20);
    s->pre_step = st3 < 280000000ull ? st3 : 280000000ull;
    s->p_u = 0.08; s->p_x = 0.01; s->p_p = 0.005; s->avg_e = 1.6; s->p_ag = 0.02 / 1.6;
    s->c_y = 0.0002 / 0.02 * 1.6;
    if (grow_pool(s)) goto fail;
    if (status) *status = LOB_OK;
    return s;
fail:
    lob_synth_free(s);
    if (status) *status = st;
    return NULL;
}

void lob_synth_free(lob_synth *s) {
    if (!s) return;
    if (s->sym)
        for (uint32_t l = 0; l <= s->n; l++) free(s->sym[l].side[0].lv), free(s->sym[l].side[1].lv);
    free(s->sym); free(s->pool); free(s->live); free(s->sym_table); free(s->ev); free(s->plants);
    free(s->open_win); free(s->far_oi); free(s->alias_p); free(s->alias_i); free(s->unit);
    free(s->xbuf); free(s->grid);
    free(s);
}

/* ---- the directory spin -------------------------------------------------------------------- */

static uint64_t pre_tick(lob_synth *s) {
    s->t_pre += s->pre_step / 2 + (uint64_t)(rnd(s) * (double)s->pre_step);
    return s->t_pre;
}

static void hy(lob_synth *s, uint32_t loc) {
    sym_t *y = &s->sym[loc];
    uint64_t ts = pre_tick(s);
    m_h(s, ts, loc, y->ipo ? 'H' : 'T', y->ipo ? "IPO1" : "    ");
    if (y->ipo) s->open_win[loc] = plant(s, 3, loc, ts);
    ts = pre_tick(s);
    uint8_t *p = msg(s, 'Y', 20, loc, 0, ts);
    name8(s, loc, p);
    p[8] = '0';
}

/* one step of the spin: S "O" (cursor 0), R and the lagged H/Y per symbol, L, V, S "S" */
static void preamble_step(lob_synth *s) {
    uint32_t n = s->n, lag = n / 3 < 1 ? 1 : n / 3 > 80 ? 80 : n / 3, c = s->cursor++;
    if (c == 0) {
        m_s(s, s->t_pre, 'O');
        return;
    }
    if (c <= n) {
        uint32_t loc = c;
        sym_t *y = &s->sym[loc];
        uint64_t ts = pre_tick(s);
        uint8_t *p = msg(s, 'R', 39, loc, 0, ts);
        double u = rnd(s);
        char cat, fin = ' ', cls = 'C';
        if (y->test) cat = 'Q', fin = 'N';
        else if (u < 0.45) cat = "QGS"[rint_(s, 3)], fin = 'N';
        else if (u < 0.6) cat = 'P', cls = 'Q';
        else cat = "NNNAZ"[rint_(s, 5)], cls = "CCCAL"[rint_(s, 5)];
        int nasdaq = cat == 'Q' || cat == 'G' || cat == 'S';
        name8(s, loc, p);
        p[8] = (uint8_t)cat;
        p[9] = (uint8_t)fin;
        be32(p + 10, 100);
        p[14] = 'N';
        p[15] = (uint8_t)cls;
        p[16] = (cat == 'P') ? 'I' : 'Z';
        p[17] = ' ';
        p[18] = y->test ? 'T' : 'P';
        p[19] = nasdaq ? 'N' : ' ';
        p[20] = y->ipo ? 'Y' : nasdaq ? 'N' : ' ';
        p[21] = rnd(s) < 0.25 ? '1' : '2';
        p[22] = cat == 'P' ? 'Y' : 'N';
        be32(p + 23, cat == 'P' ? 1 : 0);
        p[27] = 'N';
        if (loc > lag) hy(s, loc - lag);
        return;
    }
    if (c <= n + lag) {
        uint32_t loc = (n > lag ? n - lag : 0) + (c - n);
        if (loc >= 1 && loc <= n) hy(s, loc);
        return;
    }
    if (c <= n + lag + (n < 6 ? n : 6)) {
        uint32_t loc = s->sym_table[rint_(s, 1u << 20)];
        uint8_t *p = msg(s, 'L', 26, loc, 0, pre_tick(s));
        static const char MP[10][5] = {"GSCO", "UBSS", "VIRT", "FLTU", "CDRG", "NITE", "MAXM", "JPMS", "MSCO", "SUSQ"};
        memcpy(p, MP[rint_(s, 10)], 4);
        name8(s, loc, p + 4);
        p[12] = rnd(s) < 0.7 ? 'Y' : 'N';
        p[13] = 'N';
        p[14] = 'A';
        return;
    }
    /* V, then S "S": the flow starts */
    uint64_t close = 3200 + rint_(s, 200);
    uint8_t *p = msg(s, 'V', 35, 0, 0, pre_tick(s));
    be64(p, close * 93 * 1000000);
    be64(p + 8, close * 87 * 1000000);
    be64(p + 16, close * 80 * 1000000);
    m_s(s, HMS(4, 0, 0) + rint_(s, 50000), 'S');
    s->t_start = s->last_t;
    time_map(s, s->t_start, HMS(19, 59, 59));
    s->f0 = s->emitted;
    uint64_t b = s->cfg.n_messages > s->target + 2 + s->emitted ? s->cfg.n_messages - s->target - 2 - s->emitted : 1;
    s->inv_budget = 4096.0 / (double)b;
    s->phase = PH_FLOW;
}

/* ---- scheduled events ------------------------------------------------------------------------ */

/* the orders of a side in priority order, up to cap (window levels, best first) */
static uint32_t side_orders(const lob_synth *s, uint32_t loc, int buy, uint32_t *out, uint32_t cap) {
    const sym_t *y = &s->sym[loc];
    const side_t *sd = &y->side[buy];
    uint32_t k = 0;
    if (sd->best < 0) return 0;
    for (int64_t j = sd->best; j >= 0 && j < (int64_t)sd->size && k < cap; j += buy ? -1 : 1)
        for (uint32_t oi = sd->lv[j].head; oi != NIL && k < cap; oi = s->pool[oi].next) out[k++] = oi;
    return k;
}

static void open_cross_symbol(lob_synth *s, uint64_t ts, uint32_t loc, char ct) {
    sym_t *y = &s->sym[loc];
    int buy = rnd(s) < 0.5;
    if (y->side[buy].best < 0) buy = !buy;
    if (y->side[buy].best < 0 || y->halted || rnd(s) < 0.15) {
        m_q(s, ts, loc, 0, 0, ct);
        return;
    }
    int64_t best = (y->side[buy].base + y->side[buy].best) * y->tick;
    int64_t price = best + (int64_t)rint_(s, 2) * (buy ? -y->tick : y->tick);
    if (price < y->tick) price = best;
    uint32_t cand[8], nc = 0;
    const side_t *sd = &y->side[buy];
    for (int64_t j = sd->best; j >= 0 && j < (int64_t)sd->size && nc < 3; j += buy ? -1 : 1) {
        int64_t p = (sd->base + j) * y->tick;
        if (buy ? p < price : p > price) break;
        for (uint32_t oi = sd->lv[j].head; oi != NIL && nc < 8; oi = s->pool[oi].next) cand[nc++] = oi;
    }
    uint32_t ne = 1 + rint_(s, nc < 3 ? nc : 3);
    uint64_t total = 0;
    for (uint32_t j = 0; j < ne; j++) {
        ord_t *o = &s->pool[cand[j]];
        uint32_t x = o->shares;
        if (j == ne - 1 && x > 1 && rnd(s) < 0.4) x = 1 + rint_(s, x - 1);
        m_c(s, ts, loc, 1, o->ref, x, 'N', price);
        s->executed += x;
        total += x;
        o->shares -= x;
        if (!o->shares) unrest(s, cand[j]);
    }
    m_q(s, ts, loc, total + (uint64_t)s->size_table[rint_(s, 4096)] * rint_(s, 5), price, ct);
}

static void noii_symbol(lob_synth *s, uint64_t ts, uint32_t loc, char ct) {
    uint8_t *p = msg(s, 'I', 50, loc, 0, ts);
    int64_t bb = best_price(s, loc, 1), ba = best_price(s, loc, 0);
    uint64_t paired = 0, imb = 0;
    int64_t ref = 0;
    char d = 'O', pvi = ' ';
    if (!(rnd(s) < 0.1 || !bb || !ba)) {
        ref = rnd(s) < 0.5 ? bb : ba;
        paired = (uint64_t)s->size_table[rint_(s, 4096)] * (1 + rint_(s, 20));
        imb = (uint64_t)s->size_table[rint_(s, 4096)] * rint_(s, 10);
        d = imb == 0 ? 'N' : rnd(s) < 0.5 ? 'B' : 'S';
        pvi = rnd(s) < 0.8 ? 'L' : '1';
    }
    be64(p, paired);
    be64(p + 8, imb);
    p[16] = (uint8_t)d;
    name8(s, loc, p + 17);
    be32(p + 25, (uint32_t)ref);
    be32(p + 29, (uint32_t)ref);
    be32(p + 33, (uint32_t)ref);
    p[37] = (uint8_t)ct;
    p[38] = (uint8_t)pvi;
}

/* a displayed order that crosses the opposite best (the symbol does not trade: it rests) */
static void plant_cross(lob_synth *s, uint64_t ts, uint32_t loc, uint32_t k) {
    sym_t *y = &s->sym[loc];
    int buy = (int)(k & 1);
    int64_t tk = y->tick;
    if (y->side[!buy].best < 0) {
        int64_t m = y->mid, p = buy ? m : (m - tk > tk ? m - tk : tk);
        uint32_t oi = rest(s, loc, !buy, p, s->size_table[rint_(s, 4096)], 0);
        m_add(s, ts, &s->pool[oi], -1);
    }
    int64_t opp = (y->side[!buy].base + y->side[!buy].best) * tk;
    int64_t d = (int64_t)rint_(s, 3) * tk * y->ds;
    int64_t price = buy ? opp + d : opp - d;
    if (price > y->ceil || price < y->floor) price = opp;
    uint32_t oi = rest(s, loc, buy, price, s->size_table[rint_(s, 4096)], F_PLANTED);
    m_add(s, ts, &s->pool[oi], -1);
    uint32_t r = plant(s, 5, loc, s->last_t);
    s->plants[r].ref = s->pool[oi].ref;
    s->plants[r].side = buy ? 'B' : 'S';
    s->plants[r].price = price;
    s->plants[r].shares = s->pool[oi].shares;
}

/* the halt (IPO) cross: one price, C "N" for every order executed (buys, then sells), Q "H", H "T" */
static void halt_cross(lob_synth *s, uint64_t ts, uint32_t loc) {
    sym_t *y = &s->sym[loc];
    enum { CAP = XCAP };
    uint32_t *bids = s->xbuf, *asks = bids + CAP, *fb = asks + CAP, *fs = fb + CAP, *qb = fs + CAP, *qs = qb + CAP;
    uint32_t nb = side_orders(s, loc, 1, bids, CAP), na = side_orders(s, loc, 0, asks, CAP);
    uint32_t i = 0, j = 0, nfb = 0, nfs = 0;
    uint32_t lb = nb ? s->pool[bids[0]].shares : 0, la = na ? s->pool[asks[0]].shares : 0;
    uint64_t total = 0;
    while (i < nb && j < na && s->pool[bids[i]].price >= s->pool[asks[j]].price) {
        uint32_t q = lb < la ? lb : la;
        if (!nfb || fb[nfb - 1] != bids[i]) fb[nfb] = bids[i], qb[nfb++] = 0;
        if (!nfs || fs[nfs - 1] != asks[j]) fs[nfs] = asks[j], qs[nfs++] = 0;
        qb[nfb - 1] += q;
        qs[nfs - 1] += q;
        total += q;
        lb -= q;
        la -= q;
        if (!lb && ++i < nb) lb = s->pool[bids[i]].shares;
        if (!la && ++j < na) la = s->pool[asks[j]].shares;
    }
    int64_t price = 0;
    if (total) {
        int64_t lo = s->pool[fs[nfs - 1]].price, hi = s->pool[fb[nfb - 1]].price;
        price = lo + (hi - lo) / 2 / y->tick * y->tick;
    }
    uint32_t w = s->open_win[loc];
    for (int side = 1; side >= 0; side--) {
        uint32_t *f = side ? fb : fs, *q = side ? qb : qs, nf = side ? nfb : nfs;
        for (uint32_t k = 0; k < nf; k++) {
            ord_t *o = &s->pool[f[k]];
            m_c(s, ts, loc, 1, o->ref, q[k], 'N', price);
            s->executed += q[k];
            o->shares -= q[k];
            if (!o->shares) unrest(s, f[k]);
            if (w != NIL) s->plants[w].executions++;
        }
    }
    m_q(s, ts, loc, total, price, 'H');
    m_h(s, s->last_t, loc, 'T', "    ");
    y->halted = y->blocked = 0;
    if (w != NIL) {
        s->plants[w].end = s->last_t;
        s->plants[w].price = price;
        s->plants[w].shares = total;
        s->open_win[loc] = NIL;
    }
}

static void far_add(lob_synth *s, uint64_t ts, uint32_t loc, uint32_t arg) {
    sym_t *y = &s->sym[loc];
    uint32_t k = arg >> 3, why = arg & 7;
    int64_t tk = y->tick, m = y->mid, price;
    uint32_t shares = s->size_table[rint_(s, 4096)];
    int buy = 0;
    /* (outside [floor, ceil], where no order of the flow goes: every far-off order is worse than
     * every order of its side's window) */
    if (why == 1) price = (m * 8 > y->ceil ? m * 8 : y->ceil + tk) / tk * tk;
    else if (why == 2) {
        buy = 1;
        price = (m / 8 < y->floor ? m / 8 : y->floor - tk) / tk * tk;
        if (price < tk) return;   /* no room below this symbol's floor */
    } else if (why == 3) price = MAXP;
    else if (why == 4) price = 10000000;
    else {
        /* best and trades: its side's other orders go, it is the best ask, a buy takes part */
        uint32_t tmp[256], nt;
        while ((nt = side_orders(s, loc, 0, tmp, 256)) > 0)
            for (uint32_t i = 0; i < nt; i++) {
                m_d(s, ts, loc, s->pool[tmp[i]].ref);
                unrest(s, tmp[i]);
            }
        for (uint32_t oi = y->side[0].far; oi != NIL; oi = y->side[0].far) {
            m_d(s, ts, loc, s->pool[oi].ref);
            unrest(s, oi);
        }
        int64_t bb = best_price(s, loc, 1);
        price = (m > bb ? m : bb) * 8 / tk * tk;
        if (price <= y->ceil) price = y->ceil + tk;
        if (shares < 2) shares = 2;
    }
    if (price > MAXP) price = MAXP;
    if (price < tk) price = tk;
    uint32_t oi = rest(s, loc, buy, price, shares, F_PLANTED | F_FAR);
    m_add(s, ts, &s->pool[oi], -1);
    s->far_oi[k] = oi;
    uint32_t r = plant(s, 6, loc, s->last_t);
    lob_synth_plant *p = &s->plants[r];
    p->ref = s->pool[oi].ref;
    p->side = buy ? 'B' : 'S';
    p->price = price;
    p->shares = shares;
    p->why = (uint8_t)why;
    p->reserved[0] = (uint8_t)(k & 0xFF);
    p->reserved[1] = (uint8_t)(k >> 8);
    if (why == 5) {
        uint32_t x = 1 + rint_(s, shares - 1);
        m_e(s, s->last_t + 1, loc, 2, p->ref, x);
        s->executed += x;
        s->pool[oi].shares -= x;
        p->executions = x;
        s->n_groups++;
    }
}

static void far_del(lob_synth *s, uint64_t ts, uint32_t k) {
    uint32_t oi = s->far_oi[k];
    if (oi == NIL || !(s->pool[oi].flags & F_INUSE)) return;
    uint64_t ref = s->pool[oi].ref;
    m_d(s, ts, s->pool[oi].loc, ref);
    unrest(s, oi);
    s->far_oi[k] = NIL;
    for (uint32_t r = s->nplants; r-- > 0;)
        if (s->plants[r].kind == 6 && s->plants[r].ref == ref) {
            s->plants[r].end = s->last_t;
            break;
        }
}

/* one step of the current event; returns 1 when the event is finished */
static int event_step(lob_synth *s, const sev_t *e) {
    uint64_t ts = e->t > s->last_t ? e->t : s->last_t;
    uint32_t loc = e->loc;
    sym_t *y = &s->sym[loc];
    switch (e->kind) {
    case EV_S: m_s(s, ts, (char)e->arg); return 1;
    case EV_CROSS:
    case EV_NOII: {
        /* one symbol per step (non-test ones) */
        while (s->ev_cursor < s->n && s->sym[s->ev_cursor + 1].test) s->ev_cursor++;
        if (s->ev_cursor >= s->n) { s->ev_cursor = 0; return 1; }
        uint32_t l = ++s->ev_cursor;
        if (e->kind == EV_CROSS) open_cross_symbol(s, ts + 1000 + rint_(s, 40000), l, (char)e->arg);
        else noii_symbol(s, ts, l, (char)e->arg);
        return 0;
    }
    case EV_PAUSE:
    case EV_HALT:
        m_h(s, ts, loc, e->kind == EV_PAUSE ? 'P' : 'H', e->kind == EV_PAUSE ? "LUDP" : "T1  ");
        y->halted = 1;
        if (s->cfg.features & LOB_SYNTH_HALTS) s->open_win[loc] = plant(s, e->kind == EV_PAUSE ? 1 : 2, loc, ts);
        if (e->kind == EV_PAUSE) {
            int64_t ref = y->mid, tk = y->tick, band = (ref / 20) / tk * tk;
            if (band < tk) band = tk;
            uint8_t *p = msg(s, 'J', 35, loc, 0, ts + 1000 + rint_(s, 50000));
            name8(s, loc, p);
            be32(p + 8, (uint32_t)ref);
            be32(p + 12, (uint32_t)(ref + band));
            be32(p + 16, (uint32_t)(ref - band > tk ? ref - band : tk));
            be32(p + 20, 0);
        }
        return 1;
    case EV_RESUME:
        m_h(s, ts, loc, 'T', "    ");
        y->halted = 0;
        return 1;
    case EV_PLANT: plant_cross(s, ts, loc, e->arg); return 1;
    case EV_XRESUME: halt_cross(s, ts, loc); return 1;
    case EV_IPOQ: {
        uint8_t *p = msg(s, 'K', 28, loc, 0, ts);
        name8(s, loc, p);
        be32(p + 8, e->arg);
        p[12] = 'A';
        be32(p + 13, (uint32_t)(y->mid / y->tick * y->tick));
        m_h(s, ts, loc, 'Q', "IPOQ");
        y->blocked = 0;
        return 1;
    }
    case EV_OHALT:
    case EV_ORESUME: {
        uint8_t *p = msg(s, 'h', 21, loc, 0, ts);
        name8(s, loc, p);
        p[8] = 'Q';
        p[9] = e->kind == EV_OHALT ? 'H' : 'T';
        y->halted = e->kind == EV_OHALT;
        if (e->kind == EV_OHALT) s->open_win[loc] = plant(s, 4, loc, ts);
        else if (s->open_win[loc] != NIL) s->plants[s->open_win[loc]].end = ts, s->open_win[loc] = NIL;
        return 1;
    }
    case EV_MWCB: msg(s, 'W', 12, 0, 0, ts)[0] = (uint8_t)e->arg; return 1;
    case EV_REGSHO: {
        uint8_t *p = msg(s, 'Y', 20, loc, 0, ts);
        name8(s, loc, p);
        p[8] = '1';
        return 1;
    }
    case EV_FARADD: far_add(s, ts, loc, e->arg); return 1;
    case EV_FARDEL: far_del(s, ts, e->arg); return 1;
    }
    return 1;
}

/* ---- the order flow: one step ------------------------------------------------------------- */

static inline uint64_t now(lob_synth *s) {
    double x = (double)(s->emitted - s->f0) * s->inv_budget;
    if (x >= 4096) x = 4096 - 1e-9;
    uint32_t i = (uint32_t)x;
    uint64_t t = s->tmap[i] + (uint64_t)((x - i) * (double)(s->tmap[i + 1] - s->tmap[i]));
    return t < s->last_t ? s->last_t : t;
}

static void steer(lob_synth *s) {
    const uint64_t *c = s->counts;
    double N = (double)s->cfg.n_messages;
    if (s->n_groups) s->avg_e = (double)(c['E'] + s->n_cy) / (double)s->n_groups;
    double mps = (double)(s->emitted - s->f0 - s->sched_msgs) / (double)s->step;
    if (mps < 1) mps = 1;
    double left = (N - (double)s->emitted - (double)s->live_count - 2) / mps;
    if (left < 1) left = 1;
#define CLAMP(v, hi) ((v) < 0 ? 0 : (v) > (hi) ? (hi) : (v))
    s->p_u = CLAMP((0.08 * N - (double)c['U']) / left, 0.24);
    s->p_x = CLAMP((0.01 * N - (double)c['X']) / left, 0.03);
    s->p_p = CLAMP((0.005 * N - (double)c['P']) / left, 0.015);
    double ae = s->avg_e > 1 ? s->avg_e : 1;
    s->p_ag = CLAMP((0.02 * N - (double)c['E']) / left / ae, 0.06);
    s->c_y = 0.0002 / 0.02 * s->avg_e;
#undef CLAMP
}

static void passive_add(lob_synth *s, uint64_t ts, uint32_t loc, int buy) {
    sym_t *y = &s->sym[loc];
    int64_t tk = y->tick, m = y->mid, dsl = y->ds, d = s->depth_table[rint_(s, 4096)], price;
    if (buy) {
        price = m - tk * d * dsl;
        if (dsl > 1) price -= tk * (int64_t)rint_(s, (uint32_t)dsl);
        int64_t opp = best_price(s, loc, 0);
        if (opp && price >= opp) price = opp - tk - tk * d * dsl;
        if (price < y->floor) return;
    } else {
        price = m + tk + tk * d * dsl;
        if (dsl > 1) {
            price += tk * (int64_t)rint_(s, (uint32_t)dsl);
            if (price > y->ceil) price = y->ceil;
        }
        int64_t opp = best_price(s, loc, 1);
        if (opp && price <= opp) {
            price = opp + tk + tk * d * dsl;
        }
        if (price > y->ceil) return;
    }
    uint32_t oi = rest(s, loc, buy, price, s->size_table[rint_(s, 4096)], 0);
    m_add(s, ts, &s->pool[oi], rnd(s) < 0.005 / 0.445 ? (int)rint_(s, 10) : -1);
}

/* an incoming order executing against the opposite window: best price first, FIFO */
static void aggress(lob_synth *s, uint64_t t, uint32_t loc, int buy) {
    sym_t *y = &s->sym[loc];
    side_t *sd = &y->side[!buy];
    int64_t tk = y->tick;
    uint32_t need = s->touch_table[rint_(s, 1024)];
    if (rnd(s) < 0.3) {
        uint32_t c = 0;
        for (uint32_t oi = sd->lv[sd->best].head; oi != NIL && c < 20; oi = s->pool[oi].next) c++;
        need = c;
    }
    double mode = rnd(s);
    enum { FMAX = 64 };
    uint32_t fills[FMAX], nf = 0;
    for (int64_t j = sd->best; j >= 0 && j < (int64_t)sd->size && nf < need; j += buy ? 1 : -1) {
        uint32_t h = sd->lv[j].head;
        if (h == NIL) continue;
        if (mode < 0.12) {
            uint32_t c = 0;
            for (uint32_t oi = h; oi != NIL && c <= need + 3; oi = s->pool[oi].next) c++;
            if (nf + c <= need + 3) {
                for (uint32_t oi = h; oi != NIL; oi = s->pool[oi].next) fills[nf++] = oi;
                continue;
            }
            mode = 0.5;
        }
        for (uint32_t oi = h; oi != NIL && nf < need; oi = s->pool[oi].next) fills[nf++] = oi;
    }
    uint64_t q = 0;
    for (uint32_t k = 0; k < nf; k++) q += s->pool[fills[k]].shares;
    uint32_t last_sh = s->pool[fills[nf - 1]].shares;
    if (mode < 0.12) q += s->size_table[rint_(s, 4096)];
    else if (mode < 0.45 && last_sh > 1) q -= last_sh - 1 - rint_(s, last_sh - 1);
    uint64_t ts = t <= s->last_t ? s->last_t + 1 : t;
    int use_c = nf == 1 && rnd(s) < s->c_y;
    uint32_t tr = 0;
    int64_t p = 0;
    for (uint32_t k = 0; k < nf; k++) {
        uint32_t oi = fills[k];
        ord_t *o = &s->pool[oi];
        uint32_t sh = o->shares, x = q >= sh ? sh : (uint32_t)q;
        q -= x;
        p = o->price;
        tr += 2;
        if (use_c) {
            m_c(s, ts, loc, tr, o->ref, x, 'Y', p);
            s->n_cy++;
        } else {
            m_e(s, ts, loc, tr, o->ref, x);
        }
        s->executed += x;
        if (x == sh) unrest(s, oi);
        else o->shares = sh - x;
    }
    s->n_groups++;
    if (q > 0) {
        /* the remainder rests at the last price reached: every opposite order there is gone */
        uint32_t oi = rest(s, loc, buy, p, (uint32_t)q, 0);
        m_add(s, ts, &s->pool[oi], -1);
    }
    (void)tk;
}

/* ---- driving ---------------------------------------------------------------------------------- */

static void one_flow_step(lob_synth *s, uint64_t live_now) {
    uint64_t t = now(s);
    if (s->evi < s->nev && t >= s->ev[s->evi].t) {
        uint64_t e0 = s->emitted;
        if (event_step(s, &s->ev[s->evi])) s->evi++;
        s->sched_msgs += s->emitted - e0;
        return;
    }
    s->step++;
    if (!(s->step & 4095)) steer(s);
    double r = rnd(s);
    double th_u = s->p_u, th_x = th_u + s->p_x, th_p = th_x + s->p_p, th_ag = th_p + s->p_ag;
    int kind;
    if (r >= th_ag) kind = rnd(s) < 0.5 + 2.0 * ((double)s->target - (double)live_now) / (double)s->target ? 0 : 1;
    else if (r < th_u) kind = 2;
    else if (r < th_x) kind = 3;
    else if (r < th_p) kind = 4;
    else kind = 5;
    if (s->cfg.n_messages - s->emitted - live_now - 2 == 1) kind = 4;
    uint32_t oi = NIL;
    if (kind >= 1 && kind <= 3) {
        if (!s->nlive) kind = 0;
        else {
            oi = s->live[rint_(s, s->nlive)];
            if (kind == 1) {
                uint32_t o2 = s->live[rint_(s, s->nlive)];
                const ord_t *a = &s->pool[oi], *b = &s->pool[o2];
                int64_t ma = s->sym[a->loc].mid, mb = s->sym[b->loc].mid;
                double s1 = (double)(a->buy ? a->price - ma : ma - a->price) / (double)s->unit[a->loc];
                double s2 = (double)(b->buy ? b->price - mb : mb - b->price) / (double)s->unit[b->loc];
                if (s2 > s1) oi = o2;
            } else if (kind == 3 && s->pool[oi].shares < 2) {
                kind = 1;
            }
        }
    }
    if (kind == 0 || kind == 5) {
        uint32_t loc = draw_loc(s);
        sym_t *y = &s->sym[loc];
        if (y->blocked) return;
        double u = rnd(s);
        if (u < 0.16) {
            if (u < 0.08) {
                y->mid += y->tick * y->ds;
                if (y->mid > y->hi) y->mid = y->hi;
            } else {
                y->mid -= y->tick * y->ds;
                if (y->mid < y->lo) y->mid = y->lo;
            }
        }
        int buy = rnd(s) < 0.5;
        if (kind == 5) {
            if (y->halted) kind = 0;
            else {
                side_t *as = &y->side[0], *bs = &y->side[1];
                if (as->best >= 0 && y->mid > (as->base + as->best) * y->tick) buy = rnd(s) < 0.85;
                else if (bs->best >= 0 && y->mid < (bs->base + bs->best) * y->tick) buy = rnd(s) >= 0.85;
                if (y->side[!buy].best < 0) buy = !buy;
                if (y->side[!buy].best < 0) kind = 0;
            }
        }
        if (kind == 5) aggress(s, t, loc, buy);
        else passive_add(s, t, loc, buy);
        return;
    }
    if (kind == 4) {
        uint32_t loc = draw_loc(s);
        if (s->sym[loc].halted && s->cfg.features) return;
        int64_t price = s->sym[loc].mid, bb = best_price(s, loc, 1), ba = best_price(s, loc, 0);
        if (bb && price < bb) price = bb;
        if (ba && price > ba) price = ba;
        uint8_t *p = msg(s, 'P', 44, loc, 2, t);
        be64(p, 0);
        p[8] = 'B';
        be32(p + 9, s->size_table[rint_(s, 4096)]);
        name8(s, loc, p + 13);
        be32(p + 21, (uint32_t)price);
        be64(p + 25, ++s->match);
        return;
    }
    ord_t *o = &s->pool[oi];
    uint32_t loc = o->loc;
    if (kind == 3) {
        uint32_t cx = 1 + rint_(s, o->shares - 1);
        o->shares -= cx;
        uint8_t *p = msg(s, 'X', 23, loc, 0, t);
        be64(p, o->ref);
        be32(p + 8, cx);
        return;
    }
    if (kind == 1) {
        m_d(s, t, loc, o->ref);
        unrest(s, oi);
        return;
    }
    /* replace: new reference, price and size, same side, back of its queue */
    sym_t *y = &s->sym[loc];
    int buy = o->buy;
    int64_t tk = y->tick, price = o->price, newp;
    uint64_t old_ref = o->ref;
    if (rnd(s) < 0.6) {
        int64_t d = (int64_t)s->depth_table[rint_(s, 4096)] * tk * y->ds;
        newp = buy ? y->mid - d : y->mid + tk + d;
    } else {
        newp = price + (int64_t)s->replace_table[rint_(s, 1024)] * tk * y->ds;
    }
    if (newp > y->ceil || newp < y->floor) newp = price;
    unrest(s, oi);
    if (buy) {
        int64_t opp = best_price(s, loc, 0);
        if (opp && newp >= opp) newp = opp - tk;
        if (newp < y->floor) newp = price;  /* (the old price did not cross either) */
    } else {
        int64_t opp = best_price(s, loc, 1);
        if (opp && newp <= opp) newp = opp + tk;
        if (newp > y->ceil) newp = price;
    }
    uint32_t ni = rest(s, loc, buy, newp, s->size_table[rint_(s, 4096)], 0);
    uint8_t *p = msg(s, 'U', 35, loc, 0, t);
    be64(p, old_ref);
    be64(p + 8, s->pool[ni].ref);
    be32(p + 16, s->pool[ni].shares);
    be32(p + 20, (uint32_t)newp);
}

size_t lob_synth_fill(lob_synth *s, uint8_t *out, size_t cap, uint64_t *n_messages) {
    if (!s || !out || cap < LOB_SYNTH_MIN_CAP) return 0;
    s->out = out;
    s->pos = 0;
    uint64_t e0 = s->emitted;
    size_t room = cap - (1u << 20); /* a step writes far less than 1 MiB */
    while (s->pos < room && s->phase != PH_DONE) {
        if (s->phase == PH_PRE) {
            preamble_step(s);
        } else if (s->phase == PH_FLOW) {
            if (s->cfg.n_messages <= s->emitted + s->live_count + 2) {
                /* the flow is over: whatever was scheduled before 19:59:59 still happens */
                if (s->evi < s->nev && s->ev[s->evi].t < HMS(19, 59, 59)) {
                    if (event_step(s, &s->ev[s->evi])) s->evi++;
                } else {
                    s->phase = PH_EOD;
                    s->cursor = 0;
                    s->eod_t0 = s->last_t > HMS(19, 59, 59) + 500000000ull ? s->last_t : HMS(19, 59, 59) + 500000000ull;
                    s->eod_n = s->live_count;
                    s->eod_i = 0;
                }
            } else {
                one_flow_step(s, s->live_count);
            }
        } else if (s->phase == PH_EOD) {
            /* a D for every order still live, in pool order, spread to 19:59:59.999 */
            uint64_t t0 = s->eod_t0, end = HMS(19, 59, 59) + 999000000ull, span = end > t0 ? end - t0 : 0;
            while (s->cursor < s->pool_used && !(s->pool[s->cursor].flags & F_INUSE)) s->cursor++;
            if (s->cursor >= s->pool_used) {
                s->phase = PH_END;
                continue;
            }
            uint32_t oi = s->cursor++;
            m_d(s, t0 + span * s->eod_i++ / (s->eod_n ? s->eod_n : 1), s->pool[oi].loc, s->pool[oi].ref);
            unrest(s, oi);
        } else if (s->phase == PH_END) {
            uint64_t te = HMS(20, 0, 0) + rint_(s, 50000);
            m_s(s, te > s->last_t ? te : s->last_t, 'E');
            m_s(s, HMS(20, 5, 0) > s->last_t ? HMS(20, 5, 0) : s->last_t, 'C');
            s->phase = PH_DONE;
        }
    }
    s->bytes += s->pos;
    if (n_messages) *n_messages += s->emitted - e0;
    return s->pos;
}

void lob_synth_get_stats(const lob_synth *s, lob_synth_stats *st) {
    memset(st, 0, sizeof *st);
    if (!s) return;
    memcpy(st->counts, s->counts, sizeof st->counts);
    st->messages = s->emitted;
    st->bytes = s->bytes;
    st->peak_live = s->peak_live;
    st->live = s->live_count;
    st->last_order_ref = s->next_ref;
    st->last_match = s->match;
    st->executed_shares = s->executed;
    uint64_t b = (uint64_t)s->pool_cap * sizeof(ord_t) + (uint64_t)s->live_cap * 4 + (uint64_t)(s->n + 1) * sizeof(sym_t);
    for (uint32_t l = 1; l <= s->n; l++) b += (uint64_t)(s->sym[l].side[0].size + s->sym[l].side[1].size) * sizeof(lvl_t);
    st->book_bytes = b;
    st->n_plants = s->nplants;
    st->done = s->phase == PH_DONE;
}

size_t lob_synth_plants(const lob_synth *s, lob_synth_plant *out, size_t cap) {
    if (!s) return 0;
    size_t n = s->nplants < cap ? s->nplants : cap;
    if (out && n) memcpy(out, s->plants, n * sizeof *out);
    return s->nplants;
}

int lob_synth_symbol(const lob_synth *s, uint32_t locate, char *name, uint32_t *tick, int *test) {
    if (!s || locate < 1 || locate > s->n) return LOB_EARG;
    for (int i = 0; i < 8; i++) name[i] = (char)(s->sym[locate].name >> (56 - 8 * i));
    *tick = (uint32_t)s->sym[locate].tick;
    *test = s->sym[locate].test;
    return LOB_OK;
}
