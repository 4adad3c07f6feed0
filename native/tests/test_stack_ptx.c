/* Tests of the Stack PTX / AST PTX core (stack_ptx.h). Run with `make -C native test` (ASan +
   UBSan). Every program is copied into an exact-size heap array, the workspace is exactly
   stackptx_workspace_size() bytes at an odd address, and stubs are written into exact-size
   buffers (and one byte short), so any out-of-bounds access trips ASan.
   `--bench` runs only the timings (used by `make -C native bench`, built -O2). */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stack_ptx.h"

#include "check.h"

static int g_bench;
#define CHECK_STR(got, want) check_str_((got), (want), __LINE__)
static void check_str_(const char *got, const char *want, int line)
{
    if (got && strcmp(got, want) == 0) { g_pass++; return; }
    g_fail++;
    printf("FAIL [%s] line %d: text differs\n--- got:\n%s--- want:\n%s---\n", g_test, line,
           got ? got : "(null)", want);
}

/* ---- the test table ----------------------------------------------------------------------- */

/* short names for the ids of stack_ptx_tables.h (generated from numptx/valuetypes.py) */
enum { T_PRED = STACKPTX_T_PRED, T_F16 = STACKPTX_T_F16, T_F16X2 = STACKPTX_T_F16X2,
       T_BF16 = STACKPTX_T_BF16, T_BF16X2 = STACKPTX_T_BF16X2, T_F32 = STACKPTX_T_F32,
       T_F64 = STACKPTX_T_F64, T_S32 = STACKPTX_T_S32, T_U32 = STACKPTX_T_U32,
       T_S64 = STACKPTX_T_S64, T_U64 = STACKPTX_T_U64, T_B16 = STACKPTX_T_B16,
       T_B32 = STACKPTX_T_B32, T_B64 = STACKPTX_T_B64, N_TYPES = STACKPTX_N_TYPES };
static const char *const type_names[N_TYPES] = STACKPTX_TYPE_NAMES;

/* a custom reg_type_names table: each type's own name as its register type, except entry
   `which`, which is `name` (one static table: valid until the next call) */
static const char *const *reg_names_with(int which, const char *name)
{
    static const char *names[N_TYPES];
    int t;
    for (t = 0; t < N_TYPES; t++) names[t] = type_names[t];
    names[which] = name;
    return names;
}

enum { R_ADD, R_MUL, R_SUB, R_FMA, R_SETP, R_SELP, R_UNPACK, R_MMA, R_CLOCK, R_CVT, R_BAD,
       R_NEG, R_SINK, R_TID, R_BADFMT, R_MINX, R_MANY, N_ROWS };

static stackptx_instr g_rows[N_ROWS];
static stackptx_table g_table;

static void row(int i, const char *fmt, const char *res, const char *ops, uint32_t flags)
{
    /* res/ops: space-separated type specs, "f32" or "b32[4]" */
    stackptx_instr *r = &g_rows[i];
    const char *specs[2] = { res, ops };
    int s;
    memset(r, 0, sizeof *r);
    r->fmt = fmt;
    r->fmt_len = (uint32_t)strlen(fmt);
    r->flags = flags;
    for (s = 0; s < 2; s++) {
        const char *p = specs[s];
        while (*p) {
            char name[16];
            int n = 0, t, w = 1;
            while (*p == ' ') p++;
            if (!*p) break;
            while (*p && *p != ' ' && *p != '[' && n < 15) name[n++] = *p++;
            name[n] = 0;
            if (*p == '[') { w = atoi(p + 1); while (*p && *p != ' ') p++; }
            for (t = 0; t < N_TYPES && strcmp(type_names[t], name) != 0; t++) {}
            if (t == N_TYPES) { printf("bad type spec %s\n", name); exit(2); }
            if (s == 0) { r->result_type[r->n_results] = (uint8_t)t; r->result_width[r->n_results++] = (uint8_t)w; }
            else { r->operand_type[r->n_operands] = (uint8_t)t; r->operand_width[r->n_operands++] = (uint8_t)w; }
        }
    }
}

static void make_table(void)
{
    row(R_ADD, "add.f32 $0, $1, $2;", "f32", "f32 f32", STACKPTX_F_COMMUTATIVE);
    row(R_MUL, "mul.rn.f32 $0, $1, $2;", "f32", "f32 f32", STACKPTX_F_COMMUTATIVE);
    row(R_SUB, "sub.f32 $0, $1, $2;", "f32", "f32 f32", 0);
    row(R_FMA, "fma.rn.f32 $0, $1, $2, $3;", "f32", "f32 f32 f32", STACKPTX_F_COMMUTATIVE);
    row(R_SETP, "setp.lt.f32 $0, $1, $2;", "pred", "f32 f32", 0);
    row(R_SELP, "selp.f32 $0, $1, $2, $3;", "f32", "f32 f32 pred", 0);
    row(R_UNPACK, "mov.b64 {$0, $1}, $2;", "b32 b32", "b64", 0);
    row(R_MMA, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 $0, $1, $2, $3;", "f32[4]",
        "b32[4] b32[2] f32[4]", 0);
    row(R_CLOCK, "mov.u32 $0, %clock;", "u32", "", STACKPTX_F_VOLATILE);
    row(R_CVT, "cvt.rzi.s32.f32 $0, $1;", "s32", "f32", 0);
    row(R_BAD, "bad $0;", "f32", "f32", 0);
    g_rows[R_BAD].n_results = 5;                       /* a bad row */
    row(R_NEG, "neg.f32 $0, $1;", "f32", "f32", 0);
    row(R_SINK, "// sink $0", "", "f32", 0);           /* 0 results: pops only */
    row(R_TID, "mov.u32 $0, %tid.x;", "u32", "", 0);
    row(R_BADFMT, "neg.f32 $0, $7; // $x $", "f32", "f32", 0);   /* slot out of range */
    row(R_MINX, "min.ftz.NaN.xorsign.abs.f32 $0, $1, $2;", "f32", "f32 f32", 0);   /* a long piece */
    row(R_MANY, "add.f32 $0, $1, $2; // $1$2$1$2$1$2$1$2$1$2", "f32", "f32 f32", 0);   /* 13 slots */
    g_table.rows = g_rows;
    g_table.n_rows = N_ROWS;
    g_table.reg_type_names = NULL;
}

/* ---- words ------------------------------------------------------------------------------- */

#define W(k, t, a, b) STACKPTX_WORD(k, t, a, b)
#define NOP W(STACKPTX_K_NOP, 0, 0, 0)
#define IN(i) W(STACKPTX_K_INPUT, 0, i, 0)
#define CST(t, b) W(STACKPTX_K_CONST, t, 0, b)
#define C64(t) W(STACKPTX_K_CONST64, t, 0, 0)
#define OP(r) W(STACKPTX_K_INSTR, 0, r, 0)
#define MC(v) W(STACKPTX_K_META_CONST, 0, v, 0)
#define META(t, op) W(STACKPTX_K_META, t, op, 0)
#define CALL(a) W(STACKPTX_K_ROUTINE, 0, a, 0)
#define STO(t, s) W(STACKPTX_K_STORE, t, s, 0)
#define LD(t, s) W(STACKPTX_K_LOAD, t, s, 0)
#define RET W(STACKPTX_K_RETURN, 0, 0, 0)
#define F32_ONE 0x3F800000u
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- inputs / outputs --------------------------------------------------------------------- */

typedef struct iospec {
    uint8_t it[64], ot[64];
    const char *in[64], *on[64];
    uint32_t il[64], ol[64];
    char buf[1024];
    stackptx_io io;
} iospec;

/* spec: "f32:x f32:y" */
static uint32_t parse_spec(const char *spec, uint8_t *types, const char **names, uint32_t *lens,
                           char **bp)
{
    uint32_t n = 0;
    const char *p = spec;
    while (*p) {
        char tn[16];
        int k = 0, t;
        while (*p == ' ') p++;
        if (!*p) break;
        while (*p != ':') tn[k++] = *p++;
        tn[k] = 0;
        p++;
        for (t = 0; t < N_TYPES && strcmp(type_names[t], tn) != 0; t++) {}
        if (t == N_TYPES) { printf("bad io type %s\n", tn); exit(2); }
        types[n] = (uint8_t)t;
        names[n] = *bp;
        k = 0;
        while (*p && *p != ' ') { *(*bp)++ = *p++; k++; }
        *(*bp)++ = 0;
        lens[n++] = (uint32_t)k;
    }
    return n;
}

static void io_init(iospec *s, const char *ins, const char *outs)
{
    char *bp = s->buf;
    memset(s, 0, sizeof *s);
    s->io.n_inputs = parse_spec(ins, s->it, s->in, s->il, &bp);
    s->io.n_outputs = parse_spec(outs, s->ot, s->on, s->ol, &bp);
    s->io.input_types = s->it; s->io.input_names = s->in; s->io.input_name_lens = s->il;
    s->io.output_types = s->ot; s->io.output_names = s->on; s->io.output_name_lens = s->ol;
}

/* ---- stub validator ----------------------------------------------------------------------- */

/* Structure of a stub: "{", .reg lines declaring %_s0..%_s(n-1) in order, instruction lines in
   which every temporary is written once (the destination field: up to the first ',' outside
   braces) before it is read, output movs, "}". Returns 1 when well-formed. */
static int valid_stub(const char *t, size_t len, const stackptx_io *io, uint32_t unwritten)
{
    static unsigned char defined[1 << 16];
    const char *p = t, *e = t + len;
    uint32_t n_decl = 0, n_out = 0;
    if (len < 4 || memcmp(t, "{\n", 2) != 0 || memcmp(e - 2, "}\n", 2) != 0) return 0;
    p += 2;
    while (p < e - 2 && memcmp(p, ".reg .", 6) == 0) {
        const char *nl = memchr(p, '\n', (size_t)(e - p)), *q = memchr(p, '%', (size_t)(nl - p));
        char want[32];
        int k;
        if (!nl || !q) return 0;
        k = snprintf(want, sizeof want, "%%_s%u;", n_decl);
        if (nl - q != k || memcmp(q, want, (size_t)k) != 0) return 0;
        if (n_decl >= sizeof defined) return 0;
        defined[n_decl++] = 0;
        p = nl + 1;
    }
    while (p < e - 2) {
        const char *nl = memchr(p, '\n', (size_t)(e - p)), *q, *dest_end;
        int brace = 0;
        if (!nl) return 0;
        if (nl == p) return 0;
        /* destination field */
        q = memchr(p, ' ', (size_t)(nl - p));
        if (!q) return 0;
        for (dest_end = q; dest_end < nl; dest_end++) {
            if (*dest_end == '{') brace++;
            else if (*dest_end == '}') brace--;
            else if (*dest_end == ',' && !brace) break;
        }
        {   /* is it an output mov? (destination is an output register) */
            uint32_t k;
            int is_out = 0;
            for (k = 0; k < io->n_outputs; k++)
                if ((size_t)(dest_end - q - 2) == io->output_name_lens[k] &&
                    memcmp(q + 2, io->output_names[k], io->output_name_lens[k]) == 0 && q[1] == '%')
                    is_out = 1;
            if (is_out) n_out++;
            else if (n_out) return 0;   /* output movs come last */
        }
        for (; q < nl; q++) {
            if (q[0] == '%' && q + 2 < nl && q[1] == '_' && q[2] == 's') {
                uint32_t v = 0;
                const char *d = q + 3;
                if (d >= nl || *d < '0' || *d > '9') return 0;
                while (d < nl && *d >= '0' && *d <= '9') v = v * 10 + (uint32_t)(*d++ - '0');
                if (v >= n_decl) return 0;
                if (q < dest_end) {
                    if (defined[v]) return 0;
                    defined[v] = 1;
                } else if (!defined[v]) {
                    return 0;
                }
                q = d - 1;
            }
        }
        p = nl + 1;
    }
    if (n_out != io->n_outputs - unwritten) return 0;
    {
        uint32_t v;
        for (v = 0; v < n_decl; v++)
            if (!defined[v]) return 0;
    }
    return p == e - 2;
}

/* ---- runner ------------------------------------------------------------------------------- */

enum { STACK = 0, AST = 1 };

typedef struct result {
    stackptx_status st;
    stackptx_diag d;
    char *text;    /* NUL-terminated copy (NULL when no stub) */
    size_t len;
} result;

static void result_free(result *r) { free(r->text); r->text = NULL; }

static int same_diag(const stackptx_diag *a, const stackptx_diag *b) { return memcmp(a, b, sizeof *a) == 0; }

static stackptx_status call(int mode, const iospec *s, const uint64_t *w, size_t n, const stackptx_routines *r,
                            const stackptx_limits *lim, int strict, void *ws, size_t wsz, char *out,
                            size_t cap, size_t *len, stackptx_diag *d)
{
    if (mode == AST) return astptx_compile(&g_table, &s->io, lim, w, n, r, ws, wsz, out, cap, len, d);
    return stackptx_compile(&g_table, &s->io, lim, w, n, r, strict, ws, wsz, out, cap, len, d);
}

static result run_full(int mode, const iospec *s, const uint64_t *words, size_t n, const stackptx_routines *r,
                       const stackptx_limits *lim, int strict)
{
    result res;
    size_t wsz = stackptx_workspace_size(lim, &s->io), len0 = 0, len = 0, len1 = 0;
    unsigned char *raw = (unsigned char *)malloc(wsz + 1);
    uint64_t *w = (uint64_t *)malloc(n ? n * 8 : 1);
    stackptx_diag d0, d1;
    stackptx_status st0, st1;
    char *out;
    memset(&res, 0, sizeof res);
    if (n) memcpy(w, words, n * 8);
    /* measure */
    st0 = call(mode, s, w, n, r, lim, strict, raw + 1, wsz, NULL, 0, &len0, &d0);
    out = (char *)malloc(len0 ? len0 : 1);
    res.st = call(mode, s, w, n, r, lim, strict, raw + 1, wsz, out, len0, &len, &res.d);
    if (res.st == STACKPTX_OK || res.st == STACKPTX_ERR_STRICT_UNSATISFIED) {
        CHECK(st0 == STACKPTX_ERR_BUFFER_TOO_SMALL);
        CHECK(len == len0);
        CHECK(same_diag(&d0, &res.d));
        /* the mm-ptx dialect writes no mov for an unsatisfied output */
        CHECK(valid_stub(out, len, &s->io, lim && lim->dialect ? res.d.n_unsatisfied : 0));
        /* one byte short: BUFFER_TOO_SMALL, the exact size, a prefix */
        if (len0) {
            char *o1 = (char *)malloc(len0 - 1 ? len0 - 1 : 1);
            st1 = call(mode, s, w, n, r, lim, strict, raw + 1, wsz, len0 - 1 ? o1 : NULL, len0 - 1, &len1, &d1);
            CHECK(st1 == STACKPTX_ERR_BUFFER_TOO_SMALL);
            CHECK(len1 == len0);
            CHECK(same_diag(&d1, &res.d));
            free(o1);
        }
        {   /* a roomy buffer (the unchecked fast paths) gives the same bytes */
            size_t big_len = 0;
            char *big = (char *)malloc(len0 + 4096);
            stackptx_diag d2;
            st1 = call(mode, s, w, n, r, lim, strict, raw + 1, wsz, big, len0 + 4096, &big_len, &d2);
            CHECK(st1 == res.st && big_len == len && memcmp(big, out, len) == 0);
            free(big);
        }
        res.text = (char *)malloc(len + 1);
        memcpy(res.text, out, len);
        res.text[len] = 0;
        res.len = len;
    } else {
        CHECK(st0 == res.st);
        CHECK(len == 0);
    }
    free(out);
    free(w);
    free(raw);
    return res;
}

