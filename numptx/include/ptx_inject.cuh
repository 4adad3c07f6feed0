/*
 * ptx_inject.cuh -- numptx injection sites for CUDA C++ kernels (NVRTC and nvcc, C++11 or later).
 *
 * A site is a named hole in a kernel. numptx later replaces the hole, in the compiled PTX, with a
 * PTX stub written against stable register names (%v_<variable name>):
 *
 *     #include "ptx_inject.cuh"
 *
 *     extern "C" __global__ void kernel(const float *a, float *out, int n) {
 *         float acc = 0.0f;
 *         for (int j = 0; j < n; ++j) {
 *             float z;
 *             PTX_INJECT("combine", PTX_IN(F32, x, a[j]), PTX_MOD(F32, acc), PTX_OUT(F32, z));
 *             acc += z;
 *         }
 *         out[0] = acc;
 *     }
 *
 * Operands (at most PTX_INJECT_MAX_OPERANDS = 32 per site, in declaration order):
 *     PTX_IN(TYPE, name)         read the variable `name` into register %v_name
 *     PTX_IN(TYPE, name, expr)   read any expression into register %v_name
 *     PTX_MOD(TYPE, name[, lv])  read and write back the lvalue (default: `name`)
 *     PTX_OUT(TYPE, name[, lv])  write the register back into the lvalue (default: `name`)
 * TYPE is one of F16 F16X2 BF16 BF16X2 F32 F64 S32 U32 S64 U64 B16 B32 B64, upper or lower case,
 * or a type registered with numptx.register_type (numptx.cuda_to_ptx defines those for you; with
 * nvcc, prepend the output of numptx.annotate.user_type_defines()). Value types (f32, f64, s32,
 * u32, s64, u64) convert with a C++ cast; bit types (f16, f16x2, bf16, bf16x2, b16, b32, b64)
 * copy the object bytes, so `__half`, `__half2`, `unsigned short` ... fit when the size matches.
 * An expression with a top-level comma (a template argument list) needs parentheses around it.
 * Variable names must not be object-like macros. A site may have no operands: PTX_INJECT("s").
 *
 * Each site compiles to one `asm volatile` statement (the optimizer never drops it), e.g.
 *     {
 *     .reg .f32 %v_x;  .reg .f32 %v_acc;  .reg .f32 %v_z;       (one per line)
 *     mov.f32 %v_acc, %f3;  mov.f32 %v_x, %f2;                  (mod, then in variables)
 *     // PTX_INJECT_BEGIN combine
 *     // PTX_INJECT_VAR in f32 f32 v_x x                        (kind dtype regtype reg name)
 *     // PTX_INJECT_VAR mod f32 f32 v_acc acc
 *     // PTX_INJECT_VAR out f32 f32 v_z z
 *     // PTX_INJECT_END
 *     mov.f32 %f3, %v_acc;  mov.f32 %f1, %v_z;                  (mod and out variables)
 *     }
 * numptx/annotate.py (emit_site) generates the same text for the comment form; keep both in sync.
 *
 * This header defines only PTX_INJECT*, PTX_IN, PTX_MOD, PTX_OUT and namespace ptx_inject_detail.
 */
#ifndef NUMPTX_PTX_INJECT_CUH
#define NUMPTX_PTX_INJECT_CUH

/* ---- helpers for bit-copy types (shared with the prelude numptx.annotate.process_cuda emits) -- */
#ifndef PTX_INJECT_DETAIL_HELPERS
#define PTX_INJECT_DETAIL_HELPERS
namespace ptx_inject_detail {
template <class C, class T>
__device__ __forceinline__ C bits(const T &v) {
    static_assert(sizeof(T) == sizeof(C), "numptx: value size differs from its PTX_INJECT type size");
    T t = v;
    C c;
    memcpy(&c, &t, sizeof(C));
    return c;
}
template <class T, class C>
__device__ __forceinline__ void store(T &dst, const C &c) {
    static_assert(sizeof(T) == sizeof(C), "numptx: lvalue size differs from its PTX_INJECT type size");
    T t;
    memcpy(&t, &c, sizeof(C));
    dst = t;
}
} /* namespace ptx_inject_detail */
#endif

