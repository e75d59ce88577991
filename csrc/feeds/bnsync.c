/*
 * bnsync.c -- the Binance depth sync machine (bnsync.h).
 *
 * Each symbol buffers its depth events (and their levels) while it waits for a snapshot;
 * a live symbol applies each event that continues its book straight to the records.
 * Every call makes room for all it may write before it changes anything, so that an
 * allocation that fails leaves the machine as it was.
 */
#include "bnsync.h"

#include <stdlib.h>
#include <string.h>

enum { GAP_SEQUENCE = 1, GAP_STALE_SNAPSHOT = 5, GAP_MALFORMED = 7, GAP_ROTATE = 8 };
enum { BID = 'B', ASK = 'S', TRADE_FLAG_AGG = 1 };

typedef struct event {
    uint64_t U, u, pu;
    int64_t exch_ns, recv_ns;
    size_t lv; /* its first level pair in the symbol's level store */
    uint32_t nb, na;
} event;

typedef struct sym {
    event *ev; /* the buffer: ev[head .. n) */
    size_t head, n, cap;
    int64_t *lv; /* their levels: pairs lv[2 * ev[head].lv .. 2 * n_lv) */
    size_t n_lv, cap_lv;
    uint64_t snap_L; /* the snapshot waiting for an event (has_snapshot) */
    int64_t snap_exch, snap_recv;
    int64_t *snap_lv;
    uint32_t snap_nb, snap_na;
    size_t snap_cap;
} sym;

struct lob_bn_machine {
    size_t n_syms, max_buffer;
    int usdm;
    lob_bn_symbol *st;
    sym *sy;
    lob_bn_totals tot;
    lob_l2_record *out;
    size_t n_out, cap_out;
    lob_bn_event *evs;
    size_t n_evs, cap_evs;
};

/* ---- room ------------------------------------------------------------------------------ */

static int grow(void **p, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * item);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

static int room_out(lob_bn_machine *m, size_t k) { return grow((void **)&m->out, &m->cap_out, m->n_out + k, sizeof *m->out); }

static int room_evs(lob_bn_machine *m, size_t k)
{
    return grow((void **)&m->evs, &m->cap_evs, m->n_evs + k, sizeof *m->evs);
}

/* The level pairs of symbol i's buffered events. */
static size_t buffered_levels(const sym *s) { return s->head < s->n ? s->n_lv - s->ev[s->head].lv : 0; }

/* Records a sync of symbol i may write at most: its snapshot, RESYNC, every buffered diff
 * (and one more event's, k levels), a GAP. */
static size_t sync_records(const lob_bn_machine *m, size_t i, size_t k)
{
    const sym *s = &m->sy[i];
    size_t n = s->n - s->head;
    return (size_t)s->snap_nb + s->snap_na + 3 + 1 + buffered_levels(s) + 2 * n + k + 2 + 1;
}

/* Room to buffer one more event of k level pairs (the store compacted first if that does). */
static int room_buffer(sym *s, size_t k)
{
    if (s->head && (s->n == s->cap || s->n_lv + k > s->cap_lv)) {
        size_t n = s->n - s->head, base = s->ev[s->head].lv;
        memmove(s->ev, s->ev + s->head, n * sizeof *s->ev);
        if (s->n_lv > base) memmove(s->lv, s->lv + 2 * base, 2 * (s->n_lv - base) * sizeof *s->lv);
        for (size_t j = 0; j < n; j++) s->ev[j].lv -= base;
        s->head = 0;
        s->n = n;
        s->n_lv -= base;
    }
    size_t cap_pairs = s->cap_lv;
    if (!grow((void **)&s->ev, &s->cap, s->n + 1, sizeof *s->ev)) return 0;
    if (s->n_lv + k > cap_pairs) {
        size_t c = cap_pairs ? cap_pairs : 64;
        while (c < s->n_lv + k) c *= 2;
        int64_t *q = realloc(s->lv, 2 * c * sizeof *q);
        if (!q) return 0;
        s->lv = q;
        s->cap_lv = c;
    }
    return 1;
}

/* ---- records and events ------------------------------------------------------------------ */

