/*
 * bench_hdr.c -- the core's latency suite: named scenarios, every operation timed.
 *
 *   bench_hdr --out DIR [--scale F] [--only a,b,...] [--clock tsc|mono] [--rates R1,R2]
 *
 * Built by benchmarks/bench_hdr.py (make bench-hdr) against csrc/core/lob.c directly,
 * with -O2, and linked with benchmarks/counting_malloc.c, which counts every
 * allocation in the process. For each scenario it
 *   1. builds the whole event stream first, from a fixed-seed xorshift64* generator
 *      (scenarios whose orders depend on what traded drive a model session of the
 *      core while generating; the model is freed before anything is timed);
 *   2. applies it to a fresh session through lob_session_apply, one event per call,
 *      reading the clock just before and just after each call, and keeps every
 *      measured operation's latency (DIR/<scenario>.lat: uint32 ns, little-endian);
 *   3. applies it again to another fresh session in batches of 4096 events per call
 *      and times the whole measured phase: the batch mean (ns/event), for operations
 *      that take less than the clock can resolve one at a time;
 *   4. reads the core's allocation counters (lob_alloc_stats) and the process-wide
 *      ones (counting_malloc.c) around each measured loop.
 * mixed_70_20_10 also runs open loop: operation i is due at t0 + i / rate; the
 * driver spins until then, applies it, and records completion - due time.
 * DIR/summary.json has the clock probe and, per run, the counts the Python side
 * (benchmarks/bench_hdr.py) puts beside the percentiles.
 *
 * Exits 1 if an event is rejected where none should be, if the one-per-call and
 * the batched runs disagree on any result, or if anything allocates inside a
 * measured loop.
 */
#define _GNU_SOURCE
#include "lob.h"
#include "counting_malloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define MID 100000
#define BAND_LO (MID - 5000)
#define BAND_HI (MID + 5000)
#define BATCH 4096

/* ---- xorshift64* -------------------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng_t;

static rng_t rng_new(uint64_t seed)
{
    rng_t r = {seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL};
    if (!r.s) r.s = 1;
    return r;
}

static inline uint64_t rnd(rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [lo, hi] (the modulo bias is below 2^-40 for these ranges). */
static inline int64_t uni(rng_t *r, int64_t lo, int64_t hi) { return lo + (int64_t)(rnd(r) % (uint64_t)(hi - lo + 1)); }

static inline int chance(rng_t *r, unsigned percent) { return rnd(r) % 100 < percent; }

/* ---- clock -------------------------------------------------------------------------- */

static int use_tsc;
static double ns_per_tick = 1.0;

static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One reading: TSC ticks (lfence on both sides, so the reading neither moves
 * before earlier work nor lets later work start first) or CLOCK_MONOTONIC ns. */
static inline uint64_t now(void)
{
#if defined(__x86_64__)
    if (use_tsc) {
        _mm_lfence();
        uint64_t t = __rdtsc();
        _mm_lfence();
        return t;
    }
#endif
    return mono_ns();
}

static inline uint64_t to_ns(uint64_t ticks) { return (uint64_t)((double)ticks * ns_per_tick + 0.5); }

static int tsc_usable(void)
{
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[4096];
    int ok = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
            break;
        }
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

static void calibrate_tsc(void)
{
#if defined(__x86_64__)
    uint64_t m0 = mono_ns(), t0 = __rdtsc();
    while (mono_ns() - m0 < 300000000u) {
    }
    uint64_t m1 = mono_ns(), t1 = __rdtsc();
    ns_per_tick = (double)(m1 - m0) / (double)(t1 - t0);
#endif
}

typedef struct clock_probe {
    double cost_ns;            /* mean of back-to-back readings */
    double step_ns;            /* smallest non-zero difference between readings */
    uint64_t floor_min, floor_p50, floor_p99; /* t1 - t0 with nothing between (ns) */
} clock_probe_t;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static clock_probe_t probe_clock(uint64_t *scratch, size_t n)
{
    clock_probe_t p;
    uint64_t first = now(), prev = first, step = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = now();
        if (t != prev && t - prev < step) step = t - prev;
        prev = t;
    }
    p.cost_ns = (double)to_ns(prev - first) / (double)n;
    p.step_ns = (double)step * ns_per_tick;
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = now();
        uint64_t t1 = now();
        scratch[i] = to_ns(t1 - t0);
    }
    qsort(scratch, n, sizeof *scratch, cmp_u64);
    p.floor_min = scratch[0];
    p.floor_p50 = scratch[n / 2];
    p.floor_p99 = scratch[n - n / 100 - 1];
    return p;
}

/* ---- streams -------------------------------------------------------------------------- */

/* How a run applies a stretch of the stream. */
enum {
    SEG_SETUP = 0, /* in batches, untimed */
    SEG_WARM,      /* one event per call, timed, not recorded */
    SEG_EACH,      /* one event per call, each call timed and recorded */
    SEG_FILL       /* measured phase, untimed, one call for the stretch (refills) */
};

typedef struct seg {
    uint32_t start, len;
    uint8_t mode;
} seg_t;