static result run(int mode, const iospec *s, const uint64_t *words, size_t n)
{
    return run_full(mode, s, words, n, NULL, NULL, 0);
}

/* Text of a Stack PTX stub; checks OK. */
static char *stub(const iospec *s, const uint64_t *words, size_t n)
{
    result r = run(STACK, s, words, n);
    CHECK(r.st == STACKPTX_OK);
    return r.text;
}

/* The f32 stack after a program, top first, as input names ('0' = empty), read from the output
   movs of five f32 outputs o0..o4 over inputs a..e. */
static iospec g_meta_io;
static char g_stack_buf[16];
static const char *stack_of_full(const uint64_t *words, size_t n, const stackptx_routines *r,
                                 const stackptx_limits *lim, stackptx_diag *d)
{
    result res = run_full(STACK, &g_meta_io, words, n, r, lim, 0);
    int k;
    CHECK(res.st == STACKPTX_OK);
    for (k = 0; k < 5; k++) {
        char pat[32];
        const char *q;
        snprintf(pat, sizeof pat, "%%o%d, %%", k);
        q = res.text ? strstr(res.text, pat) : NULL;
        if (!q) { g_stack_buf[k] = '?'; continue; }
        q += strlen(pat);
        g_stack_buf[k] = (q[0] == '_') ? '0' : q[0];
    }
    g_stack_buf[5] = 0;
    if (d) *d = res.d;
    result_free(&res);
    return g_stack_buf;
}
static const char *stack_of(const uint64_t *words, size_t n) { return stack_of_full(words, n, NULL, NULL, NULL); }

/* ---- tests -------------------------------------------------------------------------------- */

static void test_basic(void)
{
    iospec s;
    char *t;
    g_test = "basic";
    io_init(&s, "f32:x f32:y", "f32:z");
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_SUB) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %x, %y;\nmov.f32 %z, %_s0;\n}\n");
        free(t);
    }
    {
        uint64_t w[] = { IN(1), IN(0), OP(R_SUB) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %y, %x;\nmov.f32 %z, %_s0;\n}\n");
        free(t);
    }
    {   /* an input straight to the output */
        uint64_t w[] = { IN(1) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\nmov.f32 %z, %y;\n}\n");
        free(t);
    }
    {   /* selp over setp: the pred stack is separate */
        uint64_t w[] = { IN(0), IN(1), IN(0), IN(1), OP(R_SETP), OP(R_SELP) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .pred %_s0;\n.reg .f32 %_s1;\nsetp.lt.f32 %_s0, %x, %y;\n"
                     "selp.f32 %_s1, %x, %y, %_s0;\nmov.f32 %z, %_s1;\n}\n");
        free(t);
    }
    {   /* fma: three operands, last on top */
        uint64_t w[] = { IN(0), IN(1), CST(T_F32, F32_ONE), OP(R_FMA) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\nmov.f32 %_s0, 0f3F800000;\n"
                     "fma.rn.f32 %_s1, %x, %y, %_s0;\nmov.f32 %z, %_s1;\n}\n");
        free(t);
    }
    {
        iospec c;
        uint64_t w[] = { IN(0), OP(R_CVT) };
        io_init(&c, "f32:x", "s32:i");
        t = stub(&c, w, N(w));
        CHECK_STR(t, "{\n.reg .s32 %_s0;\ncvt.rzi.s32.f32 %_s0, %x;\nmov.s32 %i, %_s0;\n}\n");
        free(t);
    }
    {   /* custom register type names */
        uint64_t w[] = { IN(0), CST(T_F32, F32_ONE), OP(R_ADD) };
        result r;
        g_table.reg_type_names = reg_names_with(T_F32, "b32");
        r = run(STACK, &s, w, N(w));
        CHECK_STR(r.text, "{\n.reg .b32 %_s0;\n.reg .b32 %_s1;\nmov.b32 %_s0, 0f3F800000;\n"
                          "add.f32 %_s1, %x, %_s0;\nmov.b32 %z, %_s1;\n}\n");
        result_free(&r);
        g_table.reg_type_names = NULL;
    }
}

static void test_multi_result(void)
{
    iospec s;
    char *t;
    g_test = "multi_result";
    io_init(&s, "b64:v", "b32:hi b32:lo");
    {
        uint64_t w[] = { IN(0), OP(R_UNPACK) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .b32 %_s0;\n.reg .b32 %_s1;\nmov.b64 {%_s0, %_s1}, %v;\n"
                     "mov.b32 %hi, %_s1;\nmov.b32 %lo, %_s0;\n}\n");
        free(t);
    }
    {   /* only one result used: the instruction still declares both */
        iospec s1;
        uint64_t w[] = { IN(0), OP(R_UNPACK), META(T_B32, STACKPTX_M_DROP) };
        io_init(&s1, "b64:v", "b32:lo");
        t = stub(&s1, w, N(w));
        CHECK_STR(t, "{\n.reg .b32 %_s0;\n.reg .b32 %_s1;\nmov.b64 {%_s0, %_s1}, %v;\n"
                     "mov.b32 %lo, %_s0;\n}\n");
        free(t);
    }
    {   /* the same instance twice: merged */
        uint64_t w[] = { IN(0), OP(R_UNPACK), IN(0), OP(R_UNPACK), META(T_B32, STACKPTX_M_DROP),
                         META(T_B32, STACKPTX_M_DROP) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .b32 %_s0;\n.reg .b32 %_s1;\nmov.b64 {%_s0, %_s1}, %v;\n"
                     "mov.b32 %hi, %_s1;\nmov.b32 %lo, %_s0;\n}\n");
        free(t);
    }
    {   /* mma: vector operands and results */
        iospec m;
        uint64_t w[] = { IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), IN(6), IN(7), IN(8), IN(9), OP(R_MMA) };
        io_init(&m, "b32:a0 b32:a1 b32:a2 b32:a3 b32:b0 b32:b1 f32:c0 f32:c1 f32:c2 f32:c3",
                "f32:d3 f32:d2 f32:d1 f32:d0");
        t = stub(&m, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\n.reg .f32 %_s2;\n.reg .f32 %_s3;\n"
                     "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%_s0, %_s1, %_s2, %_s3}, "
                     "{%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3};\n"
                     "mov.f32 %d3, %_s3;\nmov.f32 %d2, %_s2;\nmov.f32 %d1, %_s1;\nmov.f32 %d0, %_s0;\n}\n");
        free(t);
    }
    {   /* a 0-result row pops its operand */
        iospec s2;
        uint64_t w[] = { IN(0), IN(1), OP(R_SINK) };
        io_init(&s2, "f32:x f32:y", "f32:z");
        t = stub(&s2, w, N(w));
        CHECK_STR(t, "{\nmov.f32 %z, %x;\n}\n");
        free(t);
    }
}

static void test_cse(void)
{
    iospec s;
    char *t;
    const char *dup_text = "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\nadd.f32 %_s0, %x, %y;\n"
                           "mul.rn.f32 %_s1, %_s0, %_s0;\nmov.f32 %z, %_s1;\n}\n";
    g_test = "cse";
    io_init(&s, "f32:x f32:y", "f32:z");
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_ADD), META(T_F32, STACKPTX_M_DUP), OP(R_MUL) };
        t = stub(&s, w, N(w)); CHECK_STR(t, dup_text); free(t);
    }
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_ADD), IN(0), IN(1), OP(R_ADD), OP(R_MUL) };
        t = stub(&s, w, N(w)); CHECK_STR(t, dup_text); free(t);
    }
    {   /* commutative: y + x merges with x + y, emitted as first seen */
        uint64_t w[] = { IN(0), IN(1), OP(R_ADD), IN(1), IN(0), OP(R_ADD), OP(R_MUL) };
        t = stub(&s, w, N(w)); CHECK_STR(t, dup_text); free(t);
    }
    {   /* not commutative */
        uint64_t w[] = { IN(0), IN(1), OP(R_SUB), IN(1), IN(0), OP(R_SUB), OP(R_MUL) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\n.reg .f32 %_s2;\nsub.f32 %_s0, %x, %y;\n"
                     "sub.f32 %_s1, %y, %x;\nmul.rn.f32 %_s2, %_s0, %_s1;\nmov.f32 %z, %_s2;\n}\n");
        free(t);
    }
    {   /* constants merge by type + bits */
        uint64_t w[] = { CST(T_F32, F32_ONE), CST(T_F32, F32_ONE), OP(R_ADD) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\nmov.f32 %_s0, 0f3F800000;\n"
                     "add.f32 %_s1, %_s0, %_s0;\nmov.f32 %z, %_s1;\n}\n");
        free(t);
    }
    {   /* fma commutes in its first two operands only */
        uint64_t w[] = { IN(0), IN(1), IN(0), OP(R_FMA), IN(1), IN(0), IN(0), OP(R_FMA), OP(R_ADD),
                         IN(0), IN(0), IN(1), OP(R_FMA), OP(R_ADD) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\n.reg .f32 %_s2;\n.reg .f32 %_s3;\n"
                     "fma.rn.f32 %_s0, %x, %y, %x;\nadd.f32 %_s1, %_s0, %_s0;\n"
                     "fma.rn.f32 %_s2, %x, %x, %y;\nadd.f32 %_s3, %_s1, %_s2;\nmov.f32 %z, %_s3;\n}\n");
        free(t);
    }
    {   /* volatile never merges; a plain special register does */
        iospec u;
        uint64_t w[] = { OP(R_CLOCK), OP(R_CLOCK), OP(R_TID), OP(R_TID) };
        io_init(&u, "", "u32:a u32:b u32:c u32:d");
        t = stub(&u, w, N(w));
        CHECK_STR(t, "{\n.reg .u32 %_s0;\n.reg .u32 %_s1;\n.reg .u32 %_s2;\nmov.u32 %_s0, %clock;\n"
                     "mov.u32 %_s1, %clock;\nmov.u32 %_s2, %tid.x;\nmov.u32 %a, %_s2;\nmov.u32 %b, %_s2;\n"
                     "mov.u32 %c, %_s1;\nmov.u32 %d, %_s0;\n}\n");
        free(t);
    }
    {   /* dead code is not emitted; temporaries count only what is emitted */
        uint64_t w[] = { IN(0), IN(1), OP(R_MUL), CST(T_F32, 7), IN(0), IN(1), OP(R_SUB) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %x, %y;\nmov.f32 %z, %_s0;\n}\n");
        free(t);
    }
    {   /* many distinct nodes: the hash table grows (values stay distinct and correct) */
        uint64_t w[700];
        size_t i, n = 0;
        result r;
        w[n++] = IN(0);
        for (i = 0; i < 300; i++) { w[n++] = CST(T_F32, (uint32_t)i); w[n++] = OP(R_ADD); }
        r = run(STACK, &s, w, n);
        CHECK(r.st == STACKPTX_OK);
        CHECK(r.d.nodes == 601);
        CHECK(r.text && strstr(r.text, "add.f32 %_s599, %_s597, %_s598;\nmov.f32 %z, %_s599;\n}\n"));
        result_free(&r);
        n = 0;   /* and the same 300 pairs twice merge completely */
        w[n++] = IN(0);
        for (i = 0; i < 150; i++) { w[n++] = CST(T_F32, (uint32_t)i); w[n++] = OP(R_ADD); }
        for (i = 0; i < 150; i++) { w[n++] = CST(T_F32, (uint32_t)i); w[n++] = OP(R_ADD); }
        r = run(STACK, &s, w, n);
        CHECK(r.d.nodes == 1 + 150 + 300);   /* constants merge; the second chain is new (other operands) */
        result_free(&r);
    }
}