static lob_l2_record *record(lob_bn_machine *m, uint8_t kind, uint8_t side, size_t i, int64_t recv_ns, int64_t exch_ns)
{
    lob_l2_record *r = &m->out[m->n_out++];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->side = side;
    r->symbol = (uint16_t)i;
    r->recv_ns = recv_ns;
    r->exch_ns = exch_ns;
    return r;
}

static void levels_out(lob_bn_machine *m, uint8_t kind, size_t i, int64_t recv_ns, int64_t exch_ns, const int64_t *lv,
                       uint32_t nb, uint32_t na)
{
    for (size_t k = 0; k < (size_t)nb + na; k++) {
        lob_l2_record *r = record(m, kind, k < nb ? BID : ASK, i, recv_ns, exch_ns);
        r->price = lv[2 * k];
        r->qty = lv[2 * k + 1];
    }
}

static void event_out(lob_bn_machine *m, int kind, size_t i, uint64_t value)
{
    lob_bn_event *e = &m->evs[m->n_evs++];
    e->kind = kind;
    e->symbol = (int32_t)i;
    e->value = value;
}

static void gap(lob_bn_machine *m, size_t i, int64_t recv_ns, uint32_t reason, uint64_t expected, uint64_t received)
{
    lob_l2_record *r = record(m, LOB_L2_GAP, 0, i, recv_ns, 0);
    r->first_id = expected;
    r->last_id = received;
    r->flags = reason;
    lob_bn_symbol *st = &m->st[i];
    st->gap_open = 1;
    st->last_gap = (uint8_t)reason;
    st->fresh = 0;
    st->gaps++;
    m->tot.gaps++;
    if (!m->tot.gaps_by_reason[reason]++) m->tot.gap_order[m->tot.n_gap_order++] = (uint8_t)reason;
    event_out(m, LOB_BN_EV_GAP, i, reason);
}

/* The book of symbol i is unknown from here: buffer again, want a snapshot. */
static void lose(lob_bn_machine *m, size_t i)
{
    m->st[i].live = 0;
    m->st[i].has_snapshot = 0;
}

static void clear_buffer(lob_bn_machine *m, size_t i)
{
    sym *s = &m->sy[i];
    s->head = s->n = s->n_lv = 0;
    m->st[i].buffered = 0;
}

static void diff(lob_bn_machine *m, size_t i, const event *e, const int64_t *lv)
{
    lob_l2_record *r = record(m, LOB_L2_DIFF_BEGIN, 0, i, e->recv_ns, e->exch_ns);
    r->first_id = e->U;
    r->last_id = e->u;
    r->prev_id = e->pu;
    levels_out(m, LOB_L2_DIFF_LEVEL, i, e->recv_ns, e->exch_ns, lv, e->nb, e->na);
    r = record(m, LOB_L2_DIFF_END, 0, i, e->recv_ns, e->exch_ns);
    r->first_id = e->U;
    r->last_id = e->u;
    lob_bn_symbol *st = &m->st[i];
    st->last_u = e->u;
    st->applied++;
    m->tot.diff_levels += (uint64_t)e->nb + e->na;
}

/* Whether e continues symbol i's live book. */
static int continues(const lob_bn_machine *m, size_t i, const event *e)
{
    uint64_t last = m->st[i].last_u;
    return m->usdm ? e->pu == last : (last != UINT64_MAX && e->U == last + 1);
}

/* The GAP of an event that does not continue symbol i's book. */
static void sequence_gap(lob_bn_machine *m, size_t i, const event *e)
{
    uint64_t last = m->st[i].last_u;
    if (m->usdm)
        gap(m, i, e->recv_ns, GAP_SEQUENCE, last, e->pu);
    else
        gap(m, i, e->recv_ns, GAP_SEQUENCE, last + 1, e->U);
}

static void pop(lob_bn_machine *m, size_t i)
{
    sym *s = &m->sy[i];
    if (++s->head == s->n) s->head = s->n = s->n_lv = 0;
    m->st[i].buffered--;
}

