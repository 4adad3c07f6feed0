/* ptx_inject.h - find injection sites in PTX text and replace them with stubs.
   C99, single header, no allocation: the caller owns every byte of memory.

   USAGE
     #define PTX_INJECT_IMPLEMENTATION   (in exactly one .c file, before the include)
     #include "ptx_inject.h"
   Define PTX_INJECT_STATIC as well to make every function static (private copy). The
   declarations also compile as C++; the implementation is C99 (compile it as C).
   Public names start with ptxinj_ / PTXINJ_, private ones with ptxinj__.

   MARKER FORMAT (one marker per line; leading spaces/tabs allowed; lines end in "\n" or
   "\r\n", a trailing "\r" is tolerated everywhere)
     numptx:
       // PTX_INJECT_BEGIN <site>
       // PTX_INJECT_VAR <kind> <dtype> <regtype> <reg> <name>     kind: in | out | mod
       // PTX_INJECT_END
     mm-ptx 1.x (legacy):
       // PTX_INJECT_START <site>
       // <reg> <i|o|m> <regtype> <dtype> <name>                    e.g. "// _x0 m f32 F32 acc"
       // PTX_INJECT_END
   A marker line is "//" as the first non-blank text of the line, optional spaces/tabs, then
   PTX_INJECT_<KEYWORD> followed by whitespace or the end of the line ("PTX_INJECT_BEGINX" is
   an ordinary comment). Tokens are runs of bytes other than space, tab, \r, \v, \f. <site> is
   exactly one token; a VAR line has exactly 5 fields. Inside a block only variable lines and
   blank lines may appear. Every other line of the PTX is ignored.
   A site may appear several times (instances: unrolling, inlining). All instances of a site
   must carry the identical variable list (count, and per variable kind and all four tokens).
   An instance's region runs from the start of its BEGIN/START line (indentation included) to
   just after the END line's terminator (or EOF); render replaces the region with a stub.

   API
     ptxinj_parse(ctx, ptx, len, mem, mem_size)
       Parses `len` bytes (no NUL terminator needed; any bytes allowed) into the caller-owned
       ctx. `mem` (any alignment) receives the arrays. With mem == NULL or mem_size too small
       it returns PTXINJ_ERR_BUFFER_TOO_SMALL and sets ctx->mem_needed (> 0), found by a
       counting scan; call again with that much. The PTX text must outlive ctx.
       Results: ctx->sites (first-appearance order) with their variables ctx->vars[first_var ..
       first_var + n_vars) and ctx->instances (PTX order). All positions are byte offsets
       into the PTX. On an error, ctx->err_offset is the start of the line at fault (0 when no
       line applies) and ctx->err_site the site involved (UINT32_MAX when none); the arrays
       then hold the records completed so far (err_site indexes ctx->sites) - do not render.
     ptxinj_find_site(ctx, name, len, &index)   hash lookup: OK or PTXINJ_ERR_UNKNOWN_SITE.
     ptxinj_render(ctx, blob, blob_len, offsets, flags, out, out_cap, &out_len)
       Writes the PTX with every instance region replaced by its site's stub. Stubs are slices
       of `blob`: by default offsets holds n_sites + 1 non-decreasing values and site i's stub
       is blob[offsets[i], offsets[i+1]) (a prefix sum of the stub lengths). With
       PTXINJ_RENDER_PAIRS it holds 2 * n_sites values (offset, length) per site instead, and
       an offset of PTXINJ_NO_STUB means "no stub" (same as empty). A non-empty stub that does
       not end in '\n' gets one; an empty stub removes the region. With PTXINJ_RENDER_TAG every
       region (empty and missing stubs included) becomes exactly
         "\t// PTX_INJECT_STUB " <site> "\n" <stub bytes as given> "\n\t// PTX_INJECT_STUB_END\n"
       (nothing is added to the stub itself), so a PTX assembler error can be traced back to
       its stub; rendered text parses to 0 sites.
       out == NULL: *out_len = bytes needed, OK (measure). out_cap < needed: BUFFER_TOO_SMALL,
       *out_len = needed, nothing written. Otherwise out[0, needed) is filled (no NUL).
       All stub slices and instance records are checked before anything is written.
       With PTXINJ_RENDER_BIND, instances whose copy frame qualifies are bound (see BINDING).
     ptxinj_line_of(ptx, len, offset)   1-based line of a byte offset (slow; error reports),
       0 when ptx is NULL.
     ptxinj_status_string(status)       static text for every status ("unknown status" else).

   BINDING (render flag PTXINJ_RENDER_BIND)
     numptx's PTX_INJECT and nx.site asm put each marker block inside a copy frame:
         {
         .reg .<regtype> %<reg>;            one per variable
         mov.<t> %<reg>, <operand>;         in and mod variables
         // PTX_INJECT_BEGIN ... END        the instance region
         mov.<t> <operand>, %<reg>;         out and mod variables
         }
     With the flag, render replaces the whole frame (the "{" line to the "}" line) with the
     stub, each "%<reg>" token of the stub (not followed by [A-Za-z0-9_$]) rewritten to its
     variable's operand. ptxas then has no copies to remove: the same computation (usually
     byte-identical machine code), assembled sooner. The
     stub keeps a scope of its own (its labels and registers stay local): unless it is one
     brace block "{ ... }" (blanks and newlines around it; braces in "//" comments ignored),
     the bound text is wrapped in a "\t{\n" and a "\t}\n" line (the tag lines of
     PTXINJ_RENDER_TAG go inside). An empty untagged stub that binds removes the frame and
     writes nothing. An instance keeps the plain rendering unless all of these hold:
       - it is a numptx BEGIN block (mm-ptx START blocks are left alone) of a site with at
         most PTXINJ_BIND_MAX_VARS variables;
       - the frame has exactly that shape, lines in any order: each variable declared once with
         its regtype, each in/mod variable copied in once, each out/mod variable copied out
         once, a mod variable back to the operand it came from, nothing else (blank lines
         neither), and it lies between the neighbouring instances;
       - every operand is a register "%name" that is no variable's register, and the operand of
         an out or mod variable is no other variable's operand;
       - every operand is "%<prefix><digits>" (a prefix without digits) and the PTX declares
         the prefix with exactly the variable's regtype: a line that, trimmed, is exactly
         ".reg .<type> %<prefix><N>;" (as NVRTC's "\t.reg .f32 \t%f<3521>;"; .b32 is no u32),
         anywhere. The first 32 prefixes declared are remembered, no more; a prefix declared
         with two types counts as undeclared;
       - the stub has no block comment, no comment inside a statement, no directive (".reg"
         and friends) that names a variable register or is a "%name<N>" range covering one
         (a variable register %name followed by digits: "%v_acc<2>" covers %v_acc0), and no
         statement whose destination names an in variable (the first operand: after an
         optional label, "@guard" and the opcode, which ends at the first byte not in
         [A-Za-z0-9_$.:], so "mov.f32%r1, ..." and "mov.b64{%r1, %r2}, ..." write %r1);
       - no '%' name of the stub (comments included) equals an operand register, or is a
         "%name<N>" range covering one (an operand %name followed by digits; N is not looked
         at).
     Stubs are scanned per instance (operands differ between instances): linear in the stub;
     the PTX once per render for its register declarations.

   ERRORS (ptxinj_status; err_offset names the line)
     INVALID_ARGUMENT       NULL pointer or inconsistent ctx/offsets/blob arguments
     BUFFER_TOO_SMALL       parse: mem too small (see mem_needed); render: out_cap < needed
     MALFORMED_MARKER       bad BEGIN/VAR/END line, VAR outside a block, other text in a block
     MISSING_END            EOF inside a block (the BEGIN line)
     UNEXPECTED_END         END outside a block
     NESTED_SITE            BEGIN/START inside a block (the inner line)
     DUPLICATE_VARIABLE     two variables of one site with the same name (the second line)
     INCONSISTENT_INSTANCES a later instance differs: the differing line, or its BEGIN line
                            when the variable counts differ
     UNKNOWN_SITE           find_site: no such name
     TOO_LARGE              PTX of UINT32_MAX bytes or more; render output over SIZE_MAX

   COMPLEXITY
     parse: a counting pass (it sizes `mem`), then the parse pass. Outside blocks memchr hunts
     the 'J' of "PTX_INJECT_" (rare in PTX), so code and ordinary comments cost only memchr's
     scan. A block byte-identical to the previous one or to its site's first instance (unrolled
     loops) is taken whole with one memcmp; other blocks are tokenized line by line. Site names
     and (site, variable name) pairs go through FNV-1a hashed open-addressing tables at most
     half full: O(len) expected, never quadratic in sites or variables.
     Memory (mem_needed): 40 B per BEGIN/START line (site + instance), 40 B per VAR line and
     per line of a START block (repeated blocks not counted), 4 B per hash slot (2 to 4 slots
     per counted line), plus 3 B of alignment slack.
     render: O(n_sites + n_instances + output size): the measure is O(1) per site and per
     instance (stubs are never scanned); the fill is memcpy's of PTX text, stubs and tags.
     With PTXINJ_RENDER_BIND add one line pass over the PTX (register declarations) and, per
     instance, a pass over its frame lines and its stub (frames are at most 2 * vars + 1
     lines back and vars + 1 lines on; a stub's operand-independent checks are cached across
     consecutive instances of a site). Measure and fill each do that work.
   No recursion, no allocation, no global state; functions are re-entrant. */
