/* Levenberg–Marquardt in C (lm.h): fits the constants of a tape, refuses bad workspaces, marks and
   arguments with an error code, and survives every corruption of a tape's words, and random
   batches of marks, parameters and blocks, without reading or writing out of bounds (this program
   runs under ASan + UBSan; the fuzz loops hand nxlm_fit a heap workspace of exactly the size
   nxlm_workspace_size gives, so that an overrun inside it is seen). */
#include <math.h>
#include <stdint.h>
#include "check.h"
#include "interp.h"
#include "lm.h"

enum { T_F32 = 5, T_F64 = 6, N_TYPES = 14, ROWS = 2, N = 23, BLOCK = 16 };

static uint32_t op_of(const char *name)
{
    uint32_t k;
    for (k = 0; k < nxi_n_ops(); k++)
        if (!strcmp(nxi_op_name(k), name)) return k;
    return NXI_NO_OP;
}

/* f = c0 * x + c1: records const c0 (marker), input x, mul, const c1 (marker), add */
static const uint32_t TAPE[] = {
    5, 5, 1, 0,   4,
    1u | T_F32 << 8 | 1u << 24, 0, 0x3f800000u, 0, ~0u, ~0u, ~0u, ~0u,      /* c0 = 1 */
    0u | T_F32 << 8 | 1u << 24, 1, 0, 0, ~0u, ~0u, ~0u, ~0u,
    2u | T_F32 << 8 | 2u << 16 | 1u << 24, 2, 0, 0, 0, 1, ~0u, ~0u,         /* row 0: mul */
    1u | T_F32 << 8 | 1u << 24, 3, 0, 0, ~0u, ~0u, ~0u, ~0u,                 /* c1 = 0 */
    2u | T_F32 << 8 | 2u << 16 | 1u << 24, 4, 1, 0, 2, 3, ~0u, ~0u,         /* row 1: add */
};
#define TAPE_LEN (sizeof TAPE / sizeof TAPE[0])
static const uint32_t MARK_WORD[2] = {5, 5 + 3 * 8}, MARK_PARAM[2] = {0, 1};

static uint16_t row_op[ROWS];
static uint8_t op_types[4 * 512], type_size[N_TYPES];
static float xs[N];
static double ys[N];
static unsigned char ws[1 << 16];
static nxi_column col = {xs, T_F32, 0};
static uint32_t out_type = T_F32;

static nxlm_data data(void)
{
    nxlm_data d;
    memset(&d, 0, sizeof d);
    d.row_op = row_op; d.n_rows_table = ROWS; d.op_types = op_types; d.type_size = type_size;
    d.n_types = N_TYPES; d.in = &col; d.n_inputs = 1; d.out_types = &out_type; d.n_outputs = 1;
    d.y = ys; d.n_rows = N; d.block = BLOCK; d.f32_type = T_F32; d.f64_type = T_F64;
    return d;
}

static uint32_t g_block = BLOCK;

static int fit(const uint32_t *t, uint64_t len, const nxlm_options *o, double *theta,
               const uint8_t *fr, double *sse, size_t ws_size, const uint32_t *mw)
{
    nxlm_data d = data();
    d.block = g_block;
    uint64_t off[2] = {0, len};
    uint32_t po[2] = {0, 2}, mo[2] = {0, 2};
    uint8_t wide[2] = {0, 0};
    nxi_fail f;
    return nxlm_fit(&d, o, t, off, 1, po, theta, fr, wide, mo, mw, MARK_PARAM, sse, NULL, ws, ws_size, &f);
}

static uint32_t rnd(void)
{
    static uint64_t s = 88172645463325252ull;
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return (uint32_t)s;
}

/* nxlm_fit over a heap workspace of exactly the size the batch needs (as nxlm_fit's scan finds
   its largest tape, parameter and free counts); a batch too large for any gets 64 bytes */
