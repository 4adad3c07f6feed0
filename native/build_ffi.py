"""cffi build of numptx._native from the C99 cores in native/ (API mode, compiled at install)."""
import os

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))

CDEF = """
typedef enum ptxinj_status {
    PTXINJ_OK = 0, PTXINJ_ERR_INVALID_ARGUMENT, PTXINJ_ERR_BUFFER_TOO_SMALL,
    PTXINJ_ERR_MALFORMED_MARKER, PTXINJ_ERR_MISSING_END, PTXINJ_ERR_UNEXPECTED_END,
    PTXINJ_ERR_NESTED_SITE, PTXINJ_ERR_DUPLICATE_VARIABLE, PTXINJ_ERR_INCONSISTENT_INSTANCES,
    PTXINJ_ERR_UNKNOWN_SITE, PTXINJ_ERR_TOO_LARGE, PTXINJ_STATUS_COUNT
} ptxinj_status;
#define PTXINJ_RENDER_TAG ...
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
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "numptx._native",
    '#include "ptx_inject.h"\n',
    sources=[os.path.relpath(os.path.join(HERE, "ptx_inject.c"))],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=["-std=c99", "-O2"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