typedef struct stream {
    lob_event *ev;
    size_t n, cap;
    seg_t *seg;
    size_t nseg, segcap;
    uint32_t capacity;  /* the book's */
    uint64_t next_id;
} stream_t;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "bench_hdr: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        fprintf(stderr, "bench_hdr: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static void push(stream_t *st, int mode, const lob_event *e)
{
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 1 << 16;
        st->ev = xrealloc(st->ev, st->cap * sizeof *st->ev);
    }
    st->ev[st->n] = *e;
    seg_t *last = st->nseg ? &st->seg[st->nseg - 1] : NULL;
    if (last && last->mode == mode && last->start + last->len == st->n) {
        last->len++;
    } else {
        if (st->nseg == st->segcap) {
            st->segcap = st->segcap ? 2 * st->segcap : 1024;
            st->seg = xrealloc(st->seg, st->segcap * sizeof *st->seg);
        }
        st->seg[st->nseg++] = (seg_t){(uint32_t)st->n, 1, (uint8_t)mode};
    }
    st->n++;
}

static void stream_free(stream_t *st)
{
    free(st->ev);
    free(st->seg);
    memset(st, 0, sizeof *st);
}

/* First event of the measured phase (the first SEG_EACH), and how many events
 * of the phase are recorded (SEG_EACH) and how many are refills (SEG_FILL). */
static size_t phase_start(const stream_t *st, size_t *recorded, size_t *fillers)
{
    size_t start = st->n, rec = 0, fill = 0;
    for (size_t k = 0; k < st->nseg; k++) {
        const seg_t *g = &st->seg[k];
        if (g->mode == SEG_EACH) {
            if (start == st->n) start = g->start;
            rec += g->len;
        } else if (g->mode == SEG_FILL && start != st->n) {
            fill += g->len;
        }
    }
    *recorded = rec;
    *fillers = fill;
    return start;
}

static inline lob_event mk_new(uint64_t id, uint8_t side, int64_t price, int64_t qty, uint8_t tif, uint64_t part,
                               uint8_t flags)
{
    lob_event e = {id, part, price, qty, 0, LOB_NEW, side, tif, flags};
    return e;
}

static inline lob_event mk_cancel(uint64_t id)
{
    lob_event e = {id, 0, 0, 0, 0, LOB_CANCEL, 0, 0, 0};
    return e;
}

/* A passive GTC price on a random side: 1..near ticks from MID half the time, else near+1..far. */
static inline lob_event passive_add(rng_t *r, uint64_t id, int64_t near, int64_t far, uint64_t part)
{
    uint8_t side = chance(r, 50) ? LOB_BUY : LOB_SELL;
    int64_t d = (far <= near || chance(r, 50)) ? uni(r, 1, near) : uni(r, near + 1, far);
    return mk_new(id, side, side == LOB_BUY ? MID - d : MID + d, uni(r, 1, 100), LOB_GTC, part, 0);
}

/* ---- a model session for generators whose next order depends on what traded ---------- */

typedef struct model {
    lob_session *s;
    lob_book *b;
    lob_outputs out;
    lob_result res;
    lob_exec *ex;
} model_t;

static lob_session *session_new(uint32_t capacity)
{
    int st;
    lob_session *s = lob_session_new(0, &st);
    if (!s || lob_session_add_book(s, 0, BAND_LO, BAND_HI, 1, capacity) != LOB_OK) {
        fprintf(stderr, "bench_hdr: cannot create a session (capacity %u)\n", capacity);
        exit(2);
    }
    return s;
}

static void model_init(model_t *m, uint32_t capacity)
{
    memset(m, 0, sizeof *m);
    m->s = session_new(capacity);
    m->b = lob_session_book(m->s, 0);
    m->ex = xmalloc(((size_t)capacity + 8) * sizeof *m->ex);
    m->out.execs = m->ex;
    m->out.exec_cap = (size_t)capacity + 8;
}

static const lob_result *model_apply(model_t *m, const lob_event *e)
{
    m->out.results = &m->res;
    if (lob_session_apply(m->s, e, 1, &m->out) != LOB_OK) {
        fprintf(stderr, "bench_hdr: the generator's model refused a batch\n");
        exit(2);
    }
    return &m->res;
}

static void model_free(model_t *m)
{
    lob_session_free(m->s);
    free(m->ex);
}

/* Live order ids (dense, < maxid) with O(1) add, remove and uniform pick. */
typedef struct liveset {
    uint64_t *ids;
    int64_t *pos;
    size_t n;
} liveset_t;

static void live_init(liveset_t *l, size_t maxid)
{
    l->ids = xmalloc(maxid * sizeof *l->ids);
    l->pos = xmalloc(maxid * sizeof *l->pos);
    for (size_t i = 0; i < maxid; i++) l->pos[i] = -1;
    l->n = 0;
}

static void live_add(liveset_t *l, uint64_t id)
{
    l->pos[id] = (int64_t)l->n;
    l->ids[l->n++] = id;
}

