"""cffi build of numptx._native from the C99 cores in native/ (API mode, compiled at install)."""
import os
import re

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
# the generated tables (stack_ptx_tables.h); their ids are exposed as lib.STACKPTX_T_F32 etc.
TABLES_H = os.path.join(HERE, "stack_ptx_tables.h")
HEADERS = ("ptx_inject.h", "stack_ptx.h", "stack_ptx_tables.h", "dag_lower.h", "interp.h",
           "interp_rows.h", "interp_ops.h", "lm.h")


def table_constants() -> str:
    """cdef lines for the public ids of stack_ptx_tables.h: the names are read from the
    header, the values come from the compiler (``...``), so this file repeats no list."""
    with open(TABLES_H) as f:
        text = f.read()
    names = re.findall(r"^#define (STACKPTX_N_\w+) ", text, re.M) + \
        re.findall(r"^\s+(STACKPTX_[TKM]_\w+)\s*=", text, re.M)
    return "".join(f"#define {n} ...\n" for n in names)


CDEF = """
typedef enum ptxinj_status {
    PTXINJ_OK = 0, PTXINJ_ERR_INVALID_ARGUMENT, PTXINJ_ERR_BUFFER_TOO_SMALL,
    PTXINJ_ERR_MALFORMED_MARKER, PTXINJ_ERR_MISSING_END, PTXINJ_ERR_UNEXPECTED_END,
    PTXINJ_ERR_NESTED_SITE, PTXINJ_ERR_DUPLICATE_VARIABLE, PTXINJ_ERR_INCONSISTENT_INSTANCES,
    PTXINJ_ERR_UNKNOWN_SITE, PTXINJ_ERR_TOO_LARGE, PTXINJ_STATUS_COUNT
} ptxinj_status;
#define PTXINJ_RENDER_TAG ...
#define PTXINJ_RENDER_BIND ...
typedef struct ptxinj_var {
    uint32_t kind;
    uint32_t dtype_off, dtype_len, regtype_off, regtype_len, reg_off, reg_len, name_off, name_len;
    uint32_t line_off;
} ptxinj_var;
typedef struct ptxinj_site {
    uint32_t name_off, name_len, first_var, n_vars, n_instances, first_instance, hash;
} ptxinj_site;
typedef struct ptxinj_instance { uint32_t site, begin, end; } ptxinj_instance;
typedef struct ptxinj_ctx {
    const char *ptx; uint32_t ptx_len;
    uint32_t n_sites, n_vars, n_instances;
    ptxinj_site *sites; ptxinj_var *vars; ptxinj_instance *instances;
    uint32_t *table; uint32_t table_mask;
    uint32_t legacy;
    size_t mem_needed;
    uint32_t err_offset;
    uint32_t err_site;
} ptxinj_ctx;
const char *ptxinj_status_string(int status);
ptxinj_status ptxinj_parse(ptxinj_ctx *ctx, const char *ptx, size_t len, void *mem, size_t mem_size);
ptxinj_status ptxinj_find_site(const ptxinj_ctx *ctx, const char *name, size_t len, uint32_t *index);
ptxinj_status ptxinj_render(const ptxinj_ctx *ctx, const char *blob, size_t blob_len,
                            const uint32_t *offsets, uint32_t flags,
                            char *out, size_t out_cap, size_t *out_len);
uint32_t ptxinj_line_of(const char *ptx, size_t len, size_t offset);

/* native/stack_ptx.h */
typedef enum stackptx_status {
    STACKPTX_OK = 0, STACKPTX_ERR_INVALID_ARGUMENT, STACKPTX_ERR_BUFFER_TOO_SMALL,
    STACKPTX_ERR_WORKSPACE_TOO_SMALL, STACKPTX_ERR_BAD_TABLE, STACKPTX_ERR_AST_UNDERFLOW,
    STACKPTX_ERR_AST_TYPE_MISMATCH, STACKPTX_ERR_AST_LEFTOVER, STACKPTX_ERR_AST_TOO_FEW,
    STACKPTX_ERR_AST_BAD_WORD, STACKPTX_ERR_AST_OUTPUT_TYPE, STACKPTX_ERR_LIMIT,
    STACKPTX_ERR_STRICT_UNSATISFIED, STACKPTX_STATUS_COUNT
} stackptx_status;
typedef struct stackptx_instr {
    const char *fmt; uint32_t fmt_len;
    uint8_t n_results, n_operands;
    uint8_t result_type[4], result_width[4];
    uint8_t operand_type[4], operand_width[4];
    uint32_t flags;
} stackptx_instr;
typedef struct stackptx_table {
    const stackptx_instr *rows; uint32_t n_rows;
    const char *const *reg_type_names;
    uint32_t n_user_types;
    const uint8_t *user_type_base;
    const char *const *user_reg_names;
} stackptx_table;
typedef struct stackptx_io {
    uint32_t n_inputs;  const uint8_t *input_types;  const char *const *input_names;  const uint32_t *input_name_lens;
    uint32_t n_outputs; const uint8_t *output_types; const char *const *output_names; const uint32_t *output_name_lens;
    const uint32_t *input_tags;
} stackptx_io;
typedef struct stackptx_limits {
    uint32_t max_steps, max_nodes, max_depth, stack_capacity, meta_capacity, n_slots;
    uint32_t dialect;
} stackptx_limits;
#define STACKPTX_DIALECT_NUMPTX ...
#define STACKPTX_DIALECT_MMPTX ...
#define STACKPTX_ABI_VERSION ...
#define STACKPTX_MAX_TYPES ...
typedef struct stackptx_routines { const uint64_t *words; const uint32_t *offsets; uint32_t n; } stackptx_routines;
typedef struct stackptx_diag {
    uint32_t flags, n_noops, n_unsatisfied, unsatisfied_mask, steps, nodes, emitted;
    uint32_t first_limit_word, error_word;
} stackptx_diag;
#define STACKPTX_D_UNKNOWN_INPUT ...
const char *stackptx_status_string(int status);
size_t stackptx_workspace_size(const stackptx_limits *lim, const stackptx_io *io);
stackptx_status stackptx_check_table(const stackptx_table *t, uint32_t *bad_row);
stackptx_status stackptx_compile(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    int strict, void *ws, size_t ws_size, char *out, size_t out_cap, size_t *out_len,
    stackptx_diag *diag);
stackptx_status stackptx_compile_many(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, const uint32_t *offsets, uint32_t n_programs,
    const stackptx_routines *r, int strict, void *ws, size_t ws_size, char *out, size_t out_cap,
    uint32_t *out_offsets, stackptx_diag *diags, uint32_t *n_done);
stackptx_status stackptx_tape_many(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, const uint32_t *offsets, uint32_t n_programs,
    const stackptx_routines *r, void *ws, size_t ws_size, uint32_t *out, size_t out_cap,
    uint64_t *out_offsets, stackptx_diag *diags, uint32_t *n_done);
stackptx_status astptx_tape(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    void *ws, size_t ws_size, uint32_t *out, size_t out_cap, size_t *out_len, stackptx_diag *diag);
#define STACKPTX_TAPE_INPUT ...
#define STACKPTX_TAPE_CONST ...
#define STACKPTX_TAPE_INSTR ...
#define STACKPTX_TAPE_REC ...
#define STACKPTX_TAPE_NONE ...
stackptx_status astptx_compile(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    void *ws, size_t ws_size, char *out, size_t out_cap, size_t *out_len, stackptx_diag *diag);
#define DAGLOWER_ROOT_INPUT ...
size_t dag_lower_workspace_size(uint32_t n_nodes);
stackptx_status dag_lower(const stackptx_table *t, const uint64_t *rec, size_t n_rec,
                          const uint64_t *roots, uint32_t n_roots, void *ws, size_t ws_size,
                          uint64_t *out, size_t out_cap, size_t *out_len, uint32_t *n_slots,
                          uint32_t *n_instr, uint32_t *err_index);

/* native/interp.h */
uint32_t nxi_n_ops(void);
const char *nxi_op_name(uint32_t op);
int nxi_apply(uint32_t op, uint32_t n, void *d, const void *a, const void *b, const void *c);
#define NXI_NO_OP ...
#define NXI_MAX_BLOCK ...
enum { NXI_OK = 0, NXI_ERR_ARGUMENT, NXI_ERR_WORKSPACE, NXI_ERR_TAPE, NXI_ERR_ROW, NXI_ERR_TYPE };
typedef struct nxi_column { const void *data; uint32_t type, scalar; } nxi_column;
typedef struct nxi_output { void *data; uint32_t type; } nxi_output;
typedef struct nxi_fail { uint32_t program, record, row, pad; } nxi_fail;
size_t nxi_workspace_size(uint32_t max_slots, uint32_t max_records, uint32_t block);
int nxi_run(const uint32_t *tapes, const uint64_t *offsets, uint32_t n_programs,
            const uint16_t *row_op, uint32_t n_rows_table, const uint8_t *op_types,
            const uint8_t *type_size, uint32_t n_types,
            const nxi_column *in, uint32_t n_inputs, const nxi_output *out, uint32_t n_outputs,
            uint64_t n_rows, uint32_t block, void *ws, size_t ws_size, nxi_fail *fail);

/* native/lm.h */
#define NXLM_MAX_OUTPUTS ...
typedef struct nxlm_data {
    const uint16_t *row_op; uint32_t n_rows_table;
    const uint8_t *op_types; const uint8_t *type_size; uint32_t n_types;
    const nxi_column *in; uint32_t n_inputs;
    const uint32_t *out_types; uint32_t n_outputs;
    const void *unwritten;
    const double *y; uint64_t n_rows;
    uint32_t block;
    uint32_t f32_type, f64_type;
} nxlm_data;
typedef struct nxlm_options {
    uint32_t steps, scaling, positive, flat;
    double flat_rel, lambda0;
    double root_eps32, root_eps64;
} nxlm_options;
size_t nxlm_workspace_size(uint32_t max_slots, uint32_t max_records, uint32_t max_params,
                           uint32_t max_free, uint32_t n_inputs, uint64_t n_rows, uint32_t block);
int nxlm_fit(const nxlm_data *d, const nxlm_options *opt, const uint32_t *tapes,
             const uint64_t *offsets, uint32_t n_programs, const uint32_t *param_off,
             double *theta, const uint8_t *free_, const uint8_t *wide, const uint32_t *mark_off,
             const uint32_t *mark_word, const uint32_t *mark_param, double *sse, uint64_t *runs,
             void *ws, size_t ws_size, nxi_fail *fail);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF + table_constants())
ffibuilder.set_source(
    "numptx._native",
    '#include "ptx_inject.h"\n#include "stack_ptx.h"\n#include "dag_lower.h"\n'
    '#include "interp.h"\n#include "lm.h"\n',
    sources=[os.path.relpath(os.path.join(HERE, name))
             for name in ("ptx_inject.c", "stack_ptx.c", "dag_lower.c", "interp.c")],
    include_dirs=[os.path.relpath(HERE)],
    depends=[os.path.relpath(os.path.join(HERE, name)) for name in HEADERS],
    # the interpreter's rows round as IEEE says: no contraction of a * b + c into fma
    extra_compile_args=["-std=c99", "-O3", "-ffp-contract=off", "-fno-math-errno"],
    # linked against libm: unversioned exp2/log2 references bind to glibc's old-ABI wrappers
    # (exp2@GLIBC_2.2.5, with __kernel_standard on every overflow), ~2.6 % of a fit
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