/* ---- built-in types ----------------------------------------------------------------------------
 * PTX_INJECT_TYPE_<name> is (dtype name, register type, mov suffix, asm constraint, carrier C++
 * type, mode, (cast prefix)); mode is ptx_inject_value (C++ cast), ptx_inject_bits (byte copy) or
 * ptx_inject_cast (lvalue view through the cast prefix, user types only).
 * ORDER DTYPES: these rows must match BUILTIN_DTYPES in numptx/dtypes.py, in the same order
 * (tests/test_annotate.py diffs them). */
#define PTX_INJECT_TYPE_f16 ("f16", "b16", "b16", "h", unsigned short, ptx_inject_bits, ())
#define PTX_INJECT_TYPE_f16x2 ("f16x2", "b32", "b32", "r", unsigned int, ptx_inject_bits, ())
#define PTX_INJECT_TYPE_bf16 ("bf16", "b16", "b16", "h", unsigned short, ptx_inject_bits, ())
#define PTX_INJECT_TYPE_bf16x2 ("bf16x2", "b32", "b32", "r", unsigned int, ptx_inject_bits, ())
#define PTX_INJECT_TYPE_f32 ("f32", "f32", "f32", "f", float, ptx_inject_value, ())
#define PTX_INJECT_TYPE_f64 ("f64", "f64", "f64", "d", double, ptx_inject_value, ())
#define PTX_INJECT_TYPE_s32 ("s32", "s32", "s32", "r", int, ptx_inject_value, ())
#define PTX_INJECT_TYPE_u32 ("u32", "u32", "u32", "r", unsigned int, ptx_inject_value, ())
#define PTX_INJECT_TYPE_s64 ("s64", "s64", "s64", "l", long long, ptx_inject_value, ())
#define PTX_INJECT_TYPE_u64 ("u64", "u64", "u64", "l", unsigned long long, ptx_inject_value, ())
#define PTX_INJECT_TYPE_b16 ("b16", "b16", "b16", "h", unsigned short, ptx_inject_bits, ())
#define PTX_INJECT_TYPE_b32 ("b32", "b32", "b32", "r", unsigned int, ptx_inject_bits, ())
#define PTX_INJECT_TYPE_b64 ("b64", "b64", "b64", "l", unsigned long long, ptx_inject_bits, ())
/* END DTYPES */
#define PTX_INJECT_TYPE_F16 PTX_INJECT_TYPE_f16
#define PTX_INJECT_TYPE_F16X2 PTX_INJECT_TYPE_f16x2
#define PTX_INJECT_TYPE_BF16 PTX_INJECT_TYPE_bf16
#define PTX_INJECT_TYPE_BF16X2 PTX_INJECT_TYPE_bf16x2
#define PTX_INJECT_TYPE_F32 PTX_INJECT_TYPE_f32
#define PTX_INJECT_TYPE_F64 PTX_INJECT_TYPE_f64
#define PTX_INJECT_TYPE_S32 PTX_INJECT_TYPE_s32
#define PTX_INJECT_TYPE_U32 PTX_INJECT_TYPE_u32
#define PTX_INJECT_TYPE_S64 PTX_INJECT_TYPE_s64
#define PTX_INJECT_TYPE_U64 PTX_INJECT_TYPE_u64
#define PTX_INJECT_TYPE_B16 PTX_INJECT_TYPE_b16
#define PTX_INJECT_TYPE_B32 PTX_INJECT_TYPE_b32
#define PTX_INJECT_TYPE_B64 PTX_INJECT_TYPE_b64