#ifndef PTX_INJECT_H
#define PTX_INJECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef PTX_INJECT_STATIC
#define PTXINJ_DEF static
#else
#define PTXINJ_DEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ptxinj_status {
    PTXINJ_OK = 0,
    PTXINJ_ERR_INVALID_ARGUMENT,
    PTXINJ_ERR_BUFFER_TOO_SMALL,
    PTXINJ_ERR_MALFORMED_MARKER,
    PTXINJ_ERR_MISSING_END,
    PTXINJ_ERR_UNEXPECTED_END,
    PTXINJ_ERR_NESTED_SITE,
    PTXINJ_ERR_DUPLICATE_VARIABLE,
    PTXINJ_ERR_INCONSISTENT_INSTANCES,
    PTXINJ_ERR_UNKNOWN_SITE,
    PTXINJ_ERR_TOO_LARGE,
    PTXINJ_STATUS_COUNT
} ptxinj_status;

enum { PTXINJ_IN = 0, PTXINJ_OUT = 1, PTXINJ_MOD = 2 };

#define PTXINJ_NO_STUB 0xFFFFFFFFu
#define PTXINJ_RENDER_TAG 1u    /* render flag: wrap every stub in PTX_INJECT_STUB / _STUB_END lines */
#define PTXINJ_RENDER_PAIRS 2u  /* render flag: offsets are (offset, length) pairs per site */
#define PTXINJ_RENDER_BIND 4u   /* render flag: write stubs straight into the operands (BINDING) */
#define PTXINJ_BIND_MAX_VARS 32u

typedef struct ptxinj_var {      /* all offsets are byte offsets into the PTX text */
    uint32_t kind;               /* PTXINJ_IN / PTXINJ_OUT / PTXINJ_MOD */
    uint32_t dtype_off, dtype_len, regtype_off, regtype_len, reg_off, reg_len, name_off, name_len;
    uint32_t line_off;           /* start of this variable's line (first instance) */
} ptxinj_var;

typedef struct ptxinj_site {
    uint32_t name_off, name_len;
    uint32_t first_var, n_vars;  /* ctx->vars[first_var .. first_var + n_vars) */
    uint32_t n_instances;
    uint32_t first_instance;     /* index into ctx->instances (UINT32_MAX while unfinished) */
    uint32_t hash;               /* FNV-1a of the name */
} ptxinj_site;

typedef struct ptxinj_instance {
    uint32_t site;               /* index into ctx->sites */
    uint32_t begin, end;         /* region [begin, end) replaced by render */
} ptxinj_instance;               /* stored in PTX order */

typedef struct ptxinj_ctx {
    const char *ptx; uint32_t ptx_len;
    uint32_t n_sites, n_vars, n_instances;
    ptxinj_site *sites; ptxinj_var *vars; ptxinj_instance *instances;
    uint32_t *table; uint32_t table_mask;   /* private: open-addressing hash of site names */
    uint32_t legacy;             /* 1 if any mm-ptx START block was seen */
    size_t mem_needed;           /* bytes of `mem` parse needs (set whenever it could count) */
    uint32_t err_offset;         /* after an error: start of the line at fault */
    uint32_t err_site;           /* after an error: site index involved, or UINT32_MAX */
} ptxinj_ctx;

PTXINJ_DEF const char *ptxinj_status_string(int status);
PTXINJ_DEF ptxinj_status ptxinj_parse(ptxinj_ctx *ctx, const char *ptx, size_t len,
                                      void *mem, size_t mem_size);
PTXINJ_DEF ptxinj_status ptxinj_find_site(const ptxinj_ctx *ctx, const char *name, size_t len,
                                          uint32_t *index);
PTXINJ_DEF ptxinj_status ptxinj_render(const ptxinj_ctx *ctx, const char *blob, size_t blob_len,
                                       const uint32_t *offsets, uint32_t flags,
                                       char *out, size_t out_cap, size_t *out_len);
PTXINJ_DEF uint32_t ptxinj_line_of(const char *ptx, size_t len, size_t offset);

#ifdef __cplusplus
}
#endif
#endif /* PTX_INJECT_H */

/* ======================================================================================== */
#ifdef PTX_INJECT_IMPLEMENTATION
#ifndef PTX_INJECT_IMPLEMENTATION_DONE
#define PTX_INJECT_IMPLEMENTATION_DONE

#include <string.h>

#define PTXINJ__NONE 0xFFFFFFFFu
#define PTXINJ__PREFIX "PTX_INJECT_"
#define PTXINJ__TAG "\t// PTX_INJECT_STUB "          /* then the site name and "\n" */
#define PTXINJ__TAG_END "\n\t// PTX_INJECT_STUB_END\n"  /* right after the stub bytes */
#define PTXINJ__TAG_LEN (sizeof(PTXINJ__TAG) - 1)
#define PTXINJ__TAG_END_LEN (sizeof(PTXINJ__TAG_END) - 1)

enum { PTXINJ__KW_NONE, PTXINJ__KW_BEGIN, PTXINJ__KW_START, PTXINJ__KW_VAR, PTXINJ__KW_END };

typedef struct ptxinj__tok { uint32_t off, len; } ptxinj__tok;

typedef struct ptxinj__parser {
    ptxinj_ctx *c;
    const char *s;
    uint32_t cap_sites, cap_vars;   /* array capacities from the counting scan */
    uint32_t *vtab, vmask;          /* hash of (site, variable name) for duplicate checks */
    uint32_t site;                  /* open site, or PTXINJ__NONE outside blocks */
    uint32_t begin;                 /* start of the open instance's BEGIN line */
    uint32_t k;                     /* variable lines seen in the open instance */
    int first;                      /* open instance is the site's first: record its vars */
    int legacy;                     /* open block is an mm-ptx START block */
} ptxinj__parser;

/* Byte classes: 1 = token separator (space, tab, \r, \v, \f), 2 = line end. */
static const unsigned char ptxinj__cls[256] = {
    ['\t'] = 1, ['\n'] = 2, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1, [' '] = 1
};
#define PTXINJ__SEP(ch) (ptxinj__cls[(unsigned char)(ch)] == 1)
#define PTXINJ__ENDS_WORD(ch) (ptxinj__cls[(unsigned char)(ch)] != 0)

static int ptxinj__indent(char ch) { return ch == ' ' || ch == '\t'; }

static uint32_t ptxinj__fnv(const char *p, uint32_t n)
{
    uint32_t h = 2166136261u;
    while (n--) { h ^= (unsigned char)*p++; h *= 16777619u; }
    return h;
}

/* Hash slots for n keys: a power of two >= 2n (load <= 1/2 keeps probe chains short). */
static uint64_t ptxinj__slots(uint64_t n)
{
    uint64_t c = 2;
    while (c < 2 * n) c <<= 1;
    return c;
}

/* Index of the '\n' ending the line that contains i, or len. */
static uint32_t ptxinj__eol(const char *s, uint32_t len, uint32_t i)
{
    const char *nl = (const char *)memchr(s + i, '\n', len - i);
    return nl ? (uint32_t)(nl - s) : len;
}

/* Keyword right after "PTX_INJECT_" (at p; the line ends at e or at a '\n'). It must be
   followed by whitespace or the end of the line. *rest = the position after it. */
static int ptxinj__kw(const char *s, uint32_t p, uint32_t e, uint32_t *rest)
{
    const char *w;
    uint32_t n, i;
    int k;
    if (p >= e) return PTXINJ__KW_NONE;
    switch (s[p]) {   /* the first letter picks the only candidate */
    case 'B': w = "BEGIN"; n = 5; k = PTXINJ__KW_BEGIN; break;
    case 'S': w = "START"; n = 5; k = PTXINJ__KW_START; break;
    case 'V': w = "VAR"; n = 3; k = PTXINJ__KW_VAR; break;
    case 'E': w = "END"; n = 3; k = PTXINJ__KW_END; break;
    default: return PTXINJ__KW_NONE;
    }
    if (e - p < n) return PTXINJ__KW_NONE;
    for (i = 1; i < n; i++)
        if (s[p + i] != w[i]) return PTXINJ__KW_NONE;
    if (p + n < e && !PTXINJ__ENDS_WORD(s[p + n])) return PTXINJ__KW_NONE;
    *rest = p + n;
    return k;
}