/* The snapshot against the buffer: stale, a hole, or synced (then the buffer applied). */
static void try_sync(lob_bn_machine *m, size_t i)
{
    sym *s = &m->sy[i];
    lob_bn_symbol *st = &m->st[i];
    if (s->head == s->n) return; /* hold the snapshot until an event comes */
    uint64_t L = s->snap_L, U0 = s->ev[s->head].U;
    if (m->usdm ? L < U0 : (U0 > 0 && L < U0 - 1)) {
        st->snapshots_stale++;
        gap(m, i, s->snap_recv, GAP_STALE_SNAPSHOT, m->usdm ? L : L + 1, U0);
        st->has_snapshot = 0; /* the buffer stays; the driver asks again */
        return;
    }
    while (s->head < s->n && (m->usdm ? s->ev[s->head].u < L : s->ev[s->head].u <= L)) {
        pop(m, i);
        st->dropped_covered++;
    }
    if (s->head == s->n) return;
    const event *first = &s->ev[s->head];
    int holds = m->usdm ? (first->U <= L && L <= first->u)
                        : (first->U <= L || (L != UINT64_MAX && first->U == L + 1)) && L < first->u;
    if (!holds) { /* the buffer itself has a hole after L */
        gap(m, i, first->recv_ns, GAP_SEQUENCE, m->usdm ? L : L + 1, first->U);
        st->has_snapshot = 0;
        return;
    }
    /* synced: the snapshot, RESYNC if this follows a GAP, then the buffered events */
    lob_l2_record *r = record(m, LOB_L2_SNAPSHOT_BEGIN, 0, i, s->snap_recv, s->snap_exch);
    r->first_id = L;
    levels_out(m, LOB_L2_SNAPSHOT_LEVEL, i, s->snap_recv, s->snap_exch, s->snap_lv, s->snap_nb, s->snap_na);
    r = record(m, LOB_L2_SNAPSHOT_END, 0, i, s->snap_recv, s->snap_exch);
    r->first_id = L;
    m->tot.snapshot_levels += (uint64_t)s->snap_nb + s->snap_na;
    if (st->gap_open) {
        r = record(m, LOB_L2_RESYNC, 0, i, s->snap_recv, 0);
        r->first_id = L;
        st->gap_open = 0;
        st->resyncs++;
        m->tot.resyncs++;
        event_out(m, LOB_BN_EV_RESYNC, i, L);
    }
    event_out(m, LOB_BN_EV_SYNCED, i, L);
    if (!st->synced) st->first_L = L;
    st->synced++;
    st->live = 1;
    st->has_snapshot = 0;
    st->last_u = L;
    diff(m, i, first, s->lv + 2 * first->lv);
    pop(m, i);
    while (s->head < s->n) {
        const event *e = &s->ev[s->head];
        if (e->u <= st->last_u) {
            st->duplicates++;
            pop(m, i);
        } else if (continues(m, i, e)) {
            diff(m, i, e, s->lv + 2 * e->lv);
            pop(m, i);
        } else {
            sequence_gap(m, i, e);
            lose(m, i);
            return; /* e stays first in the buffer */
        }
    }
}

/* One depth event of symbol i, its levels at lv (not kept: copied if buffered). */
static int depth(lob_bn_machine *m, size_t i, const event *in, const int64_t *lv)
{
    sym *s = &m->sy[i];
    lob_bn_symbol *st = &m->st[i];
    size_t k = (size_t)in->nb + in->na;
    if (st->live && in->u > st->last_u && continues(m, i, in)) { /* the usual case: applied */
        if (!room_out(m, k + 2)) return LOB_ENOMEM;
        m->tot.depth++;
        st->depth++;
        st->fresh = 1;
        diff(m, i, in, lv);
        return LOB_OK;
    }
    if (!(st->live && in->u <= st->last_u)) { /* buffered (after a GAP if it breaks a live book) */
        if (!room_buffer(s, k) || !room_out(m, sync_records(m, i, k)) || !room_evs(m, 4)) return LOB_ENOMEM;
    }
    m->tot.depth++;
    st->depth++;
    st->fresh = 1;
    if (st->live) {
        if (in->u <= st->last_u) {
            st->duplicates++;
            return LOB_OK;
        }
        sequence_gap(m, i, in);
        lose(m, i);
    }
    event *e = &s->ev[s->n++];
    *e = *in;
    e->lv = s->n_lv;
    if (k) memcpy(s->lv + 2 * s->n_lv, lv, 2 * k * sizeof *lv);
    s->n_lv += k;
    st->buffered++;
    if (st->buffered > m->max_buffer) pop(m, i);
    if (st->has_snapshot && !st->live) try_sync(m, i);
    return LOB_OK;
}

