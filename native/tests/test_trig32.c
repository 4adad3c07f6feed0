/* The f32 transcendentals of interp_ops.h (nx_sin32, nx_cos32) give exactly
   (float)libm((double)a), bit for bit (NaN payloads and signs included):
     test_trig32                    every special class, 2^24 evenly spread bit patterns and
                                    2^20 seeded random ones per function (seconds; make test)
     test_trig32 --exhaustive [sin] [cos]
                                    all 2^32 inputs of each function named (both when none
                                    is), with the libm fallbacks counted through interp_ops.h's
                                    NX_LIBM_HOOK and the CPU time (minutes; make exhaustive,
                                    run once per change of the helpers) */
#include <math.h>
#include <stdint.h>
#include <time.h>
#include "check.h"

enum { NF = 2 };                    /* the functions: sin, cos */
static uint64_t g_libm[NF];
#define NX_LIBM_HOOK(k) (g_libm[k]++)
#include "interp_ops.h"

typedef float (*fn32)(float);
static float ref_sin(float a) { return (float)sin((double)a); }
static float ref_cos(float a) { return (float)cos((double)a); }

static const struct { const char *name; fn32 fast, ref; } FNS[NF] = {
    {"sin", nx_sin32, ref_sin}, {"cos", nx_cos32, ref_cos},
};

static uint64_t g_bad;   /* mismatches of the function under test */

static void one(int f, uint32_t u)
{
    float a = nx_f32_of(u);
    uint32_t got = nx_bits32(FNS[f].fast(a)), want = nx_bits32(FNS[f].ref(a));
    if (got != want && g_bad++ < 5)
        printf("  %s(0x%08x = %.9g): 0x%08x, libm 0x%08x\n", FNS[f].name, u, (double)a, got,
               want);
}

static uint32_t rnd(void)
{
    static uint64_t s = 0x9E3779B97F4A7C15ull;
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return (uint32_t)(s >> 16);
}

/* zeros, subnormals, the normal/subnormal edge, infs, NaNs (quiet, signalling, payloads),
   the fast paths' edges (2^24, 2^-126, 0.78), floats nearest multiples of pi/2, pi/4,
   integers, huge arguments, each with its neighbours */
static const uint32_t SPECIAL[] = {
    0x00000000u, 0x00000001u, 0x00000002u, 0x007FFFFFu, 0x00800000u, 0x00800001u,
    0x7F7FFFFFu, 0x7F800000u, 0x7F800001u, 0x7FA00000u, 0x7FC00000u, 0x7FC00001u,
    0x7FFFFFFFu, 0x4B800000u, 0x4B7FFFFFu, 0x4B800001u, 0x3F800000u, 0x3FB504F3u,
    0x3FB504F4u, 0x3FC90FDBu, 0x40490FDBu, 0x40C90FDBu, 0x42FE0000u, 0x43000000u,
    0x42FC0000u, 0xC2FC0000u, 0xC3160000u, 0xC3150000u, 0xC2FA0000u, 0x3F000000u,
    0x40000000u, 0x5AFEEEA7u, 0x4A7ACE62u, 0x47100000u, 0x00400000u, 0x33800000u,
    0x3F47AE14u, 0x3F490FDBu, 0x4E800000u,
};

static void special(int f)
{
    size_t i;
    int d;
    for (i = 0; i < sizeof SPECIAL / sizeof SPECIAL[0]; i++)
        for (d = -2; d <= 2; d++) {
            one(f, SPECIAL[i] + (uint32_t)d);
            one(f, (SPECIAL[i] + (uint32_t)d) ^ 0x80000000u);
        }
}

/* all 2^32 inputs of the functions named (all four when none is) */
static int exhaustive(int argc, char **argv)
{
    int f, i, want;
    for (f = 0; f < NF; f++) {
        clock_t t0 = clock();
        for (want = argc == 0, i = 0; i < argc; i++) want |= !strcmp(argv[i], FNS[f].name);
        if (!want) continue;
        uint32_t u = 0;
        g_bad = 0;
        g_libm[f] = 0;
        do one(f, u); while (++u != 0);
        printf("%-5s all 2^32: %llu mismatches, %llu libm fallbacks (%.3g%%), %.0f s CPU\n",
               FNS[f].name, (unsigned long long)g_bad, (unsigned long long)g_libm[f],
               100.0 * (double)g_libm[f] / 4294967296.0, (double)(clock() - t0) / CLOCKS_PER_SEC);
        g_test = FNS[f].name;
        CHECK(g_bad == 0);
    }
    return check_report();
}

int main(int argc, char **argv)
{
    int f;
    uint32_t i;
    if (argc > 1 && !strcmp(argv[1], "--exhaustive"))
        return exhaustive(argc - 2, argv + 2);
    for (f = 0; f < NF; f++) {
        g_test = FNS[f].name;
        g_bad = 0;
        special(f);
        CHECK(g_bad == 0);
        for (i = 0; i < (1u << 24); i++)          /* spread: every 256th pattern, offset */
            one(f, i * 256u + (i * 37u & 255u));
        CHECK(g_bad == 0);
        for (i = 0; i < (1u << 20); i++)
            one(f, rnd());
        CHECK(g_bad == 0);
    }
    return check_report();
}
