/*
 * counting_malloc.c -- a counting allocator linked into benchmarks/bench_hdr.
 *
 * It defines malloc, calloc, realloc, free and the aligned variants in the
 * executable itself, which glibc allows ("Replacing malloc" in its manual): every
 * allocation in the process goes through these, libc's own included, because a
 * definition in the executable takes precedence over libc's for every caller.
 * Each one counts the call and the bytes asked for, then hands the work to
 * glibc's allocator through its __libc_* entry points (glibc only). The benchmark
 * reads the counters around each measured loop: the core's own counters
 * (lob_alloc_stats) prove the core allocates nothing there; these prove that
 * nothing else in the process does either.
 *
 * Counters are relaxed atomics: a plain, single-threaded benchmark, but harmless
 * if a library starts a thread.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "counting_malloc.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *p);

static _Atomic uint64_t n_alloc, n_bytes, n_free;

static inline void count(size_t bytes)
{
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_bytes, bytes, memory_order_relaxed);
}

void *malloc(size_t size)
{
    count(size);
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    count(n * size);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    count(size);
    return __libc_realloc(p, size);
}

void free(void *p)
{
    if (p) atomic_fetch_add_explicit(&n_free, 1, memory_order_relaxed);
    __libc_free(p);
}

void *memalign(size_t alignment, size_t size)
{
    count(size);
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size)
{
    count(size);
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size)
{
    if (alignment < sizeof(void *) || (alignment & (alignment - 1))) return EINVAL;
    count(size);
    void *p = __libc_memalign(alignment, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void counting_malloc_stats(counting_malloc_t *out)
{
    out->allocs = atomic_load_explicit(&n_alloc, memory_order_relaxed);
    out->bytes = atomic_load_explicit(&n_bytes, memory_order_relaxed);
    out->frees = atomic_load_explicit(&n_free, memory_order_relaxed);
}