/* Marker keyword of a comment whose text starts at p (just after its "//"), line end e. */
static int ptxinj__comment_kw(const char *s, uint32_t p, uint32_t e, uint32_t *rest)
{
    while (p < e && ptxinj__indent(s[p])) p++;
    if (e - p < 11 || memcmp(s + p, PTXINJ__PREFIX, 11) != 0) return PTXINJ__KW_NONE;
    return ptxinj__kw(s, p + 11, e, rest);
}

/* Next marker line at or after pos: the position of its "PTX_INJECT_" (len if none) and
   *ls = the start of its line. memchr hunts the 'J' (rare in PTX), so code and ordinary
   comments cost only memchr's scan; a hit is verified backwards over blanks, "//", blanks to
   the line start. Each blank run is crossed by at most one hit, so the scan is linear. */
static uint32_t ptxinj__next_marker(const char *s, uint32_t len, uint32_t pos, uint32_t *ls)
{
    while (pos < len) {
        const char *q = (const char *)memchr(s + pos, 'J', len - pos);
        uint32_t j, p;
        if (!q) return len;
        j = (uint32_t)(q - s);
        pos = j + 1;
        if (j < 8 || len - j < 5 || memcmp(s + j - 6, PTXINJ__PREFIX, 11) != 0) continue;
        for (p = j - 6; p > 0 && ptxinj__indent(s[p - 1]); p--) {}
        if (p < 2 || s[p - 1] != '/' || s[p - 2] != '/') continue;
        for (p -= 2; p > 0 && ptxinj__indent(s[p - 1]); p--) {}
        if (p > 0 && s[p - 1] != '\n') continue;
        *ls = p;
        return j - 6;
    }
    return len;
}

/* Split [b, e) up to the first '\n' into tokens: returns how many (up to max), or max + 1 if
   there are more; *stop = where the line ends. t may be NULL when max is 0 (blank test). */
static uint32_t ptxinj__split(const char *s, uint32_t b, uint32_t e, ptxinj__tok *t, uint32_t max,
                              uint32_t *stop)
{
    uint32_t n = 0;
    for (;;) {
        while (b < e && PTXINJ__SEP(s[b])) b++;
        if (b == e || s[b] == '\n') { *stop = b; return n; }
        if (n == max) return max + 1;
        t[n].off = b;
        while (b < e && !PTXINJ__ENDS_WORD(s[b])) b++;
        t[n].len = b - t[n].off;
        n++;
    }
}

static int ptxinj__same(const char *s, uint32_t ao, uint32_t al, uint32_t bo, uint32_t bl)
{
    return al == bl && memcmp(s + ao, s + bo, al) == 0;
}

static ptxinj_status ptxinj__fail(ptxinj_ctx *c, ptxinj_status st, uint32_t off, uint32_t site)
{
    c->err_offset = off;
    c->err_site = site;
    return st;
}

/* Site index of name, or PTXINJ__NONE with *slot = the empty slot where it would go. The
   probe count is bounded so a corrupted (full) table cannot loop forever. */
static uint32_t ptxinj__lookup(const ptxinj_ctx *c, const char *name, uint32_t len, uint32_t h,
                               uint32_t *slot)
{
    uint32_t i = h & c->table_mask;
    uint64_t n;
    *slot = PTXINJ__NONE;
    for (n = 0; n <= (uint64_t)c->table_mask; n++, i = (i + 1) & c->table_mask) {
        uint32_t e = c->table[i];
        const ptxinj_site *st;
        if (e == 0) { *slot = i; break; }
        if (e - 1 >= c->n_sites) continue;
        st = &c->sites[e - 1];
        if (st->hash == h && st->name_len == len && st->name_off <= c->ptx_len &&
            len <= c->ptx_len - st->name_off && memcmp(c->ptx + st->name_off, name, len) == 0)
            return e - 1;
    }
    return PTXINJ__NONE;
}

/* Counting scan for the memory bound. BEGIN/START lines bound sites and instances; VAR lines
   and every line of a START block bound variables. A block byte-identical to the previous
   block cannot hold a site's first instance (parse would have met that site already, or
   stopped with an error), so it is skipped with one memcmp and adds no variables. */
static void ptxinj__count(const char *s, uint32_t len, uint32_t *n_begin, uint32_t *n_other)
{
    uint32_t pos = 0, open = PTXINJ__NONE, pb = 0, pl = 0, ls = 0, rest = 0, m, e;
    int legacy = 0, kw;
    while (pos < len) {
        if (legacy) {   /* mm-ptx variable lines carry no marker: count every line */
            uint32_t j = pos;
            ls = pos;
            e = ptxinj__eol(s, len, pos);
            pos = e < len ? e + 1 : len;
            while (j < e && ptxinj__indent(s[j])) j++;
            kw = e - j >= 2 && s[j] == '/' && s[j + 1] == '/' ? ptxinj__comment_kw(s, j + 2, e, &rest)
                                                               : PTXINJ__KW_NONE;
            if (kw == PTXINJ__KW_END) { pb = open; pl = pos - open; open = PTXINJ__NONE; legacy = 0; }
            else if (kw == PTXINJ__KW_BEGIN || kw == PTXINJ__KW_START) { (*n_begin)++; open = ls; }
            else (*n_other)++;
            continue;
        }
        m = ptxinj__next_marker(s, len, pos, &ls);
        if (m >= len) break;
        kw = ptxinj__kw(s, m + 11, len, &rest);
        pos = m + 11;
        if (kw == PTXINJ__KW_BEGIN || kw == PTXINJ__KW_START) {
            (*n_begin)++;
            if (pl && pl <= len - ls && memcmp(s + ls, s + pb, pl) == 0) {   /* repeated block */
                pos = ls + pl;
                continue;
            }
            open = ls;
            if (kw == PTXINJ__KW_START) {
                legacy = 1;
                e = ptxinj__eol(s, len, m);
                pos = e < len ? e + 1 : len;
            }
        } else if (kw == PTXINJ__KW_VAR) {
            (*n_other)++;
        } else if (kw == PTXINJ__KW_END && open != PTXINJ__NONE) {
            e = ptxinj__eol(s, len, m);
            pos = e < len ? e + 1 : len;
            pb = open; pl = pos - open; open = PTXINJ__NONE;
        }
    }
}

static ptxinj_status ptxinj__instance(ptxinj__parser *p, uint32_t site, uint32_t begin,
                                      uint32_t end, int first)
{
    ptxinj_ctx *c = p->c;
    ptxinj_instance *in;
    if (c->n_instances >= p->cap_sites)   /* cannot happen: counted */
        return ptxinj__fail(c, PTXINJ_ERR_BUFFER_TOO_SMALL, begin, site);
    in = &c->instances[c->n_instances];
    in->site = site; in->begin = begin; in->end = end;
    if (first) c->sites[site].first_instance = c->n_instances;
    c->sites[site].n_instances++;
    c->n_instances++;
    return PTXINJ_OK;
}

/* A BEGIN/START line at ls; rest = just after the keyword. Opens the block (*pos = next
   line), or, when the instance is byte-identical to the site's first one, records it whole
   (*pos = its end): identical bytes parse to identical variables. */
static ptxinj_status ptxinj__open(ptxinj__parser *p, uint32_t ls, uint32_t rest, int legacy,
                                  uint32_t *pos)
{
    ptxinj_ctx *c = p->c;
    const char *s = p->s;
    ptxinj__tok t;
    uint32_t h, slot, idx, stop = rest;
    if (ptxinj__split(s, rest, c->ptx_len, &t, 1, &stop) != 1)
        return ptxinj__fail(c, PTXINJ_ERR_MALFORMED_MARKER, ls, PTXINJ__NONE);
    *pos = stop < c->ptx_len ? stop + 1 : c->ptx_len;
    if (legacy) c->legacy = 1;
    h = ptxinj__fnv(s + t.off, t.len);
    idx = ptxinj__lookup(c, s + t.off, t.len, h, &slot);
    p->first = idx == PTXINJ__NONE;
    if (p->first) {
        ptxinj_site *st;
        if (c->n_sites >= p->cap_sites || slot == PTXINJ__NONE)   /* cannot happen: counted */
            return ptxinj__fail(c, PTXINJ_ERR_BUFFER_TOO_SMALL, ls, PTXINJ__NONE);
        idx = c->n_sites;
        st = &c->sites[idx];
        st->name_off = t.off; st->name_len = t.len;
        st->first_var = c->n_vars; st->n_vars = 0;
        st->n_instances = 0; st->first_instance = PTXINJ__NONE; st->hash = h;
        c->table[slot] = idx + 1;
        c->n_sites++;
    } else if (c->sites[idx].first_instance < c->n_instances) {
        const ptxinj_instance *f = &c->instances[c->sites[idx].first_instance];
        uint32_t n = f->end - f->begin;
        if (n <= c->ptx_len - ls && memcmp(s + ls, s + f->begin, n) == 0) {
            *pos = ls + n;
            return ptxinj__instance(p, idx, ls, ls + n, 0);
        }
    }
    p->site = idx; p->begin = ls; p->k = 0; p->legacy = legacy;
    return PTXINJ_OK;
}

