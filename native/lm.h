/* lm.h - Levenberg–Marquardt fitting of the float constants of Stack PTX programs, on the batch
   interpreter (interp.h): every round of a whole fit in C, no Python between rounds.
   C99, no allocation (the caller passes the workspace), no global state, re-entrant: threads may
   fit disjoint programs at once, each with its own workspace.

   USAGE
     #define NXI_IMPLEMENTATION     (in exactly one .c file: interp.c; lm's implementation joins
     #define NXLM_IMPLEMENTATION     the interpreter's translation unit, whose tape loading and
     #include "interp.h"            block execution it reuses)
     #include "lm.h"

   THE FIT (numptx/search/least_squares.py: the same semantics as its reference `_fit_numpy`)
     A program's parameters theta[0..K) are its marked float constants: each CONST record of its
     tape listed in marks (word offset of the record in the tape, parameter index) holds
     parameter j, written in the record's own type (f32 or f64). free[j]: whether j moves;
     wide[j]: j is an f64 constant (its values are rounded to f32 when not; each record marked
     with j is a CONST of that type, else NXI_ERR_ARGUMENT).
     Each of `steps` rounds: the trial point is typed (each value rounded to its own type); the
     forward-difference step of free j is h_j = typed(t_j + sqrt(eps) max(|t_j|, 1e-3)) - t_j;
     the program runs at the trial point, and, when the trial is taken and another round
     follows, once per free parameter perturbed (the Jacobian at the new best point: a rejected
     trial's is never read), as lanes of ONE loaded tape (the parameters' constant slots filled
     per lane, the input rows tiled); the loss
     is the float64 sum of squares of a + b f - y (a, b: the closed-form best when `scaling`,
     b >= 0 when `positive`, a flat f +inf when `flat` by var_f <= flat_rel * ms(f) (about 0); else
     a = 0, b = 1). A loss below the best is taken (lambda /= 3), else lambda *= 4; then the
     damped Gauss–Newton step from the best point: J the forward differences (non-finite entries
     0) times b, with a and b joining as columns 1 and f under scaling; A = H + lambda
     (diag(H) + 1e-12) I; delta solves A delta = -g by LU with partial pivoting. A solve that
     fails (a zero or non-finite pivot) gives a zero step: the next trial repeats the best point,
     is not taken, and lambda grows x4, so the round after is more damped. Steps are clipped to
     +-1e30; only free parameters move.

   API
     nxlm_workspace_size(max_slots, max_records, max_params, max_free, n_inputs, n_rows, block)
       bytes of workspace nxlm_fit needs (0 when too large).
     nxlm_fit(data, opt, tapes, offsets, n_programs, param_off, theta, free, wide, mark_off,
              mark_word, mark_param, sse, runs, ws, ws_size, &fail)
       program p: tape tapes[offsets[p] .. offsets[p + 1]), parameters theta[param_off[p] ..
       param_off[p + 1]) (overwritten by the best point found), free and wide alike, marks
       mark_word/mark_param[mark_off[p] .. mark_off[p + 1]). sse[p]: the best loss (+inf when no
       trial was finite). runs[p] (runs may be NULL): the program's runs over the rows made (a
       round runs the trial; its k perturbed lanes run only when the trial is taken and a step
       follows, since a rejected trial's Jacobian is never read). Returns NXI_OK, or an NXI_ERR_* with fail filled (program, record,
       row); programs before fail.program are complete. Nothing is read or written out of
       bounds whatever the tapes and marks hold (data's type sizes must be at most 8 bytes, 4
       for f32, 8 for f64, or 0: else NXI_ERR_ARGUMENT). */
#ifndef NXLM_H
#define NXLM_H
#include <stddef.h>
#include <stdint.h>
#include "interp.h"

#define NXLM_MAX_OUTPUTS 64u

typedef struct nxlm_data {
    const uint16_t *row_op; uint32_t n_rows_table;
    const uint8_t *op_types; const uint8_t *type_size; uint32_t n_types;
    const nxi_column *in; uint32_t n_inputs;  /* the data: n_rows elements each, or a scalar */
    const uint32_t *out_types; uint32_t n_outputs;   /* the tapes' outputs (at most
                                                        NXLM_MAX_OUTPUTS); f is output 0 */
    const void *unwritten;    /* f where a tape leaves output 0 unwritten (its type; NULL: 0) */
    const double *y; uint64_t n_rows;
    uint32_t block;           /* rows x lanes per interpreter block, 1..NXI_MAX_BLOCK */
    uint32_t f32_type, f64_type;
} nxlm_data;

