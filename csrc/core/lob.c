/*
 * lob.c -- lobreplay's matching core. The contract is lob.h.
 *
 * One book = one instrument over a fixed band of price levels:
 *   levels[]   one per tick in the band; an intrusive FIFO of orders each
 *   bits/bits2 a two-level occupancy bitmap (bit per level; bit per
 *              non-empty word) to find the next best level
 *   orders[]   a pool of order records linked by 32-bit indices, with a free list
 *   slots[]    an open-addressed (linear probing) index id -> order, twice the
 *              pool's size rounded to a power of two, backward-shift deletion
 * A level holds orders of one side only: the book is never crossed, so every
 * occupied level below the best ask is a bid level and every one above the
 * best bid is an ask level. That is what lets one bitmap serve both sides.
 * A session's books are allocated from its arena (below), a standalone
 * book's arrays from the heap.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE in hugemem.h */
#include "lob.h"
#include "hugemem.h"
#include "prefetch.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <x86intrin.h>
#define LOB_HAVE_TSC 1
#else
#define LOB_HAVE_TSC 0
#endif

#define NIL UINT32_MAX

_Static_assert(sizeof(lob_event) == 40, "lob_event must be 40 bytes");
_Static_assert(sizeof(lob_exec) == 48, "lob_exec must be 48 bytes");
_Static_assert(sizeof(lob_result) == 24, "lob_result must be 24 bytes");
_Static_assert(sizeof(lob_bbo) == 48, "lob_bbo must be 48 bytes");
_Static_assert(sizeof(lob_desync) == 64, "lob_desync must be 64 bytes");

/* ---- allocation accounting ------------------------------------------ */

/* Every allocation and free in this file goes through lob_calloc / lob_free,
 * which count calls and bytes (lob_alloc_stats). Frees are sized by the
 * caller, which knows what it allocated. */
static _Atomic uint64_t alloc_count, alloc_bytes, free_count, free_bytes;

static void *lob_calloc(size_t n, size_t size)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&alloc_bytes, (uint64_t)n * size, memory_order_relaxed);
    return calloc(n, size);
}

static void lob_free(void *p, size_t n, size_t size)
{
    if (!p) return;
    atomic_fetch_add_explicit(&free_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&free_bytes, (uint64_t)n * size, memory_order_relaxed);
    free(p);
}

/* ---- a session's arena ------------------------------------------------ */

/* A session's books take their arrays from a chain of large blocks on huge
 * pages (hugemem.h) instead of six heap blocks each. A day of 1,000 books
 * (84 MB) was 21,000 page faults while they were created and cleared, and its
 * random accesses missed the TLB on 4 KiB pages: the core's time in that replay
 * fell 4-14 % (benchmarks/RESULTS.md; not in a one-thread C driver, where it
 * stayed the same). Blocks double from 256 KiB up to 64 MiB; those under
 * 2 MiB are heap blocks on ordinary pages, so a session of a few small books
 * stays small (a huge page is 2 MiB of memory as soon as one byte of it is
 * touched); a book larger than the block in hand gets a block of its own
 * size; everything goes with the session. Under
 * AddressSanitizer the blocks are heap blocks and a poisoned gap separates
 * the arrays, so that an overrun is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
enum { ARENA_GAP = 64 };
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
enum { ARENA_GAP = 0 };
#endif

typedef struct arena_block {
    struct arena_block *next;
    size_t size, used;
} arena_block;

enum { ARENA_FIRST = 256u << 10, ARENA_MAX = 64u << 20, ARENA_ALIGN = 64 };

typedef struct arena {
    arena_block *head; /* the block in use; older ones follow */
    size_t next_size;
} arena;

static void arena_free(arena *a)
{
    while (a->head) {
        arena_block *blk = a->head;
        ASAN_UNPOISON_MEMORY_REGION(blk, blk->size);
        a->head = blk->next;
        atomic_fetch_add_explicit(&free_count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&free_bytes, blk->size, memory_order_relaxed);
        huge_free(blk, 1, blk->size);
    }
}

/* n zeroed elements of `size` bytes, 64-byte aligned, or NULL. */
static void *arena_calloc(arena *a, size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - 4 * ARENA_ALIGN) / size) return NULL;
    size_t bytes = (n * size + ARENA_GAP + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    arena_block *blk = a->head;
    if (!blk || blk->size - blk->used < bytes) {
        size_t want = a->next_size < ARENA_FIRST ? ARENA_FIRST : a->next_size;
        if (want < bytes + ARENA_ALIGN) want = huge_round(bytes + ARENA_ALIGN);
        blk = huge_calloc(1, want);
        if (!blk) return NULL;
        atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&alloc_bytes, want, memory_order_relaxed);
        blk->size = want;
        blk->used = ARENA_ALIGN; /* the header's line */
        blk->next = a->head;
        a->head = blk;
        ASAN_POISON_MEMORY_REGION((char *)blk + ARENA_ALIGN, want - ARENA_ALIGN);
        if (a->next_size < ARENA_MAX) a->next_size = 2 * want < ARENA_MAX ? 2 * want : ARENA_MAX;
    }
    void *p = (char *)blk + blk->used;
    blk->used += bytes;
    ASAN_UNPOISON_MEMORY_REGION(p, n * size);
    return p;
}

uint64_t lob_alloc_count(void)
{
    return atomic_load_explicit(&alloc_count, memory_order_relaxed);
}

void lob_alloc_stats(uint64_t *allocs, uint64_t *bytes, uint64_t *frees, uint64_t *bytes_freed)
{
    if (allocs) *allocs = atomic_load_explicit(&alloc_count, memory_order_relaxed);
    if (bytes) *bytes = atomic_load_explicit(&alloc_bytes, memory_order_relaxed);
    if (frees) *frees = atomic_load_explicit(&free_count, memory_order_relaxed);
    if (bytes_freed) *bytes_freed = atomic_load_explicit(&free_bytes, memory_order_relaxed);
}

const char *lob_strerror(int status)
{
    switch (status) {
    case LOB_OK: return "ok";
    case LOB_EUNKNOWN_ID: return "unknown order id";
    case LOB_EDUP_ID: return "duplicate order id";
    case LOB_EBAND: return "price outside the book's band";
    case LOB_EFULL: return "book full: no room for another resting order";
    case LOB_EQTY: return "bad quantity";
    case LOB_EPRICE: return "price not on the book's tick grid";
    case LOB_EKIND: return "unknown event kind, side, time in force or flag, or a bad participant";
    case LOB_EINSTRUMENT: return "no book for this instrument";
    case LOB_EEXECFULL: return "execution array full";
    case LOB_EARG: return "bad argument";
    case LOB_ENOMEM: return "out of memory";
    case LOB_ECORRUPT: return "book invariant broken";
    case LOB_EFRAME: return "corrupt frame: its length does not match its message type";
    default: return "unknown status";
    }
}

/* ---- book layout ---------------------------------------------------- */

typedef struct order {
    uint64_t id;
    int64_t qty;
    uint32_t next, prev;  /* FIFO links; next doubles as the free-list link */
    uint32_t level;       /* level index; NIL while on the free list (the side is the level's) */
    uint32_t slot;        /* where the index holds this order's id */
} order_t;

typedef struct level {
    int64_t total;        /* shares resting here */
    uint32_t head, tail;  /* front and back of the queue */
    uint32_t count;       /* orders here */
    uint8_t side;         /* side of the orders here while count > 0 */
} level_t;

typedef struct slot {
    uint32_t tag;         /* top 32 bits of the id's hash; its top bits are the home slot */
    uint32_t order;       /* NIL: empty slot */
} slot_t;

enum { HIST_KINDS = LOB_HIST_KINDS }; /* latency histograms per kind; index 0 collects events of an unknown kind */
enum { BOOK_HIST = LOB_BOOK_HIST_BUCKETS };

struct lob_book {
    int64_t low, high, tick;
    uint64_t tick_inv;            /* floor(2^64 / tick) + 1: exact division of 32-bit offsets */
    uint32_t nlevels, capacity, live, free_head;
    int64_t best_bid, best_ask;   /* level index, -1 when the side is empty */
    level_t *levels;
    uint64_t *bits, *bits2;
    uint32_t nwords, nwords2;
    order_t *orders;
    slot_t *slots;
    uint64_t slot_mask;
    int tag_shift;                /* home = tag >> tag_shift */
    int slow;                     /* halted || owners_used: the one test a NEW or REPLACE pays for
                                     both (check_event), in the same two cache lines as everything
                                     else an event reads here */
    uint32_t *hist;               /* per-kind coarse latency histograms, when timing is on (else NULL) */
    int owners_used;              /* a non-zero participant has rested since creation/clear */
    int in_arena;                 /* the book and its arrays belong to a session's arena */
    uint32_t *owner;              /* participant per order record, beside the pool so that a record
                                     stays 32 bytes; written only once owners_used is set (until
                                     then every entry is 0), read only by STP orders */
    /* Halted books (lob.h, LOB_STATE): parked orders wait in arrival order on their own list,
     * linked through next/prev like a level's queue, with level = PARKED; their level index
     * and side are in pinfo (beside the pool, as owner is). */
    int halted;
    uint32_t park_head, park_tail, parked;
    uint32_t *pinfo;              /* per order record: level index | PSELL, while parked */
    /* The best parked level of each side (0 bid, 1 ask), kept as orders park and leave, so
     * that the top of a halted book costs no walk of the parked list; pb_ok[s] = 0 once the
     * orders at that level are gone (then the next query walks the list once). A cache:
     * written by const queries too. */
    int pb_ok[2];
    int64_t pb_li[2], pb_qty[2];
    uint32_t pb_cnt[2];           /* 0 (with pb_ok): no parked order on that side */
    /* The top of book as the bbo output last saw it (read_bbo; instrument and changed unused),
     * so that an event with bbo rows on reads the top once, after it, and compares that with
     * this copy instead of reading it before the event too. Valid while top_epoch equals
     * *epoch_now (its session's bbo_epoch): a session moves that on at every call without bbo
     * rows, and lob_book_clear, lob_book_break and a batch stopped at this book set top_epoch
     * to 0 (never an epoch). A standalone book has no epoch_now and no valid top. */
    uint64_t top_epoch;
    const uint64_t *epoch_now;
    lob_bbo top;
};

enum { PARKED = NIL - 1 };        /* order.level of a parked order */
#define PSELL (1u << 31)          /* pinfo: a sell */

/* ---- occupancy bitmap ------------------------------------------------ */

static inline void bit_set(lob_book *b, uint32_t i)
{
    uint32_t w = i >> 6;
    b->bits[w] |= 1ULL << (i & 63);
    b->bits2[w >> 6] |= 1ULL << (w & 63);
}

static inline void bit_clear(lob_book *b, uint32_t i)
{
    uint32_t w = i >> 6;
    b->bits[w] &= ~(1ULL << (i & 63));
    if (b->bits[w] == 0) b->bits2[w >> 6] &= ~(1ULL << (w & 63));
}

/* Lowest occupied level >= pos, or -1. */
static int64_t find_ge(const lob_book *b, int64_t pos)
{
    if (pos >= (int64_t)b->nlevels) return -1;
    if (pos < 0) pos = 0;
    uint64_t w = (uint64_t)pos >> 6;
    uint64_t m = b->bits[w] & (~0ULL << (pos & 63));
    if (m) return (int64_t)(w * 64 + (uint64_t)__builtin_ctzll(m));
    uint64_t x = w + 1;
    if (x >= b->nwords) return -1;
    uint64_t ww = x >> 6;
    uint64_t m2 = b->bits2[ww] & (~0ULL << (x & 63));
    while (!m2) {
        if (++ww >= b->nwords2) return -1;
        m2 = b->bits2[ww];
    }
    uint64_t word = ww * 64 + (uint64_t)__builtin_ctzll(m2);
    return (int64_t)(word * 64 + (uint64_t)__builtin_ctzll(b->bits[word]));
}

static inline uint64_t mask_le(uint64_t bit)
{
    return bit == 63 ? ~0ULL : ((1ULL << (bit + 1)) - 1);
}

/* Highest occupied level <= pos, or -1. */
static int64_t find_le(const lob_book *b, int64_t pos)
{
    if (pos < 0) return -1;
    if (pos >= (int64_t)b->nlevels) pos = (int64_t)b->nlevels - 1;
    uint64_t w = (uint64_t)pos >> 6;
    uint64_t m = b->bits[w] & mask_le((uint64_t)pos & 63);
    if (m) return (int64_t)(w * 64 + 63 - (uint64_t)__builtin_clzll(m));
    if (w == 0) return -1;
    uint64_t x = w - 1;
    uint64_t ww = x >> 6;
    uint64_t m2 = b->bits2[ww] & mask_le(x & 63);
    while (!m2) {
        if (ww == 0) return -1;
        m2 = b->bits2[--ww];
    }
    uint64_t word = ww * 64 + 63 - (uint64_t)__builtin_clzll(m2);
    return (int64_t)(word * 64 + 63 - (uint64_t)__builtin_clzll(b->bits[word]));
}

/* ---- id index ---------------------------------------------------------- */