static uint32_t ptxinj__kind(const char *s, ptxinj__tok t, int legacy)
{
    const char *w = s + t.off;
    if (legacy) {
        if (t.len != 1) return PTXINJ__NONE;
        return *w == 'i' ? PTXINJ_IN : *w == 'o' ? PTXINJ_OUT : *w == 'm' ? PTXINJ_MOD : PTXINJ__NONE;
    }
    if (t.len == 2 && memcmp(w, "in", 2) == 0) return PTXINJ_IN;
    if (t.len == 3 && memcmp(w, "out", 3) == 0) return PTXINJ_OUT;
    if (t.len == 3 && memcmp(w, "mod", 3) == 0) return PTXINJ_MOD;
    return PTXINJ__NONE;
}

/* One variable line; b is where its 5 fields start. The first instance records the variable
   (rejecting a repeated name via the (site, name) hash); later instances must match it. */
static ptxinj_status ptxinj__var(ptxinj__parser *p, uint32_t ls, uint32_t b, uint32_t *stop)
{
    ptxinj_ctx *c = p->c;
    ptxinj_site *st = &c->sites[p->site];
    const char *s = p->s;
    ptxinj__tok t[5];
    ptxinj_var v;
    if (ptxinj__split(s, b, c->ptx_len, t, 5, stop) != 5)
        return ptxinj__fail(c, PTXINJ_ERR_MALFORMED_MARKER, ls, p->site);
    if (p->legacy) {   /* <reg> <i|o|m> <regtype> <dtype> <name> */
        v.kind = ptxinj__kind(s, t[1], 1);
        v.reg_off = t[0].off; v.reg_len = t[0].len;
        v.dtype_off = t[3].off; v.dtype_len = t[3].len;
    } else {           /* <kind> <dtype> <regtype> <reg> <name> */
        v.kind = ptxinj__kind(s, t[0], 0);
        v.dtype_off = t[1].off; v.dtype_len = t[1].len;
        v.reg_off = t[3].off; v.reg_len = t[3].len;
    }
    v.regtype_off = t[2].off; v.regtype_len = t[2].len;
    v.name_off = t[4].off; v.name_len = t[4].len;
    v.line_off = ls;
    if (v.kind == PTXINJ__NONE) return ptxinj__fail(c, PTXINJ_ERR_MALFORMED_MARKER, ls, p->site);

    if (p->first) {
        uint32_t h = ptxinj__fnv(s + v.name_off, v.name_len) ^ (p->site * 0x9E3779B1u);
        uint32_t i, e2;
        h ^= h >> 15; h *= 0x85EBCA6Bu; h ^= h >> 13;   /* spread the site bits */
        if (c->n_vars >= p->cap_vars)   /* cannot happen: counted */
            return ptxinj__fail(c, PTXINJ_ERR_BUFFER_TOO_SMALL, ls, p->site);
        for (i = h & p->vmask; (e2 = p->vtab[i]) != 0; i = (i + 1) & p->vmask) {
            const ptxinj_var *o = &c->vars[e2 - 1];
            if (e2 - 1 >= st->first_var &&
                ptxinj__same(s, o->name_off, o->name_len, v.name_off, v.name_len))
                return ptxinj__fail(c, PTXINJ_ERR_DUPLICATE_VARIABLE, ls, p->site);
        }
        p->vtab[i] = c->n_vars + 1;
        c->vars[c->n_vars++] = v;
        st->n_vars++;
    } else {
        const ptxinj_var *o;
        if (p->k >= st->n_vars)
            return ptxinj__fail(c, PTXINJ_ERR_INCONSISTENT_INSTANCES, p->begin, p->site);
        o = &c->vars[st->first_var + p->k];
        if (o->kind != v.kind ||
            !ptxinj__same(s, o->dtype_off, o->dtype_len, v.dtype_off, v.dtype_len) ||
            !ptxinj__same(s, o->regtype_off, o->regtype_len, v.regtype_off, v.regtype_len) ||
            !ptxinj__same(s, o->reg_off, o->reg_len, v.reg_off, v.reg_len) ||
            !ptxinj__same(s, o->name_off, o->name_len, v.name_off, v.name_len))
            return ptxinj__fail(c, PTXINJ_ERR_INCONSISTENT_INSTANCES, ls, p->site);
    }
    p->k++;
    return PTXINJ_OK;
}

/* The line at ls inside a block: blank, a variable line, END, or an error. *next = the start
   of the following line (tokenizing finds the line end, so no separate newline search). */
static ptxinj_status ptxinj__block_line(ptxinj__parser *p, uint32_t ls, uint32_t *next)
{
    const char *s = p->s;
    uint32_t len = p->c->ptx_len, j = ls, rest = 0, stop = len, site = p->site;
    ptxinj_status st = PTXINJ_OK;
    int kw;
    while (j < len && ptxinj__indent(s[j])) j++;
    if (len - j < 2 || s[j] != '/' || s[j + 1] != '/') {
        if (ptxinj__split(s, j, len, NULL, 0, &stop) != 0)   /* only blank lines are allowed */
            st = ptxinj__fail(p->c, PTXINJ_ERR_MALFORMED_MARKER, ls, site);
    } else {
        kw = ptxinj__comment_kw(s, j + 2, len, &rest);
        if (kw == PTXINJ__KW_BEGIN || kw == PTXINJ__KW_START) {
            st = ptxinj__fail(p->c, PTXINJ_ERR_NESTED_SITE, ls, site);
        } else if (kw == PTXINJ__KW_END) {
            if (ptxinj__split(s, rest, len, NULL, 0, &stop) != 0)
                return ptxinj__fail(p->c, PTXINJ_ERR_MALFORMED_MARKER, ls, site);
            if (!p->first && p->k != p->c->sites[site].n_vars)
                return ptxinj__fail(p->c, PTXINJ_ERR_INCONSISTENT_INSTANCES, p->begin, site);
            *next = stop < len ? stop + 1 : len;
            p->site = PTXINJ__NONE;
            return ptxinj__instance(p, site, p->begin, *next, p->first);
        } else if (kw == PTXINJ__KW_VAR && !p->legacy) {
            st = ptxinj__var(p, ls, rest, &stop);
        } else if (kw == PTXINJ__KW_NONE && p->legacy) {
            st = ptxinj__var(p, ls, j + 2, &stop);
        } else {
            st = ptxinj__fail(p->c, PTXINJ_ERR_MALFORMED_MARKER, ls, site);
        }
    }
    *next = stop < len ? stop + 1 : len;
    return st;
}

