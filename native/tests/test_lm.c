/* Levenberg–Marquardt in C (lm.h): fits the constants of a tape, refuses bad workspaces, marks and
   arguments with an error code, and survives every corruption of a tape's words without reading
   or writing out of bounds (this program runs under ASan + UBSan). */
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
    return nxlm_fit(&d, o, t, off, 1, po, theta, fr, wide, mo, mw, MARK_PARAM, sse, ws, ws_size, &f);
}

static uint32_t rnd(void)
{
    static uint64_t s = 88172645463325252ull;
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return (uint32_t)s;
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
                       &sse, ws, sizeof ws, &f) == NXI_ERR_ARGUMENT);
        d.n_rows = 0;
        CHECK(nxlm_fit(&d, &o, TAPE, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM,
                       &sse, ws, sizeof ws, &f) == NXI_ERR_ARGUMENT);
        d = data(); out_type = 9; type_size[9] = 4;            /* f is not a float */
        CHECK(nxlm_fit(&d, &o, TAPE, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM,
                       &sse, ws, sizeof ws, &f) == NXI_ERR_TYPE);
        out_type = T_F32; type_size[9] = 0;
        memcpy(t, TAPE, sizeof t); t[5 + 16 + 2] = 5;           /* the mul -> a row past the table */
        CHECK(nxlm_fit(&d, &o, t, off, 1, po, theta, both, wide, mo, MARK_WORD, MARK_PARAM,
                       &sse, ws, sizeof ws, &f) == NXI_ERR_TAPE && f.program == 0);
    }

    g_test = "corruptions";   /* every word x boundary values: an error or a fit, no fault */
    for (i = 0; i < TAPE_LEN; i++)
        for (j = 0; j < sizeof vals / sizeof vals[0] + 8; j++) {
            memcpy(t, TAPE, sizeof t);
            t[i] = j < sizeof vals / sizeof vals[0] ? vals[j] : rnd();
            theta[0] = 1.0; theta[1] = 0.0;
            st = fit(t, TAPE_LEN, &o, theta, both, &sse, sizeof ws, MARK_WORD);
            CHECK(st >= NXI_OK && st <= NXI_ERR_TYPE);
        }
    return check_report();
}