static inline uint32_t id_tag(uint64_t id)
{
    return (uint32_t)((id * 0x9E3779B97F4A7C15ULL) >> 32);
}

static inline uint32_t tag_home(const lob_book *b, uint32_t tag)
{
    return tag >> b->tag_shift;
}

/* Probe for id from its home slot. Returns the slot that holds it (*found = 1)
 * or the empty slot where the probe ended (*found = 0), where id belongs as
 * long as nothing is removed from the index in between. Only a slot whose tag
 * matches costs a look at the order record. */
static inline uint32_t index_probe(const lob_book *b, uint64_t id, uint32_t tag, int *found)
{
    uint32_t i = tag_home(b, tag);
    for (;;) {
        const slot_t *s = &b->slots[i];
        if (s->order == NIL) {
            *found = 0;
            return i;
        }
        if (s->tag == tag && b->orders[s->order].id == id) {
            *found = 1;
            return i;
        }
        i = (i + 1) & (uint32_t)b->slot_mask;
    }
}

/* Order index of a live id, or NIL. */
static inline uint32_t index_find(const lob_book *b, uint64_t id)
{
    int found;
    uint32_t i = index_probe(b, id, id_tag(id), &found);
    return found ? b->slots[i].order : NIL;
}

/* Store a tag -> order in an empty slot found by index_probe for its id. */
static inline void index_put(lob_book *b, uint32_t i, uint32_t tag, uint32_t order)
{
    b->slots[i].tag = tag;
    b->slots[i].order = order;
    b->orders[order].slot = i;
}

/* Empty slot i, shifting later members of its probe run back so that every id
 * stays reachable from its home without crossing an empty slot. */
static void index_remove_at(lob_book *b, uint32_t i)
{
    uint32_t mask = (uint32_t)b->slot_mask, j = i;
    for (;;) {
        j = (j + 1) & mask;
        const slot_t *sj = &b->slots[j];
        if (sj->order == NIL) break;
        uint32_t k = tag_home(b, sj->tag);
        /* Move j back to i unless its home lies cyclically in (i, j]. */
        int home_in_between = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!home_in_between) {
            b->slots[i] = *sj;
            b->orders[sj->order].slot = i;
            i = j;
        }
    }
    b->slots[i].order = NIL;
}

/* ---- creation ------------------------------------------------------------ */

enum { INDEX_ROOMY = 1 << 15 }; /* index slots (8 bytes each: 256 KiB) up to which it is kept a quarter full */

/* From the session's arena when there is one, else from the heap. */
static void *book_calloc(arena *a, size_t n, size_t size)
{
    return a ? arena_calloc(a, n, size) : lob_calloc(n, size);
}

/* A book whose arrays come from arena a (NULL: the heap; see lob_book_free). */
static lob_book *book_new(arena *a, int64_t band_low, int64_t band_high, int64_t tick, uint32_t capacity,
                          int *status)
{
    int st = LOB_EARG;
    lob_book *b = NULL;
    if (tick <= 0 || band_high < band_low || capacity == 0 || capacity > (1u << 30)) goto fail;
    /* (high - low) may overflow int64 for extreme bands: compute in unsigned. */
    uint64_t span = (uint64_t)band_high - (uint64_t)band_low;
    if (span % (uint64_t)tick != 0) goto fail;
    uint64_t nlev = span / (uint64_t)tick + 1;
    if (nlev > (1ULL << 31)) goto fail;

    st = LOB_ENOMEM;
    b = book_calloc(a, 1, sizeof *b);
    if (!b) goto fail;
    b->in_arena = a != NULL;
    b->low = band_low;
    b->high = band_high;
    b->tick = tick;
    b->nlevels = (uint32_t)nlev;
    b->capacity = capacity;
    b->nwords = (uint32_t)((nlev + 63) / 64);
    b->nwords2 = (b->nwords + 63) / 64;
    b->tick_inv = UINT64_MAX / (uint64_t)tick + 1;
    /* The id index: a power of two at least twice the pool (never more than half full),
     * and four times it while that stays within INDEX_ROOMY slots (at most a quarter
     * full): at a load near one half, probes and backward shifts cost more than a bigger
     * table does while it stays small (benchmarks/RESULTS.md, "the id index's size"). */
    uint64_t nslots = 16;
    int bits = 4;
    while (nslots < 2ULL * capacity || (nslots < 4ULL * capacity && nslots < INDEX_ROOMY)) {
        nslots <<= 1; /* <= 2^31 slots: capacity <= 2^30, so slot numbers fit 32 bits */
        bits++;
    }
    b->slot_mask = nslots - 1;
    b->tag_shift = 32 - bits;
    b->levels = book_calloc(a, nlev, sizeof *b->levels);
    b->bits = book_calloc(a, b->nwords, sizeof *b->bits);
    b->bits2 = book_calloc(a, b->nwords2, sizeof *b->bits2);
    b->orders = book_calloc(a, capacity, sizeof *b->orders);
    b->slots = book_calloc(a, nslots, sizeof *b->slots);
    b->owner = book_calloc(a, capacity, sizeof *b->owner);
    b->pinfo = book_calloc(a, capacity, sizeof *b->pinfo);
    if (!b->levels || !b->bits || !b->bits2 || !b->orders || !b->slots || !b->owner || !b->pinfo) goto fail;
    lob_book_clear(b);
    if (status) *status = LOB_OK;
    return b;
fail:
    lob_book_free(b);
    if (status) *status = st;
    return NULL;
}

lob_book *lob_book_new(int64_t band_low, int64_t band_high, int64_t tick,
                       uint32_t capacity, int *status)
{
    return book_new(NULL, band_low, band_high, tick, capacity, status);
}

void lob_book_free(lob_book *b)
{
    if (!b) return;
    if (b->in_arena) { /* the arrays go with the session's arena; the histograms are the heap's */
        lob_free(b->hist, (size_t)HIST_KINDS * BOOK_HIST, sizeof *b->hist);
        return;
    }
    lob_free(b->levels, b->nlevels, sizeof *b->levels);
    lob_free(b->bits, b->nwords, sizeof *b->bits);
    lob_free(b->bits2, b->nwords2, sizeof *b->bits2);
    lob_free(b->orders, b->capacity, sizeof *b->orders);
    lob_free(b->slots, b->slot_mask + 1, sizeof *b->slots);
    lob_free(b->owner, b->capacity, sizeof *b->owner);
    lob_free(b->pinfo, b->capacity, sizeof *b->pinfo);
    lob_free(b->hist, (size_t)HIST_KINDS * BOOK_HIST, sizeof *b->hist);
    lob_free(b, 1, sizeof *b);
}

void lob_book_clear(lob_book *b)
{
    for (uint32_t i = 0; i < b->nlevels; i++) {
        b->levels[i].total = 0;
        b->levels[i].head = b->levels[i].tail = NIL;
        b->levels[i].count = 0;
        b->levels[i].side = 0;
    }
    memset(b->bits, 0, (size_t)b->nwords * sizeof *b->bits);
    memset(b->bits2, 0, (size_t)b->nwords2 * sizeof *b->bits2);
    for (uint32_t i = 0; i < b->capacity; i++) {
        b->orders[i].next = (i + 1 < b->capacity) ? i + 1 : NIL;
        b->orders[i].prev = NIL;
        b->orders[i].level = NIL;
        b->orders[i].qty = 0;
        b->orders[i].id = 0;
        b->orders[i].slot = NIL;
    }
    for (uint64_t i = 0; i <= b->slot_mask; i++) b->slots[i].order = NIL;
    if (b->owners_used) memset(b->owner, 0, (size_t)b->capacity * sizeof *b->owner);
    b->owners_used = 0;
    b->slow = 0;
    b->free_head = 0;
    b->live = 0;
    b->best_bid = b->best_ask = -1;
    b->halted = 0;
    b->park_head = b->park_tail = NIL;
    b->parked = 0;
    for (int k = 0; k < 2; k++) {
        b->pb_ok[k] = 1;
        b->pb_cnt[k] = 0;
        b->pb_li[k] = -1;
        b->pb_qty[k] = 0;
    }
    b->top_epoch = 0;
}

void lob_book_info(const lob_book *b, int64_t *band_low, int64_t *band_high,
                   int64_t *tick, uint32_t *capacity)
{
    if (band_low) *band_low = b->low;
    if (band_high) *band_high = b->high;
    if (tick) *tick = b->tick;
    if (capacity) *capacity = b->capacity;
}

uint32_t lob_book_order_count(const lob_book *b) { return b->live; }

/* ---- queue operations ------------------------------------------------------ */

static inline int64_t level_price(const lob_book *b, int64_t li) { return b->low + li * b->tick; }

/* Take an order record from the free list, append it to level li and index
 * it in slot `slot`, an empty slot that index_probe returned for this id with
 * no removal from the index since. */
static inline void level_append(lob_book *b, uint32_t oi, uint8_t side, uint32_t li);

static inline uint32_t order_rest(lob_book *b, uint64_t id, uint8_t side, uint32_t li, int64_t qty,
                                  uint32_t tag, uint32_t slot)
{
    uint32_t oi = b->free_head;
    order_t *o = &b->orders[oi];
    b->free_head = o->next;
    o->id = id;
    o->qty = qty;
    level_append(b, oi, side, li);
    b->live++;
    index_put(b, slot, tag, oi);
    return oi;
}

/* Append order record oi (id and qty set, on no list) to the back of level li. */
static inline void level_append(lob_book *b, uint32_t oi, uint8_t side, uint32_t li)
{
    order_t *o = &b->orders[oi];
    o->level = li;
    o->next = NIL;
    level_t *L = &b->levels[li];
    o->prev = L->tail;
    if (L->tail != NIL) b->orders[L->tail].next = oi;
    else {
        L->head = oi;
        L->side = side;
        bit_set(b, li);
    }
    L->tail = oi;
    L->count++;
    L->total += o->qty;
    if (side == LOB_BUY) {
        if ((int64_t)li > b->best_bid) b->best_bid = li;
    } else if (b->best_ask < 0 || (int64_t)li < b->best_ask) {
        b->best_ask = li;
    }
}

/* ---- parked orders (halted books) ------------------------------------------ */

static inline uint8_t pinfo_side(uint32_t info) { return info & PSELL ? LOB_SELL : LOB_BUY; }

/* Side and level index of a live order, parked or not. */
static inline uint8_t order_side(const lob_book *b, uint32_t oi)
{
    uint32_t li = b->orders[oi].level;
    return li == PARKED ? pinfo_side(b->pinfo[oi]) : b->levels[li].side;
}

static inline uint32_t order_level(const lob_book *b, uint32_t oi)
{
    uint32_t li = b->orders[oi].level;
    return li == PARKED ? b->pinfo[oi] & ~PSELL : li;
}

/* The parked-best cache (lob_book.pb_*): a parked order of side index k at level li with
 * qty shares arrives, loses shares, or leaves. */
static inline int better(int k, int64_t a, int64_t b) { return k ? a < b : a > b; }

static void pb_arrive(lob_book *b, int k, int64_t li, int64_t qty)
{
    if (!b->pb_ok[k]) return;
    if (b->pb_cnt[k] == 0 || better(k, li, b->pb_li[k])) {
        b->pb_li[k] = li;
        b->pb_qty[k] = qty;
        b->pb_cnt[k] = 1;
    } else if (li == b->pb_li[k]) {
        b->pb_qty[k] += qty;
        b->pb_cnt[k]++;
    }
}

static inline void pb_shrink(lob_book *b, int k, int64_t li, int64_t qty, int leaves)
{
    if (!b->pb_ok[k] || li != b->pb_li[k]) return;
    b->pb_qty[k] -= qty;
    if (leaves && --b->pb_cnt[k] == 0) b->pb_ok[k] = 0; /* the next level: found when asked */
}

/* Take a record from the free list and append it to the parked list (an order that
 * rests while the book is halted); slot as for order_rest. */
static uint32_t order_park(lob_book *b, uint64_t id, uint8_t side, uint32_t li, int64_t qty, uint32_t tag,
                           uint32_t slot)
{
    uint32_t oi = b->free_head;
    order_t *o = &b->orders[oi];
    b->free_head = o->next;
    o->id = id;
    o->qty = qty;
    o->level = PARKED;
    b->pinfo[oi] = li | (side == LOB_SELL ? PSELL : 0);
    o->next = NIL;
    o->prev = b->park_tail;
    if (b->park_tail != NIL) b->orders[b->park_tail].next = oi;
    else b->park_head = oi;
    b->park_tail = oi;
    b->parked++;
    b->live++;
    index_put(b, slot, tag, oi);
    pb_arrive(b, side == LOB_SELL, li, qty);
    return oi;
}

/* Take a parked order off the parked list (it stays indexed and live). */
static void park_unlink(lob_book *b, uint32_t oi)
{
    order_t *o = &b->orders[oi];
    if (o->prev != NIL) b->orders[o->prev].next = o->next;
    else b->park_head = o->next;
    if (o->next != NIL) b->orders[o->next].prev = o->prev;
    else b->park_tail = o->prev;
    o->prev = o->next = NIL;
    b->parked--;
}

/* Record the participant of order record oi, which has just rested. Needed when
 * it has one or the book has seen participants: until then every entry is 0. */