typedef struct nxlm_options {
    uint32_t steps, scaling, positive, flat;
    double flat_rel, lambda0;
    double root_eps32, root_eps64;   /* the steps' sqrt(eps) of f32 and f64 constants */
} nxlm_options;

size_t nxlm_workspace_size(uint32_t max_slots, uint32_t max_records, uint32_t max_params,
                           uint32_t max_free, uint32_t n_inputs, uint64_t n_rows, uint32_t block);
int nxlm_fit(const nxlm_data *d, const nxlm_options *opt, const uint32_t *tapes,
             const uint64_t *offsets, uint32_t n_programs, const uint32_t *param_off,
             double *theta, const uint8_t *free_, const uint8_t *wide, const uint32_t *mark_off,
             const uint32_t *mark_word, const uint32_t *mark_param, double *sse, uint64_t *runs,
             void *ws, size_t ws_size, nxi_fail *fail);
#endif

#ifdef NXLM_IMPLEMENTATION
#ifndef NXLM_IMPLEMENTATION_DONE
#define NXLM_IMPLEMENTATION_DONE
#ifndef NXI_IMPLEMENTATION_DONE
#error "lm.h's implementation needs interp.h's in the same translation unit"
#endif
#include <math.h>

#define NXLM__MAX_PARAMS (1u << 16)
#define NXLM__ROWS_MAX ((uint64_t)1 << 40)

/* value v rounded to f32 as NumPy's astype does (out of range: +-inf), back to double */
static double nxlm__f32(double v)
{
    if (v != v) return v;
    if (fabs(v) >= 340282356779733661637539395458142568448.0)     /* 2**128 - 2**103 */
        return v > 0 ? HUGE_VAL : -HUGE_VAL;
    return (double)(float)v;
}

typedef struct nxlm__ws {
    char *interp; size_t interp_size;
    nxi_column *cols;          /* the tiled columns (scalars: the caller's) */
    char *tiled;               /* n_inputs x block x 8 */
    char *scratch;             /* block x 8: output 0 of a pass */
    double *F, *bestF;         /* lanes x n_rows */
    double *J;                 /* (max_free + 2) x n_rows */
    double *r;                 /* n_rows: the residual at the best point */
    double *H, *A, *g;         /* m x m, m x m, m */
    double *trial, *best, *hv, *besthv, *lane_v;
    uint32_t *lane_j, *mslot;  /* lane -> parameter; mark -> slot */
    char *lane_blocks;         /* a perturbed lane's values of the slots it changes */
    uint64_t *dep;             /* slot -> the parameters it depends on (bit min(j, 63)) */
} nxlm__ws;

/* The next 64-byte aligned piece of `bytes` at *at (NULL when only sizing). */
static void *nxlm__take(char *base, uint64_t *at, uint64_t bytes)
{
    uint64_t here = (*at + 63u) & ~(uint64_t)63u;
    *at = here + bytes;
    return base ? (void *)(base + here) : NULL;
}

static size_t nxlm__carve(nxlm__ws *w, char *base, size_t interp, uint32_t max_params,
                          uint32_t max_free, uint32_t n_inputs, uint64_t n_rows, uint32_t block,
                          uint32_t max_marks, uint32_t max_slots)
{
    uint64_t L = (uint64_t)max_free + 1u, m = (uint64_t)max_free + 2u, at = 0;
#define NXLM__TAKE(ptr, type, count) \
    ptr = (type *)nxlm__take(base, &at, (uint64_t)(count) * sizeof(type))
    if (base) { w->interp = base; w->interp_size = interp; }
    at = interp;
    NXLM__TAKE(w->cols, nxi_column, n_inputs ? n_inputs : 1u);
    NXLM__TAKE(w->tiled, char, (uint64_t)n_inputs * block * 8u);
    NXLM__TAKE(w->scratch, char, (uint64_t)block * 8u);
    NXLM__TAKE(w->F, double, L * n_rows);
    NXLM__TAKE(w->bestF, double, L * n_rows);
    NXLM__TAKE(w->J, double, m * n_rows);
    NXLM__TAKE(w->r, double, n_rows);
    NXLM__TAKE(w->H, double, m * m);
    NXLM__TAKE(w->A, double, m * m);
    NXLM__TAKE(w->g, double, m);
    NXLM__TAKE(w->trial, double, max_params);
    NXLM__TAKE(w->best, double, max_params);
    NXLM__TAKE(w->hv, double, L);
    NXLM__TAKE(w->besthv, double, L);
    NXLM__TAKE(w->lane_v, double, L);
    NXLM__TAKE(w->lane_j, uint32_t, L);
    NXLM__TAKE(w->mslot, uint32_t, max_marks);
    NXLM__TAKE(w->lane_blocks, char, (uint64_t)max_slots * block * 8u);
    NXLM__TAKE(w->dep, uint64_t, max_slots);
#undef NXLM__TAKE
    return at > (uint64_t)SIZE_MAX - 64u ? 0 : (size_t)at + 64u;
}