/* ---- preprocessor utilities ------------------------------------------------------------------ */
#define PTX_INJECT_X_TOP(...) __VA_ARGS__
#define PTX_INJECT_X_OPND(...) __VA_ARGS__
#define PTX_INJECT_X_NOPS(...) __VA_ARGS__
#define PTX_INJECT_X_APPLY(...) __VA_ARGS__
#define PTX_INJECT_X_APPLY1(...) __VA_ARGS__
#define PTX_INJECT_UNPAREN(...) __VA_ARGS__
/* separate concatenation macros per use, so no expansion ever nests one inside itself */
#define PTX_INJECT_CAT_FE(a, b) PTX_INJECT_CAT_FE_(a, b)
#define PTX_INJECT_CAT_FE_(a, b) a##b
#define PTX_INJECT_CAT_TY(a, b) PTX_INJECT_CAT_TY_(a, b)
#define PTX_INJECT_CAT_TY_(a, b) a##b
#define PTX_INJECT_CAT_IX(a, b) PTX_INJECT_CAT_IX_(a, b)
#define PTX_INJECT_CAT_IX_(a, b) a##b
#define PTX_INJECT_SEP_NONE()
#define PTX_INJECT_SEP_COMMA() ,

/* ---- operands: PTX_IN(T, n) -> (in, T, n, n); PTX_IN(T, n, e) -> (in, T, n, e) --------------- */
#define PTX_INJECT_OPND_SEL(_1, _2, _3, m, ...) m
#define PTX_INJECT_OPND2(k, T, n) (k, T, n, n)
#define PTX_INJECT_OPND3(k, T, n, e) (k, T, n, e)
#define PTX_INJECT_OPND(k, ...) \
    PTX_INJECT_X_OPND(PTX_INJECT_OPND_SEL(__VA_ARGS__, PTX_INJECT_OPND3, PTX_INJECT_OPND2, ~)(k, __VA_ARGS__))
#define PTX_IN(...) PTX_INJECT_OPND(in, __VA_ARGS__)
#define PTX_MOD(...) PTX_INJECT_OPND(mod, __VA_ARGS__)
#define PTX_OUT(...) PTX_INJECT_OPND(out, __VA_ARGS__)

/* ---- for-each with index ----------------------------------------------------------------------
 * PTX_INJECT_FE_<n>(m, s, i, a_i, ..., ~) expands PTX_INJECT_APPLY(m, i, a_i) for n operands,
 * separated by s(), with literal indices i, i+1, ... (they are stringized into "%i").
 * To allow more than 32 operands: add PTX_INJECT_INC_<k> and PTX_INJECT_FE_<k> rows following the
 * pattern, extend the number list of PTX_INJECT_NOPS and raise PTX_INJECT_MAX_OPERANDS. */
#define PTX_INJECT_MAX_OPERANDS 32
#define PTX_INJECT_NOPS(...) PTX_INJECT_X_NOPS(PTX_INJECT_NOPS_(__VA_ARGS__, \
    32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, \
    16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, ~))
#define PTX_INJECT_NOPS_(site, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, \
    _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, n, ...) n