static inline void set_owner(lob_book *b, uint32_t oi, uint32_t part)
{
    if (part | (uint32_t)b->owners_used) {
        b->owner[oi] = part;
        if (part) b->owners_used = b->slow = 1;
    }
}

/* Put order record oi (off every list, out of the index) back on the free list. */
static inline void order_free(lob_book *b, uint32_t oi)
{
    order_t *o = &b->orders[oi];
    o->level = NIL;
    o->slot = NIL;
    o->qty = 0;
    o->prev = NIL;
    o->next = b->free_head;
    b->free_head = oi;
    b->live--;
}

/* order_remove of a parked order, out of line: inlined, its code made the common
 * removal save and restore one register more (callgrind: 5 instructions a removal). */
__attribute__((noinline, cold)) static void remove_parked(lob_book *b, uint32_t oi)
{
    uint32_t info = b->pinfo[oi];
    pb_shrink(b, (info & PSELL) != 0, info & ~PSELL, b->orders[oi].qty, 1);
    park_unlink(b, oi);
    order_free(b, oi);
}

/* Remove an order: out of the index, off its level (keeping the cached best
 * prices right) and back to the free list. */
static void order_remove(lob_book *b, uint32_t oi)
{
    order_t *o = &b->orders[oi];
    index_remove_at(b, o->slot);
    uint32_t li = o->level;
    if (__builtin_expect(li == PARKED, 0)) {
        remove_parked(b, oi);
        return;
    }
    level_t *L = &b->levels[li];
    if (o->prev != NIL) b->orders[o->prev].next = o->next;
    else L->head = o->next;
    if (o->next != NIL) b->orders[o->next].prev = o->prev;
    else L->tail = o->prev;
    L->count--;
    L->total -= o->qty;
    if (L->count == 0) {
        bit_clear(b, li);
        if (L->side == LOB_BUY) {
            if ((int64_t)li == b->best_bid) b->best_bid = find_le(b, (int64_t)li - 1);
        } else if ((int64_t)li == b->best_ask) {
            b->best_ask = find_ge(b, (int64_t)li + 1);
        }
    }
    order_free(b, oi);
}

/* How much opposite quantity crosses a limit (level index lim; a market
 * order passes the far end of the band), stopping once `want` is reached,
 * and how many resting orders that many shares would touch. Always inlined
 * (as is clear_crossing): with apply_ext as a second caller the compiler would
 * call them out of line from the batch loop, which costs the plain path about
 * 3 % more instructions (callgrind, seed workload). */
static inline __attribute__((always_inline)) void crossing(const lob_book *b, uint8_t side, int64_t lim,
                                                           int64_t want, int64_t *avail, uint64_t *touched)
{
    int64_t got = 0;
    uint64_t n = 0;
    if (side == LOB_BUY) {
        for (int64_t li = b->best_ask; li >= 0 && li <= lim && got < want; li = find_ge(b, li + 1)) {
            const level_t *L = &b->levels[li];
            if (got + L->total <= want) {
                got += L->total;
                n += L->count;
            } else {
                for (uint32_t oi = L->head; got < want; oi = b->orders[oi].next) {
                    got += b->orders[oi].qty;
                    n++;
                }
            }
        }
    } else {
        for (int64_t li = b->best_bid; li >= 0 && li >= lim && got < want; li = find_le(b, li - 1)) {
            const level_t *L = &b->levels[li];
            if (got + L->total <= want) {
                got += L->total;
                n += L->count;
            } else {
                for (uint32_t oi = L->head; got < want; oi = b->orders[oi].next) {
                    got += b->orders[oi].qty;
                    n++;
                }
            }
        }
    }
    *avail = got;
    *touched = n;
}

/* Match an incoming order against the opposite side up to level lim.
 * Writes executions to ex (room checked by the caller); returns shares traded. */
static inline __attribute__((always_inline)) int64_t match(lob_book *b, uint8_t side, int64_t lim, uint64_t taker,
                                                           int64_t qty, lob_exec *ex, size_t *nex,
                                                           uint32_t event_index, uint32_t instrument)
{
    int64_t left = qty;
    for (;;) {
        int64_t li = (side == LOB_BUY) ? b->best_ask : b->best_bid;
        if (left == 0 || li < 0) break;
        if (side == LOB_BUY ? li > lim : li < lim) break;
        level_t *L = &b->levels[li];
        int64_t px = level_price(b, li);
        while (left > 0 && L->head != NIL) {
            uint32_t oi = L->head;
            order_t *o = &b->orders[oi];
            int64_t q = o->qty < left ? o->qty : left;
            left -= q;
            lob_exec *e = &ex[(*nex)++];
            e->maker_id = o->id;
            e->taker_id = taker;
            e->price = px;
            e->qty = q;
            e->maker_remaining = o->qty - q;
            e->event_index = event_index;
            e->instrument = instrument;
            if (q == o->qty) {
                order_remove(b, oi); /* may move the best to the next level */
            } else {
                o->qty -= q;
                L->total -= q;
            }
        }
    }
    return qty - left;
}

/* ---- queries ---------------------------------------------------------------- */

/* Levels as the queries see them: the levels' orders and, in a halted book, the parked
 * orders (slow: a walk of the parked list per step, only while orders are parked). */

/* The best level index of a side's parked orders worse than `than` (a bid below it, an ask
 * above it; than = INT64_MAX for a bid, -1 for an ask: any), or -1. */
static int64_t park_next(const lob_book *b, uint8_t side, int64_t than)
{
    int64_t best = -1;
    for (uint32_t oi = b->park_head; oi != NIL; oi = b->orders[oi].next) {
        uint32_t info = b->pinfo[oi];
        if (pinfo_side(info) != side) continue;
        int64_t li = info & ~PSELL;
        if (side == LOB_BUY ? (li < than && li > best) : (li > than && (best < 0 || li < best))) best = li;
    }
    return best;
}

/* The best level index of a side's parked orders, or -1. */
static inline int64_t park_first(const lob_book *b, uint8_t side)
{
    return park_next(b, side, side == LOB_BUY ? INT64_MAX : -1);
}

/* The shares and orders parked on a side at level li (li < 0: none): a walk of the list. */
static void park_at(const lob_book *b, uint8_t side, int64_t li, int64_t *qty, uint32_t *count)
{
    int64_t q = 0;
    uint32_t n = 0;
    uint32_t want = (uint32_t)li | (side == LOB_SELL ? PSELL : 0);
    for (uint32_t oi = b->park_head; li >= 0 && oi != NIL; oi = b->orders[oi].next)
        if (b->pinfo[oi] == want) {
            q += b->orders[oi].qty;
            n++;
        }
    *qty = q;
    *count = n;
}

/* A walk of one side's levels, best first: d = the next level with orders, p = the next
 * with parked orders of the side, cur = the better of them (-1: none left). */
typedef struct lvl_walk {
    uint8_t side;
    int64_t d, p, cur;
} lvl_walk;

static inline void walk_pick(lvl_walk *w)
{
    if (w->d < 0) w->cur = w->p;
    else if (w->p < 0) w->cur = w->d;
    else w->cur = w->side == LOB_BUY ? (w->d > w->p ? w->d : w->p) : (w->d < w->p ? w->d : w->p);
}

static inline lvl_walk walk_first(const lob_book *b, uint8_t side)
{
    lvl_walk w = {side, side == LOB_BUY ? b->best_bid : b->best_ask, -1, -1};
    if (b->parked) w.p = park_first(b, side);
    walk_pick(&w);
    return w;
}

static inline void walk_next(const lob_book *b, lvl_walk *w)
{
    int64_t c = w->cur;
    if (w->d == c) w->d = w->side == LOB_BUY ? find_le(b, c - 1) : find_ge(b, c + 1);
    if (w->p == c) w->p = park_next(b, w->side, c);
    walk_pick(w);
}

/* Shares and orders of a side at level li (its level's and its parked ones). */
static void side_at(const lob_book *b, uint8_t side, int64_t li, int64_t *qty, uint32_t *count)
{
    const level_t *L = &b->levels[li];
    park_at(b, side, li, qty, count);
    if (L->count && L->side == side) {
        *qty += L->total;
        *count += L->count;
    }
}

/* The best parked level of a side from the cache (filled by one walk if it was spoiled):
 * its level index (-1: none), shares and orders. */
static int64_t pb_get(const lob_book *cb, uint8_t side, int64_t *qty, uint32_t *count)
{
    lob_book *b = (lob_book *)cb; /* the cache only */
    int k = side == LOB_SELL;
    if (!b->pb_ok[k]) {
        b->pb_li[k] = park_first(b, side);
        park_at(b, side, b->pb_li[k], &b->pb_qty[k], &b->pb_cnt[k]);
        b->pb_ok[k] = 1;
    }
    if (b->pb_cnt[k] == 0) return -1;
    *qty = b->pb_qty[k];
    *count = b->pb_cnt[k];
    return b->pb_li[k];
}

/* The best level of a side of a book with parked orders: its level's and its parked orders. */
static int best_parked(const lob_book *b, uint8_t side, int64_t *price, int64_t *qty, uint32_t *count)
{
    int64_t pq = 0, d = side == LOB_BUY ? b->best_bid : b->best_ask;
    uint32_t pn = 0;
    int64_t p = pb_get(b, side, &pq, &pn);
    int64_t li = d < 0 ? p : (p < 0 ? d : (better(side == LOB_SELL, d, p) ? d : p));
    if (li < 0) return 0;
    int64_t q = 0;
    uint32_t n = 0;
    if (li == d) {
        q = b->levels[d].total;
        n = b->levels[d].count;
    }
    if (li == p) {
        q += pq;
        n += pn;
    }
    if (price) *price = level_price(b, li);
    if (qty) *qty = q;
    if (count) *count = n;
    return 1;
}

int lob_book_halted(const lob_book *b) { return b->halted; }

uint32_t lob_book_parked(const lob_book *b) { return b->parked; }

int lob_book_best(const lob_book *b, uint8_t side, int64_t *price, int64_t *qty, uint32_t *count)
{
    if (__builtin_expect(b->parked != 0, 0) && (side == LOB_BUY || side == LOB_SELL))
        return best_parked(b, side, price, qty, count);
    int64_t li = side == LOB_BUY ? b->best_bid : (side == LOB_SELL ? b->best_ask : -1);
    if (li < 0) return 0;
    if (price) *price = level_price(b, li);
    if (qty) *qty = b->levels[li].total;
    if (count) *count = b->levels[li].count;
    return 1;
}

uint32_t lob_book_depth(const lob_book *b, uint8_t side, uint32_t n, int64_t *prices,
                        int64_t *qtys, uint32_t *counts)
{
    if (side != LOB_BUY && side != LOB_SELL) return 0;
    uint32_t k = 0;
    if (__builtin_expect(b->parked != 0, 0)) {
        for (lvl_walk w = walk_first(b, side); k < n && w.cur >= 0; walk_next(b, &w), k++) {
            int64_t q;
            uint32_t c;
            side_at(b, side, w.cur, &q, &c);
            if (prices) prices[k] = level_price(b, w.cur);
            if (qtys) qtys[k] = q;
            if (counts) counts[k] = c;
        }
        return k;
    }
    int64_t li = side == LOB_BUY ? b->best_bid : b->best_ask;
    while (k < n && li >= 0) {
        if (prices) prices[k] = level_price(b, li);
        if (qtys) qtys[k] = b->levels[li].total;
        if (counts) counts[k] = b->levels[li].count;
        k++;
        li = side == LOB_BUY ? find_le(b, li - 1) : find_ge(b, li + 1);
    }
    return k;
}

/* Level index of a price, or a negative status. Offsets and ticks below 2^32
 * divide by a multiply with tick_inv: with tick_inv = 2^64/tick + e (0 < e <= 1)
 * the product overshoots off/tick by less than 2^-32 < 1/tick, so the floor is exact. */
static inline int64_t price_level(const lob_book *b, int64_t price)
{
    if (price < b->low || price > b->high) return -LOB_EBAND;
    uint64_t off = (uint64_t)price - (uint64_t)b->low, tick = (uint64_t)b->tick, q;
    if (tick == 1) return (int64_t)off;
    if ((off | tick) >> 32) q = off / tick;
    else q = (uint64_t)(((unsigned __int128)off * b->tick_inv) >> 64);
    if (off != q * tick) return -LOB_EPRICE;
    return (int64_t)q;
}

int64_t lob_book_level_orders(const lob_book *b, int64_t price, uint64_t *ids, int64_t *qtys,
                              uint32_t cap, uint8_t *side)
{
    int64_t li = price_level(b, price);
    if (li < 0) return li;
    const level_t *L = &b->levels[li];
    uint32_t k = 0;
    for (uint32_t oi = L->head; oi != NIL && k < cap; oi = b->orders[oi].next, k++) {
        if (ids) ids[k] = b->orders[oi].id;
        if (qtys) qtys[k] = b->orders[oi].qty;
    }
    int64_t n = L->count;
    uint8_t sd = L->count ? L->side : 0;
    /* parked orders there, of the level's side (or of the first one's, on an empty level) */
    for (uint32_t oi = b->park_head; oi != NIL; oi = b->orders[oi].next) {
        uint32_t info = b->pinfo[oi];
        if ((info & ~PSELL) != (uint32_t)li || (sd && pinfo_side(info) != sd)) continue;
        sd = pinfo_side(info);
        if (k < cap) {
            if (ids) ids[k] = b->orders[oi].id;
            if (qtys) qtys[k] = b->orders[oi].qty;
            k++;
        }
        n++;
    }
    if (side && n) *side = sd;
    return n;
}