size_t nxlm_workspace_size(uint32_t max_slots, uint32_t max_records, uint32_t max_params,
                           uint32_t max_free, uint32_t n_inputs, uint64_t n_rows, uint32_t block)
{
    nxlm__ws w;
    size_t interp = nxi_workspace_size(max_slots, max_records, block);
    if (!interp || max_params > NXLM__MAX_PARAMS || max_free > max_params || n_rows > NXLM__ROWS_MAX
        || n_inputs > NXI__MAX_SLOTS)
        return 0;
    /* marks: at most one per record */
    return nxlm__carve(&w, NULL, (interp + 63u) & ~(size_t)63u, max_params, max_free, n_inputs,
                       n_rows, block, max_records, max_slots);
}

/* The loss of f = F[0..n): sum of squares of a + b f - y (+inf when not finite or flat). */
static double nxlm__sse(const nxlm_options *o, const double *F, const double *y, uint64_t n,
                        double ym, double *a_out, double *b_out)
{
    double a = 0.0, b = 1.0, s = 0.0;
    uint64_t i;
    int varies = 1;
    if (o->scaling) {
        double fm = 0.0, var = 0.0, cov = 0.0, ms = 0.0;
        for (i = 0; i < n; i++) fm += F[i];
        fm /= (double)n;
        for (i = 0; i < n; i++) {
            double df = F[i] - fm;
            var += df * df; cov += df * (y[i] - ym); ms += F[i] * F[i];
        }
        b = var > 0 ? cov / var : 0.0;
        if (o->positive && b < 0) b = 0.0;          /* (NaN stays NaN, as np.maximum) */
        varies = !o->flat || (var / (double)n > o->flat_rel * (ms / (double)n));
        a = ym - b * fm;
    }
    for (i = 0; i < n; i++) {
        double r = a + b * F[i] - y[i];
        s += r * r;
    }
    *a_out = a; *b_out = b;
    if (!varies || !isfinite(s)) return HUGE_VAL;
    return s;
}

/* Solves A x = rhs (m x m, overwritten) by LU with partial pivoting; 0 when a pivot is zero or
   not finite (non-finite entries of a solution are zeroed by the caller, as NumPy's path does). */
static int nxlm__solve(double *A, double *x, size_t m)
{
    size_t i, j, k;
    for (k = 0; k < m; k++) {
        size_t p = k;
        double piv;
        for (i = k + 1; i < m; i++)
            if (fabs(A[i * m + k]) > fabs(A[p * m + k])) p = i;
        if (p != k) {
            double t;
            for (j = 0; j < m; j++) {
                t = A[k * m + j]; A[k * m + j] = A[p * m + j]; A[p * m + j] = t;
            }
            t = x[k]; x[k] = x[p]; x[p] = t;
        }
        piv = A[k * m + k];
        if (piv == 0.0 || !isfinite(piv)) return 0;
        for (i = k + 1; i < m; i++) {
            double f = A[i * m + k] / piv;
            if (f == 0.0) continue;
            for (j = k; j < m; j++) A[i * m + j] -= f * A[k * m + j];
            x[i] -= f * x[k];
        }
    }
    for (k = m; k-- > 0;) {
        double s = x[k];
        for (j = k + 1; j < m; j++) s -= A[k * m + j] * x[j];
        x[k] = s / A[k * m + k];
    }
    return 1;
}