#define PTX_INJECT_INC(i) PTX_INJECT_CAT_IX(PTX_INJECT_INC_, i)
#define PTX_INJECT_INC_0 1
#define PTX_INJECT_INC_1 2
#define PTX_INJECT_INC_2 3
#define PTX_INJECT_INC_3 4
#define PTX_INJECT_INC_4 5
#define PTX_INJECT_INC_5 6
#define PTX_INJECT_INC_6 7
#define PTX_INJECT_INC_7 8
#define PTX_INJECT_INC_8 9
#define PTX_INJECT_INC_9 10
#define PTX_INJECT_INC_10 11
#define PTX_INJECT_INC_11 12
#define PTX_INJECT_INC_12 13
#define PTX_INJECT_INC_13 14
#define PTX_INJECT_INC_14 15
#define PTX_INJECT_INC_15 16
#define PTX_INJECT_INC_16 17
#define PTX_INJECT_INC_17 18
#define PTX_INJECT_INC_18 19
#define PTX_INJECT_INC_19 20
#define PTX_INJECT_INC_20 21
#define PTX_INJECT_INC_21 22
#define PTX_INJECT_INC_22 23
#define PTX_INJECT_INC_23 24
#define PTX_INJECT_INC_24 25
#define PTX_INJECT_INC_25 26
#define PTX_INJECT_INC_26 27
#define PTX_INJECT_INC_27 28
#define PTX_INJECT_INC_28 29
#define PTX_INJECT_INC_29 30
#define PTX_INJECT_INC_30 31
#define PTX_INJECT_INC_31 32
#define PTX_INJECT_INC_32 33
#define PTX_INJECT_INC_33 34
#define PTX_INJECT_INC_34 35
#define PTX_INJECT_INC_35 36
#define PTX_INJECT_INC_36 37
#define PTX_INJECT_INC_37 38
#define PTX_INJECT_INC_38 39
#define PTX_INJECT_INC_39 40
#define PTX_INJECT_INC_40 41
#define PTX_INJECT_INC_41 42
#define PTX_INJECT_INC_42 43
#define PTX_INJECT_INC_43 44
#define PTX_INJECT_INC_44 45
#define PTX_INJECT_INC_45 46
#define PTX_INJECT_INC_46 47
#define PTX_INJECT_INC_47 48
#define PTX_INJECT_INC_48 49
#define PTX_INJECT_INC_49 50
#define PTX_INJECT_INC_50 51
#define PTX_INJECT_INC_51 52
#define PTX_INJECT_INC_52 53
#define PTX_INJECT_INC_53 54
#define PTX_INJECT_INC_54 55
#define PTX_INJECT_INC_55 56
#define PTX_INJECT_INC_56 57
#define PTX_INJECT_INC_57 58
#define PTX_INJECT_INC_58 59
#define PTX_INJECT_INC_59 60
#define PTX_INJECT_INC_60 61
#define PTX_INJECT_INC_61 62
#define PTX_INJECT_INC_62 63
#define PTX_INJECT_INC_63 64

#define PTX_INJECT_FE_0(m, s, i, ...)
#define PTX_INJECT_FE_1(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a)
#define PTX_INJECT_FE_2(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_1(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_3(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_2(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_4(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_3(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_5(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_4(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_6(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_5(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_7(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_6(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_8(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_7(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_9(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_8(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_10(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_9(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_11(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_10(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_12(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_11(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_13(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_12(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_14(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_13(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_15(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_14(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_16(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_15(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_17(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_16(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_18(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_17(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_19(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_18(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_20(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_19(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_21(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_20(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_22(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_21(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_23(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_22(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_24(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_23(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_25(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_24(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_26(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_25(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_27(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_26(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_28(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_27(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_29(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_28(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_30(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_29(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_31(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_30(m, s, PTX_INJECT_INC(i), __VA_ARGS__)
#define PTX_INJECT_FE_32(m, s, i, a, ...) PTX_INJECT_APPLY(m, i, a) s() PTX_INJECT_FE_31(m, s, PTX_INJECT_INC(i), __VA_ARGS__)

/* APPLY(m, i, (k, T, n, e)) -> m(i, k, n, e, dtype, reg, mov, constraint, ctype, mode, (cast)).
 * The argument lists are built by ARGS1/ARGS2 before APPLY1/APPLY2 see them (each level has its
 * own expander macro, since a macro does not expand inside its own expansion). */
#define PTX_INJECT_APPLY(m, i, t) PTX_INJECT_X_APPLY(PTX_INJECT_APPLY1 PTX_INJECT_ARGS1(m, i, t))
#define PTX_INJECT_ARGS1(m, i, t) (m, i, PTX_INJECT_UNPAREN t)
#define PTX_INJECT_APPLY1(m, i, k, T, n, e) \
    PTX_INJECT_X_APPLY1(PTX_INJECT_APPLY2 PTX_INJECT_ARGS2(m, i, k, n, e, PTX_INJECT_CAT_TY(PTX_INJECT_TYPE_, T)))