static void test_constants(void)
{
    iospec s;
    char *t;
    g_test = "constants";
    io_init(&s, "", "pred:p f16:h f16x2:h2 bf16:bh bf16x2:bh2 f32:f f64:d s32:i u32:u s64:l u64:ul "
                    "b16:w16 b32:w32 b64:w64");
    {
        uint64_t w[] = {
            CST(T_PRED, 1), CST(T_F16, 0x3C00), CST(T_F16X2, 0x3C003C00), CST(T_BF16, 0x3F80),
            CST(T_BF16X2, 0x3F803F80), CST(T_F32, F32_ONE), C64(T_F64), 0x3FF0000000000000ull,
            CST(T_S32, 0xFFFFFFFBu), CST(T_U32, 0xFFFFFFFFu), CST(T_S64, 0xFFFFFFFBu), C64(T_U64),
            0xFFFFFFFFFFFFFFFFull, CST(T_B16, 0x1234ABCDu), CST(T_B32, 0xDEADBEEFu), C64(T_B64),
            0x0123456789ABCDEFull };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .pred %_s0;\n.reg .b16 %_s1;\n.reg .b32 %_s2;\n.reg .b16 %_s3;\n"
                     ".reg .b32 %_s4;\n.reg .f32 %_s5;\n.reg .f64 %_s6;\n.reg .s32 %_s7;\n.reg .u32 %_s8;\n"
                     ".reg .s64 %_s9;\n.reg .u64 %_s10;\n.reg .b16 %_s11;\n.reg .b32 %_s12;\n.reg .b64 %_s13;\n"
                     "mov.pred %_s0, 1;\nmov.b16 %_s1, 0x3C00;\nmov.b32 %_s2, 0x3C003C00;\n"
                     "mov.b16 %_s3, 0x3F80;\nmov.b32 %_s4, 0x3F803F80;\nmov.f32 %_s5, 0f3F800000;\n"
                     "mov.f64 %_s6, 0d3FF0000000000000;\nmov.s32 %_s7, -5;\nmov.u32 %_s8, 4294967295;\n"
                     "mov.s64 %_s9, -5;\nmov.u64 %_s10, 18446744073709551615;\nmov.b16 %_s11, 0xABCD;\n"
                     "mov.b32 %_s12, 0xDEADBEEF;\nmov.b64 %_s13, 0x0123456789ABCDEF;\n"
                     "mov.pred %p, %_s0;\nmov.b16 %h, %_s1;\nmov.b32 %h2, %_s2;\nmov.b16 %bh, %_s3;\n"
                     "mov.b32 %bh2, %_s4;\nmov.f32 %f, %_s5;\nmov.f64 %d, %_s6;\nmov.s32 %i, %_s7;\n"
                     "mov.u32 %u, %_s8;\nmov.s64 %l, %_s9;\nmov.u64 %ul, %_s10;\nmov.b16 %w16, %_s11;\n"
                     "mov.b32 %w32, %_s12;\nmov.b64 %w64, %_s13;\n}\n");
        free(t);
    }
    {   /* extremes and canonicalization */
        uint64_t w[] = {
            CST(T_PRED, 2), CST(T_F16, 0x12343C00u), CST(T_S32, 0x80000000u), C64(T_S64), 0x8000000000000000ull,
            CST(T_U64, 0xFFFFFFFFu), CST(T_F64, 0x1u), CST(T_B64, 0x80000000u), CST(T_S32, 0), C64(T_F32),
            0xFFFFFFFF3F800000ull, CST(T_U32, 0) };
        t = stub(&s, w, N(w));
        CHECK(t && strstr(t, "mov.pred %_s0, 1;\n"));
        CHECK(t && strstr(t, "mov.b16 %_s1, 0x3C00;\n"));
        CHECK(t && strstr(t, "mov.s32 %_s6, 0;\n"));                         /* top of s32 */
        CHECK(t && strstr(t, "-2147483648") == NULL);                       /* below it: not used */
        CHECK(t && strstr(t, "mov.s64 %_s2, -9223372036854775808;\n"));
        CHECK(t && strstr(t, "mov.u64 %_s3, 4294967295;\n"));               /* zero-extended */
        CHECK(t && strstr(t, "mov.f64 %_s4, 0d0000000000000001;\n"));
        CHECK(t && strstr(t, "mov.b64 %_s5, 0x0000000080000000;\n"));
        CHECK(t && strstr(t, "mov.f32 %_s7, 0f3F800000;\n"));               /* CONST64 of a 32-bit type */
        CHECK(t && strstr(t, "mov.u32 %_s8, 0;\n"));
        CHECK(t && strstr(t, "mov.b32 %_s9, 0x00000000;\n"));              /* h2: unsatisfied */
        free(t);
    }
    {   /* pred 0 and s32 INT32_MIN on top */
        iospec s2;
        uint64_t w[] = { CST(T_PRED, 0), CST(T_S32, 0x80000000u) };
        io_init(&s2, "", "pred:p s32:i");
        t = stub(&s2, w, N(w));
        CHECK_STR(t, "{\n.reg .pred %_s0;\n.reg .s32 %_s1;\nmov.pred %_s0, 0;\nmov.s32 %_s1, -2147483648;\n"
                     "mov.pred %p, %_s0;\nmov.s32 %i, %_s1;\n}\n");
        free(t);
    }
}

static void test_meta(void)
{
    stackptx_diag d;
    stackptx_limits lim;
    g_test = "meta";
#define F META_F32
#define STACK_IS(want, ...) do { uint64_t w_[] = { __VA_ARGS__ }; CHECK_STR(stack_of(w_, N(w_)), want); } while (0)
    STACK_IS("ba000", IN(0), IN(1));
    STACK_IS("bba00", IN(0), IN(1), META(T_F32, STACKPTX_M_DUP));
    STACK_IS("00000", META(T_F32, STACKPTX_M_DUP));
    STACK_IS("acba0", IN(0), IN(1), IN(2), MC(2), META(T_F32, STACKPTX_M_YANK_DUP));
    STACK_IS("cba00", IN(0), IN(1), IN(2), MC(3), META(T_F32, STACKPTX_M_YANK_DUP));   /* past the end */
    STACK_IS("cba00", IN(0), IN(1), IN(2), META(T_F32, STACKPTX_M_YANK_DUP));          /* meta empty */
    /* a depth that did not execute stays on the meta stack */
    STACK_IS("abaed", IN(0), IN(1), IN(2), MC(9), META(T_F32, STACKPTX_M_YANK_DUP), IN(0), IN(1), IN(2),
             IN(3), IN(4), IN(0), IN(1), META(T_F32, STACKPTX_M_YANK_DUP));
    STACK_IS("ab000", IN(0), IN(1), META(T_F32, STACKPTX_M_SWAP));
    STACK_IS("a0000", IN(0), META(T_F32, STACKPTX_M_SWAP));
    STACK_IS("bcda0", IN(0), IN(1), IN(2), IN(3), MC(2), META(T_F32, STACKPTX_M_SWAP_WITH));
    STACK_IS("dcba0", IN(0), IN(1), IN(2), IN(3), MC(0), META(T_F32, STACKPTX_M_SWAP_WITH));
    STACK_IS("dcba0", IN(0), IN(1), IN(2), IN(3), MC(4), META(T_F32, STACKPTX_M_SWAP_WITH));
    /* swap_with(0) consumed its depth: the next swap_with sees 3 */
    STACK_IS("acbd0", IN(0), IN(1), IN(2), IN(3), MC(3), MC(0), META(T_F32, STACKPTX_M_SWAP_WITH),
             META(T_F32, STACKPTX_M_SWAP_WITH));
    STACK_IS("cda00", IN(0), IN(1), IN(2), IN(3), MC(1), META(T_F32, STACKPTX_M_REPLACE));
    STACK_IS("bc000", IN(0), IN(1), IN(2), MC(1), META(T_F32, STACKPTX_M_REPLACE));
    STACK_IS("ba000", IN(0), IN(1), MC(1), META(T_F32, STACKPTX_M_REPLACE));
    STACK_IS("b0000", IN(0), IN(1), MC(0), META(T_F32, STACKPTX_M_REPLACE));
    STACK_IS("a0000", IN(0), MC(0), META(T_F32, STACKPTX_M_REPLACE));
    STACK_IS("a0000", IN(0), IN(1), META(T_F32, STACKPTX_M_DROP));
    STACK_IS("00000", META(T_F32, STACKPTX_M_DROP));
    STACK_IS("c0000", IN(0), IN(1), META(T_F32, STACKPTX_M_CLEAR), IN(2));
    STACK_IS("00000", META(T_F32, STACKPTX_M_CLEAR));
    STACK_IS("bdca0", IN(0), IN(1), IN(2), IN(3), MC(2), META(T_F32, STACKPTX_M_ROTATE));
    STACK_IS("adcb0", IN(0), IN(1), IN(2), IN(3), MC(3), META(T_F32, STACKPTX_M_ROTATE));
    STACK_IS("dcba0", IN(0), IN(1), IN(2), IN(3), MC(0), META(T_F32, STACKPTX_M_ROTATE));
    STACK_IS("dcba0", IN(0), IN(1), IN(2), IN(3), MC(4), META(T_F32, STACKPTX_M_ROTATE));
    STACK_IS("bcda0", IN(0), IN(1), IN(2), IN(3), MC(3), META(T_F32, STACKPTX_M_REVERSE));
    STACK_IS("abcd0", IN(0), IN(1), IN(2), IN(3), MC(4), META(T_F32, STACKPTX_M_REVERSE));
    STACK_IS("dcba0", IN(0), IN(1), IN(2), IN(3), MC(5), META(T_F32, STACKPTX_M_REVERSE));
    STACK_IS("dcba0", IN(0), IN(1), IN(2), IN(3), MC(1), META(T_F32, STACKPTX_M_REVERSE));
    STACK_IS("00000", MC(0), META(T_F32, STACKPTX_M_REVERSE));
    /* a meta op on another stack leaves f32 alone; unknown op 9 is malformed */
    STACK_IS("ab000", IN(0), IN(1), META(T_U32, STACKPTX_M_SWAP), META(T_F32, 9), META(99, STACKPTX_M_SWAP),
             META(T_F32, STACKPTX_M_SWAP));
    {
        uint64_t w[] = { IN(0), META(T_F32, 9), META(99, 0), NOP, META(T_F32, STACKPTX_M_SWAP) };
        CHECK_STR(stack_of_full(w, N(w), NULL, NULL, &d), "a0000");
        CHECK(d.n_noops == 4);
        CHECK(d.flags == (STACKPTX_D_MALFORMED_WORD | STACKPTX_D_UNSATISFIED));
        CHECK(d.first_limit_word == UINT32_MAX && d.error_word == UINT32_MAX);
    }
    /* capacity 2 */
    memset(&lim, 0, sizeof lim);
    lim.stack_capacity = 2;
    {
        uint64_t w[] = { IN(0), IN(1), IN(2), META(T_F32, STACKPTX_M_DUP), MC(1), META(T_F32, STACKPTX_M_YANK_DUP),
                         CST(T_F32, 5), META(T_F32, STACKPTX_M_SWAP) };
        CHECK_STR(stack_of_full(w, N(w), NULL, &lim, &d), "ab000");
        CHECK(d.flags == (STACKPTX_D_STACK_OVERFLOW | STACKPTX_D_UNSATISFIED));
        CHECK(d.first_limit_word == 2);
        CHECK(d.n_noops == 4);
        CHECK(d.n_unsatisfied == 3 && d.unsatisfied_mask == 0x1C);
    }
    {   /* instruction results overflow; loading too */
        uint64_t w[] = { IN(0), IN(1), IN(0), OP(R_UNPACK), STO(T_F32, 0), IN(2), LD(T_F32, 0) };
        iospec s;
        result r;
        io_init(&s, "f32:a f32:b b64:v", "f32:o");
        lim.stack_capacity = 1;
        {
            uint64_t w2[] = { IN(2), OP(R_UNPACK), IN(0), STO(T_F32, 0), IN(1), LD(T_F32, 0) };
            r = run_full(STACK, &s, w2, N(w2), NULL, &lim, 0);
            CHECK(r.st == STACKPTX_OK);
            CHECK(r.d.flags == STACKPTX_D_STACK_OVERFLOW && r.d.first_limit_word == 1);
            CHECK_STR(r.text, "{\nmov.f32 %o, %b;\n}\n");
            CHECK(r.d.n_noops == 2);
            result_free(&r);
        }
        (void)w;
    }
    /* meta capacity 2 */
    memset(&lim, 0, sizeof lim);
    lim.meta_capacity = 2;
    {
        uint64_t w[] = { IN(0), IN(1), IN(2), MC(2), MC(1), MC(0), META(T_F32, STACKPTX_M_ROTATE) };
        CHECK_STR(stack_of_full(w, N(w), NULL, &lim, &d), "bca00");
        CHECK(d.flags == (STACKPTX_D_META_OVERFLOW | STACKPTX_D_UNSATISFIED) && d.first_limit_word == 5 && d.n_noops == 1);
    }
#undef STACK_IS
#undef F
}

/* The mm-ptx dialect (STACKPTX_DIALECT_MMPTX): the rules of mm-ptx's stack_ptx.h (ee2fa26),
   _stack_ptx_ast_run_ptx / _run_meta / _ast_run / _compile. Stacks are shown top first over
   inputs a..e; '?' = an output left unwritten (numptx writes zero: '0'). */