static int fit_exact(nxlm_data *d, const nxlm_options *o, const uint32_t *t, const uint64_t *off,
                     uint32_t n, const uint32_t *po, double *theta, const uint8_t *fr,
                     const uint8_t *wide, const uint32_t *mo, const uint32_t *mw,
                     const uint32_t *mp, double *sse, nxi_fail *f)
{
    uint32_t p, k, lim[4] = {0, 0, 0, 0};
    size_t need;
    void *w;
    int st;
    for (p = 0; p < n; p++) {
        uint32_t nf = 0;
        for (k = po[p]; k < po[p + 1]; k++) nf += fr[k] ? 1u : 0u;
        if (off[p + 1] - off[p] >= 4) {
            if (t[off[p]] > lim[0]) lim[0] = t[off[p]];
            if (t[off[p] + 1] > lim[1]) lim[1] = t[off[p] + 1];
        }
        if (po[p + 1] - po[p] > lim[2]) lim[2] = po[p + 1] - po[p];
        if (nf > lim[3]) lim[3] = nf;
    }
    need = nxlm_workspace_size(lim[0], lim[1], lim[2], lim[3], d->n_inputs, d->n_rows, d->block);
    if (!need) need = 64;
    w = malloc(need);
    if (!w) { printf("out of memory\n"); exit(2); }
    st = nxlm_fit(d, o, t, off, n, po, theta, fr, wide, mo, mw, mp, sse, NULL, w, need, f);
    free(w);
    return st;
}

/* One random batch of P copies of TAPE (some words corrupted), random parameters, free flags,
   widths and marks (mostly at the CONST records, some anywhere), a random block and loss. */
static int random_batch(nxlm_options *o)
{
    enum { P = 3 };
    static const uint32_t vals[] = {0, 1, 2, 3, 4, 5, 7, 8, 0xFF, 0xFFFF, 0x7FFFFFFFu, ~0u};
    uint32_t t[P * TAPE_LEN], po[P + 1], mo[P + 1], mw[P * 4], mp[P * 4], p, k;
    uint64_t off[P + 1];
    uint8_t fr[P * 4], wd[P * 4];
    double th[P * 4], sse[P];
    nxlm_data d = data();
    nxi_fail f;
    off[0] = 0; po[0] = 0; mo[0] = 0;
    for (p = 0; p < P; p++) {
        uint32_t K = rnd() % 5, nm = rnd() % 4, c = rnd() % 4 == 0 ? 1 + rnd() % 2 : 0;
        memcpy(t + off[p], TAPE, sizeof TAPE);
        for (k = 0; k < c; k++)
            t[off[p] + rnd() % TAPE_LEN] = rnd() & 1 ? vals[rnd() % 12] : rnd();
        off[p + 1] = off[p] + TAPE_LEN;
        for (k = 0; k < K; k++) {
            th[po[p] + k] = (double)(rnd() % 7) - 3.0;
            fr[po[p] + k] = (uint8_t)(rnd() & 1);
            wd[po[p] + k] = (uint8_t)(rnd() % 8 == 0);
        }
        po[p + 1] = po[p] + K;
        for (k = 0; k < nm; k++) {
            uint32_t r = rnd() % 8;
            mw[mo[p] + k] = r < 6 ? MARK_WORD[rnd() & 1] : r < 7 ? 5 + 8 * (rnd() % 6) : rnd() % 64;
            mp[mo[p] + k] = rnd() % 10 == 0 || !K ? rnd() % (K + 2) : rnd() % K;
        }
        mo[p + 1] = mo[p] + nm;
    }
    d.block = 1 + rnd() % 80;         /* below N: lanes where they differ; above: side by side */
    o->scaling = rnd() & 1; o->positive = rnd() & 1; o->flat = rnd() & 1; o->steps = 1 + rnd() % 3;
    return fit_exact(&d, o, t, off, P, po, th, fr, wd, mo, mw, mp, sse, &f);
}

/* The review's refusals: a type wider than a slot's 8 bytes per element (the load filled a
   block of it past the slot), a mark whose record's type is not its parameter's width. */