#define PTX_INJECT_ARGS2(m, i, k, n, e, tt) (m, i, k, n, e, PTX_INJECT_UNPAREN tt)
#define PTX_INJECT_APPLY2(m, i, k, n, e, dt, reg, mov, c, ct, mode, cast) \
    m(i, k, n, e, dt, reg, mov, c, ct, mode, cast)

/* ---- per-kind pieces --------------------------------------------------------------------------- */
#define PTX_INJECT_KIND_in "in"
#define PTX_INJECT_KIND_mod "mod"
#define PTX_INJECT_KIND_out "out"

/* C++ side: carrier temporaries __nx_t<i>, loaded before the asm and stored after it */
#define PTX_INJECT_LOAD_ptx_inject_value(e, ct, cast) (ct)(e)
#define PTX_INJECT_LOAD_ptx_inject_bits(e, ct, cast) ::ptx_inject_detail::bits<ct>(e)
#define PTX_INJECT_LOAD_ptx_inject_cast(e, ct, cast) (PTX_INJECT_UNPAREN cast(e))
#define PTX_INJECT_STORE_ptx_inject_value(e, cast, t) (e) = t;
#define PTX_INJECT_STORE_ptx_inject_bits(e, cast, t) ::ptx_inject_detail::store(e, t);
#define PTX_INJECT_STORE_ptx_inject_cast(e, cast, t) (PTX_INJECT_UNPAREN cast(e)) = t;

#define PTX_INJECT_DECL_in(i, e, ct, mode, cast) ct __nx_t##i = PTX_INJECT_LOAD_##mode(e, ct, cast);
#define PTX_INJECT_DECL_mod(i, e, ct, mode, cast) ct __nx_t##i = PTX_INJECT_LOAD_##mode(e, ct, cast);
#define PTX_INJECT_DECL_out(i, e, ct, mode, cast) ct __nx_t##i;
#define PTX_INJECT_WB_in(i, e, mode, cast)
#define PTX_INJECT_WB_mod(i, e, mode, cast) PTX_INJECT_STORE_##mode(e, cast, __nx_t##i)
#define PTX_INJECT_WB_out(i, e, mode, cast) PTX_INJECT_STORE_##mode(e, cast, __nx_t##i)

/* asm side. Operands of n variables: outputs %0 .. %n-1 (variable i: its output, read-write for
 * a mod variable, an unused write-only slot for an in variable), inputs %n .. %2n-1 (variable i:
 * an in variable's value, else a dummy immediate). In variables are plain inputs, so the
 * compiler passes the value's own register rather than a copy the asm might clobber. Out and
 * mod outputs are early-clobber ("&"): never in an input's register, so binding can write
 * them while the stub still reads its inputs (a loop's "x = site(x)" included). The mod copies come first
 * (MOVMOD, indices from 0), then the in copies (MOVIN, indices from n). */
#define PTX_INJECT_MOVIN_in(i, n, mov) "mov." mov " %%v_" #n ", %" #i ";\n\t"
#define PTX_INJECT_MOVIN_mod(i, n, mov)
#define PTX_INJECT_MOVIN_out(i, n, mov)
#define PTX_INJECT_MOVMOD_in(i, n, mov)
#define PTX_INJECT_MOVMOD_mod(i, n, mov) "mov." mov " %%v_" #n ", %" #i ";\n\t"
#define PTX_INJECT_MOVMOD_out(i, n, mov)
#define PTX_INJECT_MOVOUT_in(i, n, mov)
#define PTX_INJECT_MOVOUT_mod(i, n, mov) "mov." mov " %" #i ", %%v_" #n ";\n\t"
#define PTX_INJECT_MOVOUT_out(i, n, mov) "mov." mov " %" #i ", %%v_" #n ";\n\t"