static void live_remove(liveset_t *l, uint64_t id)
{
    int64_t p = l->pos[id];
    if (p < 0) return;
    uint64_t last = l->ids[--l->n];
    l->ids[p] = last;
    l->pos[last] = p;
    l->pos[id] = -1;
}

static void live_free(liveset_t *l)
{
    free(l->ids);
    free(l->pos);
}

/* Orders that left the book in the model's last event: fully filled makers and
 * makers cancelled by STP (qty < 0). Counts trades and STP records. */
static void live_after(liveset_t *l, const model_t *m, uint64_t *trades, uint64_t *stp)
{
    for (size_t k = 0; k < m->out.n_exec; k++) {
        const lob_exec *x = &m->ex[k];
        if (x->qty > 0) ++*trades;
        else ++*stp;
        if (x->qty != 0 && x->maker_remaining == 0) live_remove(l, x->maker_id);
    }
}

/* ---- scenarios ------------------------------------------------------------------------ */

typedef struct scen_stats {
    uint64_t aggressive, aggressive_stp, trades, stp_records;
} scen_stats_t;

static double scale = 1.0;

static size_t scaled(size_t n)
{
    size_t k = (size_t)((double)n * scale + 0.5);
    return k ? k : 1;
}

/* add_only: the book grows: GTC orders 1..1000 ticks from the middle, never crossing. */
static void gen_add_only(stream_t *st, uint64_t seed)
{
    rng_t r = rng_new(seed);
    size_t warm = scaled(200000), meas = scaled(1000000);
    st->capacity = (uint32_t)(warm + meas + 16);
    for (size_t i = 0; i < warm + meas; i++) {
        lob_event e = passive_add(&r, ++st->next_id, 1000, 1000, 0);
        push(st, i < warm ? SEG_WARM : SEG_EACH, &e);
    }
}

/* cancel_only: 1,000,000 orders loaded (untimed), then cancelled in the order they were added. */
static void gen_cancel_only(stream_t *st, uint64_t seed)
{
    rng_t r = rng_new(seed);
    size_t n = scaled(1000000);
    st->capacity = (uint32_t)(n + 16);
    for (size_t i = 0; i < n; i++) {
        lob_event e = passive_add(&r, ++st->next_id, 1000, 1000, 0);
        push(st, SEG_SETUP, &e);
    }
    for (size_t i = 0; i < n; i++) {
        lob_event e = mk_cancel(i + 1);
        push(st, SEG_EACH, &e);
    }
}

/* 50 levels x 100 orders of 500 shares on each side, MID +- 1..50 (untimed). */
static void walk_book(stream_t *st)
{
    for (int l = 1; l <= 50; l++)
        for (int k = 0; k < 100; k++) {
            lob_event a = mk_new(++st->next_id, LOB_SELL, MID + l, 500, LOB_GTC, 0, 0);
            push(st, SEG_SETUP, &a);
            lob_event b = mk_new(++st->next_id, LOB_BUY, MID - l, 500, LOB_GTC, 0, 0);
            push(st, SEG_SETUP, &b);
        }
}

/* aggressive_walk: 100,000 IOC orders of 5..20 shares, either side, priced through the book. */
static void gen_aggressive_walk(stream_t *st, uint64_t seed)
{
    rng_t r = rng_new(seed);
    st->capacity = 10000 + 16;
    walk_book(st);
    size_t meas = scaled(100000);
    for (size_t i = 0; i < meas; i++) {
        uint8_t side = chance(&r, 50) ? LOB_BUY : LOB_SELL;
        lob_event e = mk_new(++st->next_id, side, side == LOB_BUY ? BAND_HI : BAND_LO, uni(&r, 5, 20), LOB_IOC, 0, 0);
        push(st, SEG_EACH, &e);
    }
}

/* notional_walk: the same book; MARKET orders with a budget of 5..20 x MID (price x quantity). */
static void gen_notional_walk(stream_t *st, uint64_t seed)
{
    rng_t r = rng_new(seed);
    st->capacity = 10000 + 16;
    walk_book(st);
    size_t meas = scaled(100000);
    for (size_t i = 0; i < meas; i++) {
        uint8_t side = chance(&r, 50) ? LOB_BUY : LOB_SELL;
        lob_event e = mk_new(++st->next_id, side, 0, uni(&r, 5, 20) * MID, LOB_MARKET, 0, LOB_F_NOTIONAL);
        push(st, SEG_EACH, &e);
    }
}

/* A flow of passive adds, cancels of random live orders and IOC orders meeting the
 * touch (MID +- 10), driven through a model so that cancels name live orders.
 * With participants > 0, orders carry participant 1..participants and the IOC
 * orders the STP mode stp_flags. */