static void refusals_of_the_review(const nxlm_options *o)
{
    enum { LEN = TAPE_LEN + 8 };
    uint32_t t[LEN], po[2] = {0, 2}, mo[2] = {0, 2};
    uint64_t off[2] = {0, LEN};
    uint8_t both[2] = {1, 1}, wide[2] = {0, 0};
    double theta[2] = {1.0, 0.0}, sse;
    nxlm_data d = data();
    nxi_fail f;
    g_test = "a type of 16 bytes";          /* an unused CONST of type 9, whose size says 16 */
    memcpy(t, TAPE, sizeof TAPE);
    t[0] = 6; t[1] = 6;
    t[TAPE_LEN] = 1u | 9u << 8 | 1u << 24; t[TAPE_LEN + 1] = 5; t[TAPE_LEN + 2] = 7;
    t[TAPE_LEN + 3] = 0; t[TAPE_LEN + 4] = t[TAPE_LEN + 5] = t[TAPE_LEN + 6] = t[TAPE_LEN + 7] = ~0u;
    type_size[9] = 16;
    CHECK(fit_exact(&d, o, t, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM, &sse,
                    &f) == NXI_ERR_ARGUMENT);
    type_size[9] = 0;
    CHECK(fit_exact(&d, o, t, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM, &sse,
                    &f) == NXI_ERR_ROW);                      /* a type without storage */
    g_test = "a mark of another width than its parameter";
    wide[1] = 1;                             /* parameter 1 says f64; its record is f32 */
    theta[0] = 1.0; theta[1] = 0.0;
    off[1] = TAPE_LEN;
    CHECK(fit_exact(&d, o, TAPE, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM,
                    &sse, &f) == NXI_ERR_ARGUMENT && f.program == 0 && f.record == 3);
    CHECK(theta[0] == 1.0 && theta[1] == 0.0);
}