/* sum of a[i] b[i], four partial sums (the loop pipelines; the order differs from NumPy's
   pairwise sums by rounding only) */
static double nxlm__dot(const double *a, const double *b, uint64_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    uint64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i]; s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2]; s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* The next trial point: the damped Gauss–Newton step from best (lanes 1..nf of bestF). */
static void nxlm__step(nxlm__ws *w, const nxlm_options *o, const double *y, uint64_t n,
                       uint32_t K, uint32_t nf, double a, double b, double lam)
{
    size_t m = nf + (o->scaling ? 2u : 0u), k, j;      /* (m * m passes 2^32 at 2^16 + 2) */
    const double *F0 = w->bestF;
    uint64_t i;
    for (k = 0; k < K; k++) w->trial[k] = w->best[k];
    for (k = 0; k < nf; k++) {
        const double *Fk = w->bestF + (uint64_t)(k + 1) * n;
        double *Jk = w->J + (uint64_t)k * n, h = w->besthv[k + 1];
        for (i = 0; i < n; i++) {
            double v = (Fk[i] - F0[i]) / h;
            Jk[i] = (isfinite(v) ? v : 0.0) * b;
        }
    }
    if (o->scaling) {
        double *ones = w->J + (uint64_t)nf * n, *fs = ones + n;
        for (i = 0; i < n; i++) { ones[i] = 1.0; fs[i] = F0[i]; }
    }
    for (i = 0; i < n; i++) w->r[i] = a + b * F0[i] - y[i];
    for (k = 0; k < m; k++) {
        const double *Jk = w->J + (uint64_t)k * n;
        w->g[k] = -nxlm__dot(Jk, w->r, n);
        for (j = 0; j <= k; j++)
            w->H[k * m + j] = w->H[j * m + k] = nxlm__dot(Jk, w->J + (uint64_t)j * n, n);
    }
    for (k = 0; k < m * m; k++) w->A[k] = w->H[k];
    for (k = 0; k < m; k++) w->A[k * m + k] += lam * (w->H[k * m + k] + 1e-12);
    if (!nxlm__solve(w->A, w->g, m)) return;                   /* a zero step (header) */
    for (k = 0; k < nf; k++) {
        uint32_t p = w->lane_j[k + 1];
        double s = w->g[k], v;
        if (!isfinite(s)) s = 0.0;
        v = w->best[p] + s;
        w->trial[p] = v < -1e30 ? -1e30 : v > 1e30 ? 1e30 : v;
    }
}

#define NXLM__BIT(j) ((uint64_t)1 << ((j) < 63u ? (j) : 63u))

/* Fills n elements of slot block blk with v in the slot's type. */
static void nxlm__fill(char *blk, int wide, double v, uint32_t n)
{
    uint32_t i;
    if (wide) {
        double *q = (double *)(void *)blk;
        for (i = 0; i < n; i++) q[i] = v;
    } else {
        float f = (float)nxlm__f32(v), *q = (float *)(void *)blk;
        for (i = 0; i < n; i++) q[i] = f;
    }
}

/* F[0..n) = the n elements at src, output 0's type (NULL: zeros). */
static void nxlm__to_f(double *F, const char *src, uint32_t size, uint64_t n)
{
    uint64_t i;
    if (!src) for (i = 0; i < n; i++) F[i] = 0.0;
    else if (size == 8) for (i = 0; i < n; i++) F[i] = ((const double *)(const void *)src)[i];
    else for (i = 0; i < n; i++) F[i] = (double)((const float *)(const void *)src)[i];
}

/* Copies rows [row0, row0 + nr) of every input column G times into the tiled columns. */
static void nxlm__tile(nxlm__ws *w, const nxlm_data *d, uint64_t row0, uint32_t nr, uint32_t G)
{
    uint32_t in, g;
    for (in = 0; in < d->n_inputs; in++) {
        uint32_t sz = d->type_size[d->in[in].type];
        char *dst = w->tiled + (size_t)in * d->block * 8u;
        if (d->in[in].scalar) continue;
        for (g = 0; g < G; g++)
            memcpy(dst + (size_t)g * nr * sz, (const char *)d->in[in].data + row0 * sz,
                   (size_t)nr * sz);
        w->cols[in].data = dst;
    }
}

