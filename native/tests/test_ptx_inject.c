/* Tests of the PTX Inject core (ptx_inject.h). Run with `make -C native test` (ASan + UBSan).
   Every PTX text is copied into an exact-size heap buffer with no NUL terminator and the parse
   memory is exactly mem_needed bytes at an odd address, so any out-of-bounds access trips ASan.
   `--bench` runs only the timings (used by `make -C native bench`, built -O2). */
#define _POSIX_C_SOURCE 199309L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptx_inject.h"
#include "check.h"
#include "parsed.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static int tok_is(const parsed *p, uint32_t off, uint32_t len, const char *want)
{
    return len == strlen(want) && off + len <= p->len && memcmp(p->ptx + off, want, len) == 0;
}
static uint32_t err_line(const parsed *p) { return ptxinj_line_of(p->ptx, p->len, p->ctx.err_offset); }

/* Render with stubs[i] for site i (NULL = no stub). PAIRS layout when pairs, else prefix sums.
   Measures, then fills an exact-size buffer; returns a NUL-terminated copy (free it). */
static char *render(const parsed *p, const char *const *stubs, int pairs, uint32_t flags,
                    size_t *out_len, ptxinj_status *status)
{
    sb blob = {0, 0, 0};
    uint32_t *offs = (uint32_t *)calloc((size_t)p->ctx.n_sites * 2 + 1, sizeof(uint32_t));
    uint32_t i;
    size_t need = 0, got = 0;
    char *out, *copy;
    ptxinj_status st;
    for (i = 0; i < p->ctx.n_sites; i++) {
        const char *s = stubs ? stubs[i] : NULL;
        if (pairs) {
            offs[2 * i] = s ? (uint32_t)blob.n : PTXINJ_NO_STUB;
            offs[2 * i + 1] = s ? (uint32_t)strlen(s) : 0;
        } else {
            offs[i] = (uint32_t)blob.n;
        }
        if (s) sb_puts(&blob, s);
    }
    if (!pairs) offs[p->ctx.n_sites] = (uint32_t)blob.n;
    if (pairs) flags |= PTXINJ_RENDER_PAIRS;
    st = ptxinj_render(&p->ctx, blob.p ? blob.p : "", blob.n, offs, flags, NULL, 0, &need);
    copy = NULL;
    if (st == PTXINJ_OK) {
        out = (char *)malloc(need ? need : 1);
        st = ptxinj_render(&p->ctx, blob.p ? blob.p : "", blob.n, offs, flags, out, need, &got);
        if (st == PTXINJ_OK && got == need) {
            copy = (char *)malloc(need + 1);
            memcpy(copy, out, need);
            copy[need] = 0;
        }
        free(out);
    }
    free(blob.p);
    free(offs);
    if (out_len) *out_len = need;
    if (status) *status = st;
    return copy;
}

/* Straightforward reference for render's output, stubs as for render() (NULL = no stub). */
static void ref_render(const parsed *p, const char *const *stubs, uint32_t flags, sb *out)
{
    uint32_t i, prev = 0;
    sb_put(out, "", 0);
    for (i = 0; i < p->ctx.n_instances; i++) {
        const ptxinj_instance *in = &p->ctx.instances[i];
        const ptxinj_site *s = &p->ctx.sites[in->site];
        const char *stub = stubs ? stubs[in->site] : NULL;
        size_t n = stub ? strlen(stub) : 0;
        sb_put(out, p->ptx + prev, in->begin - prev);
        if (flags & PTXINJ_RENDER_TAG) {
            sb_puts(out, "\t// PTX_INJECT_STUB ");
            sb_put(out, p->ptx + s->name_off, s->name_len);
            sb_puts(out, "\n");
            if (n) sb_put(out, stub, n);
            sb_puts(out, "\n\t// PTX_INJECT_STUB_END\n");
        } else if (n) {
            sb_put(out, stub, n);
            if (stub[n - 1] != '\n') sb_puts(out, "\n");
        }
        prev = in->end;
    }
    sb_put(out, p->ptx + prev, p->len - prev);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- fixtures ----------------------------------------------------------------------------- */

static const char ONE_SITE[] =
    ".version 8.0\n"
    "\tmov.f32 %f1, 0f00000000;\n"
    "\t// PTX_INJECT_BEGIN combine\n"
    "\t// PTX_INJECT_VAR in f32 f32 _x0 x\n"
    "\t// PTX_INJECT_VAR out f32 f32 _x1 z\n"
    "\t// PTX_INJECT_END\n"
    "\tret;\n";

static void block(sb *b, const char *site, int n_vars)
{
    int k;
    sb_printf(b, "\t// PTX_INJECT_BEGIN %s\n", site);
    for (k = 0; k < n_vars; k++)
        sb_printf(b, "\t// PTX_INJECT_VAR %s f32 f32 _x%d v%d\n", k == n_vars - 1 ? "out" : "in", k, k);
    sb_puts(b, "\t// PTX_INJECT_END\n");
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_one_site(void)
{
    parsed p;
    const ptxinj_var *v;
    const char *stub[1] = {"add.f32 %_x1, %_x0, %_x0;"};
    const char *want = ".version 8.0\n\tmov.f32 %f1, 0f00000000;\nadd.f32 %_x1, %_x0, %_x0;\n\tret;\n";
    const char *want_tag = ".version 8.0\n\tmov.f32 %f1, 0f00000000;\n\t// PTX_INJECT_STUB combine\n"
                           "add.f32 %_x1, %_x0, %_x0;\n\t// PTX_INJECT_STUB_END\n\tret;\n";
    char *out;
    size_t n;
    ptxinj_status st;
    g_test = "one_site";
    p = parse_s(ONE_SITE);
    CHECK(p.st == PTXINJ_OK);
    CHECK(p.ctx.n_sites == 1 && p.ctx.n_vars == 2 && p.ctx.n_instances == 1 && !p.ctx.legacy);
    CHECK(tok_is(&p, p.ctx.sites[0].name_off, p.ctx.sites[0].name_len, "combine"));
    CHECK(p.ctx.sites[0].first_var == 0 && p.ctx.sites[0].n_vars == 2);
    CHECK(p.ctx.sites[0].n_instances == 1 && p.ctx.sites[0].first_instance == 0);
    v = &p.ctx.vars[0];
    CHECK(v->kind == PTXINJ_IN && tok_is(&p, v->dtype_off, v->dtype_len, "f32"));
    CHECK(tok_is(&p, v->regtype_off, v->regtype_len, "f32") && tok_is(&p, v->reg_off, v->reg_len, "_x0"));
    CHECK(tok_is(&p, v->name_off, v->name_len, "x") && ptxinj_line_of(p.ptx, p.len, v->line_off) == 4);
    v = &p.ctx.vars[1];
    CHECK(v->kind == PTXINJ_OUT && tok_is(&p, v->name_off, v->name_len, "z"));
    CHECK(tok_is(&p, v->reg_off, v->reg_len, "_x1") && ptxinj_line_of(p.ptx, p.len, v->line_off) == 5);
    CHECK(p.ctx.instances[0].site == 0);
    CHECK(p.ctx.instances[0].begin == (uint32_t)(strstr(ONE_SITE, "\t// PTX_INJECT_BEGIN") - ONE_SITE));
    CHECK(p.ctx.instances[0].end == (uint32_t)(strstr(ONE_SITE, "\tret;") - ONE_SITE));
    out = render(&p, stub, 0, 0, &n, &st);
    CHECK(st == PTXINJ_OK && out && strcmp(out, want) == 0 && n == strlen(want));
    free(out);
    out = render(&p, stub, 1, 0, &n, &st);
    CHECK(st == PTXINJ_OK && out && strcmp(out, want) == 0);
    free(out);
    out = render(&p, stub, 0, PTXINJ_RENDER_TAG, &n, &st);
    CHECK(st == PTXINJ_OK && out && strcmp(out, want_tag) == 0 && n == strlen(want_tag));
    if (out) {   /* the tagged output holds no sites any more */
        parsed q = parse_s(out);
        CHECK(q.st == PTXINJ_OK && q.ctx.n_sites == 0);
        parsed_free(&q);
    }
    free(out);
    parsed_free(&p);
}

static void test_two_sites(void)
{
    sb b = {0, 0, 0};
    parsed p;
    uint32_t idx = 99;
    const char *stubs[2] = {"A;\n", "B;\n"};
    char *out;
    g_test = "two_sites";
    sb_puts(&b, "head\n");
    block(&b, "alpha", 2);
    sb_puts(&b, "mid\n");
    block(&b, "beta", 3);
    block(&b, "alpha", 2);
    sb_puts(&b, "tail\n");
    p = parse_n(b.p, b.n);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 2 && p.ctx.n_instances == 3 && p.ctx.n_vars == 5);
    CHECK(tok_is(&p, p.ctx.sites[0].name_off, p.ctx.sites[0].name_len, "alpha"));
    CHECK(tok_is(&p, p.ctx.sites[1].name_off, p.ctx.sites[1].name_len, "beta"));
    CHECK(p.ctx.sites[0].n_instances == 2 && p.ctx.sites[1].n_instances == 1);
    CHECK(p.ctx.sites[1].first_var == 2 && p.ctx.sites[1].n_vars == 3 && p.ctx.sites[1].first_instance == 1);
    CHECK(p.ctx.instances[0].site == 0 && p.ctx.instances[1].site == 1 && p.ctx.instances[2].site == 0);
    CHECK(p.ctx.instances[1].end == p.ctx.instances[2].begin);   /* adjacent blocks */
    CHECK(ptxinj_find_site(&p.ctx, "alpha", 5, &idx) == PTXINJ_OK && idx == 0);
    CHECK(ptxinj_find_site(&p.ctx, "beta", 4, &idx) == PTXINJ_OK && idx == 1);
    CHECK(ptxinj_find_site(&p.ctx, "gamma", 5, &idx) == PTXINJ_ERR_UNKNOWN_SITE);
    CHECK(ptxinj_find_site(&p.ctx, "alp", 3, &idx) == PTXINJ_ERR_UNKNOWN_SITE);
    CHECK(ptxinj_find_site(&p.ctx, "alphax", 6, &idx) == PTXINJ_ERR_UNKNOWN_SITE);
    CHECK(ptxinj_find_site(&p.ctx, "", 0, &idx) == PTXINJ_ERR_UNKNOWN_SITE);
    CHECK(ptxinj_find_site(NULL, "alpha", 5, &idx) == PTXINJ_ERR_INVALID_ARGUMENT);
    CHECK(ptxinj_find_site(&p.ctx, NULL, 5, &idx) == PTXINJ_ERR_INVALID_ARGUMENT);
    CHECK(ptxinj_find_site(&p.ctx, "alpha", 5, NULL) == PTXINJ_ERR_INVALID_ARGUMENT);
    out = render(&p, stubs, 0, 0, NULL, NULL);
    CHECK(out && strcmp(out, "head\nA;\nmid\nB;\nA;\ntail\n") == 0);
    free(out);
    parsed_free(&p);
    free(b.p);
}

static void test_twenty_instances(void)
{
    sb b = {0, 0, 0};
    parsed p;
    int i, count = 0;
    const char *stub[1] = {"STUB\n"};
    char *out, *q;
    g_test = "twenty_instances";
    for (i = 0; i < 20; i++) {
        sb_printf(&b, "\tld.global.f32 %%f%d, [%%rd1+%d];\n", i, 4 * i);
        block(&b, "loop", 3);
    }
    p = parse_n(b.p, b.n);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 1 && p.ctx.n_instances == 20 && p.ctx.n_vars == 3);
    CHECK(p.ctx.sites[0].n_instances == 20);
    for (i = 1; i < 20; i++) CHECK(p.ctx.instances[i].begin > p.ctx.instances[i - 1].end);
    out = render(&p, stub, 0, 0, NULL, NULL);
    CHECK(out != NULL);
    for (q = out; q && (q = strstr(q, "STUB\n")) != NULL; q++) count++;
    CHECK(count == 20 && out && !strstr(out, "PTX_INJECT") && strstr(out, "[%rd1+76];\nSTUB\n"));
    free(out);
    parsed_free(&p);
    free(b.p);
}