static void gen_flow(stream_t *st, uint64_t seed, unsigned pct_add, unsigned pct_cancel, size_t warm, size_t meas,
                     int participants, uint8_t stp_flags, scen_stats_t *ss)
{
    rng_t r = rng_new(seed);
    size_t setup = participants ? 2000 : 0;
    size_t maxid = setup + warm + meas + 1;
    st->capacity = (uint32_t)(setup + (warm + meas) * (pct_add + 3) / 100 + 1024);
    model_t m;
    model_init(&m, st->capacity);
    liveset_t live;
    live_init(&live, maxid);
    for (size_t i = 0; i < setup; i++) { /* 40 levels x 25 orders a side, any participant */
        int64_t l = 1 + (int64_t)(i / 50);
        uint8_t side = (i & 1) ? LOB_BUY : LOB_SELL;
        lob_event e = mk_new(++st->next_id, side, side == LOB_BUY ? MID - l : MID + l, uni(&r, 1, 100), LOB_GTC,
                             (uint64_t)uni(&r, 1, participants), 0);
        push(st, SEG_SETUP, &e);
        model_apply(&m, &e);
        live_add(&live, e.id);
    }
    for (size_t i = 0; i < warm + meas; i++) {
        int mode = i < warm ? SEG_WARM : SEG_EACH;
        unsigned k = (unsigned)(rnd(&r) % 100);
        uint64_t part = participants ? (uint64_t)uni(&r, 1, participants) : 0;
        lob_event e;
        if (k < pct_add || live.n == 0) {
            e = passive_add(&r, ++st->next_id, 10, participants ? 100 : 200, part);
            push(st, mode, &e);
            model_apply(&m, &e);
            live_add(&live, e.id);
        } else if (k < pct_add + pct_cancel) {
            e = mk_cancel(live.ids[rnd(&r) % live.n]);
            push(st, mode, &e);
            model_apply(&m, &e);
            live_remove(&live, e.id);
        } else {
            uint8_t side = chance(&r, 50) ? LOB_BUY : LOB_SELL;
            e = mk_new(++st->next_id, side, side == LOB_BUY ? MID + 10 : MID - 10, uni(&r, 1, 100), LOB_IOC, part,
                       stp_flags);
            push(st, mode, &e);
            model_apply(&m, &e);
            uint64_t before = ss->stp_records;
            live_after(&live, &m, &ss->trades, &ss->stp_records);
            if (mode == SEG_EACH) {
                ss->aggressive++;
                ss->aggressive_stp += ss->stp_records != before;
            }
        }
    }
    live_free(&live);
    model_free(&m);
}

/* thin_book_sweep: 3 asks of 10 at MID+1..3; IOC buys of 5..15 up to MID+3; every 5
 * probes the asks that are gone are put back (untimed refills). */
static void gen_thin(stream_t *st, uint64_t seed)
{
    rng_t r = rng_new(seed);
    size_t warm = scaled(20000), meas = scaled(200000);
    st->capacity = 64;
    model_t m;
    model_init(&m, st->capacity);
    uint64_t slot[3];
    for (int k = 0; k < 3; k++) {
        lob_event e = mk_new(slot[k] = ++st->next_id, LOB_SELL, MID + 1 + k, 10, LOB_GTC, 0, 0);
        push(st, SEG_SETUP, &e);
        model_apply(&m, &e);
    }
    for (size_t i = 0; i < warm + meas; i++) {
        lob_event e = mk_new(++st->next_id, LOB_BUY, MID + 3, uni(&r, 5, 15), LOB_IOC, 0, 0);
        push(st, i < warm ? SEG_WARM : SEG_EACH, &e);
        model_apply(&m, &e);
        if (i % 5 == 4)
            for (int k = 0; k < 3; k++)
                if (!lob_book_find(m.b, slot[k], NULL, NULL, NULL)) {
                    lob_event f = mk_new(slot[k] = ++st->next_id, LOB_SELL, MID + 1 + k, 10, LOB_GTC, 0, 0);
                    push(st, SEG_FILL, &f);
                    model_apply(&m, &f);
                }
    }
    model_free(&m);
}

/* ---- runs -------------------------------------------------------------------------------- */

/* Allocation counters, and context switches (getrusage): a measured loop that the
 * scheduler interrupts shows it here. */
typedef struct allocs {
    uint64_t core_allocs, core_bytes, core_frees, proc_allocs, proc_bytes, proc_frees;
    int64_t ctx_involuntary, ctx_voluntary;
} allocs_t;

static allocs_t alloc_now(void)
{
    allocs_t a;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    a.ctx_involuntary = ru.ru_nivcsw;
    a.ctx_voluntary = ru.ru_nvcsw;
    uint64_t freed;
    lob_alloc_stats(&a.core_allocs, &a.core_bytes, &a.core_frees, &freed);
    counting_malloc_t c;
    counting_malloc_stats(&c);
    a.proc_allocs = c.allocs;
    a.proc_bytes = c.bytes;
    a.proc_frees = c.frees;
    return a;
}

static allocs_t alloc_diff(allocs_t b, allocs_t a)
{
    allocs_t d = {b.core_allocs - a.core_allocs, b.core_bytes - a.core_bytes, b.core_frees - a.core_frees,
                  b.proc_allocs - a.proc_allocs, b.proc_bytes - a.proc_bytes, b.proc_frees - a.proc_frees,
                  b.ctx_involuntary - a.ctx_involuntary, b.ctx_voluntary - a.ctx_voluntary};
    return d;
}