/* The dependence of every slot on the parameters (after the load and the marks). */
static void nxlm__deps(nxi__ctx *x, nxlm__ws *w, const uint32_t *t, uint32_t n_marks,
                       const uint32_t *mark_param)
{
    uint32_t i;
    memset(w->dep, 0, (size_t)t[0] * sizeof(uint64_t));
    for (i = 0; i < n_marks; i++) w->dep[w->mslot[i]] |= NXLM__BIT(mark_param[i]);
    for (i = 0; i < x->n_ins; i++) {
        const nxi__ins *in = &x->ins[i];
        w->dep[in->dst] = w->dep[in->a] | w->dep[in->b] | w->dep[in->c];
    }
}

/* Perturbed lane l over the nr rows loaded (lane 0's values in the slots' blocks): only the
   instructions that depend on its parameter run, into lane_blocks; the others' values are lane
   0's, bit for bit what a whole run would give. */
static void nxlm__dirty_lane(nxi__ctx *x, nxlm__ws *w, const nxlm_data *d, const uint32_t *t,
                             uint32_t l, uint32_t n_marks, const uint32_t *mark_param,
                             double *F, uint32_t nr)
{
    uint32_t j = w->lane_j[l], i, s = t[4];
    uint64_t bj = NXLM__BIT(j);
    size_t stride = (size_t)d->block * 8u;
#define NXLM__SRC(slot) ((w->dep[slot] & bj) ? w->lane_blocks + (slot) * stride : x->ptr[slot])
    for (i = 0; i < n_marks; i++) {
        uint32_t p = mark_param[i], ms = w->mslot[i];
        if (NXLM__BIT(p) & bj)
            nxlm__fill(w->lane_blocks + ms * stride, x->type[ms] == d->f64_type,
                       p == j ? w->lane_v[l] : w->trial[p], nr);
    }
    for (i = 0; i < x->n_ins; i++) {
        const nxi__ins *in = &x->ins[i];
        if (!(w->dep[in->dst] & bj)) continue;
        (void)nxi__apply(in->op, nr, w->lane_blocks + in->dst * stride, NXLM__SRC(in->a),
                         NXLM__SRC(in->b), NXLM__SRC(in->c));
    }
    nxlm__to_f(F, s == NXI__NONE ? NULL : NXLM__SRC(s), d->type_size[d->out_types[0]], nr);
#undef NXLM__SRC
}

/* Runs the loaded program's L lanes over all rows into F (lanes x n_rows): lane 0 at the trial
   point, lane l with parameter lane_j[l] at lane_v[l]. Few rows: lanes side by side in one
   block (one dispatch per instruction for G lanes); else lane 0 whole, and each perturbed lane
   only where its parameter reaches. */
static void nxlm__lanes(nxi__ctx *x, nxlm__ws *w, const nxlm_data *d, const uint32_t *t,
                        uint32_t lo, uint32_t L, uint32_t n_marks, const uint32_t *mark_param)
{
    uint64_t n = d->n_rows, row0;
    uint32_t block = d->block, R = n < block ? (uint32_t)n : block, G = block / R, l0, g, k;
    uint32_t osz = d->type_size[d->out_types[0]];
    size_t stride = (size_t)block * 8u;
    nxi_output o;
    o.data = w->scratch; o.type = d->out_types[0];
    if (G > L - lo) G = L - lo;
    if (G < 2) G = 1;
    for (row0 = 0; row0 < n; row0 += R) {
        uint32_t nr = (uint32_t)(n - row0 < R ? n - row0 : R);
        nxlm__tile(w, d, row0, nr, G);
        /* G == 1: lane 0 runs whole (the perturbed lanes read its values), written to F again
           when lo > 0 (the same bits: the same trial) */
        for (l0 = G == 1 ? 0u : lo; l0 < (G == 1 ? 1u : L); l0 += G) {
            uint32_t gl = L - l0 < G ? L - l0 : G;
            for (k = 0; k < n_marks; k++) {
                uint32_t s = w->mslot[k], p = mark_param[k];
                int wide = x->type[s] == d->f64_type;
                for (g = 0; g < gl; g++) {
                    uint32_t lane = l0 + g;
                    nxlm__fill(x->blocks + s * stride + (size_t)g * nr * (wide ? 8u : 4u), wide,
                               lane && w->lane_j[lane] == p ? w->lane_v[lane] : w->trial[p], nr);
                }
            }
            nxi__block(x, t, 1, &o, 0, 0, gl * nr);
            for (g = 0; g < gl; g++)
                nxlm__to_f(w->F + (uint64_t)(l0 + g) * n + row0, w->scratch + (size_t)g * nr * osz,
                           osz, nr);
        }
        if (G == 1)
            for (l0 = lo > 1 ? lo : 1; l0 < L; l0++)
                nxlm__dirty_lane(x, w, d, t, l0, n_marks, mark_param,
                                 w->F + (uint64_t)l0 * n + row0, nr);
    }
    if (t[4] == NXI__NONE && d->unwritten)                /* the register keeps its input */
        for (l0 = lo; l0 < L; l0++)
            nxlm__to_f(w->F + (uint64_t)l0 * n, (const char *)d->unwritten, osz, n);
}