/* ---- the calls --------------------------------------------------------------------------- */

lob_bn_machine *lob_bn_sync_new(size_t n_symbols, int flags, size_t max_buffer, int *status)
{
    int dummy;
    if (!status) status = &dummy;
    *status = LOB_EARG;
    if (n_symbols == 0 || n_symbols > 65536 || max_buffer == 0) return NULL;
    *status = LOB_ENOMEM;
    lob_bn_machine *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->st = calloc(n_symbols, sizeof *m->st);
    m->sy = calloc(n_symbols, sizeof *m->sy);
    if (!m->st || !m->sy) {
        lob_bn_sync_free(m);
        return NULL;
    }
    m->n_syms = n_symbols;
    m->max_buffer = max_buffer;
    m->usdm = (flags & LOB_BN_USDM) != 0;
    *status = LOB_OK;
    return m;
}

void lob_bn_sync_free(lob_bn_machine *m)
{
    if (!m) return;
    if (m->sy) {
        for (size_t i = 0; i < m->n_syms; i++) {
            free(m->sy[i].ev);
            free(m->sy[i].lv);
            free(m->sy[i].snap_lv);
        }
    }
    free(m->sy);
    free(m->st);
    free(m->out);
    free(m->evs);
    free(m);
}

const lob_bn_symbol *lob_bn_sync_symbols(const lob_bn_machine *m) { return m ? m->st : NULL; }

const lob_bn_totals *lob_bn_sync_totals(const lob_bn_machine *m) { return m ? &m->tot : NULL; }

int lob_bn_sync_snapshot(lob_bn_machine *m, uint32_t symbol, uint64_t L, int64_t exch_ns, int64_t recv_ns,
                         const int64_t *levels, uint32_t n_bids, uint32_t n_asks)
{
    if (!m || symbol >= m->n_syms || ((n_bids || n_asks) && !levels) || (size_t)n_bids + n_asks > SIZE_MAX / 32)
        return LOB_EARG;
    sym *s = &m->sy[symbol];
    lob_bn_symbol *st = &m->st[symbol];
    size_t k = (size_t)n_bids + n_asks;
    if (!st->live) {
        if (k > s->snap_cap) {
            int64_t *q = realloc(s->snap_lv, 2 * k * sizeof *q);
            if (!q) return LOB_ENOMEM;
            s->snap_lv = q;
            s->snap_cap = k;
        }
        size_t keep_nb = s->snap_nb, keep_na = s->snap_na;
        s->snap_nb = n_bids; /* (sync_records counts the new snapshot's levels) */
        s->snap_na = n_asks;
        int ok = room_out(m, sync_records(m, symbol, 0)) && room_evs(m, 4);
        if (!ok) {
            s->snap_nb = (uint32_t)keep_nb;
            s->snap_na = (uint32_t)keep_na;
            return LOB_ENOMEM;
        }
    }
    st->requested = 0;
    st->snapshots++;
    if (st->live) {
        st->snapshots_unused++;
        return LOB_OK;
    }
    if (k) memcpy(s->snap_lv, levels, 2 * k * sizeof *levels);
    s->snap_L = L;
    s->snap_exch = exch_ns;
    s->snap_recv = recv_ns;
    st->has_snapshot = 1;
    try_sync(m, symbol);
    return LOB_OK;
}

int lob_bn_sync_bad_snapshot(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns)
{
    if (!m || symbol >= m->n_syms) return LOB_EARG;
    if (!room_out(m, 1) || !room_evs(m, 1)) return LOB_ENOMEM;
    m->st[symbol].requested = 0;
    gap(m, symbol, recv_ns, GAP_MALFORMED, m->st[symbol].last_u, 0);
    lose(m, symbol);
    return LOB_OK;
}

int lob_bn_sync_bad_depth(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns)
{
    if (!m || symbol >= m->n_syms) return LOB_EARG;
    if (!room_out(m, 1) || !room_evs(m, 1)) return LOB_ENOMEM;
    lob_bn_symbol *st = &m->st[symbol];
    gap(m, symbol, recv_ns, GAP_MALFORMED, st->live ? st->last_u : 0, 0);
    lose(m, symbol);
    clear_buffer(m, symbol);
    return LOB_OK;
}