typedef struct run {
    const char *name, *mode, *unit, *what;
    double rate;                 /* open loop: operations per second */
    size_t samples, events_per_sample, phase_events, fillers;
    double batch_mean_ns;        /* measured phase applied BATCH events per call */
    allocs_t setup, loop;        /* session creation; the measured loop */
    uint64_t rejects, execs;
    scen_stats_t ss;
    int failed;
} run_t;

static const char *out_dir = ".";
static FILE *summary;
static int n_runs, failures;

static lob_exec *exec_buffer(size_t rows)
{
    lob_exec *ex = xmalloc(rows * sizeof *ex);
    size_t touch = rows < (1u << 16) ? rows : (1u << 16); /* only the first rows are written per call */
    memset(ex, 0, touch * sizeof *ex);
    return ex;
}

static void write_latencies(const char *name, const uint64_t *ticks, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.lat", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "bench_hdr: cannot write %s\n", path);
        exit(2);
    }
    uint32_t buf[4096];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; k < 4096 && i < n; k++, i++) {
            uint64_t v = to_ns(ticks[i]);
            buf[k] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
        }
        if (fwrite(buf, sizeof *buf, k, f) != k) {
            fprintf(stderr, "bench_hdr: short write to %s\n", path);
            exit(2);
        }
    }
    fclose(f);
}

static void report(run_t *r)
{
    if (r->loop.core_allocs || r->loop.proc_allocs || r->loop.proc_frees || r->loop.core_frees) r->failed = 1;
    failures += r->failed;
    fprintf(summary,
            "%s    {\"name\": \"%s\", \"mode\": \"%s\", \"rate_per_s\": %.0f, \"unit\": \"%s\", \"what\": \"%s\",\n"
            "     \"samples\": %zu, \"events_per_sample\": %zu, \"phase_events\": %zu, \"fillers\": %zu,\n"
            "     \"batch_mean_ns\": %.2f, \"rejects\": %" PRIu64 ", \"execs\": %" PRIu64 ",\n"
            "     \"aggressive\": %" PRIu64 ", \"aggressive_stp\": %" PRIu64 ", \"stp_records\": %" PRIu64 ",\n"
            "     \"setup\": {\"core_allocs\": %" PRIu64 ", \"core_bytes\": %" PRIu64 ", \"proc_allocs\": %" PRIu64
            ", \"proc_bytes\": %" PRIu64 "},\n"
            "     \"loop\": {\"core_allocs\": %" PRIu64 ", \"core_bytes\": %" PRIu64 ", \"core_frees\": %" PRIu64
            ", \"proc_allocs\": %" PRIu64 ", \"proc_bytes\": %" PRIu64 ", \"proc_frees\": %" PRIu64
            ", \"ctx_involuntary\": %" PRId64 ", \"ctx_voluntary\": %" PRId64 "},\n"
            "     \"failed\": %d}",
            n_runs ? ",\n" : "", r->name, r->mode, r->rate, r->unit, r->what, r->samples, r->events_per_sample,
            r->phase_events, r->fillers, r->batch_mean_ns, r->rejects, r->execs, r->ss.aggressive,
            r->ss.aggressive_stp, r->ss.stp_records, r->setup.core_allocs, r->setup.core_bytes,
            r->setup.proc_allocs, r->setup.proc_bytes, r->loop.core_allocs, r->loop.core_bytes,
            r->loop.core_frees, r->loop.proc_allocs, r->loop.proc_bytes, r->loop.proc_frees,
            r->loop.ctx_involuntary, r->loop.ctx_voluntary, r->failed);
    fflush(summary);
    n_runs++;
    fprintf(stderr, "  %-32s %8zu samples  batch mean %7.1f ns/event  loop allocations core %" PRIu64
                    " process %" PRIu64 "  rejects %" PRIu64 "%s\n",
            r->name, r->samples, r->batch_mean_ns, r->loop.core_allocs, r->loop.proc_allocs, r->rejects,
            r->failed ? "  FAILED" : "");
}

/* Apply events [a, a+n) in calls of at most BATCH events, untimed. */
static void apply_chunks(lob_session *s, const lob_event *ev, size_t a, size_t n, lob_result *res, lob_exec *ex,
                         size_t excap)
{
    lob_outputs out = {0};
    out.execs = ex;
    out.exec_cap = excap;
    for (size_t i = a; i < a + n;) {
        size_t k = a + n - i < BATCH ? a + n - i : BATCH;
        out.results = res + i;
        if (lob_session_apply(s, ev + i, k, &out) != LOB_OK || out.n_done != k) {
            fprintf(stderr, "bench_hdr: a batch stopped early\n");
            exit(2);
        }
        i += k;
    }
}

/* Closed loop, one event per call (recording SEG_EACH), then the batch mean on a
 * second session; the two runs' results must agree event for event. */