/* Finds each mark's slot (after the tape is loaded); NXI_ERR_TAPE/ARGUMENT on a bad mark. */
static int nxlm__marks(nxlm__ws *w, const nxlm_data *d, const uint32_t *t,
                       uint64_t len, uint32_t n_marks, const uint32_t *mark_word,
                       const uint32_t *mark_param, uint32_t K, const uint8_t *wide,
                       nxi_fail *fail)
{
    uint32_t k, head = 4u + d->n_outputs;
    for (k = 0; k < n_marks; k++) {
        uint64_t at = mark_word[k];
        uint32_t type;
        if (mark_param[k] >= K) return NXI_ERR_ARGUMENT;
        if (at < head || (at - head) % NXI__REC || at + NXI__REC > len) return NXI_ERR_TAPE;
        fail->record = (uint32_t)((at - head) / NXI__REC);
        type = (t[at] >> 8) & 0xFFu;
        if ((t[at] & 0xFFu) != 1u || (type != d->f32_type && type != d->f64_type))
            return NXI_ERR_TAPE;
        if (!wide[mark_param[k]] != (type != d->f64_type))   /* rounded as its record holds it */
            return NXI_ERR_ARGUMENT;
        w->mslot[k] = t[at + 1];
    }
    fail->record = NXI__NONE;
    return NXI_OK;
}

/* One program's whole fit; theta[0..K) in and out. */
static void nxlm__one(nxi__ctx *x, nxlm__ws *w, const nxlm_data *d, const nxlm_options *o,
                      const uint32_t *t, double *theta, const uint8_t *free_, const uint8_t *wide,
                      uint32_t K, uint32_t n_marks, const uint32_t *mark_param, double ym,
                      double *sse_out, uint64_t *runs_out)
{
    uint64_t n = d->n_rows;
    uint32_t nf = 0, L, k, s;
    double best_sse = HUGE_VAL, a = 0.0, b = 1.0, lam = o->lambda0;
    uint64_t runs = 0;
    const double r32 = o->root_eps32, r64 = o->root_eps64;
    for (k = 0; k < K; k++) {
        w->trial[k] = w->best[k] = theta[k];
        if (free_[k]) w->lane_j[1 + nf++] = k;
    }
    L = nf + 1;
    w->lane_j[0] = 0;
    for (k = 0; k < L; k++) w->besthv[k] = 1.0;
    memset(w->bestF, 0, (size_t)L * n * sizeof(double));
    for (s = 0; s < o->steps; s++) {
        double sse, at, bt, *tmp;
        for (k = 0; k < K; k++) if (!wide[k]) w->trial[k] = nxlm__f32(w->trial[k]);
        w->hv[0] = 1.0;
        for (k = 1; k < L; k++) {
            uint32_t j = w->lane_j[k];
            double tj = w->trial[j];
            double up = tj + (wide[j] ? r64 : r32) * (fabs(tj) > 1e-3 ? fabs(tj) : 1e-3);
            if (!wide[j]) up = nxlm__f32(up);
            w->hv[k] = up - tj;
            w->lane_v[k] = tj + w->hv[k];
        }
        /* the trial's value first: its perturbed lanes (the Jacobian) only when it is taken,
           and not in the last round (no step follows): a rejected trial's are never read */
        nxlm__lanes(x, w, d, t, 0, 1, n_marks, mark_param);
        runs++;
        sse = nxlm__sse(o, w->F, d->y, n, ym, &at, &bt);
        if (sse < best_sse) {
            if (s + 1 < o->steps && L > 1) {
                nxlm__lanes(x, w, d, t, 1, L, n_marks, mark_param);
                runs += L - 1;
            }
            best_sse = sse; a = at; b = bt; lam /= 3.0;
            for (k = 0; k < K; k++) w->best[k] = w->trial[k];
            for (k = 0; k < L; k++) w->besthv[k] = w->hv[k];
            tmp = w->bestF; w->bestF = w->F; w->F = tmp;
        } else lam *= 4.0;
        if (s + 1 < o->steps) nxlm__step(w, o, d->y, n, K, nf, a, b, lam);
    }
    for (k = 0; k < K; k++) theta[k] = w->best[k];
    *sse_out = best_sse;
    if (runs_out) *runs_out = runs;
}