/* the functions applied to each operand */
#define PTX_INJECT_M_DECL(i, k, n, e, dt, reg, mov, c, ct, mode, cast) PTX_INJECT_DECL_##k(i, e, ct, mode, cast)
#define PTX_INJECT_M_REG(i, k, n, e, dt, reg, mov, c, ct, mode, cast) ".reg ." reg " %%v_" #n ";\n\t"
#define PTX_INJECT_M_MOVIN(i, k, n, e, dt, reg, mov, c, ct, mode, cast) PTX_INJECT_MOVIN_##k(i, n, mov)
#define PTX_INJECT_M_MOVMOD(i, k, n, e, dt, reg, mov, c, ct, mode, cast) PTX_INJECT_MOVMOD_##k(i, n, mov)
#define PTX_INJECT_M_VAR(i, k, n, e, dt, reg, mov, c, ct, mode, cast) \
    "// PTX_INJECT_VAR " PTX_INJECT_KIND_##k " " dt " " reg " v_" #n " " #n "\n\t"
#define PTX_INJECT_M_MOVOUT(i, k, n, e, dt, reg, mov, c, ct, mode, cast) PTX_INJECT_MOVOUT_##k(i, n, mov)
#define PTX_INJECT_M_OUTS(i, k, n, e, dt, reg, mov, c, ct, mode, cast) PTX_INJECT_OUTS_##k(i, c)
#define PTX_INJECT_M_INS(i, k, n, e, dt, reg, mov, c, ct, mode, cast) PTX_INJECT_INS_##k(i, c)
#define PTX_INJECT_OUTS_in(i, c) "=" c(__nx_t##i)
#define PTX_INJECT_OUTS_mod(i, c) "+&" c(__nx_t##i)
#define PTX_INJECT_OUTS_out(i, c) "=&" c(__nx_t##i)
#define PTX_INJECT_INS_in(i, c) c(__nx_t##i)
#define PTX_INJECT_INS_mod(i, c) "n"(0)
#define PTX_INJECT_INS_out(i, c) "n"(0)
#define PTX_INJECT_M_WB(i, k, n, e, dt, reg, mov, c, ct, mode, cast) PTX_INJECT_WB_##k(i, e, mode, cast)

/* ---- the site ---------------------------------------------------------------------------------- */
#define PTX_INJECT_SITE_(fe, nops, site, ...)                                             \
    do {                                                                                  \
        fe(PTX_INJECT_M_DECL, PTX_INJECT_SEP_NONE, 0, __VA_ARGS__)                        \
        asm volatile("{\n\t"                                                              \
                     fe(PTX_INJECT_M_REG, PTX_INJECT_SEP_NONE, 0, __VA_ARGS__)            \
                     fe(PTX_INJECT_M_MOVMOD, PTX_INJECT_SEP_NONE, 0, __VA_ARGS__)         \
                     fe(PTX_INJECT_M_MOVIN, PTX_INJECT_SEP_NONE, nops, __VA_ARGS__)       \
                     "// PTX_INJECT_BEGIN " site "\n\t"                                   \
                     fe(PTX_INJECT_M_VAR, PTX_INJECT_SEP_NONE, 0, __VA_ARGS__)            \
                     "// PTX_INJECT_END\n\t"                                              \
                     fe(PTX_INJECT_M_MOVOUT, PTX_INJECT_SEP_NONE, 0, __VA_ARGS__)         \
                     "}"                                                                  \
                     : fe(PTX_INJECT_M_OUTS, PTX_INJECT_SEP_COMMA, 0, __VA_ARGS__)        \
                     : fe(PTX_INJECT_M_INS, PTX_INJECT_SEP_COMMA, 0, __VA_ARGS__));       \
        fe(PTX_INJECT_M_WB, PTX_INJECT_SEP_NONE, 0, __VA_ARGS__)                          \
    } while (0)

/* PTX_INJECT("site name", operands...): one statement; the site name is a string literal
 * holding an identifier. */
#define PTX_INJECT(...) \
    PTX_INJECT_X_TOP(PTX_INJECT_SITE_(PTX_INJECT_CAT_FE(PTX_INJECT_FE_, PTX_INJECT_NOPS(__VA_ARGS__)), \
                                      PTX_INJECT_NOPS(__VA_ARGS__), __VA_ARGS__, ~))

#endif /* NUMPTX_PTX_INJECT_CUH */