size_t lob_book_orders(const lob_book *b, uint8_t side, uint64_t *ids, int64_t *qtys, int64_t *prices,
                       size_t cap)
{
    if (side != LOB_BUY && side != LOB_SELL) return 0;
    size_t n = 0, w = 0; /* orders on the side, orders written */
    if (__builtin_expect(b->parked != 0, 0)) {
        uint32_t me = side == LOB_SELL ? PSELL : 0;
        for (lvl_walk lw = walk_first(b, side); lw.cur >= 0; walk_next(b, &lw)) {
            int64_t px = level_price(b, lw.cur);
            const level_t *L = &b->levels[lw.cur];
            uint32_t first = (lw.d == lw.cur) ? L->head : NIL;
            for (int pass = 0; pass < 2; pass++) /* the level's queue, then its parked orders */
                for (uint32_t oi = pass ? b->park_head : first; oi != NIL; oi = b->orders[oi].next) {
                    if (pass && b->pinfo[oi] != ((uint32_t)lw.cur | me)) continue;
                    if (w < cap) {
                        if (ids) ids[w] = b->orders[oi].id;
                        if (qtys) qtys[w] = b->orders[oi].qty;
                        if (prices) prices[w] = px;
                        w++;
                    }
                    n++;
                }
        }
        return n;
    }
    for (int64_t li = side == LOB_BUY ? b->best_bid : b->best_ask; li >= 0;
         li = side == LOB_BUY ? find_le(b, li - 1) : find_ge(b, li + 1)) {
        const level_t *L = &b->levels[li];
        int64_t px = level_price(b, li);
        for (uint32_t oi = L->head; oi != NIL && w < cap; oi = b->orders[oi].next, w++) {
            if (ids) ids[w] = b->orders[oi].id;
            if (qtys) qtys[w] = b->orders[oi].qty;
            if (prices) prices[w] = px;
        }
        n += L->count;
    }
    return n;
}

int lob_book_participant(const lob_book *b, uint64_t id, uint32_t *participant)
{
    uint32_t oi = index_find(b, id);
    if (oi == NIL) return 0;
    if (participant) *participant = b->owners_used ? b->owner[oi] : 0;
    return 1;
}

int lob_book_find(const lob_book *b, uint64_t id, uint8_t *side, int64_t *price, int64_t *qty)
{
    uint32_t oi = index_find(b, id);
    if (oi == NIL) return 0;
    const order_t *o = &b->orders[oi];
    if (side) *side = order_side(b, oi);
    if (price) *price = level_price(b, order_level(b, oi));
    if (qty) *qty = o->qty;
    return 1;
}

/* ---- validation ---------------------------------------------------------------- */

#define FAIL(...)                                       \
    do {                                                \
        if (msg && msglen) snprintf(msg, msglen, __VA_ARGS__); \
        return LOB_ECORRUPT;                            \
    } while (0)

/* ---- top of book (the bbo output) ------------------------------------------ */

static void read_bbo_parked(const lob_book *b, lob_bbo *o)
{
    uint32_t n = 0;
    if (!lob_book_best(b, LOB_BUY, &o->bid_price, &o->bid_qty, &n)) o->bid_price = o->bid_qty = 0;
    o->bid_count = n;
    n = 0;
    if (!lob_book_best(b, LOB_SELL, &o->ask_price, &o->ask_qty, &n)) o->ask_price = o->ask_qty = 0;
    o->ask_count = n;
}

static inline void read_bbo(const lob_book *b, lob_bbo *o)
{
    if (__builtin_expect(b->parked != 0, 0)) {
        /* through a copy: were o (the loop's local row) handed to the out-of-line call,
         * the compiler would keep that row in memory on the common path too, zeroed and
         * copied through the stack every event (callgrind: 7 instructions an event) */
        lob_bbo t = *o;
        read_bbo_parked(b, &t);
        *o = t;
        return;
    }
    if (b->best_bid >= 0) {
        const level_t *L = &b->levels[b->best_bid];
        o->bid_price = level_price(b, b->best_bid);
        o->bid_qty = L->total;
        o->bid_count = L->count;
    } else {
        o->bid_price = o->bid_qty = 0;
        o->bid_count = 0;
    }
    if (b->best_ask >= 0) {
        const level_t *L = &b->levels[b->best_ask];
        o->ask_price = level_price(b, b->best_ask);
        o->ask_qty = L->total;
        o->ask_count = L->count;
    } else {
        o->ask_price = o->ask_qty = 0;
        o->ask_count = 0;
    }
}

static inline int bbo_differs(const lob_bbo *a, const lob_bbo *b)
{
    return a->bid_price != b->bid_price || a->bid_qty != b->bid_qty || a->ask_price != b->ask_price ||
           a->ask_qty != b->ask_qty || a->bid_count != b->bid_count || a->ask_count != b->ask_count;
}

int lob_book_validate(const lob_book *b, char *msg, size_t msglen)
{
    uint64_t seen = 0;
    int64_t hi_bid = -1, lo_ask = -1;
    for (uint32_t li = 0; li < b->nlevels; li++) {
        const level_t *L = &b->levels[li];
        int bit = (int)((b->bits[li >> 6] >> (li & 63)) & 1);
        if (bit != (L->count > 0)) FAIL("level %u: bitmap says %d, count %u", li, bit, L->count);
        if (L->count == 0) {
            if (L->head != NIL || L->tail != NIL || L->total != 0)
                FAIL("level %u: empty but head/tail/total set", li);
            continue;
        }
        if (L->side != LOB_BUY && L->side != LOB_SELL) FAIL("level %u: bad side %u", li, L->side);
        if (L->side == LOB_BUY) {
            if (lo_ask >= 0) FAIL("level %u: bid above ask level %lld (crossed)", li, (long long)lo_ask);
            hi_bid = li;
        } else if (lo_ask < 0) {
            lo_ask = li;
        }
        uint32_t n = 0, prev = NIL;
        int64_t total = 0;
        for (uint32_t oi = L->head; oi != NIL; oi = b->orders[oi].next) {
            if (oi >= b->capacity) FAIL("level %u: link to order %u out of pool", li, oi);
            const order_t *o = &b->orders[oi];
            if (++n > L->count) FAIL("level %u: more orders linked than count %u (cycle?)", li, L->count);
            if (o->prev != prev) FAIL("order %u: prev link %u, expected %u", oi, o->prev, prev);
            if (o->level != li) FAIL("order %u: says level %u, linked at %u", oi, o->level, li);
            if (o->slot > b->slot_mask || b->slots[o->slot].order != oi)
                FAIL("order %u: its index slot %u does not point back to it", oi, o->slot);
            if (o->qty <= 0) FAIL("order %u: non-positive qty %lld", oi, (long long)o->qty);
            if (index_find(b, o->id) != oi) FAIL("order %u (id %llu): index does not lead to it", oi,
                                                 (unsigned long long)o->id);
            total += o->qty;
            prev = oi;
        }
        if (n != L->count) FAIL("level %u: %u orders linked, count %u", li, n, L->count);
        if (prev != L->tail) FAIL("level %u: tail %u, last linked %u", li, L->tail, prev);
        if (total != L->total) FAIL("level %u: total %lld, orders sum %lld", li, (long long)L->total,
                                    (long long)total);
        seen += n;
    }
    uint32_t np = 0, pprev = NIL;
    for (uint32_t oi = b->park_head; oi != NIL; oi = b->orders[oi].next) {
        if (oi >= b->capacity) FAIL("parked list links to order %u, out of pool", oi);
        const order_t *o = &b->orders[oi];
        if (++np > b->parked) FAIL("parked list longer than its count %u (cycle?)", b->parked);
        if (o->prev != pprev) FAIL("parked order %u: prev link %u, expected %u", oi, o->prev, pprev);
        if (o->level != PARKED) FAIL("order %u on the parked list says level %u", oi, o->level);
        if ((b->pinfo[oi] & ~PSELL) >= b->nlevels) FAIL("parked order %u: level %u out of band", oi,
                                                         b->pinfo[oi] & ~PSELL);
        if (o->slot > b->slot_mask || b->slots[o->slot].order != oi)
            FAIL("parked order %u: its index slot %u does not point back to it", oi, o->slot);
        if (o->qty <= 0) FAIL("parked order %u: non-positive qty %lld", oi, (long long)o->qty);
        if (index_find(b, o->id) != oi) FAIL("parked order %u (id %llu): index does not lead to it", oi,
                                             (unsigned long long)o->id);
        pprev = oi;
    }
    if (np != b->parked) FAIL("%u orders on the parked list, count %u", np, b->parked);
    if (pprev != b->park_tail) FAIL("parked list: tail %u, last linked %u", b->park_tail, pprev);
    if (np && !b->halted) FAIL("%u parked orders in a book that is not halted", np);
    if (b->slow != (b->halted || b->owners_used))
        FAIL("slow flag %d, halted %d, participants seen %d", b->slow, b->halted, b->owners_used);
    for (int k = 0; k < 2; k++) {
        if (!b->pb_ok[k]) continue;
        uint8_t side = k ? LOB_SELL : LOB_BUY;
        int64_t li = park_first(b, side), q;
        uint32_t n;
        park_at(b, side, li, &q, &n);
        if (n != b->pb_cnt[k] || (n && (li != b->pb_li[k] || q != b->pb_qty[k])))
            FAIL("parked best of side %d cached as level %lld (%lld shares, %u orders), is %lld (%lld, %u)", k,
                 (long long)b->pb_li[k], (long long)b->pb_qty[k], b->pb_cnt[k], (long long)li, (long long)q, n);
    }
    if (seen + np != b->live) FAIL("%llu orders on levels and %u parked, live count %u", (unsigned long long)seen,
                                   np, b->live);
    if (hi_bid != b->best_bid) FAIL("cached best bid %lld, actual %lld", (long long)b->best_bid, (long long)hi_bid);
    if (lo_ask != b->best_ask) FAIL("cached best ask %lld, actual %lld", (long long)b->best_ask, (long long)lo_ask);
    for (uint32_t w = 0; w < b->nwords; w++) {
        int bit = (int)((b->bits2[w >> 6] >> (w & 63)) & 1);
        if (bit != (b->bits[w] != 0)) FAIL("summary bit of word %u is %d, word is %s", w, bit,
                                           b->bits[w] ? "non-zero" : "zero");
    }
    uint64_t spare = (uint64_t)b->nwords2 * 64 - b->nwords; /* summary bits past the end stay 0 */
    if (spare && (b->bits2[b->nwords2 - 1] >> (64 - spare)) != 0) FAIL("summary bits set past the end");
    uint32_t nfree = 0, inuse = 0;
    for (uint32_t oi = b->free_head; oi != NIL; oi = b->orders[oi].next) {
        if (oi >= b->capacity) FAIL("free list links to %u, out of pool", oi);
        if (++nfree > b->capacity - b->live) FAIL("free list longer than %u (cycle?)", b->capacity - b->live);
        if (b->orders[oi].level != NIL) FAIL("order %u on the free list is on a level", oi);
    }
    if (nfree != b->capacity - b->live) FAIL("free list holds %u, expected %u", nfree, b->capacity - b->live);
    for (uint32_t oi = 0; oi < b->capacity; oi++) inuse += b->orders[oi].level != NIL;
    if (inuse != b->live) FAIL("%u orders in use, live count %u", inuse, b->live);
    uint64_t used = 0;
    for (uint64_t i = 0; i <= b->slot_mask; i++) {
        const slot_t *s = &b->slots[i];
        if (s->order == NIL) continue;
        used++;
        if (s->order >= b->capacity || b->orders[s->order].level == NIL || b->orders[s->order].slot != i)
            FAIL("index slot %llu points to order %u, which is not live there", (unsigned long long)i, s->order);
        uint64_t id = b->orders[s->order].id;
        if (s->tag != id_tag(id))
            FAIL("index slot %llu (id %llu) holds tag %u, hash says %u", (unsigned long long)i,
                 (unsigned long long)id, s->tag, id_tag(id));
        if (index_find(b, id) != s->order)
            FAIL("index slot %llu (id %llu) unreachable from its home slot", (unsigned long long)i,
                 (unsigned long long)id);
    }
    if (used != b->live) FAIL("index holds %llu ids, live count %u", (unsigned long long)used, b->live);
    if (!b->owners_used) /* set_owner writes an entry only once a participant has rested */
        for (uint32_t oi = 0; oi < b->capacity; oi++)
            if (b->owner[oi]) FAIL("order record %u has participant %u in a book that has seen none", oi, b->owner[oi]);
    if (b->epoch_now && b->top_epoch == *b->epoch_now) {
        lob_bbo t = {0};
        read_bbo(b, &t);
        if (bbo_differs(&t, &b->top))
            FAIL("the bbo output's copy of the top (bid %lld x %lld in %u, ask %lld x %lld in %u) is not the "
                 "book's (bid %lld x %lld in %u, ask %lld x %lld in %u)",
                 (long long)b->top.bid_price, (long long)b->top.bid_qty, b->top.bid_count,
                 (long long)b->top.ask_price, (long long)b->top.ask_qty, b->top.ask_count, (long long)t.bid_price,
                 (long long)t.bid_qty, t.bid_count, (long long)t.ask_price, (long long)t.ask_qty, t.ask_count);
    }
    if (msg && msglen) msg[0] = 0;
    return LOB_OK;
}