static void run_closed(const char *name, const char *what, stream_t *st, const scen_stats_t *ss)
{
    run_t r = {name, "closed", "op", what, 0, 0, 1, 0, 0, 0, {0}, {0}, 0, 0, {0}, 0};
    if (ss) r.ss = *ss;
    size_t rec, fill, start = phase_start(st, &rec, &fill);
    r.phase_events = st->n - start;
    r.fillers = fill;
    size_t excap = (size_t)st->capacity + 8 + (size_t)BATCH * 32;
    lob_exec *ex = exec_buffer(excap);
    lob_result *res = xmalloc(st->n * sizeof *res);
    lob_result *res2 = xmalloc(st->n * sizeof *res2);
    memset(res, 0, st->n * sizeof *res);
    memset(res2, 0, st->n * sizeof *res2);
    uint64_t *lat = xmalloc((rec ? rec : 1) * sizeof *lat);
    memset(lat, 0, (rec ? rec : 1) * sizeof *lat);

    allocs_t a0 = alloc_now();
    lob_session *s = session_new(st->capacity);
    r.setup = alloc_diff(alloc_now(), a0);

    lob_outputs out = {0};
    out.execs = ex;
    out.exec_cap = excap;
    size_t k = 0;
    int rc = LOB_OK;
    allocs_t b0 = {0};
    int started = 0;
    for (size_t g = 0; g < st->nseg; g++) {
        const seg_t *sg = &st->seg[g];
        if (sg->mode == SEG_SETUP) {
            apply_chunks(s, st->ev, sg->start, sg->len, res, ex, excap);
            continue;
        }
        if (!started) {
            started = 1;
            b0 = alloc_now();
        }
        if (sg->mode == SEG_FILL) {
            out.results = res + sg->start;
            rc |= lob_session_apply(s, st->ev + sg->start, sg->len, &out);
            continue;
        }
        int keep = sg->mode == SEG_EACH;
        for (size_t i = sg->start; i < (size_t)sg->start + sg->len; i++) {
            out.results = res + i;
            uint64_t t0 = now();
            rc |= lob_session_apply(s, st->ev + i, 1, &out);
            uint64_t t1 = now();
            if (keep) lat[k++] = t1 - t0;
        }
    }
    r.loop = alloc_diff(alloc_now(), b0);
    lob_session_free(s);
    if (rc != LOB_OK) {
        fprintf(stderr, "bench_hdr: %s: a call did not apply its events\n", name);
        r.failed = 1;
    }
    for (size_t i = 0; i < st->n; i++) {
        r.rejects += res[i].status != LOB_OK;
        r.execs += res[i].n_exec;
    }
    r.samples = k;
    write_latencies(name, lat, k);

    /* the batch mean: the same stream, BATCH events per call in the measured phase */
    s = session_new(st->capacity);
    apply_chunks(s, st->ev, 0, start, res2, ex, excap);
    uint64_t t0 = now();
    apply_chunks(s, st->ev, start, st->n - start, res2, ex, excap);
    uint64_t t1 = now();
    lob_session_free(s);
    r.batch_mean_ns = st->n > start ? (double)to_ns(t1 - t0) / (double)(st->n - start) : 0;
    for (size_t i = 0; i < st->n; i++)
        if (res[i].filled != res2[i].filled || res[i].resting != res2[i].resting ||
            res[i].n_exec != res2[i].n_exec || res[i].status != res2[i].status) {
            fprintf(stderr, "bench_hdr: %s: event %zu differs between one per call and batches\n", name, i);
            r.failed = 1;
            break;
        }
    report(&r);
    free(lat);
    free(res);
    free(res2);
    free(ex);
}

/* Open loop: the measured events are due at a fixed rate; latency = completion - due. */
static void run_open(const char *name, const char *what, stream_t *st, double rate)
{
    run_t r = {name, "open", "op", what, rate, 0, 1, 0, 0, 0, {0}, {0}, 0, 0, {0}, 0};
    size_t rec, fill, start = phase_start(st, &rec, &fill);
    r.phase_events = st->n - start;
    size_t excap = (size_t)st->capacity + 8 + (size_t)BATCH * 32;
    lob_exec *ex = exec_buffer(excap);
    lob_result *res = xmalloc(st->n * sizeof *res);
    memset(res, 0, st->n * sizeof *res);
    uint64_t *lat = xmalloc((rec ? rec : 1) * sizeof *lat);
    memset(lat, 0, (rec ? rec : 1) * sizeof *lat);
    allocs_t a0 = alloc_now();
    lob_session *s = session_new(st->capacity);
    r.setup = alloc_diff(alloc_now(), a0);
    lob_outputs out = {0};
    out.execs = ex;
    out.exec_cap = excap;
    int rc = LOB_OK;
    /* set-up in batches, warm-up one per call, as in the closed loop */
    for (size_t g = 0; g < st->nseg && st->seg[g].start < start; g++) {
        const seg_t *sg = &st->seg[g];
        if (sg->mode == SEG_WARM)
            for (size_t i = sg->start; i < (size_t)sg->start + sg->len; i++) {
                out.results = res + i;
                rc |= lob_session_apply(s, st->ev + i, 1, &out);
            }
        else
            apply_chunks(s, st->ev, sg->start, sg->len, res, ex, excap);
    }
    double interval = 1e9 / rate / ns_per_tick; /* ticks */
    allocs_t b0 = alloc_now();
    size_t k = 0;
    uint64_t t_start = now() + (uint64_t)(10000 / ns_per_tick);
    for (size_t i = start; i < st->n; i++) {
        uint64_t due = t_start + (uint64_t)((double)(i - start) * interval);
        while (now() < due) {
        }
        out.results = res + i;
        rc |= lob_session_apply(s, st->ev + i, 1, &out);
        lat[k++] = now() - due;
    }
    r.loop = alloc_diff(alloc_now(), b0);
    lob_session_free(s);
    if (rc != LOB_OK) r.failed = 1;
    for (size_t i = 0; i < st->n; i++) r.rejects += res[i].status != LOB_OK;
    r.samples = k;
    write_latencies(name, lat, k);
    report(&r);
    free(lat);
    free(res);
    free(ex);
}

