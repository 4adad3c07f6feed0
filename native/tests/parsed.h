/* PTX parsed the way the PTX Inject tests want it: an exact-size heap copy without NUL, and
   parse memory of exactly mem_needed bytes at an odd address, so ASan sees any overrun.
   Include after ptx_inject.h and check.h. */
#ifndef NUMPTX_TESTS_PARSED_H
#define NUMPTX_TESTS_PARSED_H

typedef struct parsed {
    ptxinj_ctx ctx;
    char *ptx;              /* exact-size copy, no NUL */
    size_t len;
    unsigned char *raw;     /* parse memory (mem_needed + 1, used from offset 1) */
    ptxinj_status st;
} parsed;

static inline parsed parse_n(const char *text, size_t len)
{
    parsed p;
    memset(&p, 0, sizeof p);
    p.len = len;
    p.ptx = (char *)malloc(len ? len : 1);
    if (len) memcpy(p.ptx, text, len);
    p.st = ptxinj_parse(&p.ctx, p.ptx, len, NULL, 0);
    if (p.st != PTXINJ_ERR_BUFFER_TOO_SMALL || p.ctx.mem_needed == 0) return p;
    p.raw = (unsigned char *)malloc(p.ctx.mem_needed + 1);
    p.st = ptxinj_parse(&p.ctx, p.ptx, len, p.raw + 1, p.ctx.mem_needed);   /* odd address */
    return p;
}
static inline parsed parse_s(const char *text) { return parse_n(text, strlen(text)); }
static inline void parsed_free(parsed *p) { free(p->ptx); free(p->raw); memset(p, 0, sizeof *p); }

#endif