int lob_book_break(lob_book *b, int what)
{
    if (what == LOB_BREAK_BBO_TOP) { /* a copy that the next event would trust, one share off */
        if (!b->epoch_now) return LOB_EARG;
        lob_bbo t = {0};
        read_bbo(b, &t);
        t.bid_qty += 1;
        b->top = t;
        b->top_epoch = *b->epoch_now;
        return LOB_OK;
    }
    b->top_epoch = 0; /* whatever else it breaks, the bbo output reads the top afresh */
    if (what == LOB_BREAK_PARK_LINK) {
        if (b->park_head == NIL) return LOB_EARG;
        b->orders[b->park_head].prev = b->park_head;
        return LOB_OK;
    }
    int64_t li = b->best_bid >= 0 ? b->best_bid : b->best_ask;
    if (li < 0) return LOB_EARG;
    level_t *L = &b->levels[li];
    order_t *o = &b->orders[L->head];
    switch (what) {
    case LOB_BREAK_LEVEL_TOTAL: L->total += 1; break;
    case LOB_BREAK_LEVEL_COUNT: L->count += 1; break;
    case LOB_BREAK_PREV_LINK: o->prev = L->head; break;
    case LOB_BREAK_LEVEL_BIT: b->bits[li >> 6] &= ~(1ULL << (li & 63)); break;
    case LOB_BREAK_SUMMARY_BIT: b->bits2[(li >> 6) >> 6] &= ~(1ULL << ((li >> 6) & 63)); break;
    case LOB_BREAK_BEST_BID: b->best_bid = b->best_bid >= 0 ? -1 : (int64_t)b->nlevels - 1; break;
    case LOB_BREAK_INDEX_TAG: b->slots[o->slot].tag ^= 1u; break;
    case LOB_BREAK_ORDER_QTY: o->qty = 0; break;
    case LOB_BREAK_LIVE_COUNT: b->live += 1; break;
    case LOB_BREAK_FREE_LIST:
        if (b->free_head == NIL) return LOB_EARG;
        b->orders[b->free_head].next = b->free_head; /* a cycle */
        break;
    case LOB_BREAK_PARTICIPANT:
        if (b->owners_used) return LOB_EARG;
        b->owner[L->head] = 7;
        break;
    default: return LOB_EARG;
    }
    return LOB_OK;
}

/* ---- sessions -------------------------------------------------------------- */

/* What check_event learns about an event that passes. */
typedef struct plan {
    uint8_t side;      /* NEW/REPLACE: side of the incoming order */
    uint8_t ext;       /* NEW/REPLACE: order flags, a participant, or a book that is halted
                          (park_incoming) or has seen participants (whose every resting order
                          needs its entry in b->owner): off the plain path */
    int64_t lim;       /* NEW/REPLACE: limit level (MARKET: the far end of the band) */
    uint32_t old;      /* CANCEL/REDUCE/REPLACE: order index of id */
    uint32_t tag;      /* NEW: hash tag of id */
    uint32_t slot;     /* NEW: the empty slot where id would be indexed */
} plan_t;

/* Where one batch writes executions and desyncs. Kept in locals of the batch
 * loop (not in lob_outputs, whose counters the compiler would have to reload
 * after every store to an execution, as they may alias). */
typedef struct sink {
    lob_exec *execs;
    lob_desync *desyncs;
    size_t n_exec, exec_cap, n_desync, desync_cap;
} sink_t;

/* What lob_session_apply hands to apply_ext and gets back: kept in the session, so
 * that the batch loop's own plan, sink and result never have their address taken
 * (which makes the compiler keep them in memory on the plain path as well). */
typedef struct ext_io {
    plan_t plan;
    sink_t sink;
    lob_result r;
} ext_io_t;

struct lob_session {
    uint32_t max_instrument;
    uint32_t timing;     /* 0 off; N: every Nth event timed (lob_session_set_timing) */
    uint32_t timing_left; /* events to go before the next timed one (0: the next is timed) */
    int clock;           /* LOB_CLOCK_*: what timing reads (chosen when timing is turned on) */
    uint64_t tsc_mult;   /* LOB_CLOCK_TSC: ns = ticks * tsc_mult >> 32 */
    int prefetch;        /* -1: decide from book_bytes; 0 off; 1 on */
    uint64_t book_bytes; /* memory of all books */
    lob_book **books;
    arena books_arena;   /* where its books live */
    uint64_t *hist; /* HIST_KINDS x LOB_HIST_BUCKETS */
    ext_io_t ext;
    uint64_t bbo_epoch;  /* from 1; one more at every call without bbo rows (lob_book.top_epoch) */
};

lob_session *lob_session_new(uint32_t max_instrument, int *status)
{
    if (max_instrument > (1u << 24)) {
        if (status) *status = LOB_EARG;
        return NULL;
    }
    lob_session *s = lob_calloc(1, sizeof *s);
    if (s) {
        s->max_instrument = max_instrument;
        s->prefetch = -1;
        s->bbo_epoch = 1;
        s->books = lob_calloc((size_t)max_instrument + 1, sizeof *s->books);
        s->hist = lob_calloc((size_t)HIST_KINDS * LOB_HIST_BUCKETS, sizeof *s->hist);
    }
    if (!s || !s->books || !s->hist) {
        lob_session_free(s);
        if (status) *status = LOB_ENOMEM;
        return NULL;
    }
    /* Touch the histograms now so that timing never takes a page fault later. */
    memset(s->hist, 0, (size_t)HIST_KINDS * LOB_HIST_BUCKETS * sizeof *s->hist);
    if (status) *status = LOB_OK;
    return s;
}

void lob_session_free(lob_session *s)
{
    if (!s) return;
    if (s->books)
        for (uint64_t i = 0; i <= s->max_instrument; i++) lob_book_free(s->books[i]);
    arena_free(&s->books_arena);
    lob_free(s->books, (size_t)s->max_instrument + 1, sizeof *s->books);
    lob_free(s->hist, (size_t)HIST_KINDS * LOB_HIST_BUCKETS, sizeof *s->hist);
    lob_free(s, 1, sizeof *s);
}

int lob_session_add_book(lob_session *s, uint32_t instrument, int64_t band_low, int64_t band_high,
                         int64_t tick, uint32_t capacity)
{
    if (!s || instrument > s->max_instrument || s->books[instrument]) return LOB_EARG;
    int st;
    lob_book *b = book_new(&s->books_arena, band_low, band_high, tick, capacity, &st);
    s->books[instrument] = b;
    if (b) b->epoch_now = &s->bbo_epoch;
    if (b)
        s->book_bytes += (uint64_t)b->nlevels * sizeof(level_t) + (uint64_t)b->capacity * sizeof(order_t) +
                         (b->slot_mask + 1) * sizeof(slot_t) + (uint64_t)(b->nwords + b->nwords2) * 8 +
                         (uint64_t)b->capacity * sizeof *b->pinfo;
    return st;
}

/* The n best levels of both sides of a book (NULL: none) into row r of three
 * arrays of 2n values per row, bids then asks, zeros past a side's last level. */
static void depth_fill(const lob_book *b, uint32_t n, size_t r, int64_t *prices, int64_t *qtys, uint32_t *counts)
{
    for (int side = 0; side < 2; side++) {
        size_t base = (r * 2 + (size_t)side) * n;
        uint32_t got = b ? lob_book_depth(b, side ? LOB_SELL : LOB_BUY, n, prices + base, qtys + base,
                                          counts + base) : 0;
        for (uint32_t i = got; i < n; i++) {
            prices[base + i] = qtys[base + i] = 0;
            counts[base + i] = 0;
        }
    }
}

void lob_session_depth(const lob_session *s, const uint32_t *instruments, size_t k, uint32_t n, int64_t *prices,
                       int64_t *qtys, uint32_t *counts)
{
    for (size_t j = 0; j < k; j++)
        depth_fill(instruments[j] <= s->max_instrument ? s->books[instruments[j]] : NULL, n, j, prices, qtys,
                   counts);
}

lob_book *lob_session_book(lob_session *s, uint32_t instrument)
{
    return (s && instrument <= s->max_instrument) ? s->books[instrument] : NULL;
}

/* ---- clock and histograms ------------------------------------------------ */

int64_t lob_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The invariant time-stamp counter (CPUID 0x80000007 EDX bit 8: constant rate,
 * running in every power state), where there is one. */
static int tsc_invariant(void)
{
#if LOB_HAVE_TSC
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
#else
    return 0;
#endif
}

static inline uint64_t clock_ticks(int clock)
{
#if LOB_HAVE_TSC
    if (clock == LOB_CLOCK_TSC) return __rdtsc();
#endif
    (void)clock;
    return (uint64_t)lob_clock_ns();
}

static inline uint64_t ticks_to_ns(const lob_session *s, uint64_t ticks)
{
    if (s->clock != LOB_CLOCK_TSC) return ticks;
    return (uint64_t)(((unsigned __int128)ticks * s->tsc_mult) >> 32);
}

/* The TSC's ns per tick (32.32 fixed point) over a 2 ms spin against CLOCK_MONOTONIC,
 * measured once per process (the TSC is invariant: every session gets the same). */
static _Atomic uint64_t tsc_mult_cached;

/* A TSC reading *c and the CLOCK_MONOTONIC time *t it was taken at: the reading between two
 * clock readings, *t their middle, the tightest of up to 16 tries. A thread preempted between
 * a clock reading and the TSC reading (a VM's vCPU stolen for 14 us) skewed the 2 ms
 * calibration by 0.7 % for the whole process; bracketed, the skew is at most half the
 * bracket (under 1 us: 0.05 %). */
static void tsc_at(int64_t *t, uint64_t *c)
{
    int64_t best = INT64_MAX;
    for (int k = 0; k < 16 && best >= 1000; k++) {
        int64_t a = lob_clock_ns();
        uint64_t x = clock_ticks(LOB_CLOCK_TSC);
        int64_t b = lob_clock_ns();
        if (b - a < best) {
            best = b - a;
            *t = a + (b - a) / 2;
            *c = x;
        }
    }
}

static uint64_t tsc_calibrate(void)
{
    uint64_t have = atomic_load_explicit(&tsc_mult_cached, memory_order_relaxed);
    if (have) return have;
    int64_t t0 = 0, t1 = 0;
    uint64_t c0 = 0, c1 = 0;
    tsc_at(&t0, &c0);
    while (lob_clock_ns() - t0 < 2000000) {
    }
    tsc_at(&t1, &c1);
    if (c1 <= c0 || t1 <= t0) return 0;
    uint64_t mult = (uint64_t)((((unsigned __int128)(uint64_t)(t1 - t0)) << 32) / (c1 - c0));
    atomic_store_explicit(&tsc_mult_cached, mult, memory_order_relaxed);
    return mult;
}

static void probe(const lob_session *s, int clock, uint32_t iterations, double *cost_ns, int64_t *min_step_ns)
{
    if (iterations == 0) iterations = 1;
    int64_t t0 = lob_clock_ns();
    uint64_t min_step = UINT64_MAX, prev = clock_ticks(clock);
    for (uint32_t i = 0; i < iterations; i++) {
        uint64_t t = clock_ticks(clock);
        if (t > prev && t - prev < min_step) min_step = t - prev;
        prev = t;
    }
    if (cost_ns) *cost_ns = (double)(lob_clock_ns() - t0) / iterations;
    if (min_step_ns) {
        if (min_step == UINT64_MAX) *min_step_ns = 0;
        else if (clock == LOB_CLOCK_TSC) /* rounded up: a step of a few ticks is under 1 ns */
            *min_step_ns = (int64_t)((((unsigned __int128)min_step * s->tsc_mult) + 0xFFFFFFFFu) >> 32);
        else *min_step_ns = (int64_t)min_step;
    }
}

void lob_clock_probe(uint32_t iterations, double *cost_ns, int64_t *min_step_ns, int64_t *os_resolution_ns)
{
    probe(NULL, LOB_CLOCK_MONOTONIC, iterations, cost_ns, min_step_ns);
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    if (os_resolution_ns) *os_resolution_ns = (int64_t)res.tv_sec * 1000000000 + res.tv_nsec;
}

uint64_t lob_session_clock_ticks(const lob_session *s) { return s ? clock_ticks(s->clock) : 0; }

int lob_session_clock(const lob_session *s, uint32_t iterations, double *cost_ns, int64_t *min_step_ns,
                      double *ns_per_tick)
{
    if (!s) return -LOB_EARG;
    if (iterations) probe(s, s->clock, iterations, cost_ns, min_step_ns);
    if (ns_per_tick) *ns_per_tick = s->clock == LOB_CLOCK_TSC ? (double)s->tsc_mult / 4294967296.0 : 1.0;
    return s->clock;
}

