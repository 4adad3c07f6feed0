/* What the C tests share: CHECK (counts passes, prints each failure with its line) and a
   growable string builder. Include once per test program, after the standard headers. */
#ifndef NUMPTX_TESTS_CHECK_H
#define NUMPTX_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static const char *g_test = "";   /* the test running, named in failure lines */

#define CHECK(c) check_((c) != 0, #c, __LINE__)
static inline void check_(int ok, const char *what, int line)
{
    if (ok) { g_pass++; return; }
    g_fail++;
    printf("FAIL [%s] line %d: %s\n", g_test, line, what);
}

/* The summary line `make test` shows; the exit status of main. */
static inline int check_report(void)
{
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}

typedef struct sb { char *p; size_t n, cap; } sb;   /* NUL-terminated, p owned */

static inline void sb_put(sb *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = (char *)realloc(b->p, cap);
        if (!b->p) { printf("out of memory\n"); exit(2); }
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static inline void sb_puts(sb *b, const char *s) { sb_put(b, s, strlen(s)); }
static inline void sb_printf(sb *b, const char *fmt, ...)
{
    char tmp[512];
    int n;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_put(b, tmp, (size_t)n);
}

#endif
