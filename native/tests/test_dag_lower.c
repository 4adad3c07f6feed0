/* Tests of dag_lower.h: exact programs for small DAGs, every error path, and a fuzz loop
   (random valid DAGs must lower to Stack PTX programs that compile strictly with one value
   per root; random garbage must be refused without reading or writing out of bounds).

   cc -std=c99 -fsanitize=address,undefined -I.. test_dag_lower.c ../dag_lower.c ../stack_ptx.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag_lower.h"

#include "check.h"

enum { T_PRED = STACKPTX_T_PRED, T_F32 = STACKPTX_T_F32, T_F64 = STACKPTX_T_F64 };
enum { R_ADD, R_MUL, R_FMA, R_NEG, R_SETP, R_SELP, R_TWO, R_TID, N_ROWS };
static stackptx_instr g_rows[N_ROWS];
static stackptx_table g_table;

static void row(int i, const char *fmt, uint8_t res, int n_res, const uint8_t *ops, int n_ops)
{
    stackptx_instr *r = &g_rows[i];
    int k;
    memset(r, 0, sizeof *r);
    r->fmt = fmt;
    r->fmt_len = (uint32_t)strlen(fmt);
    r->n_results = (uint8_t)n_res;
    for (k = 0; k < n_res; k++) { r->result_type[k] = res; r->result_width[k] = 1; }
    r->n_operands = (uint8_t)n_ops;
    for (k = 0; k < n_ops; k++) { r->operand_type[k] = ops[k]; r->operand_width[k] = 1; }
}

static void make_table(void)
{
    static const uint8_t ff[3] = { T_F32, T_F32, T_F32 }, ffp[3] = { T_F32, T_F32, T_PRED };
    row(R_ADD, "add.f32 $0, $1, $2;", T_F32, 1, ff, 2);
    row(R_MUL, "mul.f32 $0, $1, $2;", T_F32, 1, ff, 2);
    row(R_FMA, "fma.rn.f32 $0, $1, $2, $3;", T_F32, 1, ff, 3);
    row(R_NEG, "neg.f32 $0, $1;", T_F32, 1, ff, 1);
    row(R_SETP, "setp.lt.f32 $0, $1, $2;", T_PRED, 1, ff, 2);
    row(R_SELP, "selp.f32 $0, $1, $2, $3;", T_F32, 1, ffp, 3);
    row(R_TWO, "mov.b64 {$0, $1}, 0;", T_F32, 2, ff, 0);       /* two results: not a DAG node */
    row(R_TID, "mov.u32 $0, %tid.x;", 8, 1, ff, 0);
    g_table.rows = g_rows;
    g_table.n_rows = N_ROWS;
}

#define W(k, t, a, b) ((uint64_t)(k) | (uint64_t)(t) << 8 | (uint64_t)(a) << 16 | (uint64_t)(b) << 32)
#define IN(k, t) W(STACKPTX_K_INPUT, t, k, 0)
#define CST(t, b) W(STACKPTX_K_CONST, t, 0, b)
#define OP(r) W(STACKPTX_K_INSTR, 0, r, 0)
#define C64(t) W(STACKPTX_K_CONST64, t, 0, 0)
#define DUP(t) W(STACKPTX_K_META, t, STACKPTX_M_DUP, 0)
#define STO(t, s) W(STACKPTX_K_STORE, t, s, 0)
#define LD(t, s) W(STACKPTX_K_LOAD, t, s, 0)
#define N(a) (sizeof(a) / sizeof((a)[0]))

static uint32_t g_ws[1 << 16];
static uint64_t g_out[1 << 14];
static size_t g_len;
static uint32_t g_slots, g_instr, g_err;

static stackptx_status lower(const uint64_t *rec, size_t n, const uint64_t *roots, uint32_t nr)
{
    return dag_lower(&g_table, rec, n, roots, nr, g_ws, sizeof g_ws, g_out, N(g_out), &g_len,
                     &g_slots, &g_instr, &g_err);
}

static int same(const uint64_t *want, size_t n)
{
    return g_len == n && memcmp(g_out, want, n * sizeof *want) == 0;
}