PTXINJ_DEF ptxinj_status ptxinj_parse(ptxinj_ctx *ctx, const char *ptx, size_t len,
                                      void *mem, size_t mem_size)
{
    uint32_t n_begin = 0, n_other = 0, pos = 0, n;
    uint64_t scap, vcap, need;
    char *m;
    ptxinj__parser p;
    ptxinj_status st = PTXINJ_OK;

    if (!ctx) return PTXINJ_ERR_INVALID_ARGUMENT;
    memset(ctx, 0, sizeof *ctx);
    ctx->err_site = PTXINJ__NONE;
    if (!ptx) return PTXINJ_ERR_INVALID_ARGUMENT;
    if (len > (size_t)(UINT32_MAX - 1u)) return PTXINJ_ERR_TOO_LARGE;
    n = (uint32_t)len;

    ptxinj__count(ptx, n, &n_begin, &n_other);
    scap = ptxinj__slots(n_begin);
    vcap = ptxinj__slots(n_other);
    need = 3 + (uint64_t)n_begin * (sizeof(ptxinj_site) + sizeof(ptxinj_instance)) +
           (uint64_t)n_other * sizeof(ptxinj_var) + 4 * (scap + vcap);
    if ((uint64_t)(size_t)need != need) return PTXINJ_ERR_TOO_LARGE;
    ctx->mem_needed = (size_t)need;
    if (!mem || mem_size < (size_t)need) return PTXINJ_ERR_BUFFER_TOO_SMALL;

    /* carve the arrays; every record is uint32-only, so 4-byte alignment suffices */
    m = (char *)mem + ((4u - (unsigned)((uintptr_t)mem & 3u)) & 3u);
    ctx->sites = (ptxinj_site *)(void *)m;         m += (size_t)n_begin * sizeof(ptxinj_site);
    ctx->instances = (ptxinj_instance *)(void *)m; m += (size_t)n_begin * sizeof(ptxinj_instance);
    ctx->vars = (ptxinj_var *)(void *)m;           m += (size_t)n_other * sizeof(ptxinj_var);
    ctx->table = (uint32_t *)(void *)m;            m += (size_t)scap * 4;
    memset(ctx->table, 0, (size_t)(scap + vcap) * 4);
    ctx->table_mask = (uint32_t)(scap - 1);
    ctx->ptx = ptx;
    ctx->ptx_len = n;

    p.c = ctx; p.s = ptx;
    p.cap_sites = n_begin; p.cap_vars = n_other;
    p.vtab = (uint32_t *)(void *)m; p.vmask = (uint32_t)(vcap - 1);
    p.site = PTXINJ__NONE; p.begin = 0; p.k = 0; p.first = 0; p.legacy = 0;

    while (pos < n && st == PTXINJ_OK) {
        uint32_t mk, ls = 0, rest = 0;
        int kw;
        if (p.site != PTXINJ__NONE) {   /* inside a block every line counts */
            st = ptxinj__block_line(&p, pos, &pos);
            continue;
        }
        mk = ptxinj__next_marker(ptx, n, pos, &ls);   /* outside: jump from marker to marker */
        if (mk >= n) break;
        kw = ptxinj__kw(ptx, mk + 11, n, &rest);
        pos = mk + 11;
        if (kw == PTXINJ__KW_BEGIN || kw == PTXINJ__KW_START) {
            const ptxinj_instance *f = ctx->n_instances ? &ctx->instances[ctx->n_instances - 1] : NULL;
            if (f && f->end - f->begin <= n - ls && memcmp(ptx + ls, ptx + f->begin, f->end - f->begin) == 0) {
                pos = ls + (f->end - f->begin);   /* a copy of the previous block (unrolled loop) */
                st = ptxinj__instance(&p, f->site, ls, pos, 0);
            } else {
                st = ptxinj__open(&p, ls, rest, kw == PTXINJ__KW_START, &pos);
            }
        } else if (kw == PTXINJ__KW_END)
            st = ptxinj__fail(ctx, PTXINJ_ERR_UNEXPECTED_END, ls, PTXINJ__NONE);
        else if (kw == PTXINJ__KW_VAR)
            st = ptxinj__fail(ctx, PTXINJ_ERR_MALFORMED_MARKER, ls, PTXINJ__NONE);
    }
    if (st == PTXINJ_OK && p.site != PTXINJ__NONE)
        st = ptxinj__fail(ctx, PTXINJ_ERR_MISSING_END, p.begin, p.site);
    return st;
}

PTXINJ_DEF ptxinj_status ptxinj_find_site(const ptxinj_ctx *ctx, const char *name, size_t len,
                                          uint32_t *index)
{
    uint32_t slot, idx;
    if (!ctx || !name || !index) return PTXINJ_ERR_INVALID_ARGUMENT;
    if (!ctx->table || !ctx->sites || !ctx->ptx || len == 0 || len > ctx->ptx_len)
        return PTXINJ_ERR_UNKNOWN_SITE;
    idx = ptxinj__lookup(ctx, name, (uint32_t)len, ptxinj__fnv(name, (uint32_t)len), &slot);
    if (idx == PTXINJ__NONE) return PTXINJ_ERR_UNKNOWN_SITE;
    *index = idx;
    return PTXINJ_OK;
}

/* Stub slice of site i (validated by render before use). */
static void ptxinj__stub(const uint32_t *offsets, uint32_t flags, uint32_t i,
                         uint32_t *off, uint32_t *len)
{
    if (flags & PTXINJ_RENDER_PAIRS) {
        *off = offsets[(size_t)i * 2];
        *len = *off == PTXINJ_NO_STUB ? 0 : offsets[(size_t)i * 2 + 1];
        if (*off == PTXINJ_NO_STUB) *off = 0;
    } else {
        *off = offsets[i];
        *len = offsets[(size_t)i + 1] - offsets[i];
    }
}

static char *ptxinj__put(char *w, const char *src, size_t n)
{
    if (n) memcpy(w, src, n);
    return w + n;
}

static int ptxinj__add(size_t *total, uint64_t n)
{
    if (n > (uint64_t)(SIZE_MAX - *total)) return 0;
    *total += (size_t)n;
    return 1;
}

/* ---- binding (PTXINJ_RENDER_BIND) ---------------------------------------------------------- */

/* The types of the function-level register ranges ("\t.reg .f32 \t%f<3521>;", as NVRTC and NVVM
   declare every register they use): binding needs an operand's type to equal its variable's
   register type, or a stub could type-check (or fail) differently once bound. A prefix
   declared with two types is ambiguous (type_len 0). */
#define PTXINJ__MAX_PREFIXES 32u
typedef struct ptxinj__regtypes {
    uint32_t n;
    uint32_t pre_off[PTXINJ__MAX_PREFIXES], pre_len[PTXINJ__MAX_PREFIXES];   /* "%f" */
    uint32_t ty_off[PTXINJ__MAX_PREFIXES], ty_len[PTXINJ__MAX_PREFIXES];     /* "f32" */
} ptxinj__regtypes;

typedef struct ptxinj__frame {
    uint32_t begin, end;                                  /* the frame [begin, end) */
    uint32_t op_off[PTXINJ_BIND_MAX_VARS], op_len[PTXINJ_BIND_MAX_VARS];   /* per variable */
} ptxinj__frame;

