/* The batch interpreter (interp.h): runs a tape right, and refuses every corruption of one
   (each word set to boundary and random values, and random words) with an error code, never
   reading or writing out of bounds (this program runs under ASan + UBSan). */
#include <stdint.h>
#include "check.h"
#include "interp.h"

enum { T_F32 = 5, N_TYPES = 14, ROWS = 3, N = 37, BLOCK = 8 };

static uint32_t op_of(const char *name)
{
    uint32_t k;
    for (k = 0; k < nxi_n_ops(); k++)
        if (!strcmp(nxi_op_name(k), name)) return k;
    return NXI_NO_OP;
}

/* y = (x * 2) + x: records const 2, input x, mul, add */
static const uint32_t TAPE[] = {
    4, 4, 1, 0,   3,
    1u | T_F32 << 8 | 1u << 24, 0, 0x40000000u, 0, ~0u, ~0u, ~0u, ~0u,
    0u | T_F32 << 8 | 1u << 24, 1, 0, 0, ~0u, ~0u, ~0u, ~0u,
    2u | T_F32 << 8 | 2u << 16 | 1u << 24, 2, 0, 0, 1, 0, ~0u, ~0u,   /* row 0: mul */
    2u | T_F32 << 8 | 2u << 16 | 1u << 24, 3, 1, 0, 2, 1, ~0u, ~0u,   /* row 1: add */
};
#define TAPE_LEN (sizeof TAPE / sizeof TAPE[0])

static uint16_t row_op[ROWS];
static uint8_t op_types[4 * 64], type_size[N_TYPES];
static float xs[N], ys[N];
static unsigned char ws[1 << 16];

static int run(const uint32_t *t, uint64_t len)
{
    uint64_t off[2] = {0, len};
    nxi_column c = {xs, T_F32, 0};
    nxi_output o = {ys, T_F32};
    nxi_fail f;
    return nxi_run(t, off, 1, row_op, ROWS, op_types, type_size, N_TYPES, &c, 1, &o, 1, N, BLOCK,
                   ws, sizeof ws, &f);
}

static uint32_t rnd(void)
{
    static uint64_t s = 88172645463325252ull;
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return (uint32_t)s;
}

int main(void)
{
    uint32_t t[TAPE_LEN], mul = op_of("mul.rn.f32"), add = op_of("add.rn.f32"), i, j, k;
    static const uint32_t vals[] = {0, 1, 2, 3, 4, 5, 7, 8, 0xFF, 0xFFFF, 0x7FFFFFFFu, ~0u};
    int ok = 1;
    g_test = "setup";
    CHECK(mul != NXI_NO_OP && add != NXI_NO_OP);
    memset(op_types, 0xFF, sizeof op_types);
    for (k = 0; k < 2; k++) {
        uint32_t op = k ? add : mul;
        op_types[4 * op] = op_types[4 * op + 1] = op_types[4 * op + 2] = T_F32;
    }
    row_op[0] = (uint16_t)mul; row_op[1] = (uint16_t)add; row_op[2] = NXI_NO_OP;
    type_size[T_F32] = 4;
    for (i = 0; i < N; i++) xs[i] = (float)i - 10.5f;

    g_test = "run";
    CHECK(nxi_workspace_size(4, 4, BLOCK) <= sizeof ws);
    CHECK(run(TAPE, TAPE_LEN) == NXI_OK);
    for (i = 0; i < N; i++) ok &= ys[i] == xs[i] * 2.0f + xs[i];
    CHECK(ok);

    g_test = "refusals";
    memcpy(t, TAPE, sizeof t); t[5 + 16 + 2] = 2;            /* the mul -> row 2: no op */
    CHECK(run(t, TAPE_LEN) == NXI_ERR_ROW);
    memcpy(t, TAPE, sizeof t); t[4] = 9;                      /* output slot past the tape */
    CHECK(run(t, TAPE_LEN) == NXI_ERR_TAPE);
    CHECK(run(TAPE, TAPE_LEN - 1) == NXI_ERR_TAPE);
    type_size[T_F32] = 16;             /* a type past a slot's 8 bytes an element: refused */
    CHECK(run(TAPE, TAPE_LEN) == NXI_ERR_ARGUMENT);
    type_size[T_F32] = 4;

    g_test = "corruptions";   /* every word x boundary values: an error or a run, no fault */
    for (i = 0; i < TAPE_LEN; i++)
        for (j = 0; j < sizeof vals / sizeof vals[0]; j++) {
            int st;
            memcpy(t, TAPE, sizeof t);
            t[i] = vals[j];
            st = run(t, TAPE_LEN);
            CHECK(st >= NXI_OK && st <= NXI_ERR_TYPE);
        }
    for (k = 0; k < 20000; k++) {           /* random words, some in the header's range */
        int st;
        memcpy(t, TAPE, sizeof t);
        for (j = 0; j < 1 + rnd() % 4; j++) t[rnd() % TAPE_LEN] = rnd() % 3 ? rnd() % 16 : rnd();
        st = run(t, rnd() % 3 ? TAPE_LEN : rnd() % (TAPE_LEN + 1));
        if (st < NXI_OK || st > NXI_ERR_TYPE) CHECK(0);
    }
    CHECK(1);
    return check_report();
}