static void test_exact(void)
{
    g_test = "exact";
    {   /* x*x + y*y: no sharing */
        const uint64_t rec[] = { IN(0, T_F32), IN(1, T_F32), OP(R_MUL), 0, 0, OP(R_MUL), 1, 1,
                                 OP(R_ADD), 2, 3 };
        const uint64_t roots[] = { 4 };
        const uint64_t want[] = { IN(0, 0), IN(0, 0), OP(R_MUL), IN(1, 0), IN(1, 0), OP(R_MUL),
                                  OP(R_ADD) };
        CHECK(lower(rec, N(rec), roots, 1) == STACKPTX_OK);
        CHECK(same(want, N(want)));
        CHECK(g_slots == 0 && g_instr == 3);
    }
    {   /* t = x + y used twice: dup + store, then load */
        const uint64_t rec[] = { IN(0, T_F32), IN(1, T_F32), OP(R_ADD), 0, 1, OP(R_MUL), 2, 2 };
        const uint64_t roots[] = { 3 };
        const uint64_t want[] = { IN(0, 0), IN(1, 0), OP(R_ADD), DUP(T_F32),
                                  STO(T_F32, 0), LD(T_F32, 0), OP(R_MUL) };
        CHECK(lower(rec, N(rec), roots, 1) == STACKPTX_OK);
        CHECK(same(want, N(want)));
        CHECK(g_slots == 1 && g_instr == 2);
    }
    {   /* two roots (last first), a shared root, a pass-through input root, constants */
        const uint64_t rec[] = { IN(0, T_F32), CST(T_F32, 0x3F800000u), OP(R_ADD), 0, 1,
                                 C64(T_F64), 0x4000000000000000ull, OP(R_NEG), 2 };
        const uint64_t roots[] = { 4, 2, DAGLOWER_ROOT_INPUT | 5, 2 };
        const uint64_t want[] = { IN(0, 0), CST(T_F32, 0x3F800000u), OP(R_ADD), DUP(T_F32),
                                  STO(T_F32, 0), IN(5, 0), LD(T_F32, 0),
                                  LD(T_F32, 0), OP(R_NEG) };
        CHECK(lower(rec, N(rec), roots, N(roots)) == STACKPTX_OK);
        CHECK(same(want, N(want)));
        CHECK(g_slots == 1 && g_instr == 2);
    }
    {   /* CONST64 root, operand order of a 3-operand row, a 0-operand row */
        const uint64_t rec[] = { C64(T_F64), 7, IN(0, T_F32), IN(1, T_F32), OP(R_SETP), 1, 2,
                                 OP(R_SELP), 1, 2, 3, OP(R_TID) };
        const uint64_t roots[] = { 0, 4, 5 };
        const uint64_t want[] = { OP(R_TID), IN(0, 0), IN(1, 0), IN(0, 0), IN(1, 0), OP(R_SETP),
                                  OP(R_SELP), C64(T_F64), 7 };
        CHECK(lower(rec, N(rec), roots, N(roots)) == STACKPTX_OK);
        CHECK(same(want, N(want)));
    }
    {   /* dead nodes count as uses (as the Python lowering does) */
        const uint64_t rec[] = { IN(0, T_F32), OP(R_NEG), 0, OP(R_NEG), 1, OP(R_ADD), 1, 0 };
        const uint64_t roots[] = { 3 };
        CHECK(lower(rec, N(rec), roots, 1) == STACKPTX_OK);
        CHECK(g_slots == 1);
    }
    {   /* empty */
        CHECK(lower(NULL, 0, NULL, 0) == STACKPTX_OK && g_len == 0);
    }
}

