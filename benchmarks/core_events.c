/*
 * core_events.c -- the matching core alone on the events of an ITCH day's prefix, as a
 * replay gives them to it (written by benchmarks/core_events.py).
 *
 *   cc -O2 -std=c11 -Icsrc/core benchmarks/core_events.c csrc/core/lob.c -o build/core_events
 *   build/core_events FILE [--bbo] [--timing N] [--reps N] [--no-check]
 *
 * One session with the file's books per repetition, the events in pieces of 2^18 (as pass 2
 * calls the core), reports off unless --bbo (the top-of-book changes, as the bbo report
 * asks) and --timing N (every Nth event timed). Prints the events, executions, desyncs and
 * bbo rows, the best repetition's time in the core, and a checksum (FNV-1a) of every output
 * (results, executions, desyncs, bbo rows) and of every book's orders at the end, after
 * lob_book_validate: two builds of lob.c that print the same checksum gave the same outputs.
 * With --no-check nothing is hashed or validated (for callgrind: only the core counts).
 */
#define _POSIX_C_SOURCE 200809L
#include "lob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PIECE = 1 << 18 };

typedef struct {
    uint32_t instrument, capacity;
    int64_t low, high, tick;
} book_spec;

static uint64_t hash = 1469598103934665603ULL;

static void mix(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) hash = (hash ^ c[i]) * 1099511628211ULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *must(void *p)
{
    if (!p) {
        fprintf(stderr, "core_events: out of memory\n");
        exit(1);
    }
    return p;
}

static void get(void *p, size_t size, size_t n, FILE *f, const char *path)
{
    if (fread(p, size, n, f) != n) {
        fprintf(stderr, "core_events: %s: cut short (at byte %ld)\n", path, ftell(f));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int bbo_on = 0, reps = 1, check = 1, every = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bbo")) bbo_on = 1;
        else if (!strcmp(argv[i], "--no-check")) check = 0;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--timing") && i + 1 < argc) every = atoi(argv[++i]);
        else if (!path && argv[i][0] != '-') path = argv[i];
        else {
            fprintf(stderr, "usage: core_events FILE [--bbo] [--timing N] [--reps N] [--no-check]\n");
            return 2;
        }
    }
    if (!path || reps < 1 || every < 0) {
        fprintf(stderr, "usage: core_events FILE [--bbo] [--timing N] [--reps N] [--no-check]\n");
        return 2;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint32_t nb, nc;
    get(&nb, 4, 1, f, path);
    book_spec *bk = must(calloc(nb ? nb : 1, sizeof *bk));
    for (uint32_t j = 0; j < nb; j++) {
        get(&bk[j].instrument, 4, 1, f, path);
        get(&bk[j].low, 8, 1, f, path);
        get(&bk[j].high, 8, 1, f, path);
        get(&bk[j].tick, 8, 1, f, path);
        get(&bk[j].capacity, 4, 1, f, path);
    }
    get(&nc, 4, 1, f, path);
    size_t total = 0, cap = 1 << 20;
    lob_event *ev = must(malloc(cap * sizeof *ev));
    for (uint32_t c = 0; c < nc; c++) {
        uint64_t k;
        get(&k, 8, 1, f, path);
        while (total + k > cap) cap *= 2;
        ev = must(realloc(ev, cap * sizeof *ev));
        get(ev + total, sizeof *ev, k, f, path);
        total += k;
    }
    fclose(f);
    /* Every output array written through once, so that no page fault lands in a timed call. */
    size_t room = 1 << 20;
    lob_result *res = must(calloc(PIECE, sizeof *res));
    lob_exec *ex = must(calloc(room, sizeof *ex));
    lob_desync *ds = must(calloc(room, sizeof *ds));
    lob_bbo *bbo = must(calloc(PIECE + 1, sizeof *bbo));
    uint32_t *bev = must(calloc(PIECE + 1, sizeof *bev));
    double best = 1e300;
    size_t nx = 0, nd = 0, nbbo = 0;
    for (int rep = 0; rep < reps; rep++) {
        int st;
        lob_session *s = lob_session_new(65535, &st);
        if (!s) {
            fprintf(stderr, "core_events: lob_session_new: %s\n", lob_strerror(st));
            return 1;
        }
        for (uint32_t j = 0; j < nb; j++) {
            st = lob_session_add_book(s, bk[j].instrument, bk[j].low, bk[j].high, bk[j].tick, bk[j].capacity);
            if (st) {
                fprintf(stderr, "core_events: book %u: %s\n", bk[j].instrument, lob_strerror(st));
                return 1;
            }
        }
        if (every && lob_session_set_timing(s, every) != LOB_OK) return 1;
        hash = 1469598103934665603ULL;
        nx = nd = nbbo = 0;
        double core = 0;
        for (size_t at = 0; at < total;) {
            size_t k = total - at < PIECE ? total - at : PIECE;
            lob_outputs o = {0};
            o.results = res;
            o.execs = ex;
            o.exec_cap = room;
            o.desyncs = ds;
            o.desync_cap = room;
            if (bbo_on) {
                o.bbo = bbo;
                o.bbo_event = bev;
            }
            double t = now();
            int rc = lob_session_apply(s, ev + at, k, &o);
            core += now() - t;
            if (rc) { /* (room for 2^20 rows: more than any event of these days writes) */
                fprintf(stderr, "core_events: event %zu: %s\n", at + o.n_done, lob_strerror(rc));
                return 1;
            }
            if (check) {
                mix(res, k * sizeof *res);
                mix(ex, o.n_exec * sizeof *ex);
                mix(ds, o.n_desync * sizeof *ds);
                mix(bbo, o.n_bbo * sizeof *bbo);
                mix(bev, o.n_bbo * sizeof *bev);
            }
            nx += o.n_exec;
            nd += o.n_desync;
            nbbo += o.n_bbo;
            at += k;
        }
        if (core < best) best = core;
        if (check && rep == reps - 1)
            for (uint32_t j = 0; j < nb; j++) {
                const lob_book *b = lob_session_book(s, bk[j].instrument);
                char msg[256];
                if (lob_book_validate(b, msg, sizeof msg)) {
                    fprintf(stderr, "core_events: book %u: %s\n", bk[j].instrument, msg);
                    return 1;
                }
                for (int side = 0; side < 2; side++) {
                    uint8_t sd = side ? LOB_SELL : LOB_BUY;
                    size_t m = lob_book_orders(b, sd, NULL, NULL, NULL, 0);
                    uint64_t *ids = must(malloc((m + 1) * sizeof *ids));
                    int64_t *qtys = must(malloc((m + 1) * sizeof *qtys)), *prices = must(malloc((m + 1) * sizeof *prices));
                    lob_book_orders(b, sd, ids, qtys, prices, m);
                    mix(ids, m * sizeof *ids);
                    mix(qtys, m * sizeof *qtys);
                    mix(prices, m * sizeof *prices);
                    free(ids);
                    free(qtys);
                    free(prices);
                }
            }
        lob_session_free(s);
    }
    printf("%zu events, %zu executions, %zu desyncs, %zu bbo rows; core best of %d: %.4f s, %.1f ns/event",
           total, nx, nd, nbbo, reps, best, best / (double)(total ? total : 1) * 1e9);
    if (check) printf("; checksum %016llx", (unsigned long long)hash);
    printf("\n");
    return 0;
}
