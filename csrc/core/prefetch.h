/* prefetch.h -- a cache prefetch hint shared by lob.c and itch.c (internal). */
#ifndef LOB_PREFETCH_H
#define LOB_PREFETCH_H

static inline void prefetch(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p)); /* gcc 12 drops __builtin_prefetch in these loops */
#else
    __builtin_prefetch(p);
#endif
}

/* The same, for a line about to be written (x86: prefetchw, a no-op where unsupported). */
static inline void prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

#endif /* LOB_PREFETCH_H */