/* mass_cancel_burst: 10,000 orders added (untimed), then all cancelled, in a random
 * order, in one lob_session_apply call: one sample per burst (500 at scale 1; at least 10
 * at any scale, so that the samples spread over several histogram buckets). Each burst's events
 * are built before it is timed. */
static void run_mass_cancel(uint64_t seed)
{
    const size_t burst = 10000;
    size_t warm = 20, bursts = scaled(500) < 10 ? 10 : scaled(500); /* (a few samples can share one bucket) */
    run_t r = {"mass_cancel_burst", "closed", "burst", "10,000 cancels in one call", 0, 0, burst, 0, 0, 0,
               {0}, {0}, 0, 0, {0}, 0};
    rng_t rg = rng_new(seed);
    lob_event *adds = xmalloc(burst * sizeof *adds), *cancels = xmalloc(burst * sizeof *cancels);
    lob_result *res = xmalloc(burst * sizeof *res);
    memset(res, 0, burst * sizeof *res);
    memset(adds, 0, burst * sizeof *adds);
    memset(cancels, 0, burst * sizeof *cancels);
    uint64_t *lat = xmalloc(bursts * sizeof *lat);
    memset(lat, 0, bursts * sizeof *lat);
    lob_exec ex[8];
    allocs_t a0 = alloc_now();
    lob_session *s = session_new((uint32_t)burst + 16);
    r.setup = alloc_diff(alloc_now(), a0);
    lob_outputs out = {0};
    out.results = res;
    out.execs = ex;
    out.exec_cap = 8;
    int rc = LOB_OK;
    uint64_t id = 0;
    double sum = 0;
    allocs_t b0 = alloc_now();
    for (size_t b = 0; b < warm + bursts; b++) {
        for (size_t i = 0; i < burst; i++) {
            adds[i] = passive_add(&rg, ++id, 1000, 1000, 0);
            cancels[i] = mk_cancel(id);
        }
        for (size_t i = burst - 1; i > 0; i--) { /* Fisher-Yates */
            size_t j = (size_t)(rnd(&rg) % (i + 1));
            lob_event t = cancels[i];
            cancels[i] = cancels[j];
            cancels[j] = t;
        }
        rc |= lob_session_apply(s, adds, burst, &out);
        for (size_t i = 0; i < burst; i++) r.rejects += res[i].status != LOB_OK;
        uint64_t t0 = now();
        rc |= lob_session_apply(s, cancels, burst, &out);
        uint64_t t1 = now();
        for (size_t i = 0; i < burst; i++) r.rejects += res[i].status != LOB_OK;
        if (b >= warm) {
            lat[b - warm] = t1 - t0;
            sum += (double)to_ns(t1 - t0);
        }
    }
    r.loop = alloc_diff(alloc_now(), b0);
    lob_session_free(s);
    if (rc != LOB_OK) r.failed = 1;
    r.samples = bursts;
    r.phase_events = 2 * burst * bursts;
    r.fillers = burst * bursts;
    r.batch_mean_ns = sum / (double)bursts / (double)burst;
    write_latencies(r.name, lat, bursts);
    report(&r);
    free(adds);
    free(cancels);
    free(res);
    free(lat);
}

/* ---- main ----------------------------------------------------------------------------------- */

static int wanted(const char *only, const char *name)
{
    if (!only) return 1;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)); p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_hdr --out DIR [--scale F] [--only a,b,...] [--clock tsc|mono] [--rates R1,R2]\n");
}