/* Bytes that continue a PTX identifier: [A-Za-z0-9_$]. */
static const unsigned char ptxinj__idtab[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1, ['_'] = 1, ['$'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1
};
#define ptxinj__idc(ch) (ptxinj__idtab[(unsigned char)(ch)] != 0)

/* memcmp(a, b, n) == 0 for the short names binding compares (a call costs more than them). */
static int ptxinj__eq(const char *a, const char *b, uint32_t n)
{
    while (n && *a == *b) { a++; b++; n--; }
    return n == 0;
}

/* Index of the site variable whose register is name[0, n) (no '%'), or PTXINJ__NONE. */
static uint32_t ptxinj__var_named(const ptxinj_ctx *c, const ptxinj_site *st, const char *name,
                                  uint32_t n)
{
    uint32_t j;
    for (j = 0; j < st->n_vars; j++) {
        const ptxinj_var *v = &c->vars[st->first_var + j];
        if (v->reg_len == n && ptxinj__eq(c->ptx + v->reg_off, name, n)) return j;
    }
    return PTXINJ__NONE;
}

/* Variable of a "%reg" slice s[o, o + n), or PTXINJ__NONE. */
static uint32_t ptxinj__var_ref(const ptxinj_ctx *c, const ptxinj_site *st, const char *s,
                                uint32_t o, uint32_t n)
{
    return n >= 2 && s[o] == '%' ? ptxinj__var_named(c, st, s + o + 1, n - 1) : PTXINJ__NONE;
}

/* A register operand: '%' and one or more identifier bytes. */
static int ptxinj__is_reg(const char *s, uint32_t o, uint32_t n)
{
    uint32_t i;
    if (n < 2 || s[o] != '%') return 0;
    for (i = 1; i < n; i++)
        if (!ptxinj__idc(s[o + i])) return 0;
    return 1;
}

/* "mov.<t> A, B;" (trimmed line [a, b)): the two operand slices, or 0. */
static int ptxinj__mov_line(const char *s, uint32_t a, uint32_t b, ptxinj__tok *dst, ptxinj__tok *src)
{
    uint32_t i = a + 4;
    if (b - a < 8 || memcmp(s + a, "mov.", 4) != 0 || s[b - 1] != ';') return 0;
    while (i < b && !PTXINJ__SEP(s[i])) i++;             /* the type suffix */
    while (i < b && PTXINJ__SEP(s[i])) i++;
    dst->off = i;
    while (i < b && s[i] != ',' && !PTXINJ__SEP(s[i])) i++;
    dst->len = i - dst->off;
    while (i < b && PTXINJ__SEP(s[i])) i++;
    if (i >= b || s[i] != ',') return 0;
    for (i++; i < b && PTXINJ__SEP(s[i]); i++) {}
    src->off = i;
    while (i < b - 1 && s[i] != ';' && !PTXINJ__SEP(s[i])) i++;
    src->len = i - src->off;
    while (i < b - 1 && PTXINJ__SEP(s[i])) i++;
    return i == b - 1 && dst->len && src->len;
}

/* ".reg .<type> %<name>;" (trimmed line [a, b)): the type (no dot) and name slices, or 0. */
static int ptxinj__reg_line(const char *s, uint32_t a, uint32_t b, ptxinj__tok *type, ptxinj__tok *name)
{
    uint32_t i = a + 4;
    if (b - a < 10 || memcmp(s + a, ".reg", 4) != 0 || !PTXINJ__SEP(s[i]) || s[b - 1] != ';') return 0;
    while (i < b && PTXINJ__SEP(s[i])) i++;
    if (i >= b || s[i] != '.') return 0;
    type->off = ++i;
    while (i < b && !PTXINJ__SEP(s[i])) i++;
    type->len = i - type->off;
    while (i < b && PTXINJ__SEP(s[i])) i++;
    name->off = i;
    while (i < b - 1 && s[i] != ';' && !PTXINJ__SEP(s[i])) i++;
    name->len = i - name->off;
    while (i < b - 1 && PTXINJ__SEP(s[i])) i++;
    return i == b - 1 && type->len && name->len;
}

/* [ls, le) without its blanks (and a trailing '\r') on both sides. */
static void ptxinj__trim(const char *s, uint32_t ls, uint32_t le, uint32_t *a, uint32_t *b)
{
    while (ls < le && PTXINJ__SEP(s[ls])) ls++;
    while (le > ls && PTXINJ__SEP(s[le - 1])) le--;
    *a = ls; *b = le;
}

/* Collect the ".reg .<type> %<prefix><N>;" lines of the PTX into rt (one pass, line by line). */
static void ptxinj__scan_regtypes(const ptxinj_ctx *c, ptxinj__regtypes *rt)
{
    const char *s = c->ptx;
    uint32_t pos = 0, len = c->ptx_len;
    rt->n = 0;
    while (pos < len) {
        uint32_t le = ptxinj__eol(s, len, pos), a, b, i, k;
        ptxinj__tok ty, name;
        ptxinj__trim(s, pos, le, &a, &b);
        pos = le + 1;
        if (!ptxinj__reg_line(s, a, b, &ty, &name) || name.len < 4 || s[name.off] != '%' ||
            s[name.off + name.len - 1] != '>')
            continue;
        for (i = name.off + 1; i < name.off + name.len && ptxinj__idc(s[i]) &&
                               !(s[i] >= '0' && s[i] <= '9'); i++) {}
        if (i == name.off + 1 || s[i] != '<') continue;   /* "%f<N>": a prefix without digits */
        for (k = 0; k < rt->n; k++)
            if (ptxinj__same(s, rt->pre_off[k], rt->pre_len[k], name.off, i - name.off)) break;
        if (k < rt->n) {
            if (!ptxinj__same(s, rt->ty_off[k], rt->ty_len[k], ty.off, ty.len)) rt->ty_len[k] = 0;
        } else if (rt->n < PTXINJ__MAX_PREFIXES) {
            rt->pre_off[k] = name.off; rt->pre_len[k] = i - name.off;
            rt->ty_off[k] = ty.off; rt->ty_len[k] = ty.len;
            rt->n++;
        }
    }
}

/* Is register operand s[o, o + n) ("%f321") of declared type t[0, tn) ("f32")? */
static int ptxinj__typed(const ptxinj_ctx *c, const ptxinj__regtypes *rt, uint32_t o, uint32_t n,
                         uint32_t to, uint32_t tn)
{
    const char *s = c->ptx;
    uint32_t d = n, k;
    while (d > 1 && s[o + d - 1] >= '0' && s[o + d - 1] <= '9') d--;
    if (d == n || d < 2) return 0;   /* needs "%prefix" + digits */
    for (k = 0; k < rt->n; k++)
        if (ptxinj__same(s, rt->pre_off[k], rt->pre_len[k], o, d))
            return rt->ty_len[k] && ptxinj__same(s, rt->ty_off[k], rt->ty_len[k], to, tn);
    return 0;
}

/* The copy frame around instance `in`, lying inside [lo, hi) (see BINDING), or 0. */
static int ptxinj__frame_of(const ptxinj_ctx *c, const ptxinj_instance *in, uint32_t lo,
                            uint32_t hi, const ptxinj__regtypes *rt, ptxinj__frame *f)
{
    const char *s = c->ptx;
    const ptxinj_site *st = &c->sites[in->site];
    uint32_t nv = st->n_vars, all = 0, need_in = 0, need_out = 0, regs = 0, ins = 0, outs = 0;
    uint32_t q, j, k, lines, e;
    ptxinj__tok x, y;
    if (nv > PTXINJ_BIND_MAX_VARS || st->first_var > c->n_vars || nv > c->n_vars - st->first_var)
        return 0;
    /* the instance must start with a BEGIN line (mm-ptx START blocks are not bound) */
    e = ptxinj__eol(s, c->ptx_len, in->begin);
    for (q = in->begin; q < e && ptxinj__indent(s[q]); q++) {}
    if (e - q < 2 || s[q] != '/' || s[q + 1] != '/' ||
        ptxinj__comment_kw(s, q + 2, e, &k) != PTXINJ__KW_BEGIN)
        return 0;
    for (j = 0; j < nv; j++) {
        uint32_t kind = c->vars[st->first_var + j].kind;
        all |= 1u << j;
        if (kind != PTXINJ_OUT) need_in |= 1u << j;
        if (kind != PTXINJ_IN) need_out |= 1u << j;
    }
    /* backwards from the BEGIN line to the "{" line: declarations and copies in */
    q = in->begin;
    for (lines = 0;; lines++) {
        uint32_t le, ls, a, b;
        if (q <= lo || s[q - 1] != '\n' || lines > 2 * nv) return 0;
        le = q - 1;
        for (ls = le; ls > lo && s[ls - 1] != '\n'; ls--) {}
        ptxinj__trim(s, ls, le, &a, &b);
        if (b - a == 1 && s[a] == '{') { f->begin = ls; break; }
        if (ptxinj__reg_line(s, a, b, &x, &y)) {
            const ptxinj_var *v;
            j = ptxinj__var_ref(c, st, s, y.off, y.len);
            if (j == PTXINJ__NONE || (regs >> j & 1u)) return 0;
            v = &c->vars[st->first_var + j];
            if (!ptxinj__same(s, x.off, x.len, v->regtype_off, v->regtype_len)) return 0;
            regs |= 1u << j;
        } else if (ptxinj__mov_line(s, a, b, &x, &y)) {
            j = ptxinj__var_ref(c, st, s, x.off, x.len);
            if (j == PTXINJ__NONE || !(need_in >> j & 1u) || (ins >> j & 1u)) return 0;
            f->op_off[j] = y.off; f->op_len[j] = y.len;
            ins |= 1u << j;
        } else {
            return 0;
        }
        q = ls;
    }
    /* forwards from the line after END to the "}" line: copies out */
    q = in->end;
    if (q == 0 || s[q - 1] != '\n') return 0;
    for (lines = 0;; lines++) {
        uint32_t le, a, b;
        if (q >= hi || lines > nv) return 0;
        le = ptxinj__eol(s, c->ptx_len, q);
        ptxinj__trim(s, q, le, &a, &b);
        if (b - a == 1 && s[a] == '}') {
            f->end = le < c->ptx_len ? le + 1 : c->ptx_len;
            if (f->end > hi) return 0;
            break;
        }
        if (!ptxinj__mov_line(s, a, b, &x, &y)) return 0;
        j = ptxinj__var_ref(c, st, s, y.off, y.len);
        if (j == PTXINJ__NONE || !(need_out >> j & 1u) || (outs >> j & 1u)) return 0;
        if (need_in >> j & 1u) {   /* mod: back to where it came from */
            if (!(ins >> j & 1u) || !ptxinj__same(s, x.off, x.len, f->op_off[j], f->op_len[j])) return 0;
        } else {
            f->op_off[j] = x.off; f->op_len[j] = x.len;
        }
        outs |= 1u << j;
        q = le + 1;
    }
    if (regs != all || ins != need_in || outs != need_out) return 0;
    for (j = 0; j < nv; j++) {
        const ptxinj_var *v = &c->vars[st->first_var + j];
        if (!ptxinj__is_reg(s, f->op_off[j], f->op_len[j]) ||
            ptxinj__var_ref(c, st, s, f->op_off[j], f->op_len[j]) != PTXINJ__NONE ||
            !ptxinj__typed(c, rt, f->op_off[j], f->op_len[j], v->regtype_off, v->regtype_len))
            return 0;
        if (!(need_out >> j & 1u)) continue;
        for (k = 0; k < nv; k++)
            if (k != j && ptxinj__same(s, f->op_off[j], f->op_len[j], f->op_off[k], f->op_len[k]))
                return 0;
    }
    return 1;
}

/* What binding needs to know of one stub for one site, whatever the operands: ok = no block
   comment, no comment inside a statement, no directive naming a variable register, no
   statement writing an in variable. Cached across consecutive instances of a site. */
typedef struct ptxinj__stubinfo {
    const char *stub; uint32_t n, site;
    int ok;
    int scoped;   /* the stub is one "{ ... }" block: binding needs not add a scope */
} ptxinj__stubinfo;

#define PTXINJ__OPEN "\t{\n"      /* the scope a bound stub gets when it has none */
#define PTXINJ__CLOSE "\t}\n"
#define PTXINJ__SCOPE_LEN 6u

/* Is b[0, n) one brace block (blanks around it, braces in "//" comments ignored)? */
static int ptxinj__one_block(const char *b, uint32_t n)
{
    uint32_t i = 0, depth = 0;
    while (i < n && (PTXINJ__SEP(b[i]) || b[i] == '\n')) i++;
    if (i == n || b[i] != '{') return 0;
    for (; i < n; i++) {
        if (b[i] == '/' && i + 1 < n && b[i + 1] == '/') {
            const char *p = (const char *)memchr(b + i, '\n', n - i);
            if (!p) return 0;
            i = (uint32_t)(p - b);
        } else if (b[i] == '{') {
            depth++;
        } else if (b[i] == '}') {
            if (depth == 0 || --depth == 0) break;
        }
    }
    if (i == n) return 0;
    for (i++; i < n && (PTXINJ__SEP(b[i]) || b[i] == '\n'); i++) {}
    return i == n;
}

/* '%' names in b[i, e) against the variable registers (f == NULL) or against the operands of
   frame f. A "%name<N>" range counts when a register is name followed by digits. */
static int ptxinj__names_clash(const ptxinj_ctx *c, const ptxinj_site *st, const ptxinj__frame *f,
                               const char *b, uint32_t i, uint32_t e)
{
    while (i < e) {
        const char *p = (const char *)memchr(b + i, '%', e - i);
        uint32_t k, t, j;
        if (!p) return 0;
        k = (uint32_t)(p - b);
        for (t = k + 1; t < e && ptxinj__idc(b[t]); t++) {}
        if (!f) {
            if (ptxinj__var_named(c, st, b + k + 1, t - k - 1) != PTXINJ__NONE) return 1;
            if (t < e && b[t] == '<')   /* "%v_acc<2>" declares %v_acc0 and %v_acc1 */
                for (j = 0; j < st->n_vars; j++) {
                    const ptxinj_var *v = &c->vars[st->first_var + j];
                    uint32_t m, pl = t - k - 1;
                    if (v->reg_len <= pl || !ptxinj__eq(c->ptx + v->reg_off, b + k + 1, pl)) continue;
                    for (m = pl; m < v->reg_len && c->ptx[v->reg_off + m] >= '0' &&
                                 c->ptx[v->reg_off + m] <= '9'; m++) {}
                    if (m == v->reg_len) return 1;
                }
        } else {
            for (j = 0; j < st->n_vars; j++) {
                uint32_t oo = f->op_off[j], ol = f->op_len[j], m;
                if (ol == t - k && ptxinj__eq(c->ptx + oo, b + k, ol)) return 1;
                if (t < e && b[t] == '<' && ol > t - k && ptxinj__eq(c->ptx + oo, b + k, t - k)) {
                    for (m = t - k; m < ol && c->ptx[oo + m] >= '0' && c->ptx[oo + m] <= '9'; m++) {}
                    if (m == ol) return 1;
                }
            }
        }
        i = t;
    }
    return 0;
}

static void ptxinj__stub_info(const ptxinj_ctx *c, const ptxinj_site *st, const char *b, uint32_t n,
                              ptxinj__stubinfo *si)
{
    uint32_t i = 0;
    si->ok = 0;
    si->scoped = ptxinj__one_block(b, n);
    while (i < n) {
        const char *p;
        uint32_t e, d, depth, k, j;
        char ch = b[i];
        if (PTXINJ__SEP(ch) || ch == '\n' || ch == '{' || ch == '}') { i++; continue; }
        if (ch == '/' && i + 1 < n && b[i + 1] == '/') {
            p = (const char *)memchr(b + i, '\n', n - i);
            i = p ? (uint32_t)(p - b) + 1 : n;
            continue;
        }
        p = (const char *)memchr(b + i, ';', n - i);
        e = p ? (uint32_t)(p - b) : n;
        if (memchr(b + i, '/', e - i)) return;   /* a comment inside a statement: PTX has no other '/' */
        /* a label "name:" */
        for (k = i; k < e && (ptxinj__idc(b[k]) || b[k] == '%'); k++) {}
        if (k > i && k < e && b[k] == ':') {
            for (i = k + 1; i < e && (PTXINJ__SEP(b[i]) || b[i] == '\n'); i++) {}
            if (i == e) { i = e + 1; continue; }
        }
        if (b[i] == '.') {
            if (ptxinj__names_clash(c, st, NULL, b, i, e)) return;
            i = e + 1;
            continue;
        }
        if (b[i] == '@')   /* guard */
            while (i < e && !PTXINJ__SEP(b[i]) && b[i] != '\n') i++;
        while (i < e && (PTXINJ__SEP(b[i]) || b[i] == '\n')) i++;
        /* the opcode: letters, digits, '_', '.', ':' ("ld.shared::cta"); a destination may
           follow without a blank ("mov.f32%r1, ...") */
        while (i < e && (ptxinj__idc(b[i]) || b[i] == '.' || b[i] == ':')) i++;
        /* destination: up to the first ',' outside brackets */
        for (d = i, depth = 0; d < e; d++) {
            char x = b[d];
            if (x == '{' || x == '[' || x == '(') depth++;
            else if ((x == '}' || x == ']' || x == ')') && depth) depth--;
            else if (x == ',' && depth == 0) break;
        }
        for (k = i; k < d; k++) {
            uint32_t t;
            if (b[k] != '%') continue;
            for (t = k + 1; t < d && ptxinj__idc(b[t]); t++) {}
            j = ptxinj__var_named(c, st, b + k + 1, t - k - 1);
            if (j != PTXINJ__NONE && c->vars[st->first_var + j].kind == PTXINJ_IN) return;
            k = t - 1;
        }
        i = e + 1;
    }
    si->ok = 1;
}

/* Size of stub b[0, n) with each variable register replaced by its operand; written to w
   unless w is NULL. */
static size_t ptxinj__subst(const ptxinj_ctx *c, const ptxinj_site *st, const ptxinj__frame *f,
                            const char *b, uint32_t n, char *w)
{
    size_t total = 0;
    uint32_t i = 0;
    while (i < n) {
        const char *p = (const char *)memchr(b + i, '%', n - i);
        uint32_t k = p ? (uint32_t)(p - b) : n, t, j;
        if (w) w = ptxinj__put(w, b + i, k - i);
        total += k - i;
        if (k == n) break;
        for (t = k + 1; t < n && ptxinj__idc(b[t]); t++) {}
        j = ptxinj__var_named(c, st, b + k + 1, t - k - 1);
        if (j == PTXINJ__NONE) {
            if (w) w = ptxinj__put(w, b + k, t - k);
            total += t - k;
        } else {
            if (w) w = ptxinj__put(w, c->ptx + f->op_off[j], f->op_len[j]);
            total += f->op_len[j];
        }
        i = t;
    }
    return total;
}

/* Where instance i's text goes: its region, or its frame when bound (*bound = 1, or 2 when the
   stub must be wrapped in a scope of its own: labels and registers it declares stay local). si caches
   the stub check of the last site seen (si->stub == NULL: nothing cached yet). */
static void ptxinj__span(const ptxinj_ctx *ctx, uint32_t i, uint32_t prev, const char *stub,
                         uint32_t n, const ptxinj__regtypes *rt, ptxinj__stubinfo *si,
                         ptxinj__frame *fr, int *bound)
{
    const ptxinj_instance *in = &ctx->instances[i];
    const ptxinj_site *st = &ctx->sites[in->site];
    uint32_t hi = i + 1 < ctx->n_instances ? ctx->instances[i + 1].begin : ctx->ptx_len;
    *bound = 0;
    if (rt && hi >= in->end && ptxinj__frame_of(ctx, in, prev, hi, rt, fr)) {
        if (si->stub != stub || si->n != n || si->site != in->site) {
            ptxinj__stub_info(ctx, st, stub, n, si);
            si->stub = stub; si->n = n; si->site = in->site;
        }
        /* the stub may not name an operand register at all: it would reach the template's
           register behind the variable's back (or declare one of that name) */
        *bound = si->ok && !ptxinj__names_clash(ctx, st, fr, stub, 0, n);
        if (*bound && !si->scoped) *bound = 2;   /* the frame's braces scoped the stub: keep a scope */
    }
    if (!*bound) { fr->begin = in->begin; fr->end = in->end; }
}

PTXINJ_DEF ptxinj_status ptxinj_render(const ptxinj_ctx *ctx, const char *blob, size_t blob_len,
                                       const uint32_t *offsets, uint32_t flags,
                                       char *out, size_t out_cap, size_t *out_len)
{
    const int tag = (flags & PTXINJ_RENDER_TAG) != 0, bind = (flags & PTXINJ_RENDER_BIND) != 0;
    uint32_t i, prev = 0, off, n;
    size_t need = 0;
    char *w;
    ptxinj__frame fr;
    ptxinj__stubinfo si;
    ptxinj__regtypes rt;
    const char *stub;
    int bound, scope;

    if (!ctx || !out_len || (!ctx->ptx && ctx->ptx_len) || (!blob && blob_len) ||
        (!offsets && ctx->n_sites) || (!ctx->sites && ctx->n_sites) ||
        (!ctx->instances && ctx->n_instances) || (bind && !ctx->vars && ctx->n_vars) ||
        (flags & ~(PTXINJ_RENDER_TAG | PTXINJ_RENDER_PAIRS | PTXINJ_RENDER_BIND)))
        return PTXINJ_ERR_INVALID_ARGUMENT;
    /* every stub slice must lie inside blob */
    for (i = 0; i < ctx->n_sites; i++) {
        if (flags & PTXINJ_RENDER_PAIRS) {
            off = offsets[(size_t)i * 2];
            n = offsets[(size_t)i * 2 + 1];
            if (off != PTXINJ_NO_STUB && (off > blob_len || n > blob_len - off))
                return PTXINJ_ERR_INVALID_ARGUMENT;
        } else if (offsets[i + 1] < offsets[i] || offsets[i + 1] > blob_len) {
            return PTXINJ_ERR_INVALID_ARGUMENT;
        }
        if (tag && (ctx->sites[i].name_off > ctx->ptx_len ||
                    ctx->sites[i].name_len > ctx->ptx_len - ctx->sites[i].name_off))
            return PTXINJ_ERR_INVALID_ARGUMENT;
    }
    /* instances must be ordered, disjoint and inside the PTX (binding reads the variables of
       their sites); sum the output size: O(1) per instance, or a scan of the stub when bound */
    for (i = 0; i < ctx->n_instances; i++) {
        const ptxinj_instance *in = &ctx->instances[i];
        if (in->site >= ctx->n_sites || in->begin < prev || in->end < in->begin || in->end > ctx->ptx_len)
            return PTXINJ_ERR_INVALID_ARGUMENT;
        if (bind) {
            const ptxinj_site *st = &ctx->sites[in->site];
            uint32_t j;
            if (st->first_var > ctx->n_vars || st->n_vars > ctx->n_vars - st->first_var)
                return PTXINJ_ERR_INVALID_ARGUMENT;
            for (j = 0; j < st->n_vars && st->n_vars <= PTXINJ_BIND_MAX_VARS; j++) {
                const ptxinj_var *v = &ctx->vars[st->first_var + j];
                if (v->reg_off > ctx->ptx_len || v->reg_len > ctx->ptx_len - v->reg_off ||
                    v->regtype_off > ctx->ptx_len || v->regtype_len > ctx->ptx_len - v->regtype_off)
                    return PTXINJ_ERR_INVALID_ARGUMENT;
            }
        }
        prev = in->end;
    }
    if (bind) ptxinj__scan_regtypes(ctx, &rt);   /* once, for both passes */
    prev = 0;
    si.stub = NULL; si.n = 0; si.site = PTXINJ__NONE; si.ok = 0;
    for (i = 0; i < ctx->n_instances; i++) {
        const ptxinj_instance *in = &ctx->instances[i];
        size_t body;
        ptxinj__stub(offsets, flags, in->site, &off, &n);
        stub = n ? blob + off : "";   /* blob may be NULL when every stub is empty */
        ptxinj__span(ctx, i, prev, stub, n, bind ? &rt : NULL, &si, &fr, &bound);
        body = bound ? ptxinj__subst(ctx, &ctx->sites[in->site], &fr, stub, n, NULL) : n;
        if (bound == 2 && (tag || n) && !ptxinj__add(&need, PTXINJ__SCOPE_LEN)) return PTXINJ_ERR_TOO_LARGE;
        if (!ptxinj__add(&need, fr.begin - prev)) return PTXINJ_ERR_TOO_LARGE;
        if (tag) {
            uint64_t extra = (uint64_t)PTXINJ__TAG_LEN + ctx->sites[in->site].name_len + 1 + body +
                             PTXINJ__TAG_END_LEN;
            if (!ptxinj__add(&need, extra)) return PTXINJ_ERR_TOO_LARGE;
        } else if (n) {
            if (!ptxinj__add(&need, (uint64_t)body + (blob[(size_t)off + n - 1] != '\n')))
                return PTXINJ_ERR_TOO_LARGE;
        }
        prev = fr.end;
    }
    if (!ptxinj__add(&need, ctx->ptx_len - prev)) return PTXINJ_ERR_TOO_LARGE;
    *out_len = need;
    if (!out) return PTXINJ_OK;
    if (out_cap < need) return PTXINJ_ERR_BUFFER_TOO_SMALL;

    w = out;
    prev = 0;
    si.stub = NULL; si.n = 0; si.site = PTXINJ__NONE; si.ok = 0;
    for (i = 0; i < ctx->n_instances; i++) {
        const ptxinj_instance *in = &ctx->instances[i];
        ptxinj__stub(offsets, flags, in->site, &off, &n);
        stub = n ? blob + off : "";
        ptxinj__span(ctx, i, prev, stub, n, bind ? &rt : NULL, &si, &fr, &bound);
        w = ptxinj__put(w, ctx->ptx + prev, fr.begin - prev);
        scope = bound == 2 && (tag || n);
        if (scope) { memcpy(w, PTXINJ__OPEN, 3); w += 3; }
        if (tag) {
            const ptxinj_site *st = &ctx->sites[in->site];
            memcpy(w, PTXINJ__TAG, PTXINJ__TAG_LEN);
            w = ptxinj__put(w + PTXINJ__TAG_LEN, ctx->ptx + st->name_off, st->name_len);
            *w++ = '\n';
        }
        if (bound)
            w += ptxinj__subst(ctx, &ctx->sites[in->site], &fr, stub, n, w);
        else
            w = ptxinj__put(w, stub, n);
        if (tag) {
            memcpy(w, PTXINJ__TAG_END, PTXINJ__TAG_END_LEN);
            w += PTXINJ__TAG_END_LEN;
        } else if (n && blob[(size_t)off + n - 1] != '\n') {
            *w++ = '\n';
        }
        if (scope) { memcpy(w, PTXINJ__CLOSE, 3); w += 3; }
        prev = fr.end;
    }
    ptxinj__put(w, ctx->ptx + prev, ctx->ptx_len - prev);
    return PTXINJ_OK;
}

PTXINJ_DEF uint32_t ptxinj_line_of(const char *ptx, size_t len, size_t offset)
{
    const char *p = ptx, *e;
    uint32_t line = 1;
    if (!ptx) return 0;
    e = ptx + (offset < len ? offset : len);
    while (p < e && (p = (const char *)memchr(p, '\n', (size_t)(e - p))) != NULL) { line++; p++; }
    return line;
}

PTXINJ_DEF const char *ptxinj_status_string(int status)
{
    static const char *const text[PTXINJ_STATUS_COUNT] = {
        "ok",
        "invalid argument",
        "buffer too small",
        "malformed PTX_INJECT marker",
        "missing PTX_INJECT_END",
        "PTX_INJECT_END outside a site",
        "nested injection site",
        "duplicate variable name in site",
        "instances of a site differ",
        "unknown site",
        "input too large",
    };
    if (status < 0 || status >= PTXINJ_STATUS_COUNT) return "unknown status";
    return text[status];
}

#endif /* PTX_INJECT_IMPLEMENTATION_DONE */
#endif /* PTX_INJECT_IMPLEMENTATION */