static void test_mmptx(void)
{
    stackptx_limits mm, nx;
    stackptx_diag d;
    iospec s;
    result r;
    g_test = "mmptx";
    memset(&mm, 0, sizeof mm);
    memset(&nx, 0, sizeof nx);
    mm.dialect = STACKPTX_DIALECT_MMPTX;
#define MM_IS(want, ...) do { uint64_t w_[] = { __VA_ARGS__ }; CHECK_STR(stack_of_full(w_, N(w_), NULL, &mm, NULL), want); } while (0)
#define NX_IS(want, ...) do { uint64_t w_[] = { __VA_ARGS__ }; CHECK_STR(stack_of_full(w_, N(w_), NULL, &nx, NULL), want); } while (0)
#define ABCDE IN(0), IN(1), IN(2), IN(3), IN(4)
#define M(op) META(T_F32, STACKPTX_M_##op)
    /* operand order: operand 0 from the top (mm-ptx: sub %d, %in1, %in0) */
    io_init(&s, "f32:a f32:b f32:c pred:p", "f32:z");
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_SUB) };
        r = run_full(STACK, &s, w, N(w), NULL, &mm, 0);
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %b, %a;\nmov.f32 %z, %_s0;\n}\n");
        result_free(&r);
        r = run_full(STACK, &s, w, N(w), NULL, &nx, 0);
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %a, %b;\nmov.f32 %z, %_s0;\n}\n");
        result_free(&r);
    }
    {   /* per type: f32 operands top first, the pred from its own stack */
        uint64_t w[] = { IN(0), IN(3), IN(1), IN(2), OP(R_SELP) }, w2[] = { IN(0), IN(1), IN(2), OP(R_FMA) };
        r = run_full(STACK, &s, w, N(w), NULL, &mm, 0);
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nselp.f32 %_s0, %c, %b, %p;\nmov.f32 %z, %_s0;\n}\n");
        result_free(&r);
        r = run_full(STACK, &s, w2, N(w2), NULL, &mm, 0);
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nfma.rn.f32 %_s0, %c, %b, %a;\nmov.f32 %z, %_s0;\n}\n");
        result_free(&r);
    }
    /* results: result 0 ends on top (numptx: the last) */
    io_init(&s, "b64:v", "b32:o0 b32:o1");
    {
        uint64_t w[] = { IN(0), OP(R_UNPACK) };
        r = run_full(STACK, &s, w, N(w), NULL, &mm, 0);
        CHECK(r.text && strstr(r.text, "mov.b32 %o0, %_s0;\nmov.b32 %o1, %_s1;\n"));
        result_free(&r);
        r = run_full(STACK, &s, w, N(w), NULL, &nx, 0);
        CHECK(r.text && strstr(r.text, "mov.b32 %o0, %_s1;\nmov.b32 %o1, %_s0;\n"));
        result_free(&r);
        /* a full stack: mm-ptx pushes result 1 (first in), drops result 0; numptx: no-op */
        mm.stack_capacity = nx.stack_capacity = 1;
        r = run_full(STACK, &s, w, N(w), NULL, &mm, 0);
        CHECK_STR(r.text, "{\n.reg .b32 %_s0;\n.reg .b32 %_s1;\nmov.b64 {%_s0, %_s1}, %v;\n"
                          "mov.b32 %o0, %_s1;\n}\n");
        CHECK(r.d.flags == (STACKPTX_D_STACK_OVERFLOW | STACKPTX_D_UNSATISFIED) && r.d.first_limit_word == 1);
        CHECK(r.d.n_unsatisfied == 1 && r.d.unsatisfied_mask == 2 && r.d.emitted == 2 && r.d.n_noops == 0);
        result_free(&r);
        r = run_full(STACK, &s, w, N(w), NULL, &nx, 0);
        CHECK(r.d.n_noops == 1 && r.d.n_unsatisfied == 2);
        result_free(&r);
        mm.stack_capacity = nx.stack_capacity = 0;
    }
    /* meta ops without a meta value */
    MM_IS("abcde", ABCDE, M(REVERSE));                 /* the whole stack */
    NX_IS("edcba", ABCDE, M(REVERSE));                 /* numptx: needs a depth: no-op */
    MM_IS("dceba", ABCDE, M(ROTATE));                  /* the top goes two down */
    NX_IS("edcba", ABCDE, M(ROTATE));
    MM_IS("edcba", ABCDE, M(DROP));                    /* drop needs its count */
    NX_IS("dcba0", ABCDE, M(DROP));
    MM_IS("ba???", IN(0), IN(1), M(ROTATE));           /* rotate needs 3 */
    MM_IS("a????", IN(0), M(REVERSE));
    MM_IS("?????", M(REVERSE), M(CLEAR), M(DUP), M(SWAP));
    /* meta(2), then rotate / drop / replace / yank_dup / swap_with */
    MM_IS("dceba", ABCDE, MC(2), M(ROTATE));           /* rotate takes no value ... */
    MM_IS("eba??", ABCDE, MC(2), M(ROTATE), M(DROP));  /* ... so drop finds the 2 */
    NX_IS("cedba", ABCDE, MC(2), M(ROTATE));
    MM_IS("cba??", ABCDE, MC(2), M(DROP));
    NX_IS("dcba0", ABCDE, MC(2), M(DROP));
    MM_IS("deba?", ABCDE, MC(2), M(REPLACE));          /* depth 2 (c) := top, pop */
    NX_IS("dcea0", ABCDE, MC(2), M(REPLACE));          /* numptx: depth 2 below the top */
    MM_IS("dcba?", ABCDE, MC(0), M(REPLACE));          /* replace(0) drops the top */
    MM_IS("cedcb", ABCDE, MC(2), M(YANK_DUP));
    NX_IS("cedcb", ABCDE, MC(2), M(YANK_DUP));
    MM_IS("cdeba", ABCDE, MC(2), M(SWAP_WITH));
    NX_IS("cdeba", ABCDE, MC(2), M(SWAP_WITH));
    MM_IS("abcde", ABCDE, MC(2), M(REVERSE));          /* reverse takes no value ... */
    MM_IS("bcde?", ABCDE, MC(1), M(REVERSE), M(DROP)); /* ... so drop finds the 1 */
    NX_IS("cdeba", ABCDE, MC(3), M(REVERSE));
    /* a meta value is consumed even when its op cannot run (numptx keeps it) */
    MM_IS("bcba?", IN(0), IN(1), IN(2), MC(1), MC(9), M(YANK_DUP), M(YANK_DUP));
    NX_IS("cba00", IN(0), IN(1), IN(2), MC(1), MC(9), M(YANK_DUP), M(YANK_DUP));
    MM_IS("bca??", IN(0), IN(1), IN(2), MC(1), MC(7), M(SWAP_WITH), M(SWAP_WITH), M(SWAP_WITH));
    MM_IS("a????", IN(0), IN(1), MC(1), MC(2), M(DROP), M(DROP), M(DROP));   /* 2 of 2: no; 1 */
    MM_IS("ba???", IN(0), IN(1), MC(2), M(DROP));
    MM_IS("ba???", IN(0), IN(1), MC(5), M(REPLACE), MC(2), M(REPLACE));
    NX_IS("b0000", IN(0), IN(1), MC(5), M(REPLACE), M(DROP), M(DROP), IN(1));   /* kept the 5 */
    /* a full stack: yank_dup, swap_with, replace do nothing (and take their value) */
    mm.stack_capacity = nx.stack_capacity = 3;
    MM_IS("cba??", IN(0), IN(1), IN(2), MC(1), M(SWAP_WITH));
    NX_IS("bca00", IN(0), IN(1), IN(2), MC(1), M(SWAP_WITH));
    MM_IS("cba??", IN(0), IN(1), IN(2), MC(1), M(REPLACE));
    MM_IS("cba??", IN(0), IN(1), IN(2), MC(0), M(YANK_DUP), MC(0), MC(0), M(SWAP_WITH), M(REPLACE), M(DUP), M(REPLACE));
    MM_IS("a????", IN(0), IN(1), MC(0), M(REPLACE));   /* not full: replace(0) drops the top */
    mm.stack_capacity = nx.stack_capacity = 0;
    /* load names no type in mm-ptx: the value goes back to its own stack */
    MM_IS("aa???", IN(0), STO(T_F32, 0), LD(T_U32, 0), LD(99, 0));
    NX_IS("00000", IN(0), STO(T_F32, 0), LD(T_U32, 0));
    MM_IS("?????", LD(T_F32, 0), LD(T_F32, 99));
    /* unsatisfied outputs: no mov, counted and flagged; strict still fails */
    io_init(&s, "f32:a", "f32:z f32:w");
    {
        uint64_t w[] = { IN(0) };
        r = run_full(STACK, &s, w, N(w), NULL, &mm, 0);
        CHECK_STR(r.text, "{\nmov.f32 %z, %a;\n}\n");
        CHECK(r.d.flags == STACKPTX_D_UNSATISFIED && r.d.n_unsatisfied == 1 && r.d.unsatisfied_mask == 2);
        CHECK(r.d.emitted == 1 && r.d.nodes == 1);
        result_free(&r);
        r = run_full(STACK, &s, w, N(w), NULL, &mm, 1);
        CHECK(r.st == STACKPTX_ERR_STRICT_UNSATISFIED);
        result_free(&r);
        r = run_full(STACK, &s, NULL, 0, NULL, &mm, 0);
        CHECK_STR(r.text, "{\n}\n");
        result_free(&r);
    }
    /* clobber rule: an unwritten output clobbers nothing */
    io_init(&s, "f32:x f32:y", "f32:x u32:y f32:z");
    {
        uint64_t w[] = { IN(1), IN(0) };
        r = run_full(STACK, &s, w, N(w), NULL, &mm, 0);
        CHECK_STR(r.text, "{\nmov.f32 %x, %x;\nmov.f32 %z, %y;\n}\n");
        result_free(&r);
    }
    /* steps: the end of a routine is one (mm-ptx routines end in RETURN) */
    io_init(&s, "f32:a f32:b", "f32:z");
    {
        static const uint64_t rw[] = { IN(0) };
        static const uint32_t ro[] = { 0, 1 };
        stackptx_routines rt;
        uint64_t w[] = { CALL(0), IN(1) };
        rt.words = rw; rt.offsets = ro; rt.n = 1;
        r = run_full(STACK, &s, w, N(w), &rt, &mm, 0);
        CHECK(r.d.steps == 4 && r.d.flags == 0);
        result_free(&r);
        r = run_full(STACK, &s, w, N(w), &rt, &nx, 0);
        CHECK(r.d.steps == 3);
        result_free(&r);
        mm.max_steps = nx.max_steps = 3;
        r = run_full(STACK, &s, w, N(w), &rt, &mm, 0);   /* the routine's end is the 3rd step */
        CHECK_STR(r.text, "{\nmov.f32 %z, %a;\n}\n");
        CHECK(r.d.steps == 3 && r.d.flags == STACKPTX_D_STEP_LIMIT && r.d.first_limit_word == 1);
        result_free(&r);
        r = run_full(STACK, &s, w, N(w), &rt, &nx, 0);
        CHECK_STR(r.text, "{\nmov.f32 %z, %b;\n}\n");
        result_free(&r);
        mm.max_steps = nx.max_steps = 0;
    }
    /* compile_many runs the dialect too */
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_SUB), IN(1) };
        uint32_t off[] = { 0, 3, 4 }, oo[3] = { 0, 0, 0 }, done = 0;
        size_t wsz = stackptx_workspace_size(&mm, &s.io);
        char *ws = (char *)malloc(wsz), out[256];
        stackptx_diag dg[2];
        CHECK(stackptx_compile_many(&g_table, &s.io, &mm, w, off, 2, NULL, 0, ws, wsz, out, sizeof out,
                                    oo, dg, &done) == STACKPTX_OK && done == 2);
        CHECK(oo[1] > 0 && memcmp(out, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %b, %a;\n", 38) == 0);
        free(ws);
    }
    /* the dialect marker word (numptx strips it first): any core runs it as a NOP, a step */
    io_init(&s, "f32:a f32:b", "f32:z");
    {
        uint64_t w[] = { STACKPTX_MARKER_WORD(STACKPTX_DIALECT_MMPTX), IN(0), IN(1), OP(R_SUB) };
        CHECK(w[0] == 0x4E584401D1A10000ull && STACKPTX_ABI_VERSION == 3);
        r = run_full(STACK, &s, w, N(w), NULL, &mm, 0);
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %b, %a;\nmov.f32 %z, %_s0;\n}\n");
        CHECK(r.d.steps == 4 && r.d.n_noops == 1 && r.d.flags == 0);
        result_free(&r);
    }
    /* bad dialects */
    mm.dialect = 2;
    CHECK(stackptx_workspace_size(&mm, &s.io) == 0);
    {
        uint64_t w[] = { IN(0) };
        size_t len = 0;
        char ws[64], out[64];
        CHECK(stackptx_compile(&g_table, &s.io, &mm, w, 1, NULL, 0, ws, sizeof ws, out, sizeof out, &len, &d)
              == STACKPTX_ERR_INVALID_ARGUMENT);
        mm.dialect = STACKPTX_DIALECT_MMPTX;   /* AST PTX has one dialect */
        CHECK(astptx_compile(&g_table, &s.io, &mm, w, 1, NULL, ws, sizeof ws, out, sizeof out, &len, &d)
              == STACKPTX_ERR_INVALID_ARGUMENT);
    }
#undef MM_IS
#undef NX_IS
#undef ABCDE
#undef M
}

static void test_routines(void)
{
    /* 0: a b add | 1: call0 call0 mul | 2: a call2 (recursive) | 3: a RET b | 4: (empty) | 5: c64 at end */
    static const uint64_t rw[] = { IN(0), IN(1), OP(R_ADD), CALL(0), CALL(0), OP(R_MUL), IN(0), CALL(2),
                                   IN(0), RET, IN(1), C64(T_F64) };
    static const uint32_t ro[] = { 0, 3, 6, 8, 11, 11, 12 };
    stackptx_routines r;
    stackptx_limits lim;
    stackptx_diag d;
    iospec s;
    result res;
    g_test = "routines";
    r.words = rw; r.offsets = ro; r.n = 6;
    io_init(&s, "f32:a f32:b", "f32:z");
    {
        uint64_t w[] = { CALL(1) };
        res = run_full(STACK, &s, w, N(w), &r, NULL, 0);
        CHECK_STR(res.text, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\nadd.f32 %_s0, %a, %b;\n"
                            "mul.rn.f32 %_s1, %_s0, %_s0;\nmov.f32 %z, %_s1;\n}\n");
        CHECK(res.d.steps == 1 + 2 + 3 + 3 + 1);
        CHECK(res.d.flags == 0);
        result_free(&res);
    }
    memset(&lim, 0, sizeof lim);
    lim.max_depth = 3;
    {   /* recursion bounded by the depth */
        uint64_t w[] = { IN(1), CALL(2), IN(1) };
        CHECK_STR(stack_of_full(w, N(w), &r, &lim, &d), "baaab");
        CHECK(d.flags == STACKPTX_D_DEPTH_LIMIT);
        CHECK(d.first_limit_word == 1);
        CHECK(d.steps == 1 + 1 + 6 + 1);
        CHECK(d.n_noops == 1);
    }
    {   /* recursion bounded by the steps (deep limit) */
        lim.max_depth = 60000;
        lim.max_steps = 0;
        {
            uint64_t w[] = { CALL(2) };
            stack_of_full(w, N(w), &r, &lim, &d);
            CHECK(d.flags & STACKPTX_D_STEP_LIMIT);
            CHECK(d.steps == 4096);
            CHECK(d.first_limit_word == 0);
        }
    }
    {   /* RETURN inside a routine, at the top level; empty routine; CONST64 at a routine's end */
        uint64_t w[] = { CALL(3), IN(2 - 2), CALL(4), CALL(5), RET, IN(1) };
        io_init(&g_meta_io, "f32:a f32:b f32:c f32:d f32:e", "f32:o0 f32:o1 f32:o2 f32:o3 f32:o4");
        CHECK_STR(stack_of_full(w, N(w), &r, NULL, &d), "aa000");
        CHECK(d.flags == (STACKPTX_D_MALFORMED_WORD | STACKPTX_D_UNSATISFIED));
        CHECK(d.steps == 1 + 2 + 1 + 1 + 1 + 1 + 1);
    }
    {   /* no routines: ROUTINE is malformed; out-of-range index too */
        uint64_t w[] = { IN(0), CALL(0), CALL(6) };
        CHECK_STR(stack_of_full(w, N(w), NULL, NULL, &d), "a0000");
        CHECK(d.flags & STACKPTX_D_MALFORMED_WORD);
        CHECK_STR(stack_of_full(w, N(w), &r, NULL, &d), "0a000");   /* CALL(0) pushed a + b (a temporary) */
    }
    {   /* routines with bad offsets are rejected */
        static const uint32_t bad[] = { 0, 3, 2 };
        stackptx_routines rb;
        size_t wsz = stackptx_workspace_size(NULL, &s.io), len;
        void *ws = malloc(wsz);
        char out[256];
        uint64_t w[] = { IN(0) };
        rb.words = rw; rb.offsets = bad; rb.n = 2;
        CHECK(stackptx_compile(&g_table, &s.io, NULL, w, 1, &rb, 0, ws, wsz, out, sizeof out, &len, NULL) ==
              STACKPTX_ERR_INVALID_ARGUMENT);
        rb.offsets = NULL;
        CHECK(stackptx_compile(&g_table, &s.io, NULL, w, 1, &rb, 0, ws, wsz, out, sizeof out, &len, NULL) ==
              STACKPTX_ERR_INVALID_ARGUMENT);
        rb.n = 0;   /* zero routines: offsets may be NULL */
        CHECK(stackptx_compile(&g_table, &s.io, NULL, w, 1, &rb, 0, ws, wsz, out, sizeof out, &len, NULL) ==
              STACKPTX_OK);
        free(ws);
    }
}