static void test_kinds_and_legacy(void)
{
    const char *mixed = "// PTX_INJECT_BEGIN k\n// PTX_INJECT_VAR in u32 u32 a x\n"
                        "// PTX_INJECT_VAR out f16 b16 b y\n// PTX_INJECT_VAR mod f64 f64 c z\n"
                        "// PTX_INJECT_END\n";
    const char *legacy = "\t{\n\t.reg .f32 %_x0;\n\tmov.f32 %_x0, %f1;\n"
                         "\t// PTX_INJECT_START legacy\n\t// _x0 i f32 F32 x\n\n\t// _x1 m f32 F32 acc\n"
                         "\t// _x2 o b16 F16 h\n\t// PTX_INJECT_END\n\tmov.f32 %f2, %_x1;\n\t}\n";
    /* the same site as a numptx block and as a START block: identical variable lists */
    const char *both = "// PTX_INJECT_BEGIN s\n// PTX_INJECT_VAR in F32 f32 _x0 x\n// PTX_INJECT_END\n"
                       "// PTX_INJECT_START s\n// _x0 i f32 F32 x\n// PTX_INJECT_END\n";
    sb b = {0, 0, 0};
    parsed p;
    const ptxinj_var *v;
    const char *stub[1] = {"add.f32 %_x1, %_x1, %_x0;"};
    char *out;
    int i;
    g_test = "kinds_and_legacy";
    p = parse_s(mixed);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_vars == 3);
    CHECK(p.ctx.vars[0].kind == PTXINJ_IN && p.ctx.vars[1].kind == PTXINJ_OUT && p.ctx.vars[2].kind == PTXINJ_MOD);
    v = &p.ctx.vars[1];
    CHECK(tok_is(&p, v->dtype_off, v->dtype_len, "f16") && tok_is(&p, v->regtype_off, v->regtype_len, "b16"));
    parsed_free(&p);

    for (i = 0; i < 3; i++) sb_puts(&b, legacy);
    p = parse_n(b.p, b.n);
    CHECK(p.st == PTXINJ_OK && p.ctx.legacy == 1 && p.ctx.n_sites == 1 && p.ctx.n_instances == 3);
    CHECK(p.ctx.n_vars == 3);
    v = &p.ctx.vars[0];
    CHECK(v->kind == PTXINJ_IN && tok_is(&p, v->reg_off, v->reg_len, "_x0"));
    CHECK(tok_is(&p, v->regtype_off, v->regtype_len, "f32") && tok_is(&p, v->dtype_off, v->dtype_len, "F32"));
    CHECK(tok_is(&p, v->name_off, v->name_len, "x"));
    CHECK(p.ctx.vars[1].kind == PTXINJ_MOD && tok_is(&p, p.ctx.vars[1].name_off, p.ctx.vars[1].name_len, "acc"));
    v = &p.ctx.vars[2];
    CHECK(v->kind == PTXINJ_OUT && tok_is(&p, v->dtype_off, v->dtype_len, "F16") &&
          tok_is(&p, v->regtype_off, v->regtype_len, "b16"));
    out = render(&p, stub, 0, 0, NULL, NULL);
    CHECK(out && !strstr(out, "PTX_INJECT") && strstr(out, "%f1;\nadd.f32 %_x1, %_x1, %_x0;\n\tmov.f32 %f2"));
    free(out);
    parsed_free(&p);
    free(b.p);

    p = parse_s(both);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 1 && p.ctx.n_instances == 2 && p.ctx.legacy == 1);
    parsed_free(&p);
}

static void test_crlf(void)
{
    sb b = {0, 0, 0};
    const char *s;
    parsed p;
    const ptxinj_var *v;
    const char *stub[1] = {"S"};
    char *out;
    g_test = "crlf";
    for (s = ONE_SITE; *s; s++) {
        if (*s == '\n') sb_puts(&b, "\r\n");
        else sb_put(&b, s, 1);
    }
    p = parse_n(b.p, b.n);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 1 && p.ctx.n_vars == 2 && p.ctx.n_instances == 1);
    CHECK(tok_is(&p, p.ctx.sites[0].name_off, p.ctx.sites[0].name_len, "combine"));
    v = &p.ctx.vars[1];
    CHECK(tok_is(&p, v->name_off, v->name_len, "z") && tok_is(&p, v->reg_off, v->reg_len, "_x1"));
    CHECK(p.ctx.instances[0].end == (uint32_t)(strstr(b.p, "\tret;") - b.p));
    out = render(&p, stub, 0, 0, NULL, NULL);
    CHECK(out && strcmp(out, ".version 8.0\r\n\tmov.f32 %f1, 0f00000000;\r\nS\n\tret;\r\n") == 0);
    free(out);
    parsed_free(&p);
    free(b.p);
    /* CRLF with a marker as the last line (no terminator) and tabs/trailing blanks everywhere */
    p = parse_s("x\r\n \t//\tPTX_INJECT_BEGIN\tq \r\n\t// PTX_INJECT_VAR mod s32 s32 %r1 n\t\r\n//PTX_INJECT_END \r");
    CHECK(p.st == PTXINJ_OK && p.ctx.n_instances == 1 && p.ctx.instances[0].begin == 3);
    CHECK(p.ctx.instances[0].end == p.len && tok_is(&p, p.ctx.sites[0].name_off, p.ctx.sites[0].name_len, "q"));
    CHECK(p.ctx.n_vars == 1 && tok_is(&p, p.ctx.vars[0].name_off, p.ctx.vars[0].name_len, "n"));
    parsed_free(&p);
}