enum { SUB = 1 << LOB_HIST_SUB_BITS, HALF = SUB / 2 };

uint32_t lob_hist_index(uint64_t v)
{
    if (v < SUB) return (uint32_t)v;
    if (v >> LOB_HIST_MAX_BITS) v = (1ULL << LOB_HIST_MAX_BITS) - 1;
    int msb = 63 - __builtin_clzll(v);
    int e = msb - (LOB_HIST_SUB_BITS - 1); /* >= 1 */
    return (uint32_t)(SUB + (uint64_t)(e - 1) * HALF + ((v >> e) - HALF));
}

uint64_t lob_hist_lowest(uint32_t idx)
{
    if (idx < SUB) return idx;
    uint32_t k = idx - SUB;
    uint32_t e = k / HALF + 1;
    return (uint64_t)(HALF + k % HALF) << e;
}

void lob_hist_lows(uint64_t *lows)
{
    for (uint32_t i = 0; i < LOB_HIST_BUCKETS; i++) lows[i] = lob_hist_lowest(i);
}

int lob_session_set_timing(lob_session *s, int every)
{
    if (every < 0) return LOB_EARG;
    int on = every != 0;
    if (on) /* per-book histograms, allocated here and never during apply */
        for (uint64_t i = 0; i <= s->max_instrument; i++) {
            lob_book *b = s->books[i];
            if (b && !b->hist) {
                b->hist = lob_calloc((size_t)HIST_KINDS * BOOK_HIST, sizeof *b->hist);
                if (!b->hist) return LOB_ENOMEM;
            }
        }
    if (on && !s->timing) {
        uint64_t mult = tsc_invariant() ? tsc_calibrate() : 0;
        s->clock = mult ? LOB_CLOCK_TSC : LOB_CLOCK_MONOTONIC;
        s->tsc_mult = mult;
    }
    s->timing = (uint32_t)every;
    s->timing_left = 0;
    return LOB_OK;
}

/* Coarse buckets: exact below 4 ns, then 4 per power of two (25 % wide). */
uint32_t lob_book_hist_index(uint64_t v)
{
    if (v < 4) return (uint32_t)v;
    if (v >> LOB_HIST_MAX_BITS) v = (1ULL << LOB_HIST_MAX_BITS) - 1;
    int msb = 63 - __builtin_clzll(v);
    return (uint32_t)(4 + (msb - 2) * 4 + ((v >> (msb - 2)) & 3));
}

uint64_t lob_book_hist_lowest(uint32_t idx)
{
    if (idx < 4) return idx;
    uint32_t msb = (idx - 4) / 4 + 2;
    return (uint64_t)(4 + (idx - 4) % 4) << (msb - 2);
}

int lob_session_book_histogram(const lob_session *s, uint32_t instrument, int kind, uint32_t *counts)
{
    if (!s || !counts || instrument > s->max_instrument || kind < 0 || kind >= HIST_KINDS) return LOB_EARG;
    const lob_book *b = s->books[instrument];
    if (!b) return LOB_EINSTRUMENT;
    if (b->hist) memcpy(counts, b->hist + (size_t)kind * BOOK_HIST, BOOK_HIST * sizeof *counts);
    else memset(counts, 0, BOOK_HIST * sizeof *counts);
    return LOB_OK;
}

int lob_session_book_histograms(const lob_session *s, const uint32_t *instruments, size_t n, uint32_t *counts)
{
    if (!s || (n && (!instruments || !counts))) return LOB_EARG;
    const size_t per_book = (size_t)HIST_KINDS * BOOK_HIST;
    for (size_t j = 0; j < n; j++) {
        const lob_book *b = instruments[j] <= s->max_instrument ? s->books[instruments[j]] : NULL;
        if (!b) return LOB_EINSTRUMENT;
        if (b->hist) memcpy(counts + j * per_book, b->hist, per_book * sizeof *counts);
        else memset(counts + j * per_book, 0, per_book * sizeof *counts);
    }
    return LOB_OK;
}

void lob_session_set_prefetch(lob_session *s, int mode) { s->prefetch = mode < 0 ? -1 : mode != 0; }

uint64_t lob_session_book_bytes(const lob_session *s) { return s->book_bytes; }

int lob_session_histogram(const lob_session *s, int kind, uint64_t *counts)
{
    if (!s || !counts || kind < 0 || kind >= HIST_KINDS) return LOB_EARG;
    memcpy(counts, s->hist + (size_t)kind * LOB_HIST_BUCKETS, LOB_HIST_BUCKETS * sizeof *counts);
    return LOB_OK;
}

void lob_session_reset_histograms(lob_session *s)
{
    memset(s->hist, 0, (size_t)HIST_KINDS * LOB_HIST_BUCKETS * sizeof *s->hist);
    for (uint64_t i = 0; i <= s->max_instrument; i++)
        if (s->books[i] && s->books[i]->hist)
            memset(s->books[i]->hist, 0, (size_t)HIST_KINDS * BOOK_HIST * sizeof *s->books[i]->hist);
}

/* ---- the batch loop ---------------------------------------------------------- */

#define KNOWN_FLAGS (LOB_F_FEED | LOB_F_PRICE | LOB_F_NOCHECK | LOB_F_NOTIONAL | LOB_F_STP_CANCEL_BOTH)
#define ORDER_FLAGS (LOB_F_NOTIONAL | LOB_F_STP_CANCEL_BOTH)

/* The order flags are checked strictly (lob.h): STP on a NEW or REPLACE without
 * FEED, NOTIONAL on a MARKET NEW. */
__attribute__((noinline)) static int order_flags_ok(const lob_event *e)
{
    if (e->kind != LOB_NEW && e->kind != LOB_REPLACE) return 0;
    if ((e->flags & LOB_F_STP_CANCEL_BOTH) && (e->flags & LOB_F_FEED)) return 0;
    if (e->flags & LOB_F_NOTIONAL) return e->kind == LOB_NEW && e->tif == LOB_MARKET;
    return 1;
}

/* Checks an event against its book before anything changes (the order of the
 * checks is part of the contract: see docs/core.md). Returns a status. */
static inline __attribute__((always_inline)) int check_event(const lob_book *b, const lob_event *e, plan_t *p)
{
    int found;
    if (e->flags & ~(LOB_F_FEED | LOB_F_PRICE | LOB_F_NOCHECK)) { /* reserved bits, or order flags */
        if ((e->flags & ~KNOWN_FLAGS) || !order_flags_ok(e)) return LOB_EKIND;
        p->ext = 1;
    }
    switch (e->kind) {
    case LOB_NEW:
        if ((e->side != LOB_BUY && e->side != LOB_SELL) || e->tif > LOB_MARKET) return LOB_EKIND;
        if ((e->flags & LOB_F_FEED) && e->tif != LOB_GTC) return LOB_EKIND; /* a feed order rests */
        if (__builtin_expect(e->new_id | (uint64_t)b->slow, 0)) { /* a participant, or a book that is
                                                                      halted or has seen participants */
            if (e->new_id > UINT32_MAX) return LOB_EKIND; /* the participant */
            p->ext = 1;
        }
        if (e->qty <= 0) return LOB_EQTY;
        p->side = e->side;
        if (e->tif == LOB_MARKET) {
            p->lim = e->side == LOB_BUY ? (int64_t)b->nlevels - 1 : 0;
        } else {
            p->lim = price_level(b, e->price);
            if (p->lim < 0) return (int)-p->lim;
        }
        p->tag = id_tag(e->id);
        p->slot = index_probe(b, e->id, p->tag, &found);
        return found ? LOB_EDUP_ID : LOB_OK;
    case LOB_CANCEL:
        p->old = index_find(b, e->id);
        return p->old == NIL ? LOB_EUNKNOWN_ID : LOB_OK;
    case LOB_REDUCE:
        if (e->qty <= 0) return LOB_EQTY;
        p->old = index_find(b, e->id);
        if (p->old == NIL) return LOB_EUNKNOWN_ID;
        return e->qty > b->orders[p->old].qty && !(e->flags & LOB_F_FEED) ? LOB_EQTY : LOB_OK;
    case LOB_EXEC:
        if (e->qty <= 0) return LOB_EQTY;
        p->old = index_find(b, e->id);
        if (p->old == NIL) return LOB_EUNKNOWN_ID;
        p->side = order_side(b, p->old);
        return LOB_OK;
    case LOB_REPLACE:
        if (e->qty <= 0) return LOB_EQTY;
        p->lim = price_level(b, e->price);
        if (p->lim < 0) return (int)-p->lim;
        p->old = index_find(b, e->id);
        if (p->old == NIL) return LOB_EUNKNOWN_ID;
        if (e->new_id != e->id && index_find(b, e->new_id) != NIL) return LOB_EDUP_ID;
        p->side = order_side(b, p->old);
        if (b->slow) p->ext = 1;
        return LOB_OK;
    case LOB_STATE:
        return e->qty == 0 || e->qty == 1 ? LOB_OK : LOB_EQTY;
    default:
        return LOB_EKIND;
    }
}

/* The session's books as the event loop reads them: copied to locals once per call
 * (the calls in the loop could change *s for all the compiler knows). */
typedef struct books {
    lob_book *const *at;
    uint32_t max;
} books_t;

static inline lob_book *event_book(books_t bk, const lob_event *e)
{
    return e->instrument <= bk.max ? bk.at[e->instrument] : NULL;
}

/* Does an order on `side` limited at level lim meet the opposite best? */
static inline int crosses(const lob_book *b, uint8_t side, int64_t lim)
{
    return side == LOB_BUY ? (b->best_ask >= 0 && b->best_ask <= lim) : (b->best_bid >= 0 && b->best_bid >= lim);
}

static inline void add_desync(sink_t *out, uint32_t cause, uint64_t order_id, uint64_t found_id,
                              int64_t exp_qty, int64_t found_qty, int64_t exp_price, int64_t found_price,
                              size_t i, uint32_t instrument)
{
    lob_desync *d = &out->desyncs[out->n_desync++];
    d->order_id = order_id;
    d->found_id = found_id;
    d->expected_qty = exp_qty;
    d->found_qty = found_qty;
    d->expected_price = exp_price;
    d->found_price = found_price;
    d->event_index = (uint32_t)i;
    d->instrument = instrument;
    d->cause = cause;
    d->reserved = 0;
}

/* A feed order (a LOB_F_FEED NEW/REPLACE, or a parked order resting at the end of a halt)
 * that rests on `side` at level lim, with id incoming, qty shares at price: remove the
 * opposite orders it meets (stale, since the feed says it rests), one desync each. */
static inline __attribute__((always_inline)) void clear_crossing(lob_book *b, uint8_t side, int64_t lim, int64_t qty,
                                                                 int64_t price, uint64_t incoming, sink_t *out,
                                                                 size_t i, uint32_t instrument)
{
    for (;;) {
        int64_t li = side == LOB_BUY ? b->best_ask : b->best_bid;
        if (li < 0 || (side == LOB_BUY ? li > lim : li < lim)) break;
        uint32_t oi = b->levels[li].head;
        const order_t *o = &b->orders[oi];
        add_desync(out, LOB_D_CROSSED, o->id, incoming, qty, o->qty, price, level_price(b, li), i, instrument);
        order_remove(b, oi);
    }
}

/* LOB_EXEC: check the feed's fill against price-time priority, record the fill
 * priority expected, then apply the feed's (see lob.h). */
static inline __attribute__((always_inline)) void apply_exec(lob_book *b, const lob_event *e, const plan_t *p,
                                                             sink_t *out, size_t i, lob_result *r)
{
    order_t *o = &b->orders[p->old];
    int parked = o->level == PARKED; /* no priority among parked orders to check */
    int64_t px = level_price(b, order_level(b, p->old));
    if (!(e->flags & LOB_F_NOCHECK) && !parked) {
        int64_t li = p->side == LOB_BUY ? b->best_bid : b->best_ask; /* the order's side is not empty */
        const order_t *front = &b->orders[b->levels[li].head];
        lob_exec *x = &out->execs[out->n_exec++];
        x->maker_id = front->id;
        x->taker_id = 0;
        x->price = level_price(b, li);
        x->qty = front->qty < e->qty ? front->qty : e->qty;
        x->maker_remaining = front->qty - x->qty;
        x->event_index = (uint32_t)i;
        x->instrument = e->instrument;
        r->n_exec = 1;
        if (front != o)
            add_desync(out, LOB_D_FILL_ORDER, o->id, front->id, e->qty, o->qty, px, x->price, i, e->instrument);
    }
    if ((e->flags & (LOB_F_PRICE | LOB_F_NOCHECK)) == LOB_F_PRICE && e->price != px)
        add_desync(out, LOB_D_EXEC_PRICE, o->id, 0, e->qty, o->qty, e->price, px, i, e->instrument);
    if (e->qty >= o->qty) {
        if (e->qty > o->qty)
            add_desync(out, LOB_D_QTY, o->id, 0, e->qty, o->qty, e->price, px, i, e->instrument);
        r->filled = o->qty;
        order_remove(b, p->old);
    } else {
        r->filled = e->qty;
        o->qty -= e->qty;
        if (!parked) b->levels[o->level].total -= e->qty;
        else pb_shrink(b, (b->pinfo[p->old] & PSELL) != 0, b->pinfo[p->old] & ~PSELL, e->qty, 0);
        r->resting = o->qty;
    }
}