static void test_slots_return_malformed(void)
{
    stackptx_diag d;
    g_test = "slots";
    {
        uint64_t w[] = { IN(0), IN(1), STO(T_F32, 0), LD(T_F32, 0), LD(T_F32, 0) };
        CHECK_STR(stack_of(w, N(w)), "bba00");
    }
    {   /* empty slot, slot of another type, slot out of range, empty stack store */
        uint64_t w[] = { LD(T_F32, 3), IN(0), STO(T_F32, 1), LD(T_U32, 1), IN(1), STO(T_F32, 16), LD(T_F32, 16),
                         STO(T_U32, 2), LD(T_U32, 2) };
        CHECK_STR(stack_of_full(w, N(w), NULL, NULL, &d), "b0000");
        CHECK(d.n_noops == 6);
        CHECK(!(d.flags & STACKPTX_D_MALFORMED_WORD));
    }
    {   /* a slot keeps the last store */
        uint64_t w[] = { IN(0), STO(T_F32, 5), IN(1), STO(T_F32, 5), LD(T_F32, 5), LD(T_F32, 5) };
        CHECK_STR(stack_of(w, N(w)), "bb000");
    }
    {   /* store/load type 99 malformed */
        uint64_t w[] = { IN(0), STO(99, 0), LD(99, 0) };
        CHECK_STR(stack_of_full(w, N(w), NULL, NULL, &d), "a0000");
        CHECK(d.flags & STACKPTX_D_MALFORMED_WORD);
        CHECK(d.n_noops == 2);
    }
    g_test = "return";
    {
        uint64_t w[] = { IN(0), RET, IN(1) };
        CHECK_STR(stack_of_full(w, N(w), NULL, NULL, &d), "a0000");
        CHECK(d.steps == 2);
    }
    g_test = "malformed";
    {   /* kind 200, CONST type 99, input 99, table index 999, bad row, CONST64 of type 99 (eats its data) */
        uint64_t w[] = { IN(0), W(200, 0, 0, 0), CST(99, 1), IN(99), OP(999), IN(1), OP(R_BAD), C64(99), IN(2),
                         IN(3) };
        CHECK_STR(stack_of_full(w, N(w), NULL, NULL, &d), "dba00");
        CHECK(d.flags == (STACKPTX_D_MALFORMED_WORD | STACKPTX_D_UNSATISFIED));
        CHECK(d.n_noops == 6);
        CHECK(d.steps == 9);
    }
    {   /* CONST64 at the end */
        uint64_t w[] = { IN(0), C64(T_F32) };
        CHECK_STR(stack_of_full(w, N(w), NULL, NULL, &d), "a0000");
        CHECK(d.flags & STACKPTX_D_MALFORMED_WORD);
        CHECK(d.n_noops == 1);
    }
    {   /* an unchecked fmt with an out-of-range slot is copied literally (no crash) */
        iospec s;
        uint64_t w[] = { IN(0), OP(R_BADFMT) };
        result r;
        uint32_t bad = 0;
        io_init(&s, "f32:x", "f32:z");
        r = run(STACK, &s, w, N(w));
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nneg.f32 %_s0, $7; // $x $\nmov.f32 %z, %_s0;\n}\n");
        result_free(&r);
        CHECK(stackptx_check_table(&g_table, &bad) == STACKPTX_ERR_BAD_TABLE && bad == R_BAD);
    }
}

/* INPUT words with name tags (b): bound to the input with that tag, in any input order. */
static void test_input_tags(void)
{
    iospec s;
    uint32_t tags[2] = { 0x1111u, 0x2222u };
    uint64_t tx = W(STACKPTX_K_INPUT, 0, 1, 0x1111u), ty = W(STACKPTX_K_INPUT, 0, 0, 0x2222u);
    result r;
    g_test = "input_tags";
    io_init(&s, "f32:x f32:y", "f32:z");
    s.io.input_tags = tags;
    {   /* the indices say (y, x), the tags (x, y): the tags win */
        uint64_t w[] = { tx, ty, OP(R_SUB) };
        char *t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %x, %y;\nmov.f32 %z, %_s0;\n}\n");
        free(t);
    }
    {   /* untagged words stay positional next to tagged ones */
        uint64_t w[] = { IN(1), tx, OP(R_SUB) };
        char *t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %y, %x;\nmov.f32 %z, %_s0;\n}\n");
        free(t);
    }
    {   /* a tag no input has: a malformed no-op with its own flag; AST PTX: bad word */
        uint64_t w[] = { tx, W(STACKPTX_K_INPUT, 0, 0, 0x3333u), OP(R_SUB) };
        r = run_full(STACK, &s, w, N(w), NULL, NULL, 0);
        CHECK(r.st == STACKPTX_OK);
        CHECK((r.d.flags & STACKPTX_D_UNKNOWN_INPUT) && (r.d.flags & STACKPTX_D_MALFORMED_WORD));
        CHECK(r.d.n_noops == 2);
        result_free(&r);
        r = run_full(AST, &s, w, N(w), NULL, NULL, 0);
        CHECK(r.st == STACKPTX_ERR_AST_BAD_WORD && r.d.error_word == 1);
        CHECK(r.d.flags & STACKPTX_D_UNKNOWN_INPUT);
        result_free(&r);
    }
    {   /* without io.input_tags the tags are ignored: positional */
        uint64_t w[] = { tx, ty, OP(R_SUB) };
        char *t;
        s.io.input_tags = NULL;
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %y, %x;\nmov.f32 %z, %_s0;\n}\n");
        free(t);
        r = run_full(STACK, &s, w, N(w), NULL, NULL, 0);
        CHECK(!(r.d.flags & STACKPTX_D_UNKNOWN_INPUT));
        result_free(&r);
    }
}

/* user stack types: 14 = "philox" (u32 registers, u32 constants), 15 = "wide" (s64 base,
   b64 registers); each has a stack of its own */
static void test_user_types(void)
{
    static const uint8_t base[2] = { STACKPTX_T_U32, STACKPTX_T_S64 };
    static const char *const regs[2] = { "u32", "b64" };
    static stackptx_instr urows[3];
    stackptx_table saved = g_table, ut;
    iospec s;
    result r;
    enum { P = N_TYPES, WIDE = N_TYPES + 1 };
    g_test = "user_types";
    memset(urows, 0, sizeof urows);
    urows[0].fmt = "add.u32 $0, $1, $2;"; urows[0].fmt_len = 19;          /* philox + philox */
    urows[0].n_results = 1; urows[0].n_operands = 2;
    urows[0].result_type[0] = P; urows[0].operand_type[0] = P; urows[0].operand_type[1] = P;
    urows[0].result_width[0] = urows[0].operand_width[0] = urows[0].operand_width[1] = 1;
    urows[1].fmt = "mov.b32 $0, $1;"; urows[1].fmt_len = 15;              /* philox -> u32 */
    urows[1].n_results = 1; urows[1].n_operands = 1;
    urows[1].result_type[0] = T_U32; urows[1].operand_type[0] = P;
    urows[1].result_width[0] = urows[1].operand_width[0] = 1;
    urows[2] = urows[1];
    urows[2].operand_type[0] = N_TYPES + 2;                                /* a type nobody defined */
    memset(&ut, 0, sizeof ut);
    ut.rows = urows; ut.n_rows = 2;
    ut.n_user_types = 2; ut.user_type_base = base; ut.user_reg_names = regs;
    CHECK(stackptx_check_table(&ut, NULL) == STACKPTX_OK);
    g_table = ut;
    io_init(&s, "u32:x", "u32:z");
    {   /* constants take the base's form; the instruction works on the user stack */
        uint64_t w[] = { CST(P, 5), CST(P, 7), OP(0), OP(1) };
        char *t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .u32 %_s0;\n.reg .u32 %_s1;\n.reg .u32 %_s2;\n.reg .u32 %_s3;\n"
                     "mov.u32 %_s0, 5;\nmov.u32 %_s1, 7;\nadd.u32 %_s2, %_s0, %_s1;\n"
                     "mov.b32 %_s3, %_s2;\nmov.u32 %z, %_s3;\n}\n");
        free(t);
    }
    {   /* a u32 value is not on the philox stack: the add is a no-op, the output the input */
        uint64_t w[] = { IN(0), CST(T_U32, 1), OP(0) };
        r = run(STACK, &s, w, N(w));
        CHECK(r.st == STACKPTX_OK && r.d.n_noops == 1);
        CHECK_STR(r.text, "{\n.reg .u32 %_s0;\nmov.u32 %_s0, 1;\nmov.u32 %z, %_s0;\n}\n");
        result_free(&r);
    }
    {   /* meta ops and slots on a user stack; a type id past the table's is malformed */
        uint64_t w[] = { CST(P, 1), CST(P, 2), META(P, STACKPTX_M_SWAP), STO(P, 0), LD(P, 0),
                         OP(1), CST(N_TYPES + 2, 3), META(N_TYPES + 2, STACKPTX_M_DUP) };
        r = run(STACK, &s, w, N(w));
        CHECK(r.st == STACKPTX_OK && (r.d.flags & STACKPTX_D_MALFORMED_WORD) && r.d.n_noops == 2);
        CHECK_STR(r.text, "{\n.reg .u32 %_s0;\n.reg .u32 %_s1;\nmov.u32 %_s0, 1;\n"
                          "mov.b32 %_s1, %_s0;\nmov.u32 %z, %_s1;\n}\n");
        result_free(&r);
    }
    {   /* a user-typed input and output; the s64 base sign-extends a 32-bit constant */
        iospec u;
        uint64_t w[] = { IN(0), OP(1), CST(WIDE, 0xFFFFFFFFu) };
        io_init(&u, "u32:x", "u32:z u32:q");
        u.it[0] = P;
        u.ot[1] = WIDE;
        CHECK(stackptx_workspace_size(NULL, &u.io) > 0);
        r = run(STACK, &u, w, N(w));
        CHECK(r.st == STACKPTX_OK);
        CHECK_STR(r.text, "{\n.reg .u32 %_s0;\n.reg .b64 %_s1;\nmov.b32 %_s0, %x;\n"
                          "mov.b64 %_s1, -1;\nmov.u32 %z, %_s0;\nmov.b64 %q, %_s1;\n}\n");
        result_free(&r);
        r = run(AST, &u, w, N(w));
        CHECK(r.st == STACKPTX_OK);
        result_free(&r);
        u.it[0] = N_TYPES + 2;                          /* no such type in this table */
        r = run(STACK, &u, w, N(w));
        CHECK(r.st == STACKPTX_ERR_INVALID_ARGUMENT);
        result_free(&r);
        u.it[0] = STACKPTX_MAX_TYPES;                   /* no table has it */
        CHECK(stackptx_workspace_size(NULL, &u.io) == 0);
        g_table = saved;                                /* the built-in table lacks type 14 */
        u.it[0] = P;
        r = run(STACK, &u, w, N(w));
        CHECK(r.st == STACKPTX_ERR_INVALID_ARGUMENT);
        result_free(&r);
    }
    {   /* bad definitions */
        static const uint8_t bad_base[2] = { STACKPTX_T_U32, N_TYPES };
        static const char *const long_reg[2] = { "u32", "abcdefghijklmnopq" };
        static const char *const null_reg[2] = { "u32", NULL };
        uint32_t bad = 0;
        stackptx_table b = ut;
        b.n_user_types = STACKPTX_MAX_TYPES - N_TYPES + 1;
        CHECK(stackptx_check_table(&b, &bad) == STACKPTX_ERR_BAD_TABLE);
        b = ut; b.user_type_base = bad_base;
        CHECK(stackptx_check_table(&b, &bad) == STACKPTX_ERR_BAD_TABLE);
        b = ut; b.user_reg_names = long_reg;
        CHECK(stackptx_check_table(&b, &bad) == STACKPTX_ERR_BAD_TABLE);
        g_table = b;
        r = run(STACK, &s, (const uint64_t[]){ CST(P, 1) }, 1);
        CHECK(r.st == STACKPTX_ERR_BAD_TABLE);
        result_free(&r);
        b = ut; b.user_reg_names = null_reg;
        CHECK(stackptx_check_table(&b, &bad) == STACKPTX_ERR_BAD_TABLE);
        b = ut; b.user_type_base = NULL;
        CHECK(stackptx_check_table(&b, &bad) == STACKPTX_ERR_BAD_TABLE);
        b = ut; b.n_rows = 3;                            /* row 2 names type 16 */
        CHECK(stackptx_check_table(&b, &bad) == STACKPTX_ERR_BAD_TABLE && bad == 2);
        g_table = b;
        r = run(STACK, &s, (const uint64_t[]){ CST(P, 1), OP(2) }, 2);
        CHECK(r.st == STACKPTX_OK && (r.d.flags & STACKPTX_D_MALFORMED_WORD));
        result_free(&r);
    }
    g_table = saved;
}

static void test_outputs(void)
{
    iospec s;
    result r;
    g_test = "outputs";
    io_init(&s, "", "f32:z pred:p");
    r = run(STACK, &s, NULL, 0);
    CHECK(r.st == STACKPTX_OK);
    CHECK_STR(r.text, "{\n.reg .f32 %_s0;\n.reg .pred %_s1;\nmov.f32 %_s0, 0f00000000;\nmov.pred %_s1, 0;\n"
                      "mov.f32 %z, %_s0;\nmov.pred %p, %_s1;\n}\n");
    CHECK(r.d.n_unsatisfied == 2 && r.d.unsatisfied_mask == 3 && r.d.flags == STACKPTX_D_UNSATISFIED);
    CHECK(r.d.nodes == 2 && r.d.emitted == 4 && r.d.steps == 0);
    result_free(&r);
    r = run_full(STACK, &s, NULL, 0, NULL, NULL, 1);   /* strict: same stub, an error status */
    CHECK(r.st == STACKPTX_ERR_STRICT_UNSATISFIED);
    CHECK(r.text && strstr(r.text, "mov.pred %p, %_s1;"));
    result_free(&r);
    {   /* the zero merges with an existing zero constant */
        iospec s2;
        uint64_t w[] = { CST(T_F32, 0) };
        io_init(&s2, "", "f32:a f32:b");
        r = run_full(STACK, &s2, w, N(w), NULL, NULL, 1);
        CHECK(r.st == STACKPTX_ERR_STRICT_UNSATISFIED);
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nmov.f32 %_s0, 0f00000000;\nmov.f32 %a, %_s0;\nmov.f32 %b, %_s0;\n}\n");
        CHECK(r.d.unsatisfied_mask == 2 && r.d.n_unsatisfied == 1);
        result_free(&r);
    }
    {   /* strict and satisfied */
        iospec s2;
        uint64_t w[] = { CST(T_F32, 0), CST(T_PRED, 1) };
        r = run_full(STACK, &s, w, N(w), NULL, NULL, 1);
        CHECK(r.st == STACKPTX_OK && r.d.n_unsatisfied == 0 && r.d.flags == 0);
        result_free(&r);
        (void)s2;
    }
    {   /* 40 outputs: the mask covers the first 32 */
        iospec s3;
        char spec[512];
        int k, n = 0;
        for (k = 0; k < 40; k++) n += snprintf(spec + n, sizeof spec - (size_t)n, "u32:o%d ", k);
        io_init(&s3, "", spec);
        {
            uint64_t w[] = { CST(T_U32, 1) };
            r = run(STACK, &s3, w, N(w));
            CHECK(r.d.n_unsatisfied == 39 && r.d.unsatisfied_mask == 0xFFFFFFFEu);
            result_free(&r);
        }
    }
    g_test = "clobber";
    {   /* swap: z = acc, acc = z */
        iospec c;
        uint64_t w[] = { IN(1), IN(0) };
        io_init(&c, "f32:acc f32:z", "f32:z f32:acc");
        r = run(STACK, &c, w, N(w));
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nmov.f32 %_s0, %z;\nmov.f32 %z, %acc;\nmov.f32 %acc, %_s0;\n}\n");
        result_free(&r);
    }
    {   /* z = acc only: no copy */
        iospec c;
        uint64_t w[] = { IN(0) };
        io_init(&c, "f32:acc", "f32:z");
        r = run(STACK, &c, w, N(w));
        CHECK_STR(r.text, "{\nmov.f32 %z, %acc;\n}\n");
        result_free(&r);
    }
    {   /* pass-through of a mod register, and a second output reading it after the self-move */
        iospec c;
        uint64_t w[] = { IN(0), IN(0) };
        io_init(&c, "f32:acc", "f32:acc f32:z");
        r = run(STACK, &c, w, N(w));
        CHECK_STR(r.text, "{\nmov.f32 %acc, %acc;\nmov.f32 %z, %acc;\n}\n");
        result_free(&r);
    }
    {   /* acc = acc + x, z = acc (old): the copy is needed */
        iospec c;
        uint64_t w[] = { IN(0), IN(0), IN(1), OP(R_ADD) };
        io_init(&c, "f32:acc f32:x", "f32:acc f32:z");
        r = run(STACK, &c, w, N(w));
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\nadd.f32 %_s0, %acc, %x;\nmov.f32 %_s1, %acc;\n"
                          "mov.f32 %acc, %_s0;\nmov.f32 %z, %_s1;\n}\n");
        CHECK(r.d.emitted == 4);
        result_free(&r);
    }
}