static void test_errors(void)
{
    const uint64_t ok[] = { IN(0, T_F32), OP(R_NEG), 0 };
    const uint64_t root1[] = { 1 };
    size_t len;
    uint32_t s, i, e;
    g_test = "errors";
    {   const uint64_t rec[] = { IN(0, T_F32), W(STACKPTX_K_ROUTINE, 0, 0, 0) };  /* no record kind */
        CHECK(lower(rec, N(rec), root1, 1) == STACKPTX_ERR_INVALID_ARGUMENT && g_err == 1); }
    {   const uint64_t rec[] = { IN(0, T_F32), OP(R_NEG), 1 };           /* operand not earlier */
        CHECK(lower(rec, N(rec), root1, 1) == STACKPTX_ERR_INVALID_ARGUMENT); }
    {   const uint64_t rec[] = { IN(0, T_F32), OP(R_ADD), 0 };           /* truncated */
        CHECK(lower(rec, N(rec), root1, 1) == STACKPTX_ERR_INVALID_ARGUMENT); }
    {   const uint64_t rec[] = { OP(R_TWO) };                            /* two results */
        const uint64_t r0[] = { 0 };
        CHECK(lower(rec, N(rec), r0, 1) == STACKPTX_ERR_INVALID_ARGUMENT); }
    {   const uint64_t rec[] = { OP(N_ROWS) };                           /* row out of range */
        const uint64_t r0[] = { 0 };
        CHECK(lower(rec, N(rec), r0, 1) == STACKPTX_ERR_INVALID_ARGUMENT); }
    {   const uint64_t rec[] = { C64(T_F64) };                    /* CONST64 cut short */
        CHECK(lower(rec, N(rec), NULL, 0) == STACKPTX_ERR_INVALID_ARGUMENT); }
    {   const uint64_t rec[] = { IN(0, STACKPTX_N_TYPES) };                            /* bad type */
        CHECK(lower(rec, N(rec), NULL, 0) == STACKPTX_ERR_INVALID_ARGUMENT); }
    {   const uint64_t r9[] = { 9 };                                     /* root out of range */
        CHECK(lower(ok, N(ok), r9, 1) == STACKPTX_ERR_INVALID_ARGUMENT && g_err == 0); }
    {   const uint64_t rin[] = { DAGLOWER_ROOT_INPUT | 0x10000u };       /* input k too big */
        CHECK(lower(ok, N(ok), rin, 1) == STACKPTX_ERR_INVALID_ARGUMENT); }
    CHECK(dag_lower(NULL, ok, N(ok), root1, 1, g_ws, sizeof g_ws, g_out, 8, &len, &s, &i, &e)
          == STACKPTX_ERR_INVALID_ARGUMENT);
    CHECK(dag_lower(&g_table, ok, N(ok), root1, 1, g_ws, sizeof g_ws, g_out, 8, NULL, &s, &i, &e)
          == STACKPTX_ERR_INVALID_ARGUMENT);
    /* workspace: the measured size is enough, one byte less is not */
    {
        size_t need = dag_lower_workspace_size(2);
        CHECK(need > 0);
        CHECK(dag_lower(&g_table, ok, N(ok), root1, 1, g_ws, need, g_out, 8, &len, &s, &i, &e)
              == STACKPTX_OK);
        CHECK(dag_lower(&g_table, ok, N(ok), root1, 1, g_ws, need - 1, g_out, 8, &len, &s, &i, &e)
              == STACKPTX_ERR_WORKSPACE_TOO_SMALL);
        CHECK(dag_lower(&g_table, ok, N(ok), root1, 1, NULL, 0, g_out, 8, &len, &s, &i, &e)
              == STACKPTX_ERR_WORKSPACE_TOO_SMALL);
    }
    /* output: too small reports the size, a retry with it succeeds; nothing past out_cap */
    {
        uint64_t out[3] = { 0, 0, 0 };
        const uint64_t rec[] = { IN(0, T_F32), OP(R_NEG), 0, OP(R_ADD), 1, 1 };
        const uint64_t r2[] = { 2 };
        CHECK(dag_lower(&g_table, rec, N(rec), r2, 1, g_ws, sizeof g_ws, out, 2, &len, &s, &i, &e)
              == STACKPTX_ERR_BUFFER_TOO_SMALL);
        CHECK(len == 6 && out[2] == 0);
        CHECK(lower(rec, N(rec), r2, 1) == STACKPTX_OK && g_len == 6);
    }
}

/* ---- fuzz ------------------------------------------------------------------------------------ */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