/* A NEW or REPLACE on a halted book: it rests whole on the parked list (lob.h). Its plan
 * comes and its result goes through io (as for apply_ext), so that the batch loop never
 * takes the address of its own: a loop whose plan and result have their address taken keeps
 * them in memory on every path (callgrind: 5 instructions an event more on the 5M days). */
__attribute__((noinline)) static void park_incoming(lob_book *b, const lob_event *e, ext_io_t *io)
{
    plan_t *p = &io->plan;
    lob_result *r = &io->r;
    *r = (lob_result){0, 0, 0, LOB_OK};
    uint64_t id = e->id;
    uint32_t part;
    if (e->kind == LOB_NEW) {
        if (e->tif != LOB_GTC) return; /* nothing matches while halted: cancelled, nothing filled */
        if (b->live == b->capacity) {
            r->status = LOB_EFULL;
            return;
        }
        part = (uint32_t)e->new_id;
    } else {
        part = b->owners_used ? b->owner[p->old] : 0;
        order_remove(b, p->old);
        id = e->new_id;
        int found;
        p->tag = id_tag(id);
        p->slot = index_probe(b, id, p->tag, &found);
    }
    set_owner(b, order_park(b, id, p->side, (uint32_t)p->lim, e->qty, p->tag, p->slot), part);
    r->resting = e->qty;
}

/* LOB_STATE 0 on a halted book: the parked orders rest in arrival order, each as a feed
 * order (any opposite order it meets is removed, a LOB_D_CROSSED desync each). */
static void unpark(lob_book *b, sink_t *out, size_t i, uint32_t instrument)
{
    while (b->park_head != NIL) {
        uint32_t oi = b->park_head, info = b->pinfo[oi];
        uint8_t side = pinfo_side(info);
        int64_t lim = info & ~PSELL;
        park_unlink(b, oi);
        clear_crossing(b, side, lim, b->orders[oi].qty, level_price(b, lim), b->orders[oi].id, out, i, instrument);
        level_append(b, oi, side, (uint32_t)lim);
    }
    for (int k = 0; k < 2; k++) { /* none parked now */
        b->pb_ok[k] = 1;
        b->pb_cnt[k] = 0;
    }
}

/* LOB_STATE (checked): halt, or resume and unpark. The sink comes and goes through io, as
 * for apply_ext. Returns LOB_EEXECFULL (nothing changed) when the desyncs a resume could
 * write do not fit, else LOB_OK with the result in io->r. */
__attribute__((noinline)) static int apply_state(lob_book *b, const lob_event *e, ext_io_t *io, size_t i)
{
    sink_t *sk = &io->sink;
    io->r = (lob_result){0, 0, 0, LOB_OK};
    if (e->qty) {
        b->halted = b->slow = 1;
    } else if (b->halted) {
        if (b->parked && sk->desync_cap - sk->n_desync < b->live) return LOB_EEXECFULL;
        b->halted = 0;
        b->slow = b->owners_used;
        unpark(b, sk, i, e->instrument);
    }
    io->r.resting = b->parked;
    return LOB_OK;
}

/* ---- STP and notional orders ---------------------------------------------------- */

/* What a walk of an STP or notional order did (or, dry, would do). */
typedef struct walk {
    int64_t filled;    /* shares traded */
    size_t records;    /* executions and STP records */
    int stopped;       /* cancel-incoming STP stopped it */
} walk_t;

static inline void put_record(sink_t *out, uint64_t maker, uint64_t taker, int64_t px, int64_t qty,
                              int64_t maker_remaining, size_t i, uint32_t instrument)
{
    lob_exec *x = &out->execs[out->n_exec++];
    x->maker_id = maker;
    x->taker_id = taker;
    x->price = px;
    x->qty = qty;
    x->maker_remaining = maker_remaining;
    x->event_index = (uint32_t)i;
    x->instrument = instrument;
}

/* Match an incoming order with self-trade prevention (stp: its LOB_F_STP_* bits,
 * participant part != 0) and/or a notional budget (qty is then the budget), up
 * to level lim; see lob.h. With dry set it changes nothing and writes nothing:
 * it says what the real walk will do, which decides FOK, EFULL and room first.
 * Orders are visited in priority order; a dry walk follows the links past the
 * orders a real one would remove, so both see the same sequence. */
static walk_t walk_ext(lob_book *b, uint8_t side, int64_t lim, uint64_t taker, int64_t qty, int notional,
                       uint32_t part, int stp, int dry, sink_t *out, size_t i, uint32_t instrument)
{
    walk_t w = {0, 0, 0};
    int64_t left = qty; /* shares, or budget (notional) */
    int64_t li = side == LOB_BUY ? b->best_ask : b->best_bid;
    while (li >= 0 && (side == LOB_BUY ? li <= lim : li >= lim)) {
        int64_t px = level_price(b, li);
        level_t *L = &b->levels[li];
        for (uint32_t oi = L->head, nx; oi != NIL; oi = nx) {
            order_t *o = &b->orders[oi];
            nx = o->next;
            int64_t want = left; /* shares it can take here: a budget buys floor(left / px) */
            if (notional) /* whole orders by a multiply; the one division only for the last */
                want = px <= 0 ? 0 : (__int128)o->qty * px <= left ? o->qty : left / px;
            if (want <= 0) return w;
            if (stp && b->owner[oi] == part) {
                uint64_t mid = o->id;
                int64_t mq = o->qty;
                if (stp & LOB_F_STP_CANCEL_RESTING) {
                    if (!dry) {
                        put_record(out, mid, taker, px, -mq, 0, i, instrument);
                        order_remove(b, oi);
                    }
                    w.records++;
                }
                if (stp & LOB_F_STP_CANCEL_INCOMING) {
                    if (!dry) put_record(out, mid, taker, px, 0, (stp & LOB_F_STP_CANCEL_RESTING) ? 0 : mq, i,
                                         instrument);
                    w.records++;
                    w.stopped = 1;
                    return w;
                }
                continue;
            }
            int64_t q = o->qty < want ? o->qty : want;
            int partial = q < o->qty; /* what is left cannot take another share of it: stop here */
            if (!dry) {
                put_record(out, o->id, taker, px, q, o->qty - q, i, instrument);
                if (q == o->qty) {
                    order_remove(b, oi);
                } else {
                    o->qty -= q;
                    L->total -= q;
                }
            }
            w.records++;
            w.filled += q;
            left -= notional ? q * px : q; /* q * px <= left: no overflow */
            if (partial) return w; /* a notional sell must not go on to a cheaper bid behind it */
        }
        li = side == LOB_BUY ? find_ge(b, li + 1) : find_le(b, li - 1);
    }
    return w;
}

/* A NEW or REPLACE that has order flags or a participant, or meets a book that has
 * seen participants (plan.ext): the rules of the plain path in lob_session_apply,
 * plus participants, STP and notional budgets, decided with a dry walk. A reject
 * goes to the result's status. FEED orders (no order flags) are done as on the
 * plain path, only keeping their participant. */
__attribute__((noinline)) /* off the plain path: keeps the batch loop as it was */
static int apply_ext(lob_book *b, const lob_event *e, ext_io_t *io, size_t i)
{
    plan_t p = io->plan;
    sink_t sk = io->sink;
    lob_result *r = &io->r;
    *r = (lob_result){0, 0, 0, LOB_OK};
    /* NEW: the participant is new_id (checked); REPLACE keeps the old order's */
    uint32_t part = e->kind == LOB_NEW ? (uint32_t)e->new_id : (b->owners_used ? b->owner[p.old] : 0);
    int feed = (e->flags & LOB_F_FEED) != 0;
    int notional = (e->flags & LOB_F_NOTIONAL) != 0;
    int stp = part ? (e->flags & LOB_F_STP_CANCEL_BOTH) : 0;
    int replace = e->kind == LOB_REPLACE;
    int fok = !replace && e->tif == LOB_FOK;
    int rests = replace || e->tif == LOB_GTC;
    int full = !replace && e->tif == LOB_GTC && b->live == b->capacity;
    int trades = crosses(b, p.side, p.lim);
    size_t room = sk.exec_cap - sk.n_exec;
    if (trades && feed) { /* it meets stale orders: one desync each */
        int64_t avail;
        uint64_t touched;
        crossing(b, p.side, p.lim, INT64_MAX, &avail, &touched);
        if (touched > sk.desync_cap - sk.n_desync) return LOB_EEXECFULL;
    } else if (trades && (fok || full || room < (size_t)b->live + 1)) {
        walk_t d = walk_ext(b, p.side, p.lim, 0, e->qty, notional, part, stp, 1, &sk, i, e->instrument);
        if (d.records > room) return LOB_EEXECFULL;
        if (fok && d.filled < e->qty) return LOB_OK; /* killed: nothing changes */
        if (full && !d.stopped && d.filled < e->qty) {
            r->status = LOB_EFULL;
            return LOB_OK;
        }
    }
    if (!trades && full) {
        r->status = LOB_EFULL;
        return LOB_OK;
    }
    if (!trades && fok) return LOB_OK;
    uint64_t taker = e->id;
    if (replace) {
        order_remove(b, p.old);
        taker = e->new_id;
    }
    walk_t w = {0, 0, 0};
    if (trades && feed) {
        clear_crossing(b, p.side, p.lim, e->qty, e->price, taker, &sk, i, e->instrument);
    } else if (trades) {
        size_t n0 = sk.n_exec;
        w = walk_ext(b, p.side, p.lim, taker, e->qty, notional, part, stp, 0, &sk, i, e->instrument);
        r->n_exec = (uint32_t)(sk.n_exec - n0);
        r->filled = w.filled;
    }
    io->sink = sk;
    int64_t left = notional ? 0 : e->qty - w.filled;
    if (left > 0 && rests && !w.stopped) {
        int found;
        p.tag = id_tag(taker);
        p.slot = index_probe(b, taker, p.tag, &found);
        set_owner(b, order_rest(b, taker, p.side, (uint32_t)p.lim, left, p.tag, p.slot), part);
        r->resting = left;
    }
    return LOB_OK;
}

/* Prefetching. With many books (an ITCH day has thousands) most of an event's
 * time is spent waiting for memory: its index slot, then its order, then the
 * order's neighbours and level, each known only once the one before has
 * arrived. The batch says what comes next, so the loop asks for those of
 * later events in three stages: the slot of the event PF_SLOT ahead, the order
 * (or, for a NEW, the level) of the one PF_ORDER ahead, whose slot should have
 * arrived, and the neighbours (or the level's tail) of the one PF_LINKS ahead.
 * Hints only: the book may change in between, which costs nothing but a
 * useless fetch. Measured in benchmarks/RESULTS.md (ITCH replay). */
enum { PF_SLOT = 12, PF_ORDER = 6, PF_LINKS = 3 };
#define PF_AUTO_BYTES (16u << 20) /* about half of this machine's L3 */

static inline __attribute__((always_inline)) void prefetch_slot(books_t bk, const lob_event *e)
{
    const lob_book *b = event_book(bk, e);
    if (!b) return;
    prefetch(&b->slots[tag_home(b, id_tag(e->id))]);
    /* A REPLACE probes its new id's slot too (the duplicate check, then its place): without
     * this, that miss was an eighth of the core's time on the wide day (perf, 8 % of events). */
    if (e->kind == LOB_REPLACE) prefetch(&b->slots[tag_home(b, id_tag(e->new_id))]);
}

/* The order an event names, if its home slot holds its tag (the common case). */
static inline const order_t *peek_order(const lob_book *b, const lob_event *e)
{
    uint32_t tag = id_tag(e->id);
    const slot_t *sl = &b->slots[tag_home(b, tag)];
    return (sl->order != NIL && sl->tag == tag) ? &b->orders[sl->order] : NULL;
}

static inline __attribute__((always_inline)) void prefetch_order(books_t bk, const lob_event *e)
{
    const lob_book *b = event_book(bk, e);
    if (!b) return;
    if (e->kind == LOB_NEW) {
        int64_t li = price_level(b, e->price);
        if (li >= 0) prefetch(&b->levels[li]);
    } else {
        const order_t *o = peek_order(b, e);
        if (o) prefetch(o);
        if (e->kind == LOB_REPLACE) { /* and the level where it goes */
            int64_t li = price_level(b, e->price);
            if (li >= 0) prefetch(&b->levels[li]);
        }
    }
}

static inline __attribute__((always_inline)) void prefetch_links(books_t bk, const lob_event *e)
{
    const lob_book *b = event_book(bk, e);
    if (!b) return;
    if (e->kind == LOB_NEW) {
        int64_t li = price_level(b, e->price);
        if (li >= 0 && b->levels[li].tail != NIL) prefetch(&b->orders[b->levels[li].tail]);
        return;
    }
    const order_t *o = peek_order(b, e);
    if (!o || o->level >= b->nlevels) return; /* free (NIL) or parked */
    prefetch(&b->levels[o->level]);
    if (o->prev != NIL) prefetch(&b->orders[o->prev]);
    if (o->next != NIL) prefetch(&b->orders[o->next]);
}