static void test_limits(void)
{
    iospec s;
    stackptx_limits lim;
    result r;
    g_test = "limits";
    io_init(&s, "f32:a f32:b f32:c f32:d", "f32:z f32:y");
    memset(&lim, 0, sizeof lim);
    lim.max_steps = 5;
    {
        uint64_t w[] = { IN(0), IN(1), IN(0), IN(1), IN(0), IN(2), IN(3), IN(3) };
        r = run_full(STACK, &s, w, N(w), NULL, &lim, 0);
        CHECK(r.st == STACKPTX_OK);
        CHECK(r.d.flags == STACKPTX_D_STEP_LIMIT && r.d.steps == 5 && r.d.first_limit_word == 5);
        CHECK_STR(r.text, "{\nmov.f32 %z, %a;\nmov.f32 %y, %b;\n}\n");
        result_free(&r);
    }
    {   /* exactly max_steps words: no limit */
        uint64_t w[] = { IN(0), IN(1), IN(0), IN(1), IN(0) };
        r = run_full(STACK, &s, w, N(w), NULL, &lim, 0);
        CHECK(r.d.flags == 0 && r.d.steps == 5 && r.d.first_limit_word == UINT32_MAX);
        result_free(&r);
    }
    lim.max_steps = 0;
    lim.max_nodes = 3;
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_ADD), IN(2), IN(0), OP(R_MUL), IN(1) };
        r = run_full(STACK, &s, w, N(w), NULL, &lim, 0);
        CHECK(r.st == STACKPTX_OK);
        CHECK(r.d.flags == STACKPTX_D_NODE_LIMIT && r.d.first_limit_word == 3);
        CHECK(r.d.nodes == 3);
        /* the mul was a no-op (operands restored): stack a+b, a, b; the add is dead */
        CHECK_STR(r.text, "{\nmov.f32 %z, %b;\nmov.f32 %y, %a;\n}\n");
        result_free(&r);
    }
    lim.max_nodes = 1;
    {   /* output zeros never hit the node limit */
        uint64_t w[] = { IN(0), CST(T_F32, 3) };
        r = run_full(STACK, &s, w, N(w), NULL, &lim, 0);
        CHECK(r.st == STACKPTX_OK);
        CHECK(r.d.flags == (STACKPTX_D_NODE_LIMIT | STACKPTX_D_UNSATISFIED));
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nmov.f32 %_s0, 0f00000000;\nmov.f32 %z, %a;\nmov.f32 %y, %_s0;\n}\n");
        result_free(&r);
    }
    {   /* invalid limits */
        stackptx_limits big;
        memset(&big, 0, sizeof big);
        big.max_nodes = (1u << 22) + 1;
        CHECK(stackptx_workspace_size(&big, &s.io) == 0);
        CHECK(stackptx_workspace_size(NULL, NULL) == 0);
        CHECK(stackptx_workspace_size(NULL, &s.io) > 0);
    }
}

/* The emitter's other paths: long operand names, long literal pieces, many slots, long
   register type names. */
static void test_paths(void)
{
    iospec s;
    char *t;
    g_test = "paths";
    io_init(&s, "f32:x f32:y", "f32:z");
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_MINX), IN(1), OP(R_MANY) };
        t = stub(&s, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\nmin.ftz.NaN.xorsign.abs.f32 %_s0, %x, %y;\n"
                     "add.f32 %_s1, %_s0, %y; // %_s0%y%_s0%y%_s0%y%_s0%y%_s0%y\nmov.f32 %z, %_s1;\n}\n");
        free(t);
    }
    {
        iospec l;
        uint64_t w[] = { IN(0), IN(1), OP(R_SUB), IN(2), OP(R_MANY) };
        io_init(&l, "f32:a_really_long_input_name_x f32:y f32:sixteen_chars_xx", "f32:an_output_name_longer_than_16");
        t = stub(&l, w, N(w));
        CHECK_STR(t, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\nsub.f32 %_s0, %a_really_long_input_name_x, %y;\n"
                     "add.f32 %_s1, %_s0, %sixteen_chars_xx; // %_s0%sixteen_chars_xx%_s0%sixteen_chars_xx"
                     "%_s0%sixteen_chars_xx%_s0%sixteen_chars_xx%_s0%sixteen_chars_xx\n"
                     "mov.f32 %an_output_name_longer_than_16, %_s1;\n}\n");
        free(t);
    }
    {   /* a register type name of 16 characters works, 17 do not */
        uint64_t w[] = { IN(0), CST(T_F32, F32_ONE), OP(R_ADD) };
        result r;
        uint32_t bad = 0;
        g_table.reg_type_names = reg_names_with(T_F32, "abcdefghijklmnop");
        r = run(STACK, &s, w, N(w));
        CHECK_STR(r.text, "{\n.reg .abcdefghijklmnop %_s0;\n.reg .abcdefghijklmnop %_s1;\n"
                          "mov.abcdefghijklmnop %_s0, 0f3F800000;\nadd.f32 %_s1, %x, %_s0;\n"
                          "mov.abcdefghijklmnop %z, %_s1;\n}\n");
        result_free(&r);
        g_table.reg_type_names = reg_names_with(T_F32, "abcdefghijklmnopq");
        r = run(STACK, &s, w, N(w));
        CHECK(r.st == STACKPTX_ERR_BAD_TABLE && r.text == NULL);
        result_free(&r);
        CHECK(stackptx_check_table(&g_table, &bad) == STACKPTX_ERR_BAD_TABLE && bad == UINT32_MAX);
        g_table.reg_type_names = NULL;
    }
}

static void test_api_errors(void)
{
    iospec s;
    size_t wsz, len = 7;
    unsigned char *ws;
    char out[512];
    uint64_t w[] = { IN(0) };
    stackptx_diag d;
    stackptx_table bad_t;
    g_test = "api";
    io_init(&s, "f32:x", "f32:z");
    wsz = stackptx_workspace_size(NULL, &s.io);
    ws = (unsigned char *)malloc(wsz);
    CHECK(stackptx_compile(NULL, &s.io, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, &len, &d) ==
          STACKPTX_ERR_INVALID_ARGUMENT);
    CHECK(len == 0 && d.error_word == UINT32_MAX);
    CHECK(stackptx_compile(&g_table, NULL, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, &len, &d) ==
          STACKPTX_ERR_INVALID_ARGUMENT);
    CHECK(stackptx_compile(&g_table, &s.io, NULL, NULL, 1, NULL, 0, ws, wsz, out, sizeof out, &len, &d) ==
          STACKPTX_ERR_INVALID_ARGUMENT);
    CHECK(stackptx_compile(&g_table, &s.io, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, NULL, &d) ==
          STACKPTX_ERR_INVALID_ARGUMENT);
    CHECK(stackptx_compile(&g_table, &s.io, NULL, w, 1, NULL, 0, ws, wsz, NULL, 5, &len, &d) ==
          STACKPTX_ERR_INVALID_ARGUMENT);
    CHECK(stackptx_compile(&g_table, &s.io, NULL, w, 1, NULL, 0, ws, wsz - 1, out, sizeof out, &len, &d) ==
          STACKPTX_ERR_WORKSPACE_TOO_SMALL);
    CHECK(stackptx_compile(&g_table, &s.io, NULL, w, 1, NULL, 0, NULL, 0, out, sizeof out, &len, &d) ==
          STACKPTX_ERR_WORKSPACE_TOO_SMALL);
    CHECK(astptx_compile(&g_table, &s.io, NULL, w, 1, NULL, ws, 10, out, sizeof out, &len, &d) ==
          STACKPTX_ERR_WORKSPACE_TOO_SMALL);
    CHECK(stackptx_compile(&g_table, &s.io, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, &len, NULL) == STACKPTX_OK);
    CHECK(len == strlen("{\nmov.f32 %z, %x;\n}\n") && memcmp(out, "{\nmov.f32 %z, %x;\n}\n", len) == 0);
    {   /* bad io: type N_TYPES, NULL name, zero length */
        iospec b;
        io_init(&b, "f32:x", "f32:z");
        b.it[0] = N_TYPES;
        CHECK(stackptx_compile(&g_table, &b.io, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, &len, &d) ==
              STACKPTX_ERR_INVALID_ARGUMENT);
        b.it[0] = T_F32; b.ol[0] = 0;
        CHECK(stackptx_compile(&g_table, &b.io, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, &len, &d) ==
              STACKPTX_ERR_INVALID_ARGUMENT);
        b.ol[0] = 1; b.on[0] = NULL;
        CHECK(stackptx_compile(&g_table, &b.io, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, &len, &d) ==
              STACKPTX_ERR_INVALID_ARGUMENT);
    }
    /* bad tables */
    bad_t = g_table;
    bad_t.rows = NULL;
    CHECK(stackptx_compile(&bad_t, &s.io, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, &len, &d) ==
          STACKPTX_ERR_INVALID_ARGUMENT);
    {
        uint32_t bad = 0;
        bad_t = g_table;
        bad_t.reg_type_names = reg_names_with(T_F32, NULL);
        CHECK(stackptx_compile(&bad_t, &s.io, NULL, w, 1, NULL, 0, ws, wsz, out, sizeof out, &len, &d) ==
              STACKPTX_ERR_BAD_TABLE);
        CHECK(stackptx_check_table(&bad_t, &bad) == STACKPTX_ERR_BAD_TABLE && bad == UINT32_MAX);
        bad_t.reg_type_names = NULL;
        bad_t.n_rows = R_BAD;   /* rows before the bad one are all good */
        CHECK(stackptx_check_table(&bad_t, &bad) == STACKPTX_OK);
        CHECK(stackptx_check_table(NULL, &bad) == STACKPTX_ERR_INVALID_ARGUMENT);
    }
    {   /* each bad-row field */
        stackptx_instr rows[7];
        stackptx_table t1;
        uint32_t bad = 0, i;
        for (i = 0; i < 7; i++) rows[i] = g_rows[R_ADD];
        rows[0].fmt = NULL;
        rows[1].fmt_len = 0;
        rows[2].n_operands = 5;
        rows[3].result_type[0] = N_TYPES;
        rows[4].operand_width[1] = 0;
        rows[5].operand_width[0] = 9;
        rows[6].fmt = "add.f32 $0, $1, $3;";
        t1.rows = rows; t1.n_rows = 7; t1.reg_type_names = NULL;
        for (i = 0; i < 7; i++) {
            t1.rows = rows + i; t1.n_rows = 1;
            CHECK(stackptx_check_table(&t1, &bad) == STACKPTX_ERR_BAD_TABLE && bad == 0);
        }
    }
    for (len = 0; len <= STACKPTX_STATUS_COUNT; len++)
        CHECK(stackptx_status_string((int)len) != NULL);
    CHECK(strcmp(stackptx_status_string(-1), "unknown status") == 0);
    CHECK(strcmp(stackptx_status_string(STACKPTX_STATUS_COUNT), "unknown status") == 0);
    CHECK(strcmp(stackptx_status_string(STACKPTX_OK), "ok") == 0);
    free(ws);
}

static void test_ast(void)
{
    iospec s, s2;
    result r;
    static const uint64_t rw[] = { IN(0), IN(1), OP(R_ADD), IN(0), OP(R_SUB), CALL(2), NOP };
    static const uint32_t ro[] = { 0, 3, 5, 6, 7 };
    stackptx_routines rt;
    stackptx_limits lim;
    g_test = "ast";
    rt.words = rw; rt.offsets = ro; rt.n = 4;
    io_init(&s, "f32:x f32:y", "f32:z");
    io_init(&s2, "f32:x f32:y", "f32:p f32:q");
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_SUB) };
        r = run(AST, &s, w, N(w));
        CHECK(r.st == STACKPTX_OK);
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nsub.f32 %_s0, %x, %y;\nmov.f32 %z, %_s0;\n}\n");
        CHECK(r.d.steps == 3 && r.d.error_word == UINT32_MAX);
        result_free(&r);
    }
    {   /* bottom = first output; CSE; constants; routines */
        uint64_t w[] = { CALL(0), IN(0), IN(1), OP(R_ADD), CST(T_F32, F32_ONE), OP(R_MUL) };
        r = run_full(AST, &s2, w, N(w), &rt, NULL, 0);
        CHECK(r.st == STACKPTX_OK);
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\n.reg .f32 %_s2;\nadd.f32 %_s0, %x, %y;\n"
                          "mov.f32 %_s1, 0f3F800000;\nmul.rn.f32 %_s2, %_s0, %_s1;\nmov.f32 %p, %_s0;\n"
                          "mov.f32 %q, %_s2;\n}\n");
        result_free(&r);
    }
    {   /* vector instruction: operand types checked per component */
        iospec m;
        uint64_t w[] = { IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), IN(6), IN(7), IN(8), IN(9), OP(R_MMA) };
        io_init(&m, "b32:a0 b32:a1 b32:a2 b32:a3 b32:b0 b32:b1 f32:c0 f32:c1 f32:c2 f32:c3",
                "f32:d0 f32:d1 f32:d2 f32:d3");
        r = run(AST, &m, w, N(w));
        CHECK(r.st == STACKPTX_OK);
        CHECK(r.text && strstr(r.text, "{%_s0, %_s1, %_s2, %_s3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, "
                                       "{%c0, %c1, %c2, %c3};\nmov.f32 %d0, %_s0;\nmov.f32 %d1, %_s1;\n"));
        result_free(&r);
        w[6] = IN(0);   /* a b32 where an f32 is expected */
        r = run(AST, &m, w, N(w));
        CHECK(r.st == STACKPTX_ERR_AST_TYPE_MISMATCH && r.d.error_word == 10);
        result_free(&r);
    }
