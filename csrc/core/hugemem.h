/* hugemem.h -- large zeroed blocks on transparent huge pages (internal, lob.c and itch.c).
 *
 * A block of HUGE_MIN bytes or more is its own anonymous mapping, aligned to
 * 2 MiB and advised MADV_HUGEPAGE: where the kernel's THP setting is
 * "madvise" (a common default) it is faulted in 2 MiB at a time instead of
 * 4 KiB (512x fewer page faults while a table fills, fewer TLB misses while
 * it is probed at random). Like calloc, the block reads as zeros; unlike it,
 * it must be released with huge_free and its size. Smaller blocks, other
 * systems and sanitizer builds (which check heap blocks only) use calloc/free.
 */
#ifndef LOB_HUGEMEM_H
#define LOB_HUGEMEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define HUGEMEM_MMAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HUGEMEM_MMAP 0
#endif
#endif
#if !defined(HUGEMEM_MMAP) && defined(__linux__)
#include <sys/mman.h>
#if defined(MADV_HUGEPAGE) && defined(MAP_ANONYMOUS)
#define HUGEMEM_MMAP 1
#endif
#endif
#ifndef HUGEMEM_MMAP
#define HUGEMEM_MMAP 0
#endif

enum { HUGE_PAGE = 2u << 20, HUGE_MIN = 2u << 20 };

static inline size_t huge_round(size_t bytes)
{
    return (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
}

/* A zeroed block of n * size bytes, or NULL (also when n * size overflows). */
static inline void *huge_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    size_t bytes = n * size;
    if (!HUGEMEM_MMAP || bytes < HUGE_MIN) return calloc(n, size);
#if HUGEMEM_MMAP
    size_t len = huge_round(bytes);
    if (len > SIZE_MAX - HUGE_PAGE) return NULL;
    /* Map one huge page more than needed and trim to a 2 MiB boundary. */
    char *raw = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + len + HUGE_PAGE - (p + len));
    if (tail) munmap(p + len, tail);
    madvise(p, len, MADV_HUGEPAGE); /* a hint: without THP the block is plain pages */
    return p;
#endif
}

/* Release a block from huge_calloc(n, size) (NULL is allowed). */
static inline void huge_free(void *p, size_t n, size_t size)
{
    if (!p) return;
    if (!HUGEMEM_MMAP || n * size < HUGE_MIN) {
        free(p);
        return;
    }
#if HUGEMEM_MMAP
    munmap(p, huge_round(n * size));
#endif
}

#endif /* LOB_HUGEMEM_H */