/* The data's arguments (outs: the outputs' types, as the load checks them). */
static int nxlm__check(const nxlm_data *d, nxi_output *outs)
{
    uint32_t i, ot;
    if (!d->type_size || !d->op_types || (!d->row_op && d->n_rows_table) || !d->out_types
        || !d->n_outputs || d->n_outputs > NXLM_MAX_OUTPUTS || !d->y || (!d->in && d->n_inputs)
        || !d->block || d->block > NXI_MAX_BLOCK || !d->n_rows || d->n_rows > NXLM__ROWS_MAX
        || d->f32_type >= d->n_types || d->f64_type >= d->n_types)
        return NXI_ERR_ARGUMENT;
    for (i = 0; i < d->n_types; i++)         /* a slot holds 8 bytes per element at most */
        if (d->type_size[i] > 8u) return NXI_ERR_ARGUMENT;
    if ((d->type_size[d->f32_type] | 4u) != 4u || (d->type_size[d->f64_type] | 8u) != 8u)
        return NXI_ERR_ARGUMENT;                   /* the marks write floats and doubles */
    for (i = 0; i < d->n_inputs; i++)
        if (d->in[i].type >= d->n_types || !d->type_size[d->in[i].type] || !d->in[i].data)
            return NXI_ERR_ARGUMENT;
    for (i = 0; i < d->n_outputs; i++) {
        if (d->out_types[i] >= d->n_types || !d->type_size[d->out_types[i]])
            return NXI_ERR_ARGUMENT;
        outs[i].data = NULL; outs[i].type = d->out_types[i];
    }
    ot = d->out_types[0];
    if (ot != d->f32_type && ot != d->f64_type) return NXI_ERR_TYPE;
    return d->type_size[ot] == (ot == d->f64_type ? 8u : 4u) ? NXI_OK : NXI_ERR_ARGUMENT;
}

/* The batch's largest tape, parameter count and free count (lim[0..4)); checks the offsets. */
static int nxlm__scan(const uint32_t *tapes, const uint64_t *offsets, uint32_t n_programs,
                      const uint32_t *param_off, const uint8_t *free_, const uint32_t *mark_off,
                      const uint32_t *mark_word, const uint32_t *mark_param, uint32_t *lim,
                      nxi_fail *fail)
{
    uint32_t p, k;
    lim[0] = lim[1] = lim[2] = lim[3] = 0;
    for (p = 0; p < n_programs; p++) {
        uint32_t K, nf = 0, nm;
        fail->program = p;
        if (offsets[p + 1] < offsets[p] || offsets[p + 1] - offsets[p] < 4) return NXI_ERR_TAPE;
        if (param_off[p + 1] < param_off[p] || mark_off[p + 1] < mark_off[p])
            return NXI_ERR_ARGUMENT;
        K = param_off[p + 1] - param_off[p];
        nm = mark_off[p + 1] - mark_off[p];
        if (K > NXLM__MAX_PARAMS || (nm && (!mark_word || !mark_param))
            || nm > tapes[offsets[p] + 1])                   /* a mark per record at most */
            return NXI_ERR_ARGUMENT;
        for (k = 0; k < K; k++) nf += free_[param_off[p] + k] ? 1u : 0u;
        if (tapes[offsets[p]] > lim[0]) lim[0] = tapes[offsets[p]];
        if (tapes[offsets[p] + 1] > lim[1]) lim[1] = tapes[offsets[p] + 1];
        if (K > lim[2]) lim[2] = K;
        if (nf > lim[3]) lim[3] = nf;
    }
    fail->program = NXI__NONE;
    return NXI_OK;
}