#define AST_ERR(io, st_, word, ...)                                                            \
    do {                                                                                       \
        uint64_t w_[] = { __VA_ARGS__ };                                                       \
        r = run_full(AST, io, w_, N(w_), &rt, NULL, 0);                                        \
        CHECK(r.st == (st_));                                                                  \
        CHECK(r.d.error_word == (uint32_t)(word));                                             \
        CHECK(r.text == NULL);                                                                 \
        result_free(&r);                                                                       \
    } while (0)
    AST_ERR(&s, STACKPTX_ERR_AST_UNDERFLOW, 1, IN(0), OP(R_SUB));
    AST_ERR(&s, STACKPTX_ERR_AST_UNDERFLOW, 0, OP(R_NEG));
    AST_ERR(&s, STACKPTX_ERR_AST_TYPE_MISMATCH, 4, IN(0), IN(1), OP(R_SETP), IN(0), OP(R_SUB));
    AST_ERR(&s, STACKPTX_ERR_AST_TYPE_MISMATCH, 5, IN(0), IN(1), OP(R_SETP), IN(0), IN(1), OP(R_SELP));
    AST_ERR(&s, STACKPTX_ERR_AST_LEFTOVER, 1, IN(0), IN(1), IN(0));
    AST_ERR(&s, STACKPTX_ERR_AST_LEFTOVER, 2, IN(0), IN(0), OP(R_CVT));   /* an s32 extra */
    AST_ERR(&s2, STACKPTX_ERR_AST_TOO_FEW, 1, IN(0));
    {
        r = run_full(AST, &s2, NULL, 0, &rt, NULL, 0);
        CHECK(r.st == STACKPTX_ERR_AST_TOO_FEW && r.d.error_word == 0);
        result_free(&r);
    }
    AST_ERR(&s, STACKPTX_ERR_AST_OUTPUT_TYPE, 1, IN(0), OP(R_CVT));
    AST_ERR(&s2, STACKPTX_ERR_AST_OUTPUT_TYPE, 3, IN(0), IN(0), IN(1), OP(R_SETP));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), MC(1));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), NOP);
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), RET);
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), W(200, 0, 0, 0));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), IN(99));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), CST(99, 0));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), OP(999));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), C64(T_F64));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), CALL(9));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 2, IN(0), IN(1), STO(T_F32, 0));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 1, IN(0), C64(99), 0, IN(1));
    AST_ERR(&s, STACKPTX_ERR_BAD_TABLE, 1, IN(0), OP(R_BAD));
    /* errors inside a routine name the top-level ROUTINE word */
    AST_ERR(&s, STACKPTX_ERR_AST_UNDERFLOW, 0, CALL(1));
    AST_ERR(&s, STACKPTX_ERR_AST_TYPE_MISMATCH, 1, CST(T_PRED, 1), CALL(1));
    AST_ERR(&s, STACKPTX_ERR_AST_BAD_WORD, 2, IN(0), IN(1), CALL(3));
    AST_ERR(&s, STACKPTX_ERR_LIMIT, 2, IN(0), IN(1), CALL(2));   /* recursion: depth limit */
    {   /* leftover produced inside a routine */
        uint64_t w[] = { IN(0), CALL(0) };
        r = run_full(AST, &s, w, N(w), &rt, NULL, 0);
        CHECK(r.st == STACKPTX_ERR_AST_LEFTOVER && r.d.error_word == 1);
        result_free(&r);
    }
    memset(&lim, 0, sizeof lim);
    lim.max_depth = 2;
    {
        uint64_t w[] = { CALL(2) };
        r = run_full(AST, &s, w, N(w), &rt, &lim, 0);
        CHECK(r.st == STACKPTX_ERR_LIMIT && r.d.flags == STACKPTX_D_DEPTH_LIMIT && r.d.first_limit_word == 0);
        result_free(&r);
    }
    lim.max_depth = 0;
    lim.stack_capacity = 2;
    {
        uint64_t w[] = { IN(0), IN(1), IN(0) };
        r = run_full(AST, &s, w, N(w), &rt, &lim, 0);
        CHECK(r.st == STACKPTX_ERR_LIMIT && r.d.flags == STACKPTX_D_STACK_OVERFLOW && r.d.error_word == 2);
        result_free(&r);
    }
    lim.stack_capacity = 0;
    lim.max_steps = 2;
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_ADD) };
        r = run_full(AST, &s, w, N(w), &rt, &lim, 0);
        CHECK(r.st == STACKPTX_ERR_LIMIT && r.d.flags == STACKPTX_D_STEP_LIMIT && r.d.error_word == 2);
        result_free(&r);
    }
    lim.max_steps = 0;
    lim.max_nodes = 2;
    {
        uint64_t w[] = { IN(0), IN(1), OP(R_ADD) };
        r = run_full(AST, &s, w, N(w), &rt, &lim, 0);
        CHECK(r.st == STACKPTX_ERR_LIMIT && r.d.flags == STACKPTX_D_NODE_LIMIT && r.d.error_word == 2);
        result_free(&r);
    }
    {   /* clobber rule applies to AST PTX too */
        iospec c;
        uint64_t w[] = { IN(0), IN(1) };
        io_init(&c, "f32:acc f32:z", "f32:z f32:acc");
        r = run(AST, &c, w, N(w));
        CHECK_STR(r.text, "{\n.reg .f32 %_s0;\nmov.f32 %_s0, %z;\nmov.f32 %z, %acc;\nmov.f32 %acc, %_s0;\n}\n");
        result_free(&r);
    }
#undef AST_ERR
}

static void test_many(void)
{
    iospec s;
    uint64_t words[] = { IN(0), IN(1), OP(R_SUB),                 /* 0 */
                         IN(0), IN(0), OP(R_MUL), CST(T_F32, 1),  /* 1 */
                                                                  /* 2: empty */
                         IN(1) };                                 /* 3 */
    uint32_t offsets[] = { 0, 3, 7, 7, 8 };
    char *texts[4], *out;
    size_t lens[4], total = 0, wsz;
    uint32_t oo[5], done = 99, i;
    stackptx_diag dg[4];
    void *ws;
    stackptx_status st;
    g_test = "many";
    io_init(&s, "f32:x f32:y", "f32:z");
    for (i = 0; i < 4; i++) {
        result r = run(STACK, &s, words + offsets[i], offsets[i + 1] - offsets[i]);
        texts[i] = r.text;
        lens[i] = r.len;
        total += r.len;
    }
    wsz = stackptx_workspace_size(NULL, &s.io);
    ws = malloc(wsz);
    /* all at once */
    out = (char *)malloc(total);
    oo[0] = 0;
    st = stackptx_compile_many(&g_table, &s.io, NULL, words, offsets, 4, NULL, 0, ws, wsz, out, total, oo, dg, &done);
    CHECK(st == STACKPTX_OK && done == 4);
    for (i = 0; i < 4; i++) {
        CHECK(oo[i + 1] - oo[i] == lens[i]);
        CHECK(memcmp(out + oo[i], texts[i], lens[i]) == 0);
    }
    CHECK(dg[2].n_unsatisfied == 1 && dg[0].n_unsatisfied == 0);
    free(out);
    /* strict: program 2 is unsatisfied; everything is still written */
    out = (char *)malloc(total);
    st = stackptx_compile_many(&g_table, &s.io, NULL, words, offsets, 4, NULL, 1, ws, wsz, out, total, oo, NULL, &done);
    CHECK(st == STACKPTX_ERR_STRICT_UNSATISFIED && done == 4 && oo[4] == total);
    free(out);
    /* too small: room for program 0 and part of 1 */
    {
        size_t cap1 = lens[0] + lens[1] - 1, cap2;
        char *out2;
        out = (char *)malloc(cap1);
        oo[0] = 0;
        memset(dg, 0xEE, sizeof dg);
        st = stackptx_compile_many(&g_table, &s.io, NULL, words, offsets, 4, NULL, 0, ws, wsz, out, cap1, oo, dg, &done);
        CHECK(st == STACKPTX_ERR_BUFFER_TOO_SMALL && done == 1);
        CHECK(oo[1] == lens[0] && memcmp(out, texts[0], lens[0]) == 0);
        /* resume the rest into a fresh buffer */
        cap2 = total - lens[0];
        out2 = (char *)malloc(cap2);
        st = stackptx_compile_many(&g_table, &s.io, NULL, words, offsets + done, 4 - done, NULL, 0, ws, wsz, out2,
                                   cap2, oo + done, dg + done, &done);
        CHECK(st == STACKPTX_OK && done == 3);
        CHECK(oo[4] == total);
        for (i = 1; i < 4; i++) {
            CHECK(oo[i + 1] - oo[i] == lens[i]);
            CHECK(memcmp(out2 + (oo[i] - oo[1]), texts[i], lens[i]) == 0);
        }
        CHECK(dg[2].n_unsatisfied == 1);
        free(out);
        free(out2);
        /* a buffer too small for the first stub: nothing done */
        st = stackptx_compile_many(&g_table, &s.io, NULL, words, offsets, 4, NULL, 0, ws, wsz, NULL, 0, oo, NULL, &done);
        CHECK(st == STACKPTX_ERR_BUFFER_TOO_SMALL && done == 0);
        /* zero programs */
        st = stackptx_compile_many(&g_table, &s.io, NULL, words, offsets, 0, NULL, 0, ws, wsz, NULL, 0, oo, NULL, &done);
        CHECK(st == STACKPTX_OK && done == 0);
        /* bad offsets */
        {
            uint32_t bad[] = { 0, 3, 2 };
            st = stackptx_compile_many(&g_table, &s.io, NULL, words, bad, 2, NULL, 0, ws, wsz, NULL, 0, oo, NULL, &done);
            CHECK(st == STACKPTX_ERR_INVALID_ARGUMENT);
        }
        /* offsets would pass UINT32_MAX */
        oo[0] = UINT32_MAX - 5;
        out = (char *)malloc(total);
        st = stackptx_compile_many(&g_table, &s.io, NULL, words, offsets, 4, NULL, 0, ws, wsz, out, total, oo, NULL, &done);
        CHECK(st == STACKPTX_ERR_LIMIT && done == 0);
        free(out);
    }
    for (i = 0; i < 4; i++) free(texts[i]);
    free(ws);
}

/* ---- fuzz --------------------------------------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static int g_ast_like;
static uint32_t rnd32(void)
{
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static uint32_t rnd(uint32_t n) { return n ? rnd32() % n : 0; }

static uint64_t rand_word(uint32_t n_in, uint32_t n_routines)
{
    uint32_t k = rnd(100), type = rnd(16) ? rnd(N_TYPES) : rnd(256), a, b = rnd32();
    if (g_ast_like) {   /* mostly words AST PTX accepts */
        k = rnd(100);
        if (k < 45) return IN(rnd(n_in ? n_in : 1));
        if (k < 55) return CST(rnd(N_TYPES), rnd(3) ? rnd(4) : rnd32());
        if (k < 57) return C64(rnd(N_TYPES));
        if (k < 95) return OP(rnd(N_ROWS));
        return CALL(rnd(n_routines + 1));
    }
    if (k < 20) { k = STACKPTX_K_INPUT; a = rnd(8) ? rnd(n_in + 1) : rnd(65536); }
    else if (k < 30) { k = STACKPTX_K_CONST; a = rnd(4); b = rnd(3) ? rnd(4) : b; }
    else if (k < 33) { k = STACKPTX_K_CONST64; a = 0; }
    else if (k < 58) { k = STACKPTX_K_INSTR; a = rnd(12) ? rnd(N_ROWS) : rnd(65536); }
    else if (k < 66) { k = STACKPTX_K_META_CONST; a = rnd(6) ? rnd(6) : rnd(65536); }
    else if (k < 80) { k = STACKPTX_K_META; a = rnd(STACKPTX_N_META_OPS + 1); }
    else if (k < 85) { k = STACKPTX_K_ROUTINE; a = rnd(n_routines + 2); }
    else if (k < 90) { k = STACKPTX_K_STORE; a = rnd(20); }
    else if (k < 95) { k = STACKPTX_K_LOAD; a = rnd(20); }
    else if (k < 97) { k = STACKPTX_K_RETURN; a = 0; }
    else if (k < 98) { k = STACKPTX_K_NOP; a = 0; }
    else { k = STACKPTX_N_KINDS + rnd(256 - STACKPTX_N_KINDS); a = rnd(65536); }
    if (rnd(3) && k == STACKPTX_K_INPUT) type = 0;
    return W(k, type, a, b);
}