int lob_bn_sync_snapshot_failed(lob_bn_machine *m, uint32_t symbol, int64_t recv_ns, uint32_t reason)
{
    if (!m || symbol >= m->n_syms || reason >= LOB_BN_REASONS) return LOB_EARG;
    if (!room_out(m, 1) || !room_evs(m, 1)) return LOB_ENOMEM;
    lob_bn_symbol *st = &m->st[symbol];
    if (!(st->gap_open && st->last_gap == reason)) gap(m, symbol, recv_ns, reason, st->live ? st->last_u : 0, 0);
    return LOB_OK;
}

static void disconnect(lob_bn_machine *m, size_t i, int64_t recv_ns, uint32_t reason)
{
    lob_bn_symbol *st = &m->st[i];
    if (st->fresh || st->live)
        gap(m, i, recv_ns, reason, st->live ? st->last_u + (m->usdm ? 0 : 1) : 0, 0);
    lose(m, i);
    clear_buffer(m, i);
    st->requested = 0;
}

int lob_bn_sync_disconnected(lob_bn_machine *m, int64_t recv_ns, uint32_t reason, const uint32_t *symbols, size_t n)
{
    if (!m || reason >= LOB_BN_REASONS || (n && !symbols)) return LOB_EARG;
    size_t k = symbols ? n : m->n_syms;
    for (size_t j = 0; symbols && j < n; j++)
        if (symbols[j] >= m->n_syms) return LOB_EARG;
    if (!room_out(m, k) || !room_evs(m, k)) return LOB_ENOMEM;
    for (size_t j = 0; j < k; j++) disconnect(m, symbols ? symbols[j] : j, recv_ns, reason);
    return LOB_OK;
}

int lob_bn_sync_end_file(lob_bn_machine *m, int64_t recv_ns)
{
    int rc = lob_bn_sync_disconnected(m, recv_ns, GAP_ROTATE, NULL, 0);
    if (rc != LOB_OK) return rc;
    for (size_t i = 0; i < m->n_syms; i++) m->st[i].gap_open = m->st[i].fresh = 0;
    return LOB_OK;
}

static void trade(lob_bn_machine *m, size_t i, uint64_t first_id, uint64_t last_id, int64_t exch_ns, int64_t recv_ns,
                  const int64_t *pq, int maker, int agg)
{
    lob_l2_record *r = record(m, LOB_L2_TRADE, maker ? ASK : BID, i, recv_ns, exch_ns);
    r->first_id = first_id;
    r->last_id = last_id;
    r->price = pq[0];
    r->qty = pq[1];
    r->flags = agg ? TRADE_FLAG_AGG : 0;
    m->tot.trades++;
}

static void ticker(lob_bn_machine *m, size_t i, uint64_t u, int64_t exch_ns, int64_t recv_ns, const int64_t *lv)
{
    for (int k = 0; k < 2; k++) {
        lob_l2_record *r = record(m, k ? LOB_L2_TICKER_ASK : LOB_L2_TICKER_BID, k ? ASK : BID, i, recv_ns, exch_ns);
        r->first_id = u;
        r->price = lv[2 * k];
        r->qty = lv[2 * k + 1];
    }
    m->tot.tickers++;
}

int lob_bn_sync_request(lob_bn_machine *m, uint32_t symbol, int requested)
{
    if (!m || symbol >= m->n_syms) return LOB_EARG;
    m->st[symbol].requested = requested != 0;
    return LOB_OK;
}

size_t lob_bn_sync_wanted(const lob_bn_machine *m, uint32_t *out, size_t cap)
{
    if (!m) return 0;
    size_t n = 0;
    for (size_t i = 0; i < m->n_syms; i++) {
        const lob_bn_symbol *st = &m->st[i];
        if (!st->live && st->buffered && !st->has_snapshot && !st->requested) {
            if (n < cap && out) out[n] = (uint32_t)i;
            n++;
        }
    }
    return n;
}