typedef struct err_case { const char *text; ptxinj_status st; uint32_t line; uint32_t site; } err_case;
#define NOSITE 0xFFFFFFFFu
#define B "// PTX_INJECT_BEGIN "
#define V "// PTX_INJECT_VAR "
#define E "// PTX_INJECT_END\n"

static void test_errors(void)
{
    static const err_case cases[] = {
        {E, PTXINJ_ERR_UNEXPECTED_END, 1, NOSITE},
        {"a\n" B "a\n" E "b\n\t" E, PTXINJ_ERR_UNEXPECTED_END, 5, NOSITE},
        {"a\n// PTX_INJECT_BEGIN\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, NOSITE},
        {B "a b\n" E, PTXINJ_ERR_MALFORMED_MARKER, 1, NOSITE},
        {"x\n" B "a\n" V "in f32 f32 v_x\n" E, PTXINJ_ERR_MALFORMED_MARKER, 3, 0},
        {B "a\n" V "in f32 f32 v_x x y\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {B "a\n" V "inout f32 f32 v_x x\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {B "a\nadd.f32 %f1, %f2, %f3;\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {B "a\n\n   \n// PTX_INJECT_FOO\n" E, PTXINJ_ERR_MALFORMED_MARKER, 4, 0},
        {B "a\n// a comment\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {B "a\n// PTX_INJECT_END x\n", PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {"x\n" V "in f32 f32 a b\n", PTXINJ_ERR_MALFORMED_MARKER, 2, NOSITE},
        {B "a\n" E B "b\n" V "in f32 f32 r\n" E, PTXINJ_ERR_MALFORMED_MARKER, 4, 1},
        {B "a\n" B "b\n" E, PTXINJ_ERR_NESTED_SITE, 2, 0},
        {B "a\n// PTX_INJECT_START b\n" E, PTXINJ_ERR_NESTED_SITE, 2, 0},
        {"x\ny\n\t" B "a\n" V "in f32 f32 r x\n", PTXINJ_ERR_MISSING_END, 3, 0},
        {"x\n" B "a", PTXINJ_ERR_MISSING_END, 2, 0},
        {B "a\n" V "in f32 f32 r x\n" V "out f32 f32 r2 x\n" E, PTXINJ_ERR_DUPLICATE_VARIABLE, 3, 0},
        /* later instance has more variables: its BEGIN line */
        {B "a\n" V "in f32 f32 r x\n" E "nop\n" B "a\n" V "in f32 f32 r x\n" V "out f32 f32 r2 y\n" E,
         PTXINJ_ERR_INCONSISTENT_INSTANCES, 5, 0},
        /* fewer variables: its BEGIN line */
        {B "a\n" V "in f32 f32 r x\n" E "nop\n" B "a\n" E, PTXINJ_ERR_INCONSISTENT_INSTANCES, 5, 0},
        /* differing dtype / kind / reg / name: the differing line */
        {B "a\n" V "in f32 f32 r x\n" V "in f32 f32 q y\n" E B "a\n" V "in f32 f32 r x\n" V "in f16 f32 q y\n" E,
         PTXINJ_ERR_INCONSISTENT_INSTANCES, 7, 0},
        {B "a\n" V "in f32 f32 r x\n" E B "a\n" V "mod f32 f32 r x\n" E, PTXINJ_ERR_INCONSISTENT_INSTANCES, 5, 0},
        {B "a\n" V "in f32 f32 r x\n" E B "a\n" V "in f32 f32 r2 x\n" E, PTXINJ_ERR_INCONSISTENT_INSTANCES, 5, 0},
        {B "z\n" E B "a\n" V "in f32 f32 r x\n" E B "a\n" V "in f32 f32 r xx\n" E,
         PTXINJ_ERR_INCONSISTENT_INSTANCES, 7, 1},
        /* legacy blocks */
        {"// PTX_INJECT_START s\n// _x0 i f32 x\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {"// PTX_INJECT_START s\n// _x0 q f32 F32 x\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {"// PTX_INJECT_START s\n// _x0 in f32 F32 x\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {"// PTX_INJECT_START s\n" V "in f32 f32 r x\n" E, PTXINJ_ERR_MALFORMED_MARKER, 2, 0},
        {"// PTX_INJECT_START s\n// _x0 i f32 F32 x\n// _x1 o f32 F32 x\n" E, PTXINJ_ERR_DUPLICATE_VARIABLE, 3, 0},
        {"// PTX_INJECT_START s\n// _x0 i f32 F32 x\n", PTXINJ_ERR_MISSING_END, 1, 0},
        {"// PTX_INJECT_START\n" E, PTXINJ_ERR_MALFORMED_MARKER, 1, NOSITE},
    };
    size_t i;
    g_test = "errors";
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parsed p = parse_s(cases[i].text);
        int ok = p.st == cases[i].st && err_line(&p) == cases[i].line && p.ctx.err_site == cases[i].site;
        CHECK(ok);
        if (!ok)
            printf("  case %u: got status %d line %u site %u, want %d line %u site %u\n", (unsigned)i,
                   (int)p.st, (unsigned)err_line(&p), (unsigned)p.ctx.err_site, (int)cases[i].st,
                   (unsigned)cases[i].line, (unsigned)cases[i].site);
        if (p.ctx.err_site != NOSITE) CHECK(p.ctx.err_site < p.ctx.n_sites);
        parsed_free(&p);
    }
}

static void test_not_markers(void)
{
    static const char *const ok0[] = {
        "// PTX_INJECT_BEGINX foo\n",
        "add.f32 %f1, %f2, %f3; // PTX_INJECT_BEGIN a\n",
        "x // PTX_INJECT_END\n",
        "// begin inline asm\n// end inline asm\n",
        "/ / PTX_INJECT_BEGIN a\n/* // PTX_INJECT_BEGIN a */\n",
        "\t// PTX_INJECT_STUB a 3\n",
        "\t// PTX_INJECT_STUB a\nx\n\t// PTX_INJECT_STUB_END\n",
        "\t// PTX_INJECT_STUB a\n\n\t// PTX_INJECT_STUB_END\n\t// PTX_INJECT_STUB_END",
        "// _x0 i f32 F32 x\n",
        "//",
        "/",
        "x/",
        "// PTX_INJECT_",
        "PTX_INJECT_BEGIN a\n",
    };
    size_t i;
    parsed p;
    g_test = "not_markers";
    for (i = 0; i < sizeof ok0 / sizeof ok0[0]; i++) {
        p = parse_s(ok0[i]);
        CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 0 && p.ctx.n_instances == 0);
        parsed_free(&p);
    }
    p = parse_s("//PTX_INJECT_BEGIN a\n//PTX_INJECT_END");   /* no space after // is accepted */
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 1 && p.ctx.instances[0].end == p.len);
    parsed_free(&p);
}

static void test_edges(void)
{
    parsed p;
    ptxinj_ctx ctx;
    char one = 'x', buf[64];
    size_t n = 7;
    const char *stub[1] = {"S"};
    char *out, *big;
    sb b = {0, 0, 0};
    uint32_t idx;
    int i;
    g_test = "edges";
    /* empty input: measure gives a positive size, then 0 sites; render copies nothing */
    CHECK(ptxinj_parse(&ctx, &one, 0, NULL, 0) == PTXINJ_ERR_BUFFER_TOO_SMALL && ctx.mem_needed > 0);
    p = parse_n("", 0);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 0 && p.ctx.n_instances == 0);
    CHECK(ptxinj_render(&p.ctx, NULL, 0, NULL, 0, NULL, 0, &n) == PTXINJ_OK && n == 0);
    CHECK(ptxinj_render(&p.ctx, NULL, 0, NULL, 0, buf, 0, &n) == PTXINJ_OK && n == 0);
    CHECK(ptxinj_find_site(&p.ctx, "a", 1, &idx) == PTXINJ_ERR_UNKNOWN_SITE);
    parsed_free(&p);
    /* argument checks */
    CHECK(ptxinj_parse(NULL, "x", 1, NULL, 0) == PTXINJ_ERR_INVALID_ARGUMENT);
    CHECK(ptxinj_parse(&ctx, NULL, 1, NULL, 0) == PTXINJ_ERR_INVALID_ARGUMENT && ctx.err_site == NOSITE);
    CHECK(ptxinj_parse(&ctx, &one, (size_t)UINT32_MAX, NULL, 0) == PTXINJ_ERR_TOO_LARGE);
    if (sizeof(size_t) > 4)
        CHECK(ptxinj_parse(&ctx, &one, (size_t)UINT32_MAX + 7u, NULL, 0) == PTXINJ_ERR_TOO_LARGE);
    /* too-small memory, then exactly enough */
    CHECK(ptxinj_parse(&ctx, ONE_SITE, strlen(ONE_SITE), NULL, 1u << 20) == PTXINJ_ERR_BUFFER_TOO_SMALL);
    n = ctx.mem_needed;
    big = (char *)malloc(n);
    CHECK(ptxinj_parse(&ctx, ONE_SITE, strlen(ONE_SITE), big, n - 1) == PTXINJ_ERR_BUFFER_TOO_SMALL &&
          ctx.mem_needed == n && ctx.err_offset == 0 && ctx.err_site == NOSITE);
    CHECK(ptxinj_parse(&ctx, ONE_SITE, strlen(ONE_SITE), big, n) == PTXINJ_OK && ctx.n_sites == 1);
    free(big);
    /* marker on the very last line without newline */
    p = parse_s("x\n// PTX_INJECT_BEGIN a\n// PTX_INJECT_END");
    CHECK(p.st == PTXINJ_OK && p.ctx.n_instances == 1 && p.ctx.instances[0].end == p.len);
    out = render(&p, stub, 0, 0, NULL, NULL);
    CHECK(out && strcmp(out, "x\nS\n") == 0);
    free(out);
    parsed_free(&p);
    /* garbage: every byte value, NULs, 0x80-0xFF */
    for (i = 0; i < 50 * 256; i++) { char c = (char)(i & 255); sb_put(&b, &c, 1); }
    p = parse_n(b.p, b.n);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 0);
    parsed_free(&p);
    sb_put(&b, "\n// PTX_INJECT_BEGIN \xff\xfe\n\0", 25);
    p = parse_n(b.p, b.n);
    CHECK(p.st == PTXINJ_ERR_MALFORMED_MARKER && p.ctx.err_offset == b.n - 1);
    parsed_free(&p);
    /* NUL and high bytes inside names are ordinary token bytes */
    p = parse_n("// PTX_INJECT_BEGIN a\0\xff\n// PTX_INJECT_END\n", 42);
    CHECK(p.st == PTXINJ_OK && p.ctx.sites[0].name_len == 3);
    CHECK(ptxinj_find_site(&p.ctx, "a\0\xff", 3, &idx) == PTXINJ_OK && idx == 0);
    parsed_free(&p);
    free(b.p);
}