static void test_fuzz(void)
{
    static const char *const ins[] = { "f32:x f32:y pred:p b64:v b32:a b32:b", "f32:acc f32:z u32:n",
                                       "", "f32:a f32:b f32:c f32:d f32:e f32:f b32:g b32:h b32:i b32:j" };
    static const char *const outs[] = { "f32:z", "f32:z f32:acc", "s32:i pred:q b32:w u32:u f64:d",
                                        "f32:d0 f32:d1 f32:d2 f32:d3", "" };
    int iter, n_ok_ast = 0, n_ok_stack = 0, bad_status = 0;
    long n_unsat = 0;
    g_test = "fuzz";
    for (iter = 0; iter < 20000; iter++) {
        iospec s;
        uint64_t words[160], rw[64];
        uint32_t ro[6], n = rnd(8) ? rnd(60) : rnd(160), i, nr = rnd(5), nrw = 0;
        stackptx_routines r;
        stackptx_limits lim;
        result res;
        int mode;
        io_init(&s, ins[rnd(4)], outs[rnd(5)]);
        g_ast_like = rnd(3) == 0;
        if (g_ast_like && rnd(2)) io_init(&s, ins[0], outs[0]);
        for (i = 0; i < n; i++) words[i] = rand_word(s.io.n_inputs, nr);
        ro[0] = 0;
        for (i = 0; i < nr; i++) {
            uint32_t k, len = rnd(12);
            for (k = 0; k < len; k++) rw[nrw++] = rand_word(s.io.n_inputs, nr);
            ro[i + 1] = nrw;
        }
        r.words = rw; r.offsets = ro; r.n = nr;
        memset(&lim, 0, sizeof lim);
        if (rnd(2)) {
            lim.max_steps = rnd(3) ? 0 : rnd(100);
            lim.max_nodes = rnd(3) ? 0 : rnd(40);
            lim.max_depth = rnd(3) ? 0 : rnd(4);
            lim.stack_capacity = rnd(3) ? 0 : rnd(5);
            lim.meta_capacity = rnd(3) ? 0 : rnd(4);
            lim.n_slots = rnd(3) ? 0 : rnd(4);
        }
        if (rnd(4) == 0) {   /* copy routines to an exact-size heap array */
            uint64_t *hw = (uint64_t *)malloc(nrw ? nrw * 8 : 1);
            if (nrw) memcpy(hw, rw, nrw * 8);
            r.words = hw;
        }
        for (mode = 0; mode < 2; mode++) {
            lim.dialect = mode == STACK ? rnd(2) : 0;   /* AST PTX: numptx only */
            res = run_full(mode, &s, words, n, rnd(5) ? &r : NULL, &lim, mode == STACK ? (int)rnd(2) : 0);
            if (mode == STACK) {
                if (res.st != STACKPTX_OK && res.st != STACKPTX_ERR_STRICT_UNSATISFIED) bad_status++;
                else n_ok_stack++;
                n_unsat += res.d.n_unsatisfied;
                if (res.d.n_unsatisfied > s.io.n_outputs || res.d.steps > (lim.max_steps ? lim.max_steps : 4096u) ||
                    res.d.nodes > (lim.max_nodes ? lim.max_nodes : 4096u) + s.io.n_outputs || res.text == NULL)
                    bad_status++;
            } else {
                if (res.st == STACKPTX_OK) n_ok_ast++;
                if (res.st < 0 || res.st >= STACKPTX_STATUS_COUNT || res.st == STACKPTX_ERR_INVALID_ARGUMENT ||
                    res.st == STACKPTX_ERR_WORKSPACE_TOO_SMALL || res.st == STACKPTX_ERR_BUFFER_TOO_SMALL)
                    bad_status++;
                if (res.st != STACKPTX_OK && res.d.error_word == UINT32_MAX) bad_status++;
                if (res.st != STACKPTX_OK && res.d.error_word > n) bad_status++;
            }
            result_free(&res);
        }
        if (r.words != rw) free((void *)r.words);
        g_ast_like = 0;
    }
    CHECK(bad_status == 0);
    CHECK(n_ok_stack == 20000);
    printf("fuzz: 20000 random programs x (Stack, AST): Stack always OK, AST OK %d, unsatisfied outputs %ld\n",
           n_ok_ast, n_unsat);
}

/* compile_many over random batches with random buffer sizes, resumed until done, gives the
   same stubs and diags as single compiles. */
static void test_fuzz_many(void)
{
    iospec s;
    int iter, agree = 1, resumes = 0;
    size_t wsz;
    unsigned char *ws;
    g_test = "fuzz_many";
    io_init(&s, "f32:x f32:y pred:p b64:v b32:a b32:b", "f32:z f32:x b32:w");
    wsz = stackptx_workspace_size(NULL, &s.io);
    ws = (unsigned char *)malloc(wsz + 1);
    for (iter = 0; iter < 300; iter++) {
        uint32_t np = 1 + rnd(12), offs[13], oo[13], i, done = 0, n = 0;
        uint64_t words[12 * 40];
        char *texts[12], *all;
        size_t lens[12], total = 0, got = 0;
        stackptx_diag ds[12], dm[12];
        stackptx_limits lim;
        memset(&lim, 0, sizeof lim);
        lim.dialect = rnd(2);   /* both dialects batch the same as one by one */
        offs[0] = 0;
        for (i = 0; i < np; i++) {
            uint32_t k, len = rnd(40);
            for (k = 0; k < len; k++) words[n++] = rand_word(s.io.n_inputs, 0);
            offs[i + 1] = n;
        }
        for (i = 0; i < np; i++) {
            result r = run_full(STACK, &s, words + offs[i], offs[i + 1] - offs[i], NULL, &lim, 0);
            texts[i] = r.text; lens[i] = r.len; ds[i] = r.d; total += r.len;
        }
        all = (char *)malloc(total);
        oo[0] = 0;
        while (done < np) {
            size_t cap = rnd(3) ? rnd(600) : total - got;
            char *out = (char *)malloc(cap ? cap : 1);
            uint32_t k = 0;
            stackptx_status st = stackptx_compile_many(&g_table, &s.io, &lim, words, offs + done, np - done, NULL, 0,
                                                       ws + 1, wsz, cap ? out : NULL, cap, oo + done, dm + done, &k);
            if (st != STACKPTX_OK && st != STACKPTX_ERR_BUFFER_TOO_SMALL) { agree = 0; free(out); break; }
            if (st == STACKPTX_ERR_BUFFER_TOO_SMALL) resumes++;
            if (k) {
                memcpy(all + got, out, oo[done + k] - oo[done]);
                got += oo[done + k] - oo[done];
            }
            done += k;
            free(out);
        }
        for (i = 0; i < np && agree; i++)
            if (oo[i + 1] - oo[i] != lens[i] || memcmp(all + oo[i], texts[i], lens[i]) != 0 ||
                !same_diag(&ds[i], &dm[i]))
                agree = 0;
        for (i = 0; i < np; i++) free(texts[i]);
        free(all);
    }
    CHECK(agree);
    CHECK(resumes > 100);
    free(ws);
}

/* AST PTX programs that are valid by construction (random expression trees) compile OK. */
static void test_fuzz_ast_valid(void)
{
    iospec s;
    int iter, ok = 0;
    g_test = "fuzz_ast_valid";
    io_init(&s, "f32:x f32:y f32:w", "f32:z pred:p");
    for (iter = 0; iter < 3000; iter++) {
        uint64_t w[256];
        uint32_t n = 0, depth_f = 0, depth_p = 0, target = 1 + rnd(30);
        result r;
        /* random f32 RPN until long enough, then reduce to one f32 + one pred */
        while (n < 200 && (n < target || depth_f != 1)) {
            uint32_t c = rnd(10);
            if (depth_f < 2 || c < 4) { w[n++] = rnd(3) ? IN(rnd(3)) : CST(T_F32, rnd(4)); depth_f++; }
            else if (c < 8) { w[n++] = OP(rnd(2) ? R_ADD : (rnd(2) ? R_MUL : R_SUB)); depth_f--; }
            else if (c < 9 && depth_f >= 3) { w[n++] = OP(R_FMA); depth_f -= 2; }
            else { w[n++] = OP(R_NEG); }
            if (n >= 200) break;
        }
        if (depth_f != 1) continue;
        w[n++] = IN(0); w[n++] = IN(1); w[n++] = OP(R_SETP);
        (void)depth_p;
        r = run(AST, &s, w, n);
        if (r.st == STACKPTX_OK) ok++;
        else printf("  ast valid failed: %s at %u\n", stackptx_status_string(r.st), r.d.error_word);
        result_free(&r);
    }
    CHECK(ok > 2500);
}

/* ---- timing ------------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* random 100-word programs in the style of a search: mostly inputs, constants, f32 arithmetic
   and some meta ops */
static uint64_t bench_word(void)
{
    uint32_t k = rnd(100);
    if (k < 25) return IN(rnd(4));
    if (k < 35) return CST(T_F32, rnd(8) * 0x3E000000u);
    if (k < 75) { static const int ops[] = { R_ADD, R_MUL, R_SUB, R_FMA, R_NEG, R_SETP, R_SELP, R_CVT };
                  return OP(ops[rnd(8)]); }
    if (k < 82) return MC(rnd(4));
    if (k < 95) return META(T_F32, rnd(STACKPTX_N_META_OPS));
    return rand_word(4, 0);
}

static void bench(void)
{
    iospec s;
#ifndef BENCH_REPS
#define BENCH_REPS 40
#endif
    enum { NP = 2000, LEN = 100, REPS = BENCH_REPS };
    uint64_t *progs = (uint64_t *)malloc(sizeof(uint64_t) * NP * LEN);
    uint32_t *offs = (uint32_t *)malloc(sizeof(uint32_t) * (NP + 1)), *oo = (uint32_t *)malloc(4 * (NP + 1));
    size_t wsz, len, total = 0;
    void *ws;
    char *out = (char *)malloc(1 << 16), *big;
    stackptx_diag d, *dg = (stackptx_diag *)malloc(sizeof(stackptx_diag) * NP);
    double t0, t1, best;
    int i, rep;
    long emitted = 0;
    uint32_t done;
    g_test = "bench";
    io_init(&s, "f32:x f32:y f32:w f32:acc", "f32:acc");
    wsz = stackptx_workspace_size(NULL, &s.io);
    ws = malloc(wsz);
    for (i = 0; i < NP * LEN; i++) progs[i] = bench_word();
    for (i = 0; i <= NP; i++) offs[i] = (uint32_t)(i * LEN);
    best = 1e9;
    for (rep = 0; rep < REPS; rep++) {
        t0 = now_s();
        for (i = 0; i < NP; i++) {
            stackptx_compile(&g_table, &s.io, NULL, progs + (size_t)i * LEN, LEN, NULL, 0, ws, wsz, out, 1 << 16, &len, &d);
            total += len;
            emitted += d.emitted;
        }
        t1 = now_s();
        if (t1 - t0 < best) best = t1 - t0;
    }
    {
        double nodes = 0, noops = 0;
        for (i = 0; i < NP; i++) {
            stackptx_compile(&g_table, &s.io, NULL, progs + (size_t)i * LEN, LEN, NULL, 0, ws, wsz, out, 1 << 16, &len, &d);
            nodes += d.nodes;
            noops += d.n_noops;
        }
        printf("bench: random %d-word programs: %.2f us each (avg stub %.0f B, %.1f lines, %.1f nodes, %.1f no-ops)\n",
               LEN, best / NP * 1e6, (double)total / ((double)REPS * NP), (double)emitted / ((double)REPS * NP), nodes / NP, noops / NP);
    }
    big = (char *)malloc(total / REPS + 1024);
    best = 1e9;
    for (rep = 0; rep < REPS; rep++) {
        oo[0] = 0;
        t0 = now_s();
        stackptx_compile_many(&g_table, &s.io, NULL, progs, offs, NP, NULL, 0, ws, wsz, big, total / REPS + 1024, oo,
                              dg, &done);
        t1 = now_s();
        if (t1 - t0 < best) best = t1 - t0;
    }
    CHECK(done == NP);
    printf("bench: compile_many of the same: %.2f us each\n", best / NP * 1e6);
    {   /* AST PTX: valid random expressions of ~100 words */
        int n_ok = 0;
        uint64_t *ap = progs;   /* reuse the buffer */
        uint32_t *alen = offs;
        for (i = 0; i < NP; i++) {
            uint64_t *w = ap + (size_t)i * LEN;
            uint32_t n = 0, depth = 0;
            while (!(depth == 1 && n >= LEN - 3)) {
                if ((depth < 2 && n + depth < LEN - 1) || (depth >= 2 && n + depth < LEN - 2 && rnd(10) < 5)) {
                    w[n++] = rnd(4) ? IN(rnd(4)) : CST(T_F32, rnd(8) * 0x3E000000u);
                    depth++;
                } else {
                    w[n++] = OP(rnd(3) == 0 ? R_MUL : rnd(2) ? R_ADD : R_SUB);
                    depth--;
                }
            }
            alen[i] = n;
        }
        best = 1e9;
        for (rep = 0; rep < REPS; rep++) {
            n_ok = 0;
            t0 = now_s();
            for (i = 0; i < NP; i++)
                n_ok += astptx_compile(&g_table, &s.io, NULL, ap + (size_t)i * LEN, alen[i], NULL, ws, wsz, out,
                                       1 << 16, &len, &d) == STACKPTX_OK;
            t1 = now_s();
            if (t1 - t0 < best) best = t1 - t0;
        }
        CHECK(n_ok == NP);
        printf("bench: AST PTX ~%d-word expressions: %.2f us each\n", LEN - 2, best / NP * 1e6);
    }
    {   /* a 59-word program: a degree-9 polynomial in x (Horner) plus a product with y and acc */
        uint64_t w[64];
        int n = 0, k;
        w[n++] = CST(T_F32, 0x3F800000u);
        for (k = 0; k < 9; k++) {   /* 5 words each */
            w[n++] = IN(0); w[n++] = OP(R_MUL); w[n++] = CST(T_F32, 0x3E000000u + (uint32_t)k); w[n++] = OP(R_ADD);
            w[n++] = k % 3 == 2 ? META(T_F32, STACKPTX_M_DUP) : NOP;
        }
        w[n++] = IN(1); w[n++] = IN(2); w[n++] = OP(R_FMA);
        w[n++] = IN(3); w[n++] = OP(R_ADD);
        w[n++] = OP(R_MUL); w[n++] = OP(R_MUL); w[n++] = OP(R_ADD);
        w[n++] = IN(3); w[n++] = OP(R_MUL);
        w[n++] = CST(T_F32, 0x3F000000u); w[n++] = OP(R_MUL); w[n++] = OP(R_NEG);
        CHECK(n == 59);
        best = 1e9;
        for (rep = 0; rep < REPS; rep++) {
            t0 = now_s();
            for (i = 0; i < NP; i++)
                stackptx_compile(&g_table, &s.io, NULL, w, (size_t)n, NULL, 0, ws, wsz, out, 1 << 16, &len, &d);
            t1 = now_s();
            if (t1 - t0 < best) best = t1 - t0;
        }
        printf("bench: a 59-word program: %.2f us each (%zu B stub, %u lines, %u noops)\n", best / NP * 1e6, len,
               d.emitted, d.n_noops);
    }
    free(progs); free(offs); free(oo); free(out); free(big); free(dg); free(ws);
}

int main(int argc, char **argv)
{
    g_bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    make_table();
    io_init(&g_meta_io, "f32:a f32:b f32:c f32:d f32:e", "f32:o0 f32:o1 f32:o2 f32:o3 f32:o4");
    if (!g_bench) {
        test_basic();
        test_multi_result();
        test_cse();
        test_constants();
        test_meta();
        test_mmptx();
        test_routines();
        test_slots_return_malformed();
        test_input_tags();
        test_user_types();
        test_outputs();
        test_limits();
        test_paths();
        test_api_errors();
        test_ast();
        test_many();
        test_fuzz();
        test_fuzz_ast_valid();
        test_fuzz_many();
    } else {
        bench();
    }
    return check_report();
}