static void test_fuzz(void)
{
    static uint64_t rec[4096], roots[16];
    static uint8_t type[1024];
    static char stub[1 << 16];
    static char ws[1 << 20];
    static const uint8_t out_types[16] = { 0 };
    const char *names[16] = { "a", "b", "c", "d" };
    static const char *out_names[16] = { "o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7",
                                         "o8", "o9", "o10", "o11", "o12", "o13", "o14", "o15" };
    uint32_t lens[16] = { 1, 1, 1, 1 }, out_lens[16] = { 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3 };
    uint8_t in_types[4] = { T_F32, T_F32, T_F32, T_F32 }, ot[16];
    int iter, valid_ok = 0;
    (void)out_types;
    g_test = "fuzz";
    for (iter = 0; iter < 3000; iter++) {
        size_t n = 0;
        uint32_t nodes = 0, nr = 1 + rnd(4), k, j;
        stackptx_status st;
        if (iter % 3 == 0) {                                   /* garbage */
            size_t len = rnd(40);
            for (n = 0; n < len; n++) rec[n] = (uint64_t)rnd(0xFFFFFFFFu) << rnd(40) ^ rnd(16);
            for (k = 0; k < nr; k++) roots[k] = rnd(2) ? rnd(60) : (DAGLOWER_ROOT_INPUT | rnd(70000));
            st = lower(rec, n, roots, nr);
            CHECK(st == STACKPTX_OK || st == STACKPTX_ERR_INVALID_ARGUMENT);
            continue;
        }
        /* a random valid DAG over 4 f32 inputs */
        for (k = 0; k < 4; k++) { rec[n++] = IN(k, T_F32); type[nodes++] = T_F32; }
        while (nodes < 4 + rnd(60)) {
            uint32_t pick = rnd(5), a, b, c;
            do { a = rnd(nodes); } while (type[a] != T_F32);
            do { b = rnd(nodes); } while (type[b] != T_F32);
            do { c = rnd(nodes); } while (type[c] != T_F32);
            if (pick == 0) { rec[n++] = CST(T_F32, rnd(0x7F000000u)); }
            else if (pick == 1) { rec[n++] = OP(R_NEG); rec[n++] = a; }
            else if (pick == 2) { rec[n++] = OP(rnd(2) ? R_ADD : R_MUL); rec[n++] = a; rec[n++] = b; }
            else { rec[n++] = OP(R_FMA); rec[n++] = a; rec[n++] = b; rec[n++] = c; }
            type[nodes++] = T_F32;
        }
        for (k = 0; k < nr; k++) roots[k] = rnd(nodes);
        st = lower(rec, n, roots, nr);
        CHECK(st == STACKPTX_OK);
        if (st != STACKPTX_OK) continue;
        CHECK(g_len <= 9u * nodes + 2u * nr);
        {   /* the program compiles strictly: every root reaches its output */
            stackptx_io io;
            stackptx_diag d;
            size_t slen;
            stackptx_limits lim = { 0, 0, 0, 0, 0, 0, 0 };
            uint64_t words[1 << 12];
            for (j = 0; j < nr; j++) ot[j] = T_F32;
            memset(&io, 0, sizeof io);
            io.n_inputs = 4; io.input_types = in_types; io.input_names = names; io.input_name_lens = lens;
            io.n_outputs = nr; io.output_types = ot; io.output_names = out_names; io.output_name_lens = out_lens;
            lim.n_slots = 1024;
            if (stackptx_workspace_size(&lim, &io) > sizeof ws) { CHECK(0); continue; }
            memcpy(words, g_out, g_len * sizeof *words);
            st = stackptx_compile(&g_table, &io, &lim, words, g_len, NULL, 1, ws, sizeof ws, stub,
                                  sizeof stub, &slen, &d);
            CHECK(st == STACKPTX_OK && d.n_noops == 0);
            valid_ok += st == STACKPTX_OK;
        }
    }
    CHECK(valid_ok > 1000);
}

int main(void)
{
    make_table();
    test_exact();
    test_errors();
    test_fuzz();
    return check_report();
}