static void test_long_names(void)
{
    sb b = {0, 0, 0};
    char *name = (char *)malloc(100001);
    parsed p;
    uint32_t idx = 9;
    const char *stub[1] = {"X"};
    char *out;
    size_t n;
    g_test = "long_names";
    memset(name, 's', 100000);
    name[100000] = 0;
    sb_puts(&b, "// PTX_INJECT_BEGIN ");
    sb_puts(&b, name);
    sb_puts(&b, "\n// PTX_INJECT_VAR in f32 f32 _x0 ");
    name[0] = 'v';
    sb_puts(&b, name);
    sb_puts(&b, "\n// PTX_INJECT_END\n");
    p = parse_n(b.p, b.n);
    CHECK(p.st == PTXINJ_OK && p.ctx.sites[0].name_len == 100000 && p.ctx.vars[0].name_len == 100000);
    name[0] = 's';
    CHECK(ptxinj_find_site(&p.ctx, name, 100000, &idx) == PTXINJ_OK && idx == 0);
    CHECK(ptxinj_find_site(&p.ctx, name, 99999, &idx) == PTXINJ_ERR_UNKNOWN_SITE);
    out = render(&p, stub, 0, PTXINJ_RENDER_TAG, &n, NULL);
    CHECK(out && n == 20 + 100000 + 27 && strncmp(out, "\t// PTX_INJECT_STUB ssss", 24) == 0);
    CHECK(out && strcmp(out + 100020, "\nX\n\t// PTX_INJECT_STUB_END\n") == 0);
    free(out);
    parsed_free(&p);
    free(name);
    free(b.p);
}