/* The interpreter's context over the workspace's first part (as nxi_run carves it). */
static void nxlm__bind(nxi__ctx *x, nxlm__ws *w, const nxlm_data *d, char *base)
{
    uint32_t i;
    for (i = 0; i < d->n_inputs; i++) w->cols[i] = d->in[i];
    x->row_op = d->row_op; x->n_rows_table = d->n_rows_table; x->op_types = d->op_types;
    x->type_size = d->type_size; x->n_types = d->n_types; x->in = w->cols;
    x->n_inputs = d->n_inputs; x->block = d->block;
    x->blocks = base;
    x->ptr = (const char **)(void *)(base + (size_t)x->max_slots * d->block * 8u);
    x->ins = (nxi__ins *)(void *)(x->ptr + x->max_slots);
    x->col = (uint32_t *)(void *)(x->ins + x->max_records);
    x->type = (uint8_t *)(void *)(x->col + x->max_slots);
}

int nxlm_fit(const nxlm_data *d, const nxlm_options *opt, const uint32_t *tapes,
             const uint64_t *offsets, uint32_t n_programs, const uint32_t *param_off,
             double *theta, const uint8_t *free_, const uint8_t *wide, const uint32_t *mark_off,
             const uint32_t *mark_word, const uint32_t *mark_param, double *sse, uint64_t *runs,
             void *ws, size_t ws_size, nxi_fail *fail)
{
    nxi__ctx x;
    nxlm__ws w;
    nxi_fail local;
    nxi_output outs[NXLM_MAX_OUTPUTS];
    uint32_t p, lim[4];
    uint64_t i, n;
    double ym = 0.0;
    char *base;
    size_t need;
    int st;
    if (!fail) fail = &local;
    fail->program = fail->record = fail->row = NXI__NONE; fail->pad = 0;
    if (!d || !opt || !offsets || !param_off || !mark_off || !ws
        || (n_programs && (!tapes || !theta || !free_ || !wide || !sse)))
        return NXI_ERR_ARGUMENT;
    if ((st = nxlm__check(d, outs)) != NXI_OK) return st;
    st = nxlm__scan(tapes, offsets, n_programs, param_off, free_, mark_off, mark_word, mark_param,
                    lim, fail);
    if (st != NXI_OK) return st;
    n = d->n_rows;
    need = nxlm_workspace_size(lim[0], lim[1], lim[2], lim[3], d->n_inputs, n, d->block);
    if (!need || ws_size < need) return NXI_ERR_WORKSPACE;
    base = (char *)ws + ((64u - (unsigned)((uintptr_t)ws & 63u)) & 63u);
    (void)nxlm__carve(&w, base, (nxi_workspace_size(lim[0], lim[1], d->block) + 63u) & ~(size_t)63u,
                      lim[2], lim[3], d->n_inputs, n, d->block, lim[1], lim[0]);
    x.max_slots = lim[0]; x.max_records = lim[1];
    nxlm__bind(&x, &w, d, base);
    for (i = 0; i < n; i++) ym += d->y[i];
    ym /= (double)n;
    for (p = 0; p < n_programs; p++) {
        const uint32_t *t = tapes + offsets[p];
        uint64_t len = offsets[p + 1] - offsets[p];
        uint32_t K = param_off[p + 1] - param_off[p], nm = mark_off[p + 1] - mark_off[p];
        fail->program = p;
        st = nxi__load(&x, t, len, d->n_outputs, outs, fail);
        if (st != NXI_OK) return st;
        st = nxlm__marks(&w, d, t, len, nm, mark_word + mark_off[p], mark_param + mark_off[p],
                         K, wide + param_off[p], fail);
        if (st != NXI_OK) return st;
        nxlm__deps(&x, &w, t, nm, mark_param + mark_off[p]);
        nxlm__one(&x, &w, d, opt, t, theta + param_off[p], free_ + param_off[p],
                  wide + param_off[p], K, nm, mark_param + mark_off[p], ym, sse + p,
                  runs ? runs + p : NULL);
    }
    fail->program = fail->record = fail->row = NXI__NONE;
    return NXI_OK;
}
#endif
#endif
