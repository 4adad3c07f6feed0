/* interp_ops.h - helpers the c column of numptx/instructions.py may call (the batch
   interpreter's row semantics, generated into interp_rows.h). C99, static inline, no state.
   Each helper computes exactly what the row's NumPy semantic computes (numptx/semantics.py;
   tests/test_interp_rows.py holds the two to the same bits, any NaN matching any NaN).

   Assumptions (checked by the tests): IEEE binary32/binary64 with no excess precision (SSE2 or
   AArch64), round-to-nearest-even as the current rounding mode (nothing here changes it), no
   contraction of a * b + c (build_ffi.py compiles with -ffp-contract=off), GCC/Clang's modular
   conversion of an out-of-range integer to a signed type and arithmetic >> being avoided where
   the language leaves them open (signed arithmetic goes through unsigned types).

   Sections: bits, ftz, error-free float64 tools, f32/f64 rows, f32 transcendentals, directed
   roundings, integers, conversions. */
#ifndef NXI_OPS_H
#define NXI_OPS_H
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- bits */
static inline uint32_t nx_bits32(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline uint64_t nx_bits64(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
static inline float nx_f32_of(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static inline double nx_f64_of(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }

/* PTX canonical NaNs (what min/max of two NaNs give) */
#define NX_NAN32 nx_f32_of(0x7FFFFFFFu)
#define NX_NAN64 nx_f64_of(0x7FFFFFFFFFFFFFFFull)

/* ---------------------------------------------------------------- .ftz */
/* a subnormal f32 flushed to sign-preserving zero (semantics.ftz32); NaN passes */
static inline float nx_ftz32(float x)
{
    return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x;
}

/* ---------------------------------------------------------------- error-free float64 tools */
/* s = RN(a + b), *e its exact error (semantics.two_sum) */
static inline double nx_two_sum(double a, double b, double *e)
{
    double s = a + b, bb = s - a;
    *e = (a - (s - bb)) + (b - bb);
    return s;
}

/* the exact s + e rounded to 53 bits to odd (semantics.round_to_odd64): an inexact s with an
   even last bit steps one ulp toward s + e (s != 0 there: a sum that rounds to 0 is exact), so
   its bits go up when e has s's sign (away from 0) and down otherwise */
static inline double nx_odd64(double s, double e)
{
    uint64_t u = nx_bits64(s);
    if (e != 0.0 && isfinite(s) && !(u & 1u))
        u += (!signbit(e) == !signbit(s)) ? 1u : (uint64_t)-1;
    return nx_f64_of(u);
}

/* ---------------------------------------------------------------- f32 / f64 rows */
/* fma.rn.f32 (semantics.fma_small): the product is exact in float64, the sum exact by TwoSum,
   rounded once through round-to-odd; inf/NaN operands: a * b + c in float64 */
static inline float nx_fma32(float a, float b, float c)
{
    double p = (double)a * (double)b, e, s;
    if (!(isfinite(a) && isfinite(b) && isfinite(c)))
        return (float)(p + (double)c);
    s = nx_two_sum(p, (double)c, &e);
    return (float)nx_odd64(s, e);
}

/* div.approx.f32 (instructions._div_approx): |b| > 2^126 (finite) gives a signed 0, or NaN
   when a is inf */
static inline float nx_div_approx32(float a, float b)
{
    if (isfinite(b) && fabsf(b) > 0x1p126f) {
        if (isinf(a)) return NX_NAN32;
        return (!signbit(a) != !signbit(b)) ? -0.0f : 0.0f;
    }
    return a / b;
}

/* PTX min/max (semantics.fmin/fmax): a NaN operand yields the other, two NaNs the canonical
   NaN, -0 < +0 */
#define NX_MINMAX(NAME, T, SEL, CANON)                                                  \
    static inline T NAME(T x, T y)                                                      \
    {                                                                                   \
        if (isnan(x)) return isnan(y) ? CANON : y;                                      \
        if (isnan(y)) return x;                                                         \
        return SEL ? y : x;                                                             \
    }
#define NX_LESS(x, y) ((x) < (y) || ((x) == (y) && signbit(x) && !signbit(y)))
NX_MINMAX(nx_min32, float, NX_LESS(y, x), NX_NAN32)
NX_MINMAX(nx_max32, float, NX_LESS(x, y), NX_NAN32)
NX_MINMAX(nx_min64, double, NX_LESS(y, x), NX_NAN64)
NX_MINMAX(nx_max64, double, NX_LESS(x, y), NX_NAN64)

/* cvt.sat.f32.f32: clamped to [0, 1]; NaN and -0 give +0 */
static inline float nx_sat32(float a)
{
    if (isnan(a) || a <= 0.0f) return 0.0f;
    return a > 1.0f ? 1.0f : a;
}

/* shf.l.wrap.b32: the high word of (b:a) << (c mod 32) */
static inline uint32_t nx_shf_l_wrap(uint32_t a, uint32_t b, uint32_t c)
{
    uint64_t w = ((uint64_t)b << 32) | a;
    return (uint32_t)((w << (c & 31u)) >> 32);
}

/* cvt.rna.tf32.f32 (instructions._tf32_rna): the bits rounded to 10 mantissa bits, ties away;
   a NaN keeps its bits with the quiet bit set */
static inline uint32_t nx_tf32_rna(float a)
{
    uint32_t u = nx_bits32(a);
    return isnan(a) ? (u | 0x00400000u) : ((u + 0x1000u) & 0xFFFFE000u);
}

/* ---------------------------------------------------------------- f32 transcendentals */
/* sin/cos.approx.f32: exactly (float)sin((double)a) and (float)cos((double)a) for every f32 a,
   without the libm call in the common case (Ziv's rounding test). A float64 approximation y
   of f(a) with relative error below 2^-42 (the reduction and polynomials below, each bounded
   in its comment) decides the f32 rounding unless y lies within NX_ZIV_K float64 ulps of an
   f32 midpoint (|y - t| < 2^-42 |t| is under 2^11 ulps of y; libm's own result is within 1
   ulp of t, 2 of y; so outside the band t, y and libm's value all lie on one side of the
   midpoint and round to the same float), or outside the f32 normal range, or the argument is
   one the fast path does not take (NaN, inf, 0, subnormal, |a| >= 2^24): then libm is called
   and its value rounded. A band of 2^13 ulps of the 2^29 between two floats falls back about
   once in 2^15 elements. native/tests/test_trig32.c checks both against libm on special
   classes and 2^25 spread and random patterns; `make -C native exhaustive` checks all 2^32
   inputs (run once per change of these helpers; glibc 2.36, x86-64: 0 mismatches for both,
   and of the 2.5e9 inputs the fast path takes, 19052 (sin) and 18664 (cos) fell back).
   ex2/lg2 stay on libm: helpers of the same kind measured slower than glibc 2.36's exp2 and
   log2 (table-driven, ~15-20 cycles), unlike its sin/cos (~30-60 cycles past |a| ~ 0.8). */
#define NX_ZIV_K 0x2000u
#if defined(__GNUC__) || defined(__clang__)
#define NX_COLD __attribute__((noinline, cold))
#else
#define NX_COLD
#endif

/* 1 when the float64 y does not decide its f32 rounding: within NX_ZIV_K ulps of an f32
   midpoint (the low 29 of 52 fraction bits near 2^28), or |y| outside [2^-126, 2^128) (an
   f32 subnormal or overflow: other midpoints; zero, inf, NaN too) */
static inline int nx_f32_undecided(double y)
{
    uint64_t u = nx_bits64(y);
    uint32_t low = (uint32_t)u & 0x1FFFFFFFu, be = (uint32_t)(u >> 52) & 0x7FFu;
    return (low - (0x10000000u - NX_ZIV_K)) < 2u * NX_ZIV_K || be - 897u > 1150u - 897u;
}

/* the fallbacks; NX_LIBM_HOOK(k) (k = 0 sin, 1 cos) lets a test count them */
#ifndef NX_LIBM_HOOK
#define NX_LIBM_HOOK(k) ((void)0)
#endif
static NX_COLD float nx_sin32_libm(float a) { NX_LIBM_HOOK(0); return (float)sin((double)a); }
static NX_COLD float nx_cos32_libm(float a) { NX_LIBM_HOOK(1); return (float)cos((double)a); }

/* a = k pi/2 + r, |r| <= pi/4 (+ an ulp), for 2^-126 <= |a| < 2^24: k = rint(a 2/pi) (the
   1.5 2^52 shift; its low bits are k mod 4, and |r| <= 0.786 despite the product's
   rounding), pi/2 = P1 + P2 + P3 with P1, P2 of 29 bits so k P1, k P2 are exact (|k| < 2^24)
   and a - k P1 is exact (both multiples of 2^-28, the difference below 1); the error is below
   2^-87 absolute (the roundings of a - k P1 - k P2 and k P3, pi/2 - P1 - P2 - P3 < 2^-114,
   times |k|) plus 2^-52 relative. Returns k mod 4; *undecided when |r| < 2^-40 with k != 0 (a within 2^-40 of a
   nonzero multiple of pi/2: the absolute error would not be 2^-47 relative). */
static inline uint32_t nx_trig_reduce(double x, double *r, int *undecided)
{
    const double shift = 0x1.8p52;
    double t = x * 0x1.45f306dc9c883p-1 + shift, k = t - shift;
    *r = ((x - k * 0x1.921fb54p+0) - k * 0x1.10b4611p-30) - k * 0x1.4c4c6628b80dcp-59;
    *undecided = k != 0.0 && fabs(*r) < 0x1p-40;
    return (uint32_t)nx_bits64(t) & 3u;
}

/* sin r and cos r for |r| <= 0.79: Taylor to r^13 (remainder r^15/15! < 2^-44 |sin r|) and
   to r^14 (r^16/16! < 2^-49 cos r); Estrin in z = r^2 (short dependency chains), a few 2^-53
   of rounding. With the reduction's 2^-47: below 2^-43 relative in all. */
static inline double nx_sin_poly(double r)
{
    double z = r * r, z2 = z * z;
    double p = (-0x1.5555555555555p-3 + 0x1.1111111111111p-7 * z)
               + z2 * ((-0x1.a01a01a01a01ap-13 + 0x1.71de3a556c734p-19 * z)
                       + z2 * ((-0x1.ae64567f544e4p-26 + 0x1.6124613a86d09p-33 * z)
                               + z2 * -0x1.ae7f3e733b81fp-41));
    return r + (r * z) * p;
}

static inline double nx_cos_poly(double r)
{
    double z = r * r, z2 = z * z;
    double p = (-0.5 + 0x1.5555555555555p-5 * z)
               + z2 * ((-0x1.6c16c16c16c17p-10 + 0x1.a01a01a01a01ap-16 * z)
                       + z2 * ((-0x1.27e4fb7789f5cp-22 + 0x1.1eed8eff8d898p-29 * z)
                               + z2 * -0x1.93974a8c07c9dp-37));
    return 1.0 + z * p;
}

/* quadrant q of sin (cos: q + 1): sin r, cos r, -sin r, -cos r */
static inline double nx_trig_quadrant(double r, uint32_t q)
{
    double s = nx_sin_poly(r), c = nx_cos_poly(r), y = (q & 1u) ? c : s;
    return (q & 2u) ? -y : y;
}

/* sin.approx.f32: (float)sin((double)a), exactly */
static inline float nx_sin32(float a)
{
    double x = (double)a, r, y;
    int undecided;
    uint32_t q;
    if (!(fabs(x) < 0x1p24 && fabs(x) >= 0x1p-126))
        return nx_sin32_libm(a);
    if (fabs(x) < 0.78) {                   /* k = 0: r = a, one polynomial */
        y = nx_sin_poly(x);
        undecided = 0;
    } else {
        q = nx_trig_reduce(x, &r, &undecided);
        y = nx_trig_quadrant(r, q);
    }
    if (undecided || nx_f32_undecided(y))
        return nx_sin32_libm(a);
    return (float)y;
}

/* cos.approx.f32: (float)cos((double)a), exactly */
static inline float nx_cos32(float a)
{
    double x = (double)a, r, y;
    int undecided;
    uint32_t q;
    if (!(fabs(x) < 0x1p24 && fabs(x) >= 0x1p-126))
        return nx_cos32_libm(a);
    if (fabs(x) < 0.78) {                   /* k = 0: r = a, one polynomial */
        y = nx_cos_poly(x);
        undecided = 0;
    } else {
        q = nx_trig_reduce(x, &r, &undecided);
        y = nx_trig_quadrant(r, q + 1u);
    }
    if (undecided || nx_f32_undecided(y))
        return nx_cos32_libm(a);
    return (float)y;
}

/* ---------------------------------------------------------------- directed roundings */
/* add/sub/mul/fma .rz/.rm/.rp.f32 (semantics.directed_f32): the exact p + c (p + c exact in
   float64 by TwoSum) rounded to odd at 53 bits, then one directed step from RN32 when RN32
   lies on the wrong side; an exact zero under .rm is -0 unless both addends are +0 */
#define NX_RZ 0
#define NX_RM 1
#define NX_RP 2
static inline float nx_dir32(double p, double c, int mode)
{
    double e, s, o, yd;
    float y;
    int step;
    if (!(isfinite(p) && isfinite(c)))
        return (float)(p + c);
    s = nx_two_sum(p, c, &e);
    o = nx_odd64(s, e);
    y = (float)o;
    yd = (double)y;
    if (mode == NX_RM) step = yd > o;
    else if (mode == NX_RP) step = yd < o;
    else step = fabs(yd) > fabs(o);
    if (step && !isnan(o))
        y = nextafterf(y, mode == NX_RM ? -INFINITY : mode == NX_RP ? INFINITY : 0.0f);
    if (mode == NX_RM && o == 0.0)
        y = (!signbit(p) && !signbit(c)) ? 0.0f : -0.0f;
    return y;
}

static inline float nx_add_dir32(float a, float b, int mode)
{
    return nx_dir32((double)a, (double)b, mode);
}

static inline float nx_sub_dir32(float a, float b, int mode)
{
    return nx_dir32((double)a, -(double)b, mode);
}

static inline float nx_mul_dir32(float a, float b, int mode)
{
    double p = (double)a * (double)b;        /* exact */
    return p == 0.0 ? (float)p : nx_dir32(p, 0.0, mode);
}

static inline float nx_fma_dir32(float a, float b, float c, int mode)
{
    return nx_dir32((double)a * (double)b, (double)c, mode);
}

/* ---------------------------------------------------------------- integers */
/* div (semantics.int_div): truncated; by 0 all bits set; MIN / -1 = MIN.
   rem (semantics.int_rem): sign of the dividend; by 0 the dividend; x rem -1 = 0. */
#define NX_IDIV(SFX, S, U, SMIN)                                                        \
    static inline S nx_div_##SFX(S a, S b)                                              \
    {                                                                                   \
        if (b == 0) return -1;                                                          \
        if (a == SMIN && b == -1) return a;                                             \
        return a / b;                                                                   \
    }                                                                                   \
    static inline S nx_rem_##SFX(S a, S b)                                              \
    {                                                                                   \
        if (b == 0) return a;                                                           \
        if (b == -1) return 0;                                                          \
        return a % b;                                                                   \
    }
NX_IDIV(s32, int32_t, uint32_t, INT32_MIN)
NX_IDIV(s64, int64_t, uint64_t, INT64_MIN)
#define NX_UDIV(SFX, U)                                                                 \
    static inline U nx_div_##SFX(U a, U b) { return b == 0 ? (U)~(U)0 : a / b; }        \
    static inline U nx_rem_##SFX(U a, U b) { return b == 0 ? a : a % b; }
NX_UDIV(u32, uint32_t)
NX_UDIV(u64, uint64_t)

/* arithmetic shift right, the amount clamped to width - 1 (semantics.shr), without relying on
   >> of a negative value */
static inline int32_t nx_sar32(int32_t a, uint32_t n)
{
    uint32_t s = n > 31u ? 31u : n, u = (uint32_t)a;
    return (int32_t)(a < 0 ? ~(~u >> s) : u >> s);
}

static inline int64_t nx_sar64(int64_t a, uint32_t n)
{
    uint32_t s = n > 63u ? 63u : n;
    uint64_t u = (uint64_t)a;
    return (int64_t)(a < 0 ? ~(~u >> s) : u >> s);
}

/* the high 32 bits of the full product of two s32 (semantics.mul_hi) */
static inline int32_t nx_mul_hi_s32(int32_t a, int32_t b)
{
    return (int32_t)nx_sar64((int64_t)a * (int64_t)b, 32u);
}

static inline uint32_t nx_popc64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

static inline uint32_t nx_clz64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return x ? (uint32_t)__builtin_clzll(x) : 64u;
#else
    uint32_t n = 0;
    if (!x) return 64u;
    while (!(x & 0x8000000000000000ull)) { x <<= 1; n++; }
    return n;
#endif
}

static inline uint64_t nx_brev64(uint64_t x)
{
    x = ((x >> 1) & 0x5555555555555555ull) | ((x & 0x5555555555555555ull) << 1);
    x = ((x >> 2) & 0x3333333333333333ull) | ((x & 0x3333333333333333ull) << 2);
    x = ((x >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((x & 0x0F0F0F0F0F0F0F0Full) << 4);
    x = ((x >> 8) & 0x00FF00FF00FF00FFull) | ((x & 0x00FF00FF00FF00FFull) << 8);
    x = ((x >> 16) & 0x0000FFFF0000FFFFull) | ((x & 0x0000FFFF0000FFFFull) << 16);
    return (x >> 32) | (x << 32);
}

#define nx_popc32(x) nx_popc64((uint32_t)(x))
#define nx_clz32(x) (nx_clz64((uint32_t)(x)) - 32u)
#define nx_brev32(x) ((uint32_t)(nx_brev64((uint32_t)(x)) >> 32))

/* ---------------------------------------------------------------- conversions */
/* an integral float64 (or NaN) saturated into an integer type (semantics.float_to_int) */
static inline int32_t nx_sat_s32(double r, int32_t nan)
{
    if (isnan(r)) return nan;
    if (r >= 2147483648.0) return INT32_MAX;
    return r < -2147483648.0 ? INT32_MIN : (int32_t)r;
}

static inline uint32_t nx_sat_u32(double r, uint32_t nan)
{
    if (isnan(r)) return nan;
    if (r >= 4294967296.0) return UINT32_MAX;
    return r < 0.0 ? 0u : (uint32_t)r;
}

static inline int64_t nx_sat_s64(double r)
{
    if (isnan(r) || r < -9223372036854775808.0) return INT64_MIN;
    return r >= 9223372036854775808.0 ? INT64_MAX : (int64_t)r;
}

static inline uint64_t nx_sat_u64(double r)
{
    if (isnan(r)) return 0x8000000000000000ull;
    if (r >= 18446744073709551616.0) return UINT64_MAX;
    return r < 0.0 ? 0u : (uint64_t)r;
}

/* 64-bit integer -> float (semantics.int_to_float): the two 32-bit halves are exact in
   float64, TwoSum makes their sum exact, round-to-odd then one rounding to f32 */
static inline double nx_s64_split(int64_t x, double *e)
{
    double hi = (double)nx_sar64(x, 32u), lo = (double)((uint64_t)x & 0xFFFFFFFFull);
    return nx_two_sum(hi * 4294967296.0, lo, e);
}

static inline double nx_u64_split(uint64_t x, double *e)
{
    double hi = (double)(x >> 32), lo = (double)(x & 0xFFFFFFFFull);
    return nx_two_sum(hi * 4294967296.0, lo, e);
}

static inline float nx_s64_f32(int64_t x)
{
    double e, s = nx_s64_split(x, &e);
    return (float)nx_odd64(s, e);
}

static inline float nx_u64_f32(uint64_t x)
{
    double e, s = nx_u64_split(x, &e);
    return (float)nx_odd64(s, e);
}

static inline double nx_s64_f64(int64_t x) { double e; return nx_s64_split(x, &e); }
static inline double nx_u64_f64(uint64_t x) { double e; return nx_u64_split(x, &e); }

/* 8-bit values in 32-bit registers (numptx/instructions_mmptx.py) */
static inline int32_t nx_sx8(uint32_t x) { return (int32_t)((x & 0xFFu) ^ 0x80u) - 0x80; }

static inline int64_t nx_clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* cvt.<rni|rzi>.<u8|s8>.f32: an integral float64 clamped to [lo, hi]; NaN -> 0 */
static inline int32_t nx_sat8(double r, double lo, double hi)
{
    if (isnan(r)) return 0;
    return (int32_t)(r < lo ? lo : r > hi ? hi : r);
}

#endif