int main(int argc, char **argv)
{
    const char *only = NULL, *clock = NULL, *rates = "1000000,2000000,5000000";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_dir = argv[++i];
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc) scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--clock") && i + 1 < argc) clock = argv[++i];
        else if (!strcmp(argv[i], "--rates") && i + 1 < argc) rates = argv[++i];
        else {
            usage();
            return !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ? 0 : 2;
        }
    }
    if (scale <= 0) {
        usage();
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/summary.json", out_dir);
    summary = fopen(path, "w");
    if (!summary) {
        fprintf(stderr, "bench_hdr: cannot write %s\n", path);
        return 2;
    }

    /* the clocks: CLOCK_MONOTONIC always probed; the TSC used when invariant */
    size_t np = 1000000;
    uint64_t *scratch = xmalloc(np * sizeof *scratch);
    memset(scratch, 0, np * sizeof *scratch);
    use_tsc = 0;
    ns_per_tick = 1.0;
    clock_probe_t mono = probe_clock(scratch, np);
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    int tsc_ok = tsc_usable();
    if (clock ? !strcmp(clock, "tsc") : tsc_ok) {
        if (!tsc_ok) fprintf(stderr, "bench_hdr: no invariant TSC here: using CLOCK_MONOTONIC\n");
        else {
            calibrate_tsc();
            use_tsc = 1;
        }
    }
    clock_probe_t used = use_tsc ? probe_clock(scratch, np) : mono;
    free(scratch);
    fprintf(summary,
            "{\"clock\": {\"used\": \"%s\", \"tsc_ghz\": %.6f,\n"
            "  \"cost_ns\": %.2f, \"step_ns\": %.3f, \"floor_min_ns\": %" PRIu64 ", \"floor_p50_ns\": %" PRIu64
            ", \"floor_p99_ns\": %" PRIu64 ",\n"
            "  \"mono_cost_ns\": %.2f, \"mono_step_ns\": %.0f, \"mono_os_resolution_ns\": %ld, \"mono_floor_p50_ns\": %"
            PRIu64 "},\n \"scale\": %g,\n \"runs\": [\n",
            use_tsc ? "tsc" : "CLOCK_MONOTONIC", use_tsc ? 1.0 / ns_per_tick : 0.0, used.cost_ns, used.step_ns,
            used.floor_min, used.floor_p50, used.floor_p99, mono.cost_ns, mono.step_ns,
            (long)(res.tv_sec * 1000000000L + res.tv_nsec), mono.floor_p50, scale);
    fprintf(stderr, "clock: %s, %.1f ns per reading, empty timed region p50 %" PRIu64 " ns (CLOCK_MONOTONIC: %.1f ns "
                    "per reading, smallest step %.0f ns)\n",
            use_tsc ? "TSC" : "CLOCK_MONOTONIC", used.cost_ns, used.floor_p50, mono.cost_ns, mono.step_ns);

    stream_t st = {0};
    scen_stats_t ss;
    if (wanted(only, "add_only")) {
        gen_add_only(&st, 1);
        run_closed("add_only", "GTC adds, the book grows", &st, NULL);
        stream_free(&st);
    }
    if (wanted(only, "cancel_only")) {
        gen_cancel_only(&st, 2);
        run_closed("cancel_only", "cancels of loaded orders, in order", &st, NULL);
        stream_free(&st);
    }
    if (wanted(only, "aggressive_walk")) {
        gen_aggressive_walk(&st, 3);
        run_closed("aggressive_walk", "IOC 5..20 shares into 50 levels x 100 orders", &st, NULL);
        stream_free(&st);
    }
    if (wanted(only, "notional_walk")) {
        gen_notional_walk(&st, 4);
        run_closed("notional_walk", "MARKET, budget 5..20 x price, same book", &st, NULL);
        stream_free(&st);
    }
    if (wanted(only, "mixed_70_20_10") || wanted(only, "mixed_open")) {
        memset(&ss, 0, sizeof ss);
        gen_flow(&st, 5, 70, 20, scaled(200000), scaled(1000000), 0, 0, &ss);
        if (wanted(only, "mixed_70_20_10")) run_closed("mixed_70_20_10", "70% add, 20% cancel, 10% IOC", &st, &ss);
        if (wanted(only, "mixed_open"))
            for (const char *p = rates; p && *p;) {
                double rate = atof(p);
                char nm[64];
                snprintf(nm, sizeof nm, "mixed_70_20_10_open_%gM", rate / 1e6);
                if (rate > 0) run_open(nm, "the same stream, open loop", &st, rate);
                p = strchr(p, ',');
                if (p) p++;
            }
        stream_free(&st);
    }
    if (wanted(only, "thin_book_sweep")) {
        gen_thin(&st, 6);
        run_closed("thin_book_sweep", "IOC probes of 3 asks, refilled every 5", &st, NULL);
        stream_free(&st);
    }
    if (wanted(only, "mass_cancel_burst")) run_mass_cancel(7);
    static const struct {
        const char *name;
        uint8_t flags;
    } stp[] = {{"self_trade_cancel_resting", LOB_F_STP_CANCEL_RESTING},
               {"self_trade_cancel_incoming", LOB_F_STP_CANCEL_INCOMING},
               {"self_trade_cancel_both", LOB_F_STP_CANCEL_BOTH}};
    for (int k = 0; k < 3; k++)
        if (wanted(only, stp[k].name) || wanted(only, "self_trade")) {
            memset(&ss, 0, sizeof ss);
            gen_flow(&st, 8, 55, 15, scaled(100000), scaled(500000), 4, stp[k].flags, &ss);
            run_closed(stp[k].name, "4 participants: 55% add, 15% cancel, 30% IOC with STP", &st, &ss);
            stream_free(&st);
        }
    fprintf(summary, "\n]}\n");
    fclose(summary);
    if (failures) fprintf(stderr, "bench_hdr: %d run(s) FAILED their checks\n", failures);
    return failures ? 1 : 0;
}