/* The N best levels of both sides of a book into row r of the depth outputs. */
static void depth_row(const lob_book *b, const lob_outputs *out, size_t r)
{
    depth_fill(b, out->depth_levels, r, out->depth_prices, out->depth_qtys, out->depth_counts);
}

static int depth_rows_equal(const lob_outputs *out, size_t a, size_t b)
{
    size_t w = 2 * (size_t)out->depth_levels;
    return !memcmp(out->depth_prices + a * w, out->depth_prices + b * w, w * sizeof *out->depth_prices) &&
           !memcmp(out->depth_qtys + a * w, out->depth_qtys + b * w, w * sizeof *out->depth_qtys) &&
           !memcmp(out->depth_counts + a * w, out->depth_counts + b * w, w * sizeof *out->depth_counts);
}

/* Before an event with bbo rows on, when b->top may not be the book's top (see lob_book). */
__attribute__((noinline)) static void top_refresh(lob_book *b, uint64_t epoch)
{
    lob_bbo t = {0};
    read_bbo(b, &t);
    b->top = t;
    b->top_epoch = epoch;
}

/* The batch loop of lob_session_apply (arguments checked), one copy per mode: pf (prefetch),
 * with_bbo (0: no bbo rows, 1: a row per event, 2: rows for the changes only, bbo_event) and
 * deep (depth rows asked for) are constants in each call below but the first, so that each
 * copy carries only the tests and the live values its mode needs (the replays' bbo rows are
 * changes only: 14.6 instructions an event fewer on the narrow day than with one copy for
 * both kinds of bbo rows).
 * One loop for every mode kept them all live at once: the compiler spilled the plan, the
 * result and the loop's pointers to the stack, a dozen loads and stores an event more
 * (callgrind). Timing is a single compare an event (t_next) in every copy. */
static inline __attribute__((always_inline)) int apply_loop(lob_session *s, const lob_event *events, size_t n,
                                                            lob_outputs *out, const int pf, const int with_bbo,
                                                            const int deep)
{
    size_t i;
    int rc = LOB_OK;
    size_t nd = 0; /* depth rows written */
    sink_t sk = {out->execs, out->desyncs, 0, out->exec_cap, 0, out->desync_cap};
    lob_result *results = out->results;
    lob_bbo *const bbo = with_bbo ? out->bbo : NULL;
    uint32_t *const bbo_event = with_bbo == 2 ? out->bbo_event : NULL;
    size_t nb = 0; /* bbo rows written, with bbo_event */
    const uint64_t epoch = with_bbo ? s->bbo_epoch : 0;
    /* Read once: the calls in the loop could change *out and *s for all the compiler knows. */
    const uint32_t depth_levels = deep ? out->depth_levels : 0;
    const uint32_t every = s->timing;
    /* The index of the next event to time (SIZE_MAX: none): one compare an event, no store,
     * when timing is off. An event not done keeps its turn (t_next - i is the countdown). */
    size_t t_next = every ? (size_t)s->timing_left : SIZE_MAX;
    const books_t bk = {s->books, s->max_instrument};
    /* Timing every event: one clock reading ends an event and starts the next. Every Nth
     * (N > 1): a reading before the timed event and one after it. */
    uint64_t t_prev = every == 1 ? clock_ticks(s->clock) : 0;
    for (i = 0; i < n; i++) {
        const lob_event *e = &events[i];
        if (__builtin_expect(i == t_next, 0) && every > 1) t_prev = clock_ticks(s->clock);
        if (pf) {
            if (i + PF_SLOT < n) prefetch_slot(bk, &events[i + PF_SLOT]);
            if (i + PF_ORDER < n) prefetch_order(bk, &events[i + PF_ORDER]);
            if (i + PF_LINKS < n) prefetch_links(bk, &events[i + PF_LINKS]);
        }
        lob_result r = {0, 0, 0, LOB_OK};
        lob_book *b = event_book(bk, e);
        plan_t p = {0, 0, 0, NIL, 0, 0};
        if (!b) {
            r.status = LOB_EINSTRUMENT;
            goto done;
        }
        if (depth_levels) {
            if (out->depth_cap - nd < 2) {
                rc = LOB_EEXECFULL;
                break;
            }
            depth_row(b, out, nd + 1); /* the levels before the event, in the scratch row */
        }
        if (bbo && __builtin_expect(b->top_epoch != epoch, 0)) top_refresh(b, epoch); /* else b->top is the top */
        r.status = check_event(b, e, &p);
        if (r.status != LOB_OK) goto done;
        if (e->kind == LOB_NEW || e->kind == LOB_REPLACE) {
            if (__builtin_expect(p.ext, 0)) { /* halted, participants, STP, notional: see plan_t */
                s->ext.plan = p;
                if (b->halted) { /* before anything else: the order parks */
                    park_incoming(b, e, &s->ext);
                    r = s->ext.r;
                    goto done;
                }
                s->ext.sink = sk;
                if (apply_ext(b, e, &s->ext, i) != LOB_OK) {
                    rc = LOB_EEXECFULL;
                    break;
                }
                r = s->ext.r;
                sk.n_exec = s->ext.sink.n_exec;
                sk.n_desync = s->ext.sink.n_desync;
                goto done;
            }
            if (e->kind == LOB_REPLACE && e->new_id == e->id) {
                order_t *o = &b->orders[p.old];
                if (o->level == (uint32_t)p.lim && o->next == NIL) {
                    /* same id, same price, already the last of its level: where a REPLACE
                     * would put it back (an L2 level's one order always is). Resized in
                     * place; it rests, so it crosses nothing. */
                    b->levels[o->level].total += e->qty - o->qty;
                    o->qty = e->qty;
                    r.resting = e->qty;
                    goto done;
                }
            }
            int trades = crosses(b, p.side, p.lim);
            int feed = (e->flags & LOB_F_FEED) != 0;
            int fok = e->kind == LOB_NEW && e->tif == LOB_FOK;
            int full = e->kind == LOB_NEW && e->tif == LOB_GTC && b->live == b->capacity;
            if (trades && (feed || fok || full || sk.exec_cap - sk.n_exec < b->live)) {
                /* Decide what must be known before the book changes: how many
                 * orders it meets (all of them, for a feed order) and whether a
                 * FOK fills or a GTC on a full book would rest. */
                int64_t avail;
                uint64_t touched;
                crossing(b, p.side, p.lim, feed ? INT64_MAX : e->qty, &avail, &touched);
                if (touched > (feed ? sk.desync_cap - sk.n_desync : sk.exec_cap - sk.n_exec)) {
                    rc = LOB_EEXECFULL;
                    break;
                }
                if (!feed && fok && avail < e->qty) goto done; /* killed: nothing changes */
                if (!feed && full && avail < e->qty) {
                    r.status = LOB_EFULL;
                    goto done;
                }
            }
            if (!trades && full) { /* it would have to rest */
                r.status = LOB_EFULL;
                goto done;
            }
            if (!trades && fok) goto done; /* nothing to take: killed */
            uint64_t taker = e->id;
            int reindex = trades; /* a removal from the index invalidates p.slot */
            if (e->kind == LOB_REPLACE) {
                order_remove(b, p.old);
                taker = e->new_id;
                reindex = 1;
            }
            if (trades && feed) {
                clear_crossing(b, p.side, p.lim, e->qty, e->price, taker, &sk, i, e->instrument);
            } else if (trades) {
                size_t nex = sk.n_exec;
                r.filled = match(b, p.side, p.lim, taker, e->qty, sk.execs, &nex, (uint32_t)i, e->instrument);
                r.n_exec = (uint32_t)(nex - sk.n_exec);
                sk.n_exec = nex;
            }
            int64_t left = e->qty - r.filled;
            if (left > 0 && (e->kind == LOB_REPLACE || e->tif == LOB_GTC)) {
                if (reindex) {
                    int found;
                    p.tag = id_tag(taker);
                    p.slot = index_probe(b, taker, p.tag, &found);
                }
                order_rest(b, taker, p.side, (uint32_t)p.lim, left, p.tag, p.slot); /* no participant here */
                r.resting = left;
            }
        } else if (e->kind == LOB_CANCEL) {
            order_remove(b, p.old);
        } else if (e->kind == LOB_REDUCE) {
            order_t *o = &b->orders[p.old];
            if (e->qty >= o->qty) {
                if (e->qty > o->qty) { /* only with LOB_F_FEED (check_event) */
                    if (sk.desync_cap - sk.n_desync < 1) {
                        rc = LOB_EEXECFULL;
                        break;
                    }
                    add_desync(&sk, LOB_D_QTY, o->id, 0, e->qty, o->qty, 0, level_price(b, order_level(b, p.old)),
                               i, e->instrument);
                }
                order_remove(b, p.old);
            } else {
                o->qty -= e->qty;
                if (__builtin_expect(o->level != PARKED, 1)) b->levels[o->level].total -= e->qty;
                else pb_shrink(b, (b->pinfo[p.old] & PSELL) != 0, b->pinfo[p.old] & ~PSELL, e->qty, 0);
                r.resting = o->qty;
            }
        } else if (__builtin_expect(e->kind == LOB_STATE, 0)) {
            s->ext.sink = sk;
            if (apply_state(b, e, &s->ext, i) != LOB_OK) {
                rc = LOB_EEXECFULL;
                break;
            }
            r = s->ext.r;
            sk.n_desync = s->ext.sink.n_desync;
        } else { /* LOB_EXEC */
            if (sk.exec_cap - sk.n_exec < 1 || sk.desync_cap - sk.n_desync < 3) {
                rc = LOB_EEXECFULL;
                break;
            }
            apply_exec(b, e, &p, &sk, i, &r);
        }
    done:
        if (depth_levels && b) {
            depth_row(b, out, nd);
            if (!depth_rows_equal(out, nd, nd + 1)) out->depth_event[nd++] = (uint32_t)i;
        }
        if (bbo) {
            lob_bbo after = {0};
            if (b) {
                read_bbo(b, &after);
                if (bbo_differs(&b->top, &after)) {
                    after.changed = 1;
                    b->top = after;
                }
            }
            after.instrument = e->instrument;
            if (!bbo_event) bbo[i] = after;
            else if (after.changed) {
                bbo[nb] = after;
                bbo_event[nb++] = (uint32_t)i;
            }
        }
        results[i] = r;
        if (__builtin_expect(i == t_next, 0)) {
            t_next = i + every;
            uint64_t t = clock_ticks(s->clock), dt = t - t_prev;
            t_prev = t;
            int k = (e->kind >= 1 && e->kind < HIST_KINDS) ? e->kind : 0;
            uint64_t v = (int64_t)dt < 0 ? 0 : ticks_to_ns(s, dt); /* < 0: another core's counter */
            s->hist[(size_t)k * LOB_HIST_BUCKETS + lob_hist_index(v)]++;
            if (b && b->hist) b->hist[(size_t)k * BOOK_HIST + lob_book_hist_index(v)]++;
        }
    }
    if (bbo && i < n) { /* stopped before event i, which changed nothing (lob.h); its book's copy of
                           its top is read afresh all the same */
        lob_book *b = event_book(bk, &events[i]);
        if (b) b->top_epoch = 0;
    }
    if (!with_bbo) s->bbo_epoch++; /* the books' copies of their tops may be stale now (lob_book.top_epoch) */
    if (every) s->timing_left = (uint32_t)(t_next - i);
    out->n_done = i;
    out->n_exec = sk.n_exec;
    out->n_desync = sk.n_desync;
    out->n_depth = nd;
    out->n_bbo = nb;
    return rc;
}

int lob_session_apply(lob_session *s, const lob_event *events, size_t n, lob_outputs *out)
{
    if (!s || !out || (n && (!events || !out->results)) || (out->exec_cap && !out->execs) ||
        (out->desync_cap && !out->desyncs) ||
        (out->depth_levels && (!out->depth_event || !out->depth_prices || !out->depth_qtys || !out->depth_counts))) {
        if (out) out->n_done = out->n_exec = out->n_desync = out->n_depth = out->n_bbo = 0;
        return LOB_EARG;
    }
    /* Prefetch only where the books outgrow the caches: on books that fit, it
     * costs more than it saves (benchmarks/RESULTS.md). */
    int pf = s->prefetch < 0 ? s->book_bytes > PF_AUTO_BYTES : s->prefetch;
    int with_bbo = out->bbo ? (out->bbo_event ? 2 : 1) : 0;

    if (out->depth_levels) return apply_loop(s, events, n, out, pf, with_bbo, 1);
    if (pf) {
        if (with_bbo == 2) return apply_loop(s, events, n, out, 1, 2, 0);
        return with_bbo ? apply_loop(s, events, n, out, 1, 1, 0) : apply_loop(s, events, n, out, 1, 0, 0);
    }
    if (with_bbo == 2) return apply_loop(s, events, n, out, 0, 2, 0);
    return with_bbo ? apply_loop(s, events, n, out, 0, 1, 0) : apply_loop(s, events, n, out, 0, 0, 0);
}