static void test_render(void)
{
    static const char text[] = "a\n" B "s\n" V "in f32 f32 r x\n" E "b\n" B "t\n" E "c";
    parsed p;
    const char *both[2] = {"X", "Y\n"};
    const char *empty_s[2] = {"", "Y"};
    const char *none_s[2] = {NULL, "Y"};
    const char *multi[2] = {"l1\nl2\nl3", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"};
    const char *tag_empty = "a\n\t// PTX_INJECT_STUB s\n\n\t// PTX_INJECT_STUB_END\n"
                            "b\n\t// PTX_INJECT_STUB t\nY\n\t// PTX_INJECT_STUB_END\nc";
    const char *tag_multi = "a\n\t// PTX_INJECT_STUB s\nl1\nl2\nl3\n\t// PTX_INJECT_STUB_END\n"
                            "b\n\t// PTX_INJECT_STUB t\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"
                            "\n\t// PTX_INJECT_STUB_END\nc";
    const char *tag_none = "a\n\t// PTX_INJECT_STUB s\n\n\t// PTX_INJECT_STUB_END\n"
                           "b\n\t// PTX_INJECT_STUB t\n\n\t// PTX_INJECT_STUB_END\nc";
    const char *tag_xy = "a\n\t// PTX_INJECT_STUB s\nXY\n\t// PTX_INJECT_STUB_END\n"
                         "b\n\t// PTX_INJECT_STUB t\nZ\n\t// PTX_INJECT_STUB_END\nc";
    const char *blob = "XYZ";
    uint32_t offs[4], pre[3];
    char out[128], *r;
    size_t n = 0, need;
    ptxinj_status st;
    ptxinj_ctx bad;
    ptxinj_instance inst[2];
    ptxinj_site bsites[2];
    int i, untouched;
    g_test = "render";
    p = parse_s(text);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 2);
    /* measure, exact fill, too small */
    r = render(&p, both, 1, 0, &need, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, "a\nX\nb\nY\nc") == 0 && need == 9);
    free(r);
    offs[0] = 0; offs[1] = 1; offs[2] = 1; offs[3] = 1;
    CHECK(ptxinj_render(&p.ctx, blob, 3, offs, PTXINJ_RENDER_PAIRS, NULL, 12345, &n) == PTXINJ_OK && n == 9);
    memset(out, 'Z', sizeof out);
    CHECK(ptxinj_render(&p.ctx, blob, 3, offs, PTXINJ_RENDER_PAIRS, out, 8, &n) == PTXINJ_ERR_BUFFER_TOO_SMALL && n == 9);
    for (untouched = 1, i = 0; i < (int)sizeof out; i++) untouched &= out[i] == 'Z';
    CHECK(untouched);
    CHECK(ptxinj_render(&p.ctx, blob, 3, offs, PTXINJ_RENDER_PAIRS, out, 9, &n) == PTXINJ_OK && n == 9);
    CHECK(memcmp(out, "a\nX\nb\nY\nc", 9) == 0 && out[9] == 'Z');
    /* empty stub and missing stub remove the region (without the tag flag) */
    r = render(&p, empty_s, 0, 0, NULL, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, "a\nb\nY\nc") == 0);
    free(r);
    r = render(&p, none_s, 1, 0, NULL, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, "a\nb\nY\nc") == 0);
    free(r);
    r = render(&p, NULL, 1, 0, NULL, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, "a\nb\nc") == 0);
    free(r);
    /* tag: every region becomes STUB line, stub bytes verbatim, "\n", STUB_END line, even for
       empty and missing stubs; a stub's own final '\n' is kept and nothing else is added */
    r = render(&p, empty_s, 0, PTXINJ_RENDER_TAG, &n, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, tag_empty) == 0 && n == strlen(tag_empty));
    free(r);
    r = render(&p, empty_s, 1, PTXINJ_RENDER_TAG, &n, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, tag_empty) == 0 && n == strlen(tag_empty));
    free(r);
    r = render(&p, none_s, 1, PTXINJ_RENDER_TAG, &n, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, tag_empty) == 0 && n == strlen(tag_empty));
    free(r);
    r = render(&p, NULL, 1, PTXINJ_RENDER_TAG, &n, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, tag_none) == 0 && n == strlen(tag_none));
    free(r);
    r = render(&p, multi, 0, PTXINJ_RENDER_TAG, &n, &st);
    CHECK(st == PTXINJ_OK && r && strcmp(r, tag_multi) == 0 && n == strlen(tag_multi));
    if (r) {   /* the tagged output holds no sites any more */
        parsed q = parse_s(r);
        CHECK(q.st == PTXINJ_OK && q.ctx.n_sites == 0);
        parsed_free(&q);
    }
    free(r);
    /* tag: measure, too small (nothing written), exact fill */
    pre[0] = 0; pre[1] = 2; pre[2] = 3;
    CHECK(ptxinj_render(&p.ctx, blob, 3, pre, PTXINJ_RENDER_TAG, NULL, 0, &n) == PTXINJ_OK &&
          n == strlen(tag_xy));
    memset(out, 'Z', sizeof out);
    CHECK(ptxinj_render(&p.ctx, blob, 3, pre, PTXINJ_RENDER_TAG, out, n - 1, &need) ==
          PTXINJ_ERR_BUFFER_TOO_SMALL && need == n);
    for (untouched = 1, i = 0; i < (int)sizeof out; i++) untouched &= out[i] == 'Z';
    CHECK(untouched);
    CHECK(ptxinj_render(&p.ctx, blob, 3, pre, PTXINJ_RENDER_TAG, out, sizeof out, &need) == PTXINJ_OK &&
          need == n && memcmp(out, tag_xy, n) == 0 && out[n] == 'Z');
    /* tag: a site name outside the PTX is refused (the name is not read without the tag) */
    bad = p.ctx;
    memcpy(bsites, p.ctx.sites, sizeof bsites);
    bsites[1].name_len = (uint32_t)p.len;
    bad.sites = bsites;
    CHECK(ptxinj_render(&bad, blob, 3, pre, PTXINJ_RENDER_TAG, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    CHECK(ptxinj_render(&bad, blob, 3, pre, 0, NULL, 0, &n) == PTXINJ_OK && n == 10);
    bsites[1].name_len = p.ctx.sites[1].name_len;
    bsites[1].name_off = (uint32_t)p.len + 1;
    CHECK(ptxinj_render(&bad, blob, 3, pre, PTXINJ_RENDER_TAG, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    /* out-of-range slices are rejected before writing */
    memset(out, 'Z', sizeof out);
    offs[0] = 4; offs[1] = 0;
    CHECK(ptxinj_render(&p.ctx, blob, 3, offs, PTXINJ_RENDER_PAIRS, out, sizeof out, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    offs[0] = 3; offs[1] = 1;
    CHECK(ptxinj_render(&p.ctx, blob, 3, offs, PTXINJ_RENDER_PAIRS, out, sizeof out, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    offs[0] = 1; offs[1] = 0xFFFFFFFFu;
    CHECK(ptxinj_render(&p.ctx, blob, 3, offs, PTXINJ_RENDER_PAIRS, out, sizeof out, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    offs[0] = 3; offs[1] = 0;
    CHECK(ptxinj_render(&p.ctx, blob, 3, offs, PTXINJ_RENDER_PAIRS, NULL, 0, &n) == PTXINJ_OK);
    pre[0] = 0; pre[1] = 2; pre[2] = 1;
    CHECK(ptxinj_render(&p.ctx, blob, 3, pre, 0, out, sizeof out, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    pre[2] = 4;
    CHECK(ptxinj_render(&p.ctx, blob, 3, pre, 0, out, sizeof out, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    for (untouched = 1, i = 0; i < (int)sizeof out; i++) untouched &= out[i] == 'Z';
    CHECK(untouched);
    pre[2] = 3;
    CHECK(ptxinj_render(&p.ctx, blob, 3, pre, 0, out, sizeof out, &n) == PTXINJ_OK && n == 10);
    CHECK(memcmp(out, "a\nXY\nb\nZ\nc", 10) == 0);
    /* argument checks */
    CHECK(ptxinj_render(NULL, blob, 3, pre, 0, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    CHECK(ptxinj_render(&p.ctx, blob, 3, pre, 0, NULL, 0, NULL) == PTXINJ_ERR_INVALID_ARGUMENT);
    CHECK(ptxinj_render(&p.ctx, blob, 3, NULL, 0, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    CHECK(ptxinj_render(&p.ctx, NULL, 3, pre, 0, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    CHECK(ptxinj_render(&p.ctx, blob, 3, pre, 8, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    /* a corrupted ctx (overlapping or out-of-range instances) is refused */
    bad = p.ctx;
    inst[0] = p.ctx.instances[0];
    inst[1] = p.ctx.instances[1];
    inst[1].begin = inst[0].end - 1;
    bad.instances = inst;
    CHECK(ptxinj_render(&bad, blob, 3, pre, 0, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    inst[1] = p.ctx.instances[1];
    inst[1].site = 2;
    CHECK(ptxinj_render(&bad, blob, 3, pre, 0, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    inst[1] = p.ctx.instances[1];
    inst[1].end = (uint32_t)p.len + 1;
    CHECK(ptxinj_render(&bad, blob, 3, pre, 0, NULL, 0, &n) == PTXINJ_ERR_INVALID_ARGUMENT);
    parsed_free(&p);
}

static void test_misc(void)
{
    int i, j, distinct = 1;
    g_test = "misc";
    for (i = 0; i < PTXINJ_STATUS_COUNT; i++)
        for (j = 0; j < i; j++)
            distinct &= strcmp(ptxinj_status_string(i), ptxinj_status_string(j)) != 0;
    CHECK(distinct && strcmp(ptxinj_status_string(PTXINJ_OK), "ok") == 0);
    CHECK(strcmp(ptxinj_status_string(-1), "unknown status") == 0);
    CHECK(strcmp(ptxinj_status_string(PTXINJ_STATUS_COUNT), "unknown status") == 0);
    CHECK(ptxinj_line_of("a\nb\nc", 5, 0) == 1 && ptxinj_line_of("a\nb\nc", 5, 1) == 1);
    CHECK(ptxinj_line_of("a\nb\nc", 5, 2) == 2 && ptxinj_line_of("a\nb\nc", 5, 4) == 3);
    CHECK(ptxinj_line_of("a\nb\nc", 5, 100) == 3 && ptxinj_line_of(NULL, 5, 1) == 0);
}

/* ---- scale and timing --------------------------------------------------------------------- */

static int g_bench;

static void build_big(sb *b, int instances)   /* ~300 B of PTX per instance, as nvcc writes it */
{
    int i;
    sb_puts(b, ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry k(\n\t.param .u64 p\n)\n{\n");
    for (i = 0; i < instances; i++) {
        sb_printf(b, "\tld.global.f32 \t%%f%d, [%%rd%d+%d];\n", i, i % 7, 4 * i);
        sb_puts(b, "\t{\n\t.reg .f32 %_x0, %_x1, %_x2;\n\tmov.f32 \t%_x0, %f1;\n\t// begin inline asm\n");
        sb_puts(b, "\t// PTX_INJECT_BEGIN func\n\t// PTX_INJECT_VAR in f32 f32 _x0 x\n"
                   "\t// PTX_INJECT_VAR in f32 f32 _x1 y\n\t// PTX_INJECT_VAR out f32 f32 _x2 z\n"
                   "\t// PTX_INJECT_END\n");
        sb_puts(b, "\t// end inline asm\n\tmov.f32 \t%f2, %_x2;\n\t}\n");
    }
    sb_puts(b, "\tret;\n}\n");
}

/* Best-of-rounds timings (the machine may be shared): parse as Python calls it (measure, then
   fill), the fill call alone, and render (measure + fill), plain and with PTXINJ_RENDER_TAG. */
static void time_case(const char *label, const char *ptx, size_t len, uint32_t n_sites, const char *stub)
{
    ptxinj_ctx ctx;
    void *mem;
    sb blob = {0, 0, 0};
    uint32_t *pre = (uint32_t *)malloc(((size_t)n_sites + 1) * sizeof(uint32_t)), i;
    size_t need = 0, need_tag = 0, got;
    char *out;
    int iters = n_sites >= 1000 ? 4 : 100, rounds = g_bench ? 30 : 3, k, r;
    double t0, t, best_pf = 1e9, best_f = 1e9, best_r = 1e9, best_rt = 1e9;
    ptxinj_parse(&ctx, ptx, len, NULL, 0);
    mem = malloc(ctx.mem_needed);
    CHECK(ptxinj_parse(&ctx, ptx, len, mem, ctx.mem_needed) == PTXINJ_OK && ctx.n_sites == n_sites);
    for (i = 0; i < n_sites; i++) { pre[i] = (uint32_t)blob.n; sb_puts(&blob, stub); }
    pre[n_sites] = (uint32_t)blob.n;
    CHECK(ptxinj_render(&ctx, blob.p, blob.n, pre, 0, NULL, 0, &need) == PTXINJ_OK);
    CHECK(ptxinj_render(&ctx, blob.p, blob.n, pre, PTXINJ_RENDER_TAG, NULL, 0, &need_tag) == PTXINJ_OK);
    out = (char *)malloc(need_tag > need ? need_tag : need);
    for (r = 0; r < rounds; r++) {
        t0 = now_s();
        for (k = 0; k < iters; k++) {
            ptxinj_parse(&ctx, ptx, len, NULL, 0);
            ptxinj_parse(&ctx, ptx, len, mem, ctx.mem_needed);
        }
        t = (now_s() - t0) / iters;
        if (t < best_pf) best_pf = t;
        t0 = now_s();
        for (k = 0; k < iters; k++) ptxinj_parse(&ctx, ptx, len, mem, ctx.mem_needed);
        t = (now_s() - t0) / iters;
        if (t < best_f) best_f = t;
        t0 = now_s();
        for (k = 0; k < iters; k++) {
            ptxinj_render(&ctx, blob.p, blob.n, pre, 0, NULL, 0, &need);
            ptxinj_render(&ctx, blob.p, blob.n, pre, 0, out, need, &got);
        }
        t = (now_s() - t0) / iters;
        if (t < best_r) best_r = t;
        t0 = now_s();
        for (k = 0; k < iters; k++) {
            ptxinj_render(&ctx, blob.p, blob.n, pre, PTXINJ_RENDER_TAG, NULL, 0, &need_tag);
            ptxinj_render(&ctx, blob.p, blob.n, pre, PTXINJ_RENDER_TAG, out, need_tag, &got);
        }
        t = (now_s() - t0) / iters;
        if (t < best_rt) best_rt = t;
    }
    printf("timing%s: %s (%zu bytes, %u sites, %u instances): parse measure+fill %.1f us "
           "(fill alone %.1f us), render measure+fill %.1f us -> %zu bytes, "
           "tagged %.1f us -> %zu bytes\n",
           g_bench ? "" : " (sanitizer build, not representative)", label, len, (unsigned)ctx.n_sites,
           (unsigned)ctx.n_instances, best_pf * 1e6, best_f * 1e6, best_r * 1e6, need, best_rt * 1e6,
           need_tag);
    free(out);
    free(mem);
    free(pre);
    free(blob.p);
}

static void test_scale(void)
{
    sb b = {0, 0, 0}, s = {0, 0, 0};
    parsed p;
    int i, all = 1;
    uint32_t idx;
    char name[32];
    g_test = "scale";
    for (i = 0; i < 8192; i++) {
        sb_printf(&b, "\tadd.f32 %%f%d, %%f1, %%f2;\n", i);
        sb_printf(&b, "\t// PTX_INJECT_BEGIN site_%d\n\t// PTX_INJECT_VAR in f32 f32 _x0 x\n"
                      "\t// PTX_INJECT_VAR out f32 f32 _x1 y\n\t// PTX_INJECT_END\n", i);
    }
    p = parse_n(b.p, b.n);
    CHECK(p.st == PTXINJ_OK && p.ctx.n_sites == 8192 && p.ctx.n_instances == 8192 && p.ctx.n_vars == 16384);
    for (i = 0; i < 8192 && p.st == PTXINJ_OK; i++) {
        int n = sprintf(name, "site_%d", i);
        all &= ptxinj_find_site(&p.ctx, name, (size_t)n, &idx) == PTXINJ_OK && idx == (uint32_t)i;
        all &= tok_is(&p, p.ctx.sites[i].name_off, p.ctx.sites[i].name_len, name);
    }
    CHECK(all);
    parsed_free(&p);
    time_case("8192 unique sites", b.p, b.n, 8192, "mov.f32 %_x1, %_x0;\n");
    build_big(&s, 512);
    CHECK(s.n > 140000 && s.n < 170000);
    time_case("512 instances of one site", s.p, s.n, 1, "add.f32 %_x2, %_x0, %_x1;\n");
    free(b.p);
    free(s.p);
}

/* ---- fuzz --------------------------------------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)   /* xorshift64*, uniform enough for fuzzing */
{
    g_rng ^= g_rng >> 12; g_rng ^= g_rng << 25; g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 2685821657736338717ull) >> 33) % (n ? n : 1);
}

static void check_parsed(const parsed *p)
{
    const ptxinj_ctx *c = &p->ctx;
    uint32_t i, prev = 0, sum_inst = 0, sum_vars = 0, idx;
    int ok = 1;
    if (p->st != PTXINJ_OK) {
        ok &= c->err_offset <= p->len && (c->err_offset == 0 || p->ptx[c->err_offset - 1] == '\n');
        ok &= c->err_site == NOSITE || c->err_site < c->n_sites;
        CHECK(ok);
        return;
    }
    for (i = 0; i < c->n_instances; i++) {
        const ptxinj_instance *in = &c->instances[i];
        ok &= in->site < c->n_sites && in->begin >= prev && in->begin < in->end && in->end <= p->len;
        ok &= (in->begin == 0 || p->ptx[in->begin - 1] == '\n') && (in->end == p->len || p->ptx[in->end - 1] == '\n');
        prev = in->end;
    }
    for (i = 0; i < c->n_sites; i++) {
        const ptxinj_site *s = &c->sites[i];
        ok &= s->first_var == sum_vars && s->n_instances > 0 && s->first_instance < c->n_instances;
        ok &= s->first_instance < c->n_instances && c->instances[s->first_instance].site == i;
        ok &= ptxinj_find_site(c, p->ptx + s->name_off, s->name_len, &idx) == PTXINJ_OK && idx == i;
        sum_inst += s->n_instances;
        sum_vars += s->n_vars;
    }
    for (i = 0; i < c->n_vars; i++)
        ok &= c->vars[i].kind <= PTXINJ_MOD && c->vars[i].name_off + c->vars[i].name_len <= p->len;
    ok &= sum_inst == c->n_instances && sum_vars == c->n_vars;
    CHECK(ok);
}

static void test_fuzz(void)
{
    static const char *const frags[] = {
        "// PTX_INJECT_BEGIN f\n", "\t// PTX_INJECT_END\n", "// PTX_INJECT_VAR in f32 f32 _x0 a\n",
        "// PTX_INJECT_VAR out f32 f32 _x1 b", "// PTX_INJECT_START f\n", "// _x0 m f32 F32 c\n",
        "\r\n", "\n", "//", "// PTX_INJECT_", "PTX_INJECT_END", " ", "\t", "\0", "\xff", "/", "\r",
        "// PTX_INJECT_BEGIN g\n// PTX_INJECT_END\n",
    };
    sb base = {0, 0, 0};
    char *work = (char *)malloc(16384), *text;
    int it, k, counts[PTXINJ_STATUS_COUNT] = {0};
    size_t n;
    g_test = "fuzz";
    sb_puts(&base, ".version 8.0\n\tmov.f32 %f1, %f2;\n");
    block(&base, "f", 3);
    sb_puts(&base, "\tadd.s32 %r1, %r2, 1; // note\r\n");
    block(&base, "g", 1);
    block(&base, "f", 3);
    block(&base, "f", 3);
    sb_puts(&base, "\t// PTX_INJECT_START h\r\n\t// _x0 i f32 F32 x\r\n\r\n\t// _x1 o f32 F32 y\r\n"
                   "\t// PTX_INJECT_END\r\n\tret;\n");
    for (it = 0; it < 20000; it++) {
        int muts = 1 + (int)rnd(4);
        parsed p;
        const char *stubs[8] = {0};
        char *r;
        ptxinj_status st;
        n = base.n;
        memcpy(work, base.p, n);
        for (k = 0; k < muts; k++) {
            uint32_t pos = rnd((uint32_t)n + 1), m;
            switch (rnd(6)) {
            case 0:   /* byte flip to any value */
                if (n) work[rnd((uint32_t)n)] = (char)rnd(256);
                break;
            case 1:   /* truncate */
                n = pos;
                break;
            case 2: { /* insert a marker fragment */
                const char *f = frags[rnd(sizeof frags / sizeof frags[0])];
                size_t fl = *f ? strlen(f) : 1;
                if (n + fl < 16384) { memmove(work + pos + fl, work + pos, n - pos); memcpy(work + pos, f, fl); n += fl; }
                break;
            }
            case 3:   /* delete a range */
                m = rnd((uint32_t)(n - pos) + 1);
                memmove(work + pos, work + pos + m, n - pos - m);
                n -= m;
                break;
            case 4: { /* duplicate a chunk somewhere else */
                uint32_t from = rnd((uint32_t)n + 1), len = rnd((uint32_t)(n - from) + 1);
                if (len > 200) len = 200;
                if (n + len < 16384) {
                    memmove(work + pos + len, work + pos, n - pos);
                    memmove(work + pos, work + (from < pos ? from : from + len), len);
                    n += len;
                }
                break;
            }
            default:  /* line terminator noise */
                if (n) work[rnd((uint32_t)n)] = rnd(2) ? '\r' : '\n';
                break;
            }
        }
        text = (char *)malloc(n ? n : 1);
        memcpy(text, work, n);
        p = parse_n(text, n);
        free(text);
        if ((int)p.st >= 0 && p.st < PTXINJ_STATUS_COUNT) counts[p.st]++;
        CHECK(p.st != PTXINJ_ERR_BUFFER_TOO_SMALL && p.st != PTXINJ_ERR_INVALID_ARGUMENT);
        check_parsed(&p);
        if (p.st == PTXINJ_OK && p.ctx.n_sites <= 8) {
            static const char *const pool[] = {"", "x", "add.f32 %_x0, %_x0, %_x1;\n", "a\nb", "\n", "\n\n"};
            uint32_t i;
            size_t need;
            uint32_t flags = rnd(2) ? PTXINJ_RENDER_TAG : 0;
            sb want = {0, 0, 0};
            for (i = 0; i < p.ctx.n_sites; i++) stubs[i] = rnd(6) ? pool[rnd(6)] : NULL;
            r = render(&p, stubs, (int)rnd(2), flags, &need, &st);
            ref_render(&p, stubs, flags, &want);
            CHECK(st == PTXINJ_OK && r != NULL && need == want.n && memcmp(r, want.p, need) == 0);
            if (r) {   /* region boundaries are line boundaries: the output holds no sites */
                parsed q = parse_n(r, need);
                CHECK(q.st == PTXINJ_OK && q.ctx.n_sites == 0);
                parsed_free(&q);
            }
            free(want.p);
            free(r);
        } else if (p.ctx.n_sites <= 8) {   /* partial results must still be safe to hand over */
            r = render(&p, stubs, 1, 0, NULL, &st);
            free(r);
        }
        parsed_free(&p);
    }
    printf("fuzz: 20000 mutations:");
    for (k = 0; k < PTXINJ_STATUS_COUNT; k++)
        if (counts[k]) printf(" %s=%d", ptxinj_status_string(k), counts[k]);
    printf("\n");
    CHECK(counts[PTXINJ_OK] > 1000 && counts[PTXINJ_ERR_MALFORMED_MARKER] > 100);
    free(work);
    free(base.p);
}

/* ---- differential fuzz against a slow, simple reference parser ---------------------------- */

/* The reference follows the format description line by line with linear searches and no fast
   paths (no marker hunting, no repeated-block shortcut, no hashing). */
typedef struct rtok { size_t off, len; } rtok;
typedef struct rvar { uint32_t kind; rtok f[4]; size_t line; } rvar;   /* dtype regtype reg name */
typedef struct ref {
    ptxinj_status st;
    size_t err_off;
    uint32_t err_site;
    int n_sites, n_vars, n_inst, legacy;
    struct { rtok name; int first_var, n_vars, n_inst; } sites[128];
    rvar vars[256];
    struct { int site; size_t b, e; } inst[128];
} ref;

static int ref_sep(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static int ref_tokens(const char *s, size_t b, size_t e, rtok *t, int max)
{
    int n = 0;
    while (b < e) {
        if (ref_sep(s[b])) { b++; continue; }
        if (n < max) t[n].off = b;
        while (b < e && !ref_sep(s[b])) b++;
        if (n < max) t[n].len = b - t[n].off;
        n++;
    }
    return n;
}

static int tok_eq(const char *s, rtok a, rtok b) { return a.len == b.len && memcmp(s + a.off, s + b.off, a.len) == 0; }

static int ref_fail(ref *r, ptxinj_status st, size_t off, int site)
{
    r->st = st; r->err_off = off; r->err_site = site < 0 ? NOSITE : (uint32_t)site;
    return 0;
}

static void ref_parse(ref *r, const char *s, size_t len)
{
    static const char *const words[4] = {"BEGIN", "START", "VAR", "END"};
    size_t pos = 0, begin = 0;
    int open = -1, first = 0, k = 0, legacy = 0;
    memset(r, 0, sizeof *r);
    r->st = PTXINJ_OK; r->err_site = NOSITE;
    while (pos < len) {
        const char *nl = (const char *)memchr(s + pos, '\n', len - pos);
        size_t e = nl ? (size_t)(nl - s) : len, next = nl ? e + 1 : len, j = pos, after = 0, rest = 0;
        int comment = 0, kw = 0, w;
        rtok t[6];
        while (j < e && (s[j] == ' ' || s[j] == '\t')) j++;
        if (e - j >= 2 && s[j] == '/' && s[j + 1] == '/') {
            size_t q = j + 2;
            comment = 1; after = q;
            while (q < e && (s[q] == ' ' || s[q] == '\t')) q++;
            if (e - q >= 11 && memcmp(s + q, "PTX_INJECT_", 11) == 0)
                for (w = 0; w < 4; w++) {
                    size_t n = strlen(words[w]);
                    if (e - q - 11 >= n && memcmp(s + q + 11, words[w], n) == 0 &&
                        (q + 11 + n == e || ref_sep(s[q + 11 + n]))) { kw = w + 1; rest = q + 11 + n; }
                }
        }
        if (open < 0) {
            if (kw == 1 || kw == 2) {
                int i;
                if (ref_tokens(s, rest, e, t, 1) != 1) { ref_fail(r, PTXINJ_ERR_MALFORMED_MARKER, pos, -1); return; }
                for (open = -1, i = 0; i < r->n_sites; i++)
                    if (tok_eq(s, r->sites[i].name, t[0])) open = i;
                first = open < 0;
                if (first) {
                    open = r->n_sites++;
                    r->sites[open].name = t[0];
                    r->sites[open].first_var = r->n_vars;
                }
                begin = pos; k = 0; legacy = kw == 2;
                if (legacy) r->legacy = 1;
            } else if (kw == 4) { ref_fail(r, PTXINJ_ERR_UNEXPECTED_END, pos, -1); return; }
            else if (kw == 3) { ref_fail(r, PTXINJ_ERR_MALFORMED_MARKER, pos, -1); return; }
        } else if (!comment) {
            if (ref_tokens(s, pos, e, t, 0) != 0) { ref_fail(r, PTXINJ_ERR_MALFORMED_MARKER, pos, open); return; }
        } else if (kw == 1 || kw == 2) {
            ref_fail(r, PTXINJ_ERR_NESTED_SITE, pos, open); return;
        } else if (kw == 4) {
            if (ref_tokens(s, rest, e, t, 0) != 0) { ref_fail(r, PTXINJ_ERR_MALFORMED_MARKER, pos, open); return; }
            if (!first && k != r->sites[open].n_vars) { ref_fail(r, PTXINJ_ERR_INCONSISTENT_INSTANCES, begin, open); return; }
            r->inst[r->n_inst].site = open; r->inst[r->n_inst].b = begin; r->inst[r->n_inst].e = next;
            r->n_inst++; r->sites[open].n_inst++;
            open = -1;
        } else if ((kw == 3 && !legacy) || (kw == 0 && legacy)) {
            rvar v;
            rtok kt;
            int i;
            if (ref_tokens(s, legacy ? after : rest, e, t, 6) != 5) { ref_fail(r, PTXINJ_ERR_MALFORMED_MARKER, pos, open); return; }
            if (legacy) { kt = t[1]; v.f[0] = t[3]; v.f[1] = t[2]; v.f[2] = t[0]; }
            else { kt = t[0]; v.f[0] = t[1]; v.f[1] = t[2]; v.f[2] = t[3]; }
            v.f[3] = t[4]; v.line = pos;
            v.kind = 9;
            if (legacy && kt.len == 1) v.kind = s[kt.off] == 'i' ? 0 : s[kt.off] == 'o' ? 1 : s[kt.off] == 'm' ? 2 : 9;
            if (!legacy && kt.len == 2 && !memcmp(s + kt.off, "in", 2)) v.kind = 0;
            if (!legacy && kt.len == 3 && !memcmp(s + kt.off, "out", 3)) v.kind = 1;
            if (!legacy && kt.len == 3 && !memcmp(s + kt.off, "mod", 3)) v.kind = 2;
            if (v.kind == 9) { ref_fail(r, PTXINJ_ERR_MALFORMED_MARKER, pos, open); return; }
            if (first) {
                for (i = r->sites[open].first_var; i < r->n_vars; i++)
                    if (tok_eq(s, r->vars[i].f[3], v.f[3])) { ref_fail(r, PTXINJ_ERR_DUPLICATE_VARIABLE, pos, open); return; }
                r->vars[r->n_vars++] = v;
                r->sites[open].n_vars++;
            } else {
                const rvar *o;
                if (k >= r->sites[open].n_vars) { ref_fail(r, PTXINJ_ERR_INCONSISTENT_INSTANCES, begin, open); return; }
                o = &r->vars[r->sites[open].first_var + k];
                if (o->kind != v.kind || !tok_eq(s, o->f[0], v.f[0]) || !tok_eq(s, o->f[1], v.f[1]) ||
                    !tok_eq(s, o->f[2], v.f[2]) || !tok_eq(s, o->f[3], v.f[3])) {
                    ref_fail(r, PTXINJ_ERR_INCONSISTENT_INSTANCES, pos, open); return;
                }
            }
            k++;
        } else {
            ref_fail(r, PTXINJ_ERR_MALFORMED_MARKER, pos, open); return;
        }
        pos = next;
    }
    if (open >= 0) ref_fail(r, PTXINJ_ERR_MISSING_END, begin, open);
}

/* Does the library agree with the reference? */
static int same_as_ref(const parsed *p, const ref *r)
{
    const ptxinj_ctx *c = &p->ctx;
    int i, k;
    if (p->st != r->st) return 0;
    if (r->st != PTXINJ_OK) return c->err_offset == r->err_off && c->err_site == r->err_site;
    if ((int)c->n_sites != r->n_sites || (int)c->n_vars != r->n_vars || (int)c->n_instances != r->n_inst ||
        (int)c->legacy != r->legacy)
        return 0;
    for (i = 0; i < r->n_inst; i++)
        if ((int)c->instances[i].site != r->inst[i].site || c->instances[i].begin != r->inst[i].b ||
            c->instances[i].end != r->inst[i].e)
            return 0;
    for (i = 0; i < r->n_sites; i++) {
        const ptxinj_site *st = &c->sites[i];
        if (st->name_off != r->sites[i].name.off || st->name_len != r->sites[i].name.len ||
            (int)st->first_var != r->sites[i].first_var || (int)st->n_vars != r->sites[i].n_vars ||
            (int)st->n_instances != r->sites[i].n_inst)
            return 0;
    }
    for (k = 0; k < r->n_vars; k++) {
        const ptxinj_var *v = &c->vars[k];
        const rvar *w = &r->vars[k];
        if (v->kind != w->kind || v->line_off != w->line || v->dtype_off != w->f[0].off ||
            v->dtype_len != w->f[0].len || v->regtype_off != w->f[1].off || v->regtype_len != w->f[1].len ||
            v->reg_off != w->f[2].off || v->reg_len != w->f[2].len || v->name_off != w->f[3].off ||
            v->name_len != w->f[3].len)
            return 0;
    }
    return 1;
}

/* Random texts built from whole marker lines and blocks, often repeating earlier blocks
   byte for byte (the shortcut paths), with occasional defects; checked against ref_parse. */
static void test_fuzz_lines(void)
{
    static const char *const noise[] = {
        "", "  \t", "\tadd.f32 %f1, %f2, %f3;", "// begin inline asm", "// PTX_INJECT_BEGINX a",
        "x // PTX_INJECT_BEGIN a", "// PTX_INJECT_END", "\t// PTX_INJECT_END  x", "// PTX_INJECT_BEGIN",
        "// PTX_INJECT_BEGIN a b", "// PTX_INJECT_VAR in f32 f32 _x0 x", "// _x0 q f32 F32 x",
        "// PTX_INJECT_START c", "\t//PTX_INJECT_BEGIN b ", "// PTX_INJECT_VAR in f32 f32 _x0",
        "// _x1 o f32 F32 y", "/", "\r", "J", "PTX_INJECT_BEGIN a",
    };
    static const char *const vars_new[] = {
        "// PTX_INJECT_VAR in f32 f32 _x0 x", "\t// PTX_INJECT_VAR out f32 f32 _x1 y",
        "//\tPTX_INJECT_VAR mod u32 b32 _x2 z", "// PTX_INJECT_VAR in f32 f32 _x0 y",
        "// PTX_INJECT_VAR inout f32 f32 _x0 w",
    };
    static const char *const vars_old[] = {
        "// _x0 i f32 F32 x", "\t// _x1 o f32 F32 y", "// _x2 m b32 U32 z", "// _x3 i f32 F32 x", "// _x0 x f32 F32 w",
    };
    static const char *const names[] = {"a", "b", "c", "a "};
    int it, agree = 1, n_ok = 0;
    sb b = {0, 0, 0};
    g_test = "fuzz_lines";
    for (it = 0; it < 20000; it++) {
        size_t starts[24];
        int n_blocks = 0, items = 1 + (int)rnd(12), i;
        const char *eol = rnd(4) ? "\n" : "\r\n";
        parsed p;
        ref r;
        b.n = 0;
        for (i = 0; i < items; i++) {
            uint32_t what = rnd(10);
            if (what < 2) {                       /* a noise line */
                sb_puts(&b, noise[rnd(sizeof noise / sizeof noise[0])]);
                sb_puts(&b, rnd(8) ? eol : "\r\n");
            } else if (what < 5 && n_blocks) {    /* repeat an earlier block byte for byte */
                size_t from = starts[rnd((uint32_t)n_blocks)], to = b.n, n;
                const char *q = b.p + from, *end;
                end = strstr(q, "PTX_INJECT_END");
                if (!end) continue;
                end = strchr(end, '\n');
                n = end ? (size_t)(end - q) + 1 : to - from;
                if (n <= to - from) {
                    char *tmp = (char *)malloc(n);
                    memcpy(tmp, q, n);
                    sb_put(&b, tmp, n);
                    free(tmp);
                }
            } else {                              /* a fresh block, sometimes defective */
                int legacy = rnd(4) == 0, nv = (int)rnd(4), v;
                if (n_blocks < 24) starts[n_blocks++] = b.n;
                sb_printf(&b, "%s// PTX_INJECT_%s %s", rnd(2) ? "\t" : "", legacy ? "START" : "BEGIN",
                          names[rnd(4)]);
                sb_puts(&b, eol);
                for (v = 0; v < nv; v++) {
                    uint32_t pick = rnd(10) ? (uint32_t)v : rnd(5);
                    sb_puts(&b, legacy ? vars_old[pick] : vars_new[pick]);
                    sb_puts(&b, eol);
                    if (rnd(12) == 0) { sb_puts(&b, noise[rnd(3)]); sb_puts(&b, eol); }
                }
                if (rnd(16)) { sb_puts(&b, rnd(2) ? "// PTX_INJECT_END" : "\t// PTX_INJECT_END "); if (rnd(10)) sb_puts(&b, eol); }
            }
        }
        p = parse_n(b.p ? b.p : "", b.n);
        ref_parse(&r, p.ptx, p.len);
        if (p.st == PTXINJ_OK) n_ok++;
        if (!same_as_ref(&p, &r)) {
            if (agree) printf("  first disagreement (status %d vs ref %d):\n%.*s\n---\n", (int)p.st, (int)r.st,
                              (int)b.n, b.p);
            agree = 0;
        }
        check_parsed(&p);
        parsed_free(&p);
    }
    CHECK(agree);
    CHECK(n_ok > 2000);
    printf("fuzz_lines: 20000 texts, %d parsed OK, all agree with the reference: %s\n", n_ok, agree ? "yes" : "NO");
    free(b.p);
}

int main(int argc, char **argv)
{
    g_bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    if (!g_bench) {
        test_one_site();
        test_two_sites();
        test_twenty_instances();
        test_kinds_and_legacy();
        test_crlf();
        test_errors();
        test_not_markers();
        test_edges();
        test_long_names();
        test_render();
        test_misc();
        test_fuzz();
        test_fuzz_lines();
    }
    test_scale();
    return check_report();
}