int main(void)
{
    uint32_t mul = op_of("mul.rn.f32"), add = op_of("add.rn.f32"), i, j, t[TAPE_LEN], mw[2];
    nxlm_options o = {20, 0, 0, 0, 1e-12, 1e-3, 3.4526697709225118e-04,
                      1.4901161193847656e-08};
    uint8_t both[2] = {1, 1}, first[2] = {1, 0};
    double theta[2], sse;
    static const uint32_t vals[] = {0, 1, 2, 3, 4, 5, 7, 8, 0xFF, 0xFFFF, 0x7FFFFFFFu, ~0u};
    int st;
    g_test = "setup";
    CHECK(mul != NXI_NO_OP && add != NXI_NO_OP);
    memset(op_types, 0xFF, sizeof op_types);
    op_types[4 * mul] = op_types[4 * mul + 1] = op_types[4 * mul + 2] = T_F32;
    op_types[4 * add] = op_types[4 * add + 1] = op_types[4 * add + 2] = T_F32;
    row_op[0] = (uint16_t)mul; row_op[1] = (uint16_t)add;
    type_size[T_F32] = 4; type_size[T_F64] = 8;
    for (i = 0; i < N; i++) { xs[i] = (float)i * 0.25f - 2.0f; ys[i] = 2.0 * xs[i] + 3.0; }
    CHECK(nxlm_workspace_size(5, 5, 2, 2, 1, N, 3 * N) <= sizeof ws);

    g_test = "fits a line";       /* from c0 = 1, c1 = 0 to 2 and 3 */
    theta[0] = 1.0; theta[1] = 0.0;
    CHECK(fit(TAPE, TAPE_LEN, &o, theta, both, &sse, sizeof ws, MARK_WORD) == NXI_OK);
    CHECK(fabs(theta[0] - 2.0) < 1e-4 && fabs(theta[1] - 3.0) < 1e-4);
    CHECK(sse < 1e-6);
    CHECK(theta[0] == (double)(float)theta[0]);          /* f32 parameters stay f32 values */

    g_test = "lanes side by side = lanes where they differ";  /* 23 rows: blocks of 46, 69 */
    {
        double th2[2], sse2;
        uint32_t blocks[2] = {2 * N, 3 * N}, b;
        o.steps = 6;
        theta[0] = 1.0; theta[1] = 0.0;
        CHECK(fit(TAPE, TAPE_LEN, &o, theta, both, &sse, sizeof ws, MARK_WORD) == NXI_OK);
        for (b = 0; b < 2; b++) {
            g_block = blocks[b];
            th2[0] = 1.0; th2[1] = 0.0;
            CHECK(fit(TAPE, TAPE_LEN, &o, th2, both, &sse2, sizeof ws, MARK_WORD) == NXI_OK);
            CHECK(th2[0] == theta[0] && th2[1] == theta[1] && sse2 == sse);
        }
        g_block = BLOCK;
        o.steps = 20;
    }

    g_test = "a fixed parameter stays";
    theta[0] = 1.0; theta[1] = 0.5;
    CHECK(fit(TAPE, TAPE_LEN, &o, theta, first, &sse, sizeof ws, MARK_WORD) == NXI_OK);
    CHECK(theta[1] == 0.5 && isfinite(sse) && sse > 1.0);

    g_test = "scaling: a and b need no constants";
    o.scaling = 1;
    theta[0] = 1.0; theta[1] = 0.0;
    CHECK(fit(TAPE, TAPE_LEN, &o, theta, both, &sse, sizeof ws, MARK_WORD) == NXI_OK);
    CHECK(sse < 1e-9);
    o.flat = 1;                                            /* a flat f is +inf */
    for (i = 0; i < N; i++) xs[i] = 1.0f;
    theta[0] = 1.0; theta[1] = 0.0;
    CHECK(fit(TAPE, TAPE_LEN, &o, theta, both, &sse, sizeof ws, MARK_WORD) == NXI_OK);
    CHECK(isinf(sse) && theta[0] == 1.0 && theta[1] == 0.0);
    for (i = 0; i < N; i++) xs[i] = (float)i * 0.25f - 2.0f;
    o.scaling = o.flat = 0;

    g_test = "refusals";
    theta[0] = 1.0; theta[1] = 0.0;
    CHECK(fit(TAPE, TAPE_LEN, &o, theta, both, &sse, 64, MARK_WORD) == NXI_ERR_WORKSPACE);
    mw[0] = 5 + 8; mw[1] = MARK_WORD[1];                       /* an INPUT record */
    CHECK(fit(TAPE, TAPE_LEN, &o, theta, both, &sse, sizeof ws, mw) == NXI_ERR_TAPE);
    mw[0] = 6;                                                 /* not a record's start */
    CHECK(fit(TAPE, TAPE_LEN, &o, theta, both, &sse, sizeof ws, mw) == NXI_ERR_TAPE);
    mw[0] = ~0u;                                               /* past the tape */
    CHECK(fit(TAPE, TAPE_LEN, &o, theta, both, &sse, sizeof ws, mw) == NXI_ERR_TAPE);
    {
        nxlm_data d = data();
        uint64_t off[2] = {0, TAPE_LEN};
        uint32_t po[2] = {0, 2}, mo[2] = {0, 2}, bad_param[2] = {0, 7};
        uint8_t wide[2] = {0, 0};
        nxi_fail f;
        CHECK(nxlm_fit(&d, &o, TAPE, off, 1, po, theta, both, wide, mo, MARK_WORD, bad_param,
                       &sse, NULL, ws, sizeof ws, &f) == NXI_ERR_ARGUMENT);
        d.n_rows = 0;
        CHECK(nxlm_fit(&d, &o, TAPE, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM,
                       &sse, NULL, ws, sizeof ws, &f) == NXI_ERR_ARGUMENT);
        d = data(); out_type = 9; type_size[9] = 4;            /* f is not a float */
        CHECK(nxlm_fit(&d, &o, TAPE, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM,
                       &sse, NULL, ws, sizeof ws, &f) == NXI_ERR_TYPE);
        out_type = T_F32; type_size[9] = 0;
        memcpy(t, TAPE, sizeof t); t[5 + 16 + 2] = 5;           /* the mul -> a row past the table */
        CHECK(nxlm_fit(&d, &o, t, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM,
                       &sse, NULL, ws, sizeof ws, &f) == NXI_ERR_TAPE && f.program == 0);
    }

    g_test = "corruptions";   /* every word x boundary values: an error or a fit, no fault */
    for (i = 0; i < TAPE_LEN; i++)
        for (j = 0; j < sizeof vals / sizeof vals[0] + 8; j++) {
            memcpy(t, TAPE, sizeof t);
            t[i] = j < sizeof vals / sizeof vals[0] ? vals[j] : rnd();
            theta[0] = 1.0; theta[1] = 0.0;
            {
                nxlm_data d = data();
                uint64_t off[2] = {0, TAPE_LEN};
                uint32_t po[2] = {0, 2}, mo[2] = {0, 2};
                uint8_t wide[2] = {0, 0};
                nxi_fail f;
                st = fit_exact(&d, &o, t, off, 1, po, theta, both, wide, mo, MARK_WORD,
                               MARK_PARAM, &sse, &f);
            }
            CHECK(st >= NXI_OK && st <= NXI_ERR_TYPE);
        }
    refusals_of_the_review(&o);
    g_test = "random batches";
    {
        int seen_ok = 0;
        for (i = 0; i < 4000; i++) {
            st = random_batch(&o);
            CHECK(st >= NXI_OK && st <= NXI_ERR_TYPE);
            seen_ok += st == NXI_OK;
        }
        CHECK(seen_ok > 200);                 /* the fuzz reaches the fit, not only refusals */
    }
    return check_report();
}