static uint64_t distance(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

int32_t lob_bn_sync_guess(const lob_bn_machine *m, uint64_t L)
{
    if (!m) return -1;
    if (m->n_syms == 1) return 0;
    int32_t best = -1;
    uint64_t best_d = 0;
    for (size_t i = 0; i < m->n_syms; i++) {
        const sym *s = &m->sy[i];
        const lob_bn_symbol *st = &m->st[i];
        if (st->live || st->has_snapshot || s->head == s->n) continue;
        uint64_t lo = s->ev[s->head].U, hi = s->ev[s->n - 1].u;
        int within = (L == UINT64_MAX || lo <= L + 1) && L <= hi;
        uint64_t d = within ? 0 : (distance(L, lo) < distance(L, hi) ? distance(L, lo) : distance(L, hi));
        if (best < 0 || d < best_d) {
            best = (int32_t)i;
            best_d = d;
        }
    }
    return best;
}

int lob_bn_sync_lines(lob_bn_machine *m, const lob_bn_line *lines, size_t n_lines, size_t *pos, const int64_t *levels,
                      size_t n_levels, const int32_t *name_sym, size_t n_names)
{
    if (!m || !pos || (n_lines && !lines) || (n_levels && !levels) || (n_names && !name_sym)) return LOB_EARG;
    size_t i = *pos;
    int rc = LOB_OK;
    for (; i < n_lines; i++) {
        const lob_bn_line *ln = &lines[i];
        if (ln->status == LOB_BN_OTHER) break;
        if (ln->name_id >= n_names || name_sym[ln->name_id] >= (int64_t)m->n_syms) {
            rc = LOB_EARG;
            break;
        }
        int32_t s = name_sym[ln->name_id];
        size_t nlev = ln->status == LOB_BN_DEPTH ? (size_t)ln->n_bids + ln->n_asks : ln->status == LOB_BN_TICKER ? 2 : 1;
        if (ln->level > n_levels || nlev > n_levels - ln->level) {
            rc = LOB_EARG;
            break;
        }
        if (s < 0) { /* a name that is none of the machine's symbols */
            m->tot.messages++;
            m->tot.unknown_symbol++;
            continue;
        }
        const int64_t *lv = levels + 2 * ln->level;
        int64_t exch = ln->exch_ms >= 0 ? ln->exch_ms * 1000000 : 0;
        if (ln->status == LOB_BN_DEPTH) {
            event e = {ln->first_id, ln->last_id, m->usdm ? ln->prev_id : 0, exch, ln->recv_ns, 0, ln->n_bids,
                       ln->n_asks};
            rc = depth(m, (size_t)s, &e, lv);
        } else if (ln->status == LOB_BN_TICKER) {
            rc = room_out(m, 2) ? LOB_OK : LOB_ENOMEM;
            if (rc == LOB_OK) ticker(m, (size_t)s, ln->first_id, exch, ln->recv_ns, lv);
        } else { /* trade, aggTrade */
            rc = room_out(m, 1) ? LOB_OK : LOB_ENOMEM;
            if (rc == LOB_OK)
                trade(m, (size_t)s, ln->first_id, ln->last_id, exch, ln->recv_ns, lv, ln->maker,
                      ln->status == LOB_BN_AGGTRADE);
        }
        if (rc != LOB_OK) break;
        m->tot.messages++;
    }
    *pos = i;
    return rc;
}

size_t lob_bn_sync_pending(const lob_bn_machine *m) { return m ? m->n_out : 0; }

int lob_bn_sync_take(lob_bn_machine *m, lob_l2_record *out, size_t out_cap, size_t *n_out)
{
    if (!m || !n_out || out_cap < m->n_out || (m->n_out && !out)) return LOB_EARG;
    if (m->n_out) memcpy(out, m->out, m->n_out * sizeof *out);
    *n_out = m->n_out;
    m->n_out = 0;
    return LOB_OK;
}

size_t lob_bn_sync_pending_events(const lob_bn_machine *m) { return m ? m->n_evs : 0; }

int lob_bn_sync_take_events(lob_bn_machine *m, lob_bn_event *out, size_t out_cap, size_t *n_out)
{
    if (!m || !n_out || out_cap < m->n_evs || (m->n_evs && !out)) return LOB_EARG;
    if (m->n_evs) memcpy(out, m->evs, m->n_evs * sizeof *out);
    *n_out = m->n_evs;
    m->n_evs = 0;
    return LOB_OK;
}
