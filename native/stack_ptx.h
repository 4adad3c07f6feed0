/* stack_ptx.h - compile Stack PTX and AST PTX programs (arrays of uint64 words) to PTX stubs.
   C99, one header plus its generated tables (stack_ptx_tables.h, which ships beside it), no
   allocation: the caller owns every byte of memory.
   The contract is docs/design/programs.md (sections 1, 3, 4, 5); this comment is the manual.

   USAGE
     #define STACK_PTX_IMPLEMENTATION    (in exactly one .c file, before the include)
     #include "stack_ptx.h"
   Define STACK_PTX_STATIC as well to make every function static (private copy). The
   declarations also compile as C++; the implementation is C99 (compile it as C).
   Public names start with stackptx_ / astptx_ / STACKPTX_, private ones with stackptx__.
   ABI: STACKPTX_ABI_VERSION changes whenever a public struct's layout or a word's meaning
   changes (2: stackptx_limits gained the dialect field; 3: stackptx_table gained the user
   stack types); a binding built against another
   version must be rebuilt (numptx's cffi module checks it at import).

   VALUE TYPES (ids 0..STACKPTX_N_TYPES-1, STACKPTX_T_*; STACKPTX_TYPE_NAMES spells them):
   pred f16 f16x2 bf16 bf16x2 f32 f64 s32 u32 s64 u64 b16 b32 b64, as listed in
   stack_ptx_tables.h (generated from numptx/valuetypes.py, which owns every per-type fact).
   PTX register type names come from table->reg_type_names (STACKPTX_N_TYPES NUL-terminated
   strings of 1..16 characters, else STACKPTX_ERR_BAD_TABLE) or, when that is NULL, the
   defaults pred b16 b32 b16 b32 f32 f64 s32 u32 s64 u64 b16 b32 b64.
   USER STACK TYPES: a table may define n_user_types more (at most STACKPTX_MAX_TYPES - 14),
   ids 14, 15, ...: each has a stack of its own, its register type user_reg_names[i] (1..16
   characters) and a built-in base user_type_base[i], whose bits and literal form its constants
   take (a "philox" type on u32 registers has base u32). Words, rows and io may use ids below
   14 + n_user_types; any other id is a bad type as before (a bad table definition:
   BAD_TABLE; an io type: INVALID_ARGUMENT). The workspace holds STACKPTX_MAX_TYPES stacks.

   WORDS (one uint64 each; STACKPTX_WORD(kind, type, a, b) builds one)
     bits 0..7 kind, 8..15 type id, 16..31 a, 32..63 b.
     0 NOP | 1 INPUT a,b | 2 CONST type,b | 3 CONST64 type (next word = payload) | 4 INSTR a |
     5 META_CONST a | 6 META type, a = op | 7 ROUTINE a | 8 STORE type, a = slot |
     9 LOAD type, a = slot | 10 RETURN.   Fields a word does not use are ignored.
     DIALECT MARKER: a NOP with a = 0xD1A1 and b = 0x4E584400 | dialect id ("NXD", id) is how
     numptx's encodings carry their dialect (word 0 of an mm-ptx program). The core runs it as
     any NOP (a no-op, and a step); numptx strips it from word 0 before calling compile, so
     STACKPTX_MARKER_WORD(id) never reaches the core from numptx and step counts are unchanged.
     INPUT's b is a name tag (numptx: the CRC-32 of the input's UTF-8 name, 0 taken as 1): with
     io.input_tags set, a word with b != 0 reads the input whose tag is b (input a when its tag
     is b, else the first such input), so an encoding binds by name in any input order; no such
     input -> flag UNKNOWN_INPUT (Stack PTX: a malformed no-op; AST PTX: AST_BAD_WORD). b == 0,
     or io.input_tags NULL: input a by position.
     Meta ops: 0 dup, 1 yank_dup, 2 swap, 3 swap_with, 4 replace, 5 drop, 6 clear, 7 rotate,
     8 reverse (depth n popped from the meta stack, only when the op executes).
     Constants are canonicalized to their type: pred = (payload != 0), 16-bit types keep the low
     16 bits, 32-bit types the low 32; a CONST of a 64-bit type zero-extends its 32-bit payload,
     except s64 which sign-extends it. CONST64 takes the next word as its payload whatever its
     type (a 32/16-bit/pred type keeps the bits above); CONST64 always consumes that next word
     if there is one (even with a bad type), so the word stream parses the same way regardless.

   THE TABLE (stackptx_table; rows are filled from numptx/instructions.py)
     fmt: PTX text, $k = register slot k (results first, then operands; one digit, k < n_results
     + n_operands). A slot of width w > 1 renders as {%a, %b, ...}. Other '$' are copied.
     Row rules: fmt != NULL, fmt_len > 0, n_results <= 4, n_operands <= 4, types < 14 + n_user_types, widths
     1..8 for every used result/operand, and every "$<digit>" slot in range. Compilation checks
     all of this (except the fmt slots) on each row an INSTR word uses, in O(1); a bad row is a
     no-op (malformed word) in Stack PTX and STACKPTX_ERR_BAD_TABLE in AST PTX. The fmt slots
     are checked by stackptx_check_table() only: compile assumes a checked table there, and an
     out-of-range "$k" in an unchecked fmt is copied literally (never an out-of-bounds read).
     Flags: STACKPTX_F_VOLATILE (never merged by CSE), STACKPTX_F_COMMUTATIVE (operands 0 and 1
     are interchangeable for CSE when both are scalars of the same type; the emitted text keeps
     the operand order of the first occurrence). A row with 0 results pops its operands and
     creates nothing (it can never be emitted). Each call summarizes the rows it uses on first
     use (a 64-entry cache in the workspace), so the table must not change during a call.

   API
     stackptx_workspace_size(lim, io)  bytes of workspace compile needs (any alignment; 0 when
       lim/io are invalid). Depends only on the limits and io (counts and name lengths), so one
       workspace serves any number of calls with them (one call at a time). Nothing is kept
       in it between calls. About 0.5 MB with the default limits.
     stackptx_check_table(t, &bad_row)  full table check: OK, or BAD_TABLE with *bad_row
       (UINT32_MAX when reg_type_names is at fault). Optional; see THE TABLE.
     stackptx_compile(t, io, lim, words, n_words, r, strict, ws, ws_size, out, out_cap,
       &out_len, diag)   Stack PTX -> one stub. Always produces a valid stub for valid
       arguments (push-style resilience, design section 3). strict != 0: returns
       STACKPTX_ERR_STRICT_UNSATISFIED when an output got the zero value (stub and diag are still
       complete).
     stackptx_compile_many(t, io, lim, words, offsets, n_programs, r, strict, ws, ws_size, out,
       out_cap, out_offsets, diags, &n_done)   program i = words[offsets[i] .. offsets[i+1])
       (offsets: n_programs + 1 non-decreasing entries, indices into words). Stubs are written
       back to back; out_offsets has n_programs + 1 entries and out_offsets[0] is an INPUT, the
       base B (use 0): stub i is out[out_offsets[i] - B, out_offsets[i+1] - B). diags (n_programs
       entries) may be NULL. Returns OK, or STRICT_UNSATISFIED (strict and some program
       unsatisfied; every stub is still written), or BUFFER_TOO_SMALL: then *n_done = k
       programs are complete (out_offsets[0..k], diags[0..k) final, their stubs valid) and
       nothing else is; resume with offsets + k, n_programs - k, out_offsets + k, diags + k and
       a fresh out buffer - out_offsets[k] is then the base, so the offsets keep counting as if
       all stubs were one buffer. A single stub larger than out_cap makes *n_done = 0 with
       out_offsets[1] untouched; grow out. STACKPTX_ERR_LIMIT if an offset would pass
       UINT32_MAX (n_done as for BUFFER_TOO_SMALL).
     stackptx_tape_many(t, io, lim, words, offsets, n_programs, r, ws, ws_size, out, out_cap,
       out_offsets, diags, &n_done)   Stack PTX -> one TAPE per program (below), written back to
       back into out (out_cap uint32 words); out_offsets has n_programs + 1 uint64 entries,
       out_offsets[0] an INPUT base as for compile_many. The same execution as compile (the
       stub's DAG: what the stub computes, the tape computes). Returns OK, or BUFFER_TOO_SMALL
       with *n_done programs complete (resume as for compile_many).
     astptx_tape(t, io, lim, words, n_words, r, ws, ws_size, out, out_cap, &out_len, diag)
       AST PTX -> one TAPE (out_cap uint32 words; *out_len its size), with astptx_compile's
       checks and errors (no tape on an error).
     astptx_compile(t, io, lim, words, n_words, r, ws, ws_size, out, out_cap, &out_len, diag)
       AST PTX -> one stub (design section 5), strict: any error returns its status with
       diag->error_word, and no stub (*out_len = 0).
     stackptx_status_string(status)   static text for every status ("unknown status" else).

   OUTPUT BUFFER (compile, astptx_compile, compile_many)
     The writer never writes past out_cap and keeps counting, so *out_len is always the exact
     stub size; out_cap < size returns STACKPTX_ERR_BUFFER_TOO_SMALL (the contents of out are
     then unspecified; diag is complete). out may be NULL when out_cap is 0 (a measuring call:
     BUFFER_TOO_SMALL with *out_len). No NUL terminator is written. The bytes of out after the
     text, up to out_cap, may be overwritten too (short strings move as 16-byte blocks when
     there is room). BUFFER_TOO_SMALL takes precedence over STRICT_UNSATISFIED.

   STUB TEXT
     "{\n", then one ".reg .<rt> %_s<n>;\n" per temporary in temporary order, then constants and
     instructions in DAG creation order (only those reachable from the outputs; a multi-result
     instruction once, all its results get temporaries), then the clobber copies
     "mov.<rt> %_s<n>, %<input>;\n", then one "mov.<rt> %<output>, <src>;\n" per output in
     order, then "}\n". Temporaries count from 0 in emission order (the copies last). Inputs are
     read as %<name>. Constants: "mov.<rt> %_sN, <lit>;" with <lit> 0f%08X (f32), 0d%016X
     (f64), 0x%04X (f16 bf16 b16), 0x%08X (f16x2 bf16x2 b32), 0x%016X (b64), signed decimal
     (s32 s64), unsigned decimal (u32 u64), 1 / 0 (pred); <rt> is the type's register name.
     Clobber rule: output k whose value is input i gets its value from a copy made before the
     output movs when an earlier output j < k writes a register named like input i and output
     j's value is not input i itself (only then could the read see a clobbered register).

   TAPES (what an interpreter runs: native/interp.h on the CPU, numptx/jit/interpret_gpu.py)
     uint32 words: a header n_slots, n_records, n_outputs, diag flags; then n_outputs words, the
     slot holding output k (STACKPTX_TAPE_NONE: not written, the mm-ptx dialect's unsatisfied
     output); then n_records records of STACKPTX_TAPE_REC words, operands before their users:
       w0 = kind | type << 8 | n_ops << 16 | n_res << 24   (STACKPTX_TAPE_INPUT / CONST / INSTR;
            type: the slot's value type, an INSTR's result 0; n_ops: operand ids)
       w1 = the slot written (INSTR: result 0's; result j is w1 + j)
       w2 = INPUT: input index | CONST: low 32 bits of the canonical payload | INSTR: table row
       w3 = CONST: high 32 bits | else 0
       w4..w7 = INSTR: the slots of operand ids 0..3 (STACKPTX_TAPE_NONE past n_ops)
     Slots count from 0 in record order; the records are the stub's constants and instructions
     in its order (only what reaches an output), each input read gets one INPUT record.

   STACK PTX EXECUTION (design section 3)
     Words run in order; ROUTINE a runs routine a inline on an explicit frame stack (no C
     recursion); RETURN leaves the current routine (or ends the program at top level); the end
     of a routine returns too. A LOAD pushes the slot's node (the same value: no copy). No-ops
     (counted in diag.n_noops, state unchanged): NOP, malformed words (also flag
     MALFORMED_WORD: unknown kind, type >= 14 + n_user_types, meta op > 8, table/input/routine index out of
     range, an input name tag no input has (also UNKNOWN_INPUT), bad table row, CONST64
     without its data word), and any word rejected by the
     resilience rules (missing operands, depth or slot out of range, empty slot or slot of
     another type, clear of an empty stack, or a limit: stack/meta overflow, node limit,
     routine depth). Limits (STACKPTX_D_* flags, diag.first_limit_word): STEP_LIMIT stops the
     program; NODE_LIMIT, DEPTH_LIMIT, STACK_OVERFLOW, META_OVERFLOW make that word a no-op.
     Then outputs pop their type's stack in order; an empty stack gives the zero constant of
     the type (flag UNSATISFIED, n_unsatisfied, unsatisfied_mask bit k for k < 32). The zero
     constants never hit the node limit (room for them is reserved).

   AST PTX (design section 5): words INPUT, CONST, CONST64, INSTR, ROUTINE; anything else is
     STACKPTX_ERR_AST_BAD_WORD. One typed value stack of stack_capacity entries.
     Errors (diag->error_word; flags as noted):
       AST_BAD_WORD       kind not allowed/unknown, type >= 14 + n_user_types, input/table/routine index out of
                          range, CONST64 without its data word (flag MALFORMED_WORD)
       BAD_TABLE          the INSTR's table row is bad
       AST_UNDERFLOW      an INSTR needs more values than the stack holds
       AST_TYPE_MISMATCH  an operand value has another type than the row says
       AST_LEFTOVER       more values than outputs: error_word = the word that pushed the first
                          extra value (the value at stack position n_outputs)
       AST_TOO_FEW        fewer values than outputs: error_word = n_words
       AST_OUTPUT_TYPE    value k's type != output k's type: the word that pushed value k
       LIMIT              step/node/depth limit or stack overflow (flags as in Stack PTX)
   Word indices in diag (error_word, first_limit_word) are indices into the top-level words;
   a word inside a routine is reported as the top-level ROUTINE word that led to it.

   DIALECTS (stackptx_limits.dialect; 0 or lim == NULL: numptx, as above). STACKPTX_DIALECT_MMPTX
     runs Stack PTX words with mm-ptx's semantics (MetaMachines/mm-ptx stack_ptx.h; the table
     in docs/dialects.md): an INSTR takes operand 0 (component 0 first) off the top and leaves
     result 0 (component 0) on top (a row without operands, a special register, pushes component
     0 first); results that find their stack full are dropped, the rest still pushed. META:
     yank_dup, swap_with, replace and drop pop their number from the meta stack even when they
     then do nothing; dup, swap, clear, rotate, reverse take none; replace(d) overwrites depth d
     (top = 0) with the top, then pops; drop(n) pops n when more than n are there; rotate sends
     the top two down; reverse reverses the whole stack; yank_dup, swap_with, replace do nothing
     on a full stack. LOAD ignores its type (the value returns to its own type's stack). The end
     of a routine is a step (mm-ptx ends routines with a RETURN word). An output whose stack is
     empty is not written (no mov; still counted and flagged UNSATISFIED; strict still fails).
     A META that only pops its number is no no-op for diag.n_noops (the meta stack changed).
     AST PTX accepts only the numptx dialect (else INVALID_ARGUMENT).

   LIMITS (stackptx_limits; a zero field or lim == NULL means the default)
     max_steps 4096 (executed words, routines included), max_nodes 4096 (DAG nodes),
     max_depth 8 (routine nesting), stack_capacity 256 (per type stack; AST: its one stack),
     meta_capacity 256, n_slots 16; dialect 0 or 1 (DIALECTS above). Accepted ranges: max_nodes,
     stack_capacity, meta_capacity <= 2^22, n_slots <= 65536, max_depth <= 65536; inputs and
     outputs <= 65536 each
     (INVALID_ARGUMENT / workspace size 0 beyond). An INSTR also fails the node limit when the
     operand pool (8 * max_nodes operand ids) is full.

   DIAG (stackptx_diag, zeroed at the start of every call; error_word / first_limit_word are
     UINT32_MAX when unset): steps = words executed (CONST64 + data = 1), nodes = DAG nodes
     created (inputs, constants, results, output zeros), emitted = instruction lines in the
     stub (constants, instructions, copies, output movs).

   COMPLEXITY
     O(steps + nodes + operand ids + stub size) expected per program: CSE is an open-addressing
     hash (starts at 128 slots, doubles at half full, so its clearing cost follows the program),
     stacks are arrays, reachability is one backward pass over the DAG (operands always precede
     their users), the rows in use are summarized once per call (types, pops, pushes, and their
     fmt split at the slots), operand texts ("%name", "%_sN") are laid out once so each moves as
     one 16-byte block, numbers are formatted with digit loops. Meta rotate/reverse are O(depth).
     Per call (also once per compile_many) the setup copies the io names and checks io.
     Measured (gcc 12 -O2, 2-core AMD EPYC VM, `make -C native bench`): a random 100-word
     program ~3 us, the same through compile_many ~2.5 us, a 59-word program ~2.2 us.
   No recursion, no allocation, no global state; functions are re-entrant. */
#ifndef STACK_PTX_H
#define STACK_PTX_H

#include <stddef.h>
#include <stdint.h>

#ifdef STACK_PTX_STATIC
#define STACKPTX_DEF static
#else
#define STACKPTX_DEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stackptx_status {
    STACKPTX_OK = 0,
    STACKPTX_ERR_INVALID_ARGUMENT,
    STACKPTX_ERR_BUFFER_TOO_SMALL,
    STACKPTX_ERR_WORKSPACE_TOO_SMALL,
    STACKPTX_ERR_BAD_TABLE,
    STACKPTX_ERR_AST_UNDERFLOW,
    STACKPTX_ERR_AST_TYPE_MISMATCH,
    STACKPTX_ERR_AST_LEFTOVER,
    STACKPTX_ERR_AST_TOO_FEW,
    STACKPTX_ERR_AST_BAD_WORD,
    STACKPTX_ERR_AST_OUTPUT_TYPE,
    STACKPTX_ERR_LIMIT,
    STACKPTX_ERR_STRICT_UNSATISFIED,
    STACKPTX_STATUS_COUNT
} stackptx_status;

/* STACKPTX_N_TYPES, STACKPTX_T_* (ORDER TYPES), STACKPTX_K_* (ORDER KINDS), STACKPTX_M_*
   (ORDER META): generated from numptx/valuetypes.py and numptx/opkinds.py */
#include "stack_ptx_tables.h"
#define STACKPTX_WORD(kind, type, a, b)                                                        \
    ((uint64_t)((kind) & 0xFFu) | ((uint64_t)((type) & 0xFFu) << 8) |                        \
     ((uint64_t)((a) & 0xFFFFu) << 16) | ((uint64_t)((uint32_t)(b)) << 32))

#define STACKPTX_F_VOLATILE 1u
#define STACKPTX_F_COMMUTATIVE 2u

#define STACKPTX_D_STEP_LIMIT 1u
#define STACKPTX_D_NODE_LIMIT 2u
#define STACKPTX_D_DEPTH_LIMIT 4u
#define STACKPTX_D_STACK_OVERFLOW 8u
#define STACKPTX_D_META_OVERFLOW 16u
#define STACKPTX_D_MALFORMED_WORD 32u
#define STACKPTX_D_UNSATISFIED 64u
#define STACKPTX_D_UNKNOWN_INPUT 128u

#define STACKPTX_TAPE_INPUT 0u        /* tape record kinds (TAPES) */
#define STACKPTX_TAPE_CONST 1u
#define STACKPTX_TAPE_INSTR 2u
#define STACKPTX_TAPE_REC 8u          /* words per record */
#define STACKPTX_TAPE_NONE 0xFFFFFFFFu

typedef struct stackptx_instr {           /* one table row */
    const char *fmt; uint32_t fmt_len;    /* "add.rn.f32 $0, $1, $2;" ($k: results first) */
    uint8_t n_results, n_operands;        /* 0..4 each */
    uint8_t result_type[4], result_width[4];
    uint8_t operand_type[4], operand_width[4];
    uint32_t flags;                       /* STACKPTX_F_* */
} stackptx_instr;

typedef struct stackptx_table {
    const stackptx_instr *rows; uint32_t n_rows;
    const char *const *reg_type_names;    /* 14 NUL-terminated names, or NULL for the defaults */
    uint32_t n_user_types;                /* user stack types: ids 14 .. 14 + n_user_types - 1 */
    const uint8_t *user_type_base;        /* n_user_types built-in ids: constants as the base's */
    const char *const *user_reg_names;    /* n_user_types PTX register types (1..16 chars) */
} stackptx_table;

/* type ids a table may define: the 14 built-in types and up to 18 user stack types */
#define STACKPTX_MAX_TYPES 32

typedef struct stackptx_io {              /* register names without '%' (not NUL-terminated) */
    uint32_t n_inputs;  const uint8_t *input_types;  const char *const *input_names;  const uint32_t *input_name_lens;
    uint32_t n_outputs; const uint8_t *output_types; const char *const *output_names; const uint32_t *output_name_lens;
    const uint32_t *input_tags;           /* n_inputs name tags (INPUT words bind by them), or NULL */
} stackptx_io;

typedef struct stackptx_limits {          /* 0 -> default */
    uint32_t max_steps, max_nodes, max_depth, stack_capacity, meta_capacity, n_slots;
    uint32_t dialect;                     /* Stack PTX semantics: STACKPTX_DIALECT_* (0 numptx) */
} stackptx_limits;

#define STACKPTX_DIALECT_NUMPTX 0u
#define STACKPTX_DIALECT_MMPTX 1u
#define STACKPTX_ABI_VERSION 3           /* 2: no user stack types; 1: no dialect (USAGE) */
#define STACKPTX_MARKER_WORD(dialect) STACKPTX_WORD(STACKPTX_K_NOP, 0, 0xD1A1u, 0x4E584400u | ((dialect) & 0xFFu))

typedef struct stackptx_routines {        /* routine i = words[offsets[i] .. offsets[i+1]) */
    const uint64_t *words; const uint32_t *offsets; uint32_t n;
} stackptx_routines;

typedef struct stackptx_diag {
    uint32_t flags;             /* STACKPTX_D_* */
    uint32_t n_noops;           /* executed words that did nothing */
    uint32_t n_unsatisfied;     /* outputs that got the zero value */
    uint32_t unsatisfied_mask;  /* bit k = output k (first 32 outputs) */
    uint32_t steps, nodes, emitted;
    uint32_t first_limit_word;  /* top-level word where the first limit was hit, or UINT32_MAX */
    uint32_t error_word;        /* AST PTX: top-level word at fault, or UINT32_MAX */
} stackptx_diag;

STACKPTX_DEF const char *stackptx_status_string(int status);
STACKPTX_DEF size_t stackptx_workspace_size(const stackptx_limits *lim, const stackptx_io *io);
STACKPTX_DEF stackptx_status stackptx_check_table(const stackptx_table *t, uint32_t *bad_row);
STACKPTX_DEF stackptx_status stackptx_compile(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    int strict, void *ws, size_t ws_size, char *out, size_t out_cap, size_t *out_len,
    stackptx_diag *diag);
STACKPTX_DEF stackptx_status stackptx_compile_many(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, const uint32_t *offsets, uint32_t n_programs,
    const stackptx_routines *r, int strict, void *ws, size_t ws_size, char *out, size_t out_cap,
    uint32_t *out_offsets, stackptx_diag *diags, uint32_t *n_done);
STACKPTX_DEF stackptx_status stackptx_tape_many(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, const uint32_t *offsets, uint32_t n_programs,
    const stackptx_routines *r, void *ws, size_t ws_size, uint32_t *out, size_t out_cap,
    uint64_t *out_offsets, stackptx_diag *diags, uint32_t *n_done);
STACKPTX_DEF stackptx_status astptx_compile(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    void *ws, size_t ws_size, char *out, size_t out_cap, size_t *out_len, stackptx_diag *diag);
STACKPTX_DEF stackptx_status astptx_tape(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    void *ws, size_t ws_size, uint32_t *out, size_t out_cap, size_t *out_len, stackptx_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* STACK_PTX_H */

/* ======================================================================================== */
#ifdef STACK_PTX_IMPLEMENTATION
#ifndef STACK_PTX_IMPLEMENTATION_DONE
#define STACK_PTX_IMPLEMENTATION_DONE

#include <string.h>

#define STACKPTX__NONE 0xFFFFFFFFu
#define STACKPTX__MAX_BIG (1u << 22)
#define STACKPTX__MAX_IO 65536u
#define STACKPTX__POOL_PER_NODE 8u
#define STACKPTX__MAX_RT 16        /* longest register type name */
#define STACKPTX__RC_N 64          /* row cache entries (direct mapped by row) */
#define STACKPTX__RC_PIECES 12     /* slot references of a cached fmt */
#define STACKPTX__RC_TXT 64        /* longest cached fmt */
#define STACKPTX__PIECES_NONE 0xFFu   /* fmt not split: scanned at each emission */
#define STACKPTX__PIECES_TODO 0xFEu   /* fmt not split yet */

#if defined(__GNUC__) || defined(__clang__)
#define STACKPTX__INLINE static __inline__ __attribute__((always_inline))
#else
#define STACKPTX__INLINE static
#endif

enum { STACKPTX__N_INPUT = 0, STACKPTX__N_CONST = 1, STACKPTX__N_INSTR = 2 };

typedef struct stackptx__node {
    uint64_t bits;      /* CONST: canonical payload */
    uint32_t row;       /* INSTR: table row; INPUT: input index */
    uint32_t first;     /* INSTR: first node of the instance (its results are consecutive) */
    uint32_t ops;       /* INSTR first node: operand ids at pool[ops .. ops + n_ops) */
    uint32_t hash;      /* hashed nodes: key hash */
    uint32_t tmp;       /* emission: temporary number (INPUT: its clobber copy), or NONE */
    uint32_t ref, ref_len;   /* emission: operand text at text[ref .. ref + ref_len) */
    uint8_t kind, type;
    uint8_t n_ops, m;   /* INSTR first node: operand ids, result nodes of the instance */
    uint8_t mark, hashed, pad0, pad1;
} stackptx__node;

/* What a call needs to know about a table row, computed on first use (per call). */
typedef struct stackptx__rc {
    uint8_t ok, total, m, comm;            /* row passes the checks; operand ids; result nodes */
    uint8_t vol, n_res, n_ops, n_pieces;   /* n_pieces = PIECES_NONE: fmt not cached (scanned) */
    uint8_t nn, np, pad0, pad1;
    uint8_t rt[4], rw[4], ot[4], ow[4];    /* result / operand types and widths */
    uint8_t need_t[4], need_n[4];          /* distinct operand types and their pops */
    uint8_t push_t[4], push_n[4], push_pop[4];   /* distinct result types, pushes, pops of it */
    uint8_t slot_res[8], slot_base[8], slot_w[8];   /* slot k: result?, first component, width */
    uint8_t piece_k[STACKPTX__RC_PIECES];  /* cached fmt: piece i = text up to piece_end[i], */
    uint16_t piece_end[STACKPTX__RC_PIECES];   /* then slot piece_k[i] ("$k" skipped) */
    uint16_t fmt_len;
    uint32_t bound;                        /* cached fmt: longest line when operand texts <= 16 */
    char txt[STACKPTX__RC_TXT + 24];       /* cached fmt + "\n", zero padded */
} stackptx__rc;

typedef struct stackptx__frame { const uint64_t *w; uint32_t pos, end; } stackptx__frame;

typedef struct stackptx__lim {
    uint32_t max_steps, max_nodes, max_depth, cap, meta_cap, n_slots, mm;   /* mm: mm-ptx dialect */
} stackptx__lim;

/* Bounded writer: writes while it fits, then only counts (over). */
typedef struct stackptx__out { char *w, *end, *base; size_t over; } stackptx__out;

typedef struct stackptx__ctx {
    const stackptx_table *t;
    const stackptx_io *io;
    const stackptx_routines *r;
    stackptx__lim L;
    const char (*decl)[32];               /* ".reg .<rt> %_s" per type (32 bytes read whole) */
    const char (*mov)[32];                /* "mov.<rt> " per type */
    const uint8_t *decl_len, *mov_len;
    char cdecl[STACKPTX_MAX_TYPES][32], cmov[STACKPTX_MAX_TYPES][32];   /* custom register names */
    uint8_t cdecl_len[STACKPTX_MAX_TYPES], cmov_len[STACKPTX_MAX_TYPES];
    uint32_t n_types;                     /* 14 + the table's user stack types */
    uint8_t base[STACKPTX_MAX_TYPES];     /* the built-in type whose constants a type's are */
    stackptx__node *nodes; uint32_t n_nodes, node_cap;
    uint32_t *pool; uint32_t n_pool, pool_cap;
    uint32_t *hash; uint32_t hmask, hfull, hcount;
    uint32_t *stk; uint32_t sz[STACKPTX_MAX_TYPES];
    uint32_t *meta; uint32_t n_meta;
    uint32_t *slots;
    uint32_t *in_node;
    uint32_t *out_val;
    uint32_t *copies; uint32_t n_copies;
    uint32_t *list;     /* emission: marked constants and instances (reverse creation order) */
    uint32_t *prod;     /* AST: producer (top-level word) of each stack entry */
    uint32_t *in_ref, *out_ref;   /* offsets of "%<name>" in text */
    uint32_t tmp_text;  /* offset of the temporaries' texts (16 bytes each) in text */
    char *text;         /* operand texts; 16 readable bytes after every start */
    int refs16;         /* every operand text is at most 16 bytes (input names <= 15) */
    stackptx__rc *rc;
    uint32_t *rc_tag;   /* row + 1 of each cache entry; 0 = empty */
    stackptx__frame *frames;
    stackptx_diag *d;
    uint32_t top;       /* top-level index of the word being executed */
} stackptx__ctx;

/* ORDER TYPES: stackptx__def_decl, stackptx__def_mov (and their _len), stackptx__bits,
   stackptx__lit (STACKPTX__LIT_*: how a constant is written) */
#include "stack_ptx_tables.h"
static const char stackptx__hex2[513] =
    "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F"
    "202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F"
    "404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F"
    "606162636465666768696A6B6C6D6E6F707172737475767778797A7B7C7D7E7F"
    "808182838485868788898A8B8C8D8E8F909192939495969798999A9B9C9D9E9F"
    "A0A1A2A3A4A5A6A7A8A9AAABACADAEAFB0B1B2B3B4B5B6B7B8B9BABBBCBDBEBF"
    "C0C1C2C3C4C5C6C7C8C9CACBCCCDCECFD0D1D2D3D4D5D6D7D8D9DADBDCDDDEDF"
    "E0E1E2E3E4E5E6E7E8E9EAEBECEDEEEFF0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF";
static const char stackptx__digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static uint64_t stackptx__canon(const stackptx__ctx *c, uint32_t type, uint64_t v)
{
    switch (stackptx__bits[c->base[type]]) {
    case 1: return v != 0;
    case 16: return v & 0xFFFFu;
    case 32: return v & 0xFFFFFFFFu;
    default: return v;
    }
}

/* ---- limits and workspace layout -------------------------------------------------------- */

static int stackptx__limits(const stackptx_limits *lim, stackptx__lim *L)
{
    L->max_steps = lim && lim->max_steps ? lim->max_steps : 4096;
    L->max_nodes = lim && lim->max_nodes ? lim->max_nodes : 4096;
    L->max_depth = lim && lim->max_depth ? lim->max_depth : 8;
    L->cap = lim && lim->stack_capacity ? lim->stack_capacity : 256;
    L->meta_cap = lim && lim->meta_capacity ? lim->meta_capacity : 256;
    L->n_slots = lim && lim->n_slots ? lim->n_slots : 16;
    L->mm = lim && lim->dialect == STACKPTX_DIALECT_MMPTX;
    return (!lim || lim->dialect <= STACKPTX_DIALECT_MMPTX) && L->max_nodes <= STACKPTX__MAX_BIG && L->cap <= STACKPTX__MAX_BIG &&
           L->meta_cap <= STACKPTX__MAX_BIG && L->n_slots <= 65536u && L->max_depth <= 65536u;
}

/* Checks io; *names = total bytes of "%<name>" texts. */
static int stackptx__io_ok(const stackptx_io *io, uint64_t *names)
{
    uint32_t i;
    uint64_t n = 0;
    if (!io || io->n_inputs > STACKPTX__MAX_IO || io->n_outputs > STACKPTX__MAX_IO) return 0;
    if (io->n_inputs && (!io->input_types || !io->input_names || !io->input_name_lens)) return 0;
    if (io->n_outputs && (!io->output_types || !io->output_names || !io->output_name_lens)) return 0;
    for (i = 0; i < io->n_inputs; i++) {
        if (io->input_types[i] >= STACKPTX_MAX_TYPES || !io->input_names[i] || !io->input_name_lens[i])
            return 0;
        n += 1 + (uint64_t)io->input_name_lens[i];
    }
    for (i = 0; i < io->n_outputs; i++) {
        if (io->output_types[i] >= STACKPTX_MAX_TYPES || !io->output_names[i] || !io->output_name_lens[i])
            return 0;
        n += 1 + (uint64_t)io->output_name_lens[i];
    }
    *names = n;
    return n <= 0x7FFFFFFFu;
}

static uint32_t stackptx__pow2(uint64_t n)   /* smallest power of two >= n (n <= 2^31) */
{
    uint32_t c = 1;
    while (c < n) c <<= 1;
    return c;
}

/* Byte offsets of the workspace arrays (from an 8-aligned base); returns the total. */
#define STACKPTX__N_ARRAYS 14
static uint64_t stackptx__layout(const stackptx__lim *L, uint32_t n_in, uint32_t n_out, uint64_t names,
                                 uint64_t off[STACKPTX__N_ARRAYS])
{
    uint64_t node_cap = (uint64_t)L->max_nodes + n_out, o = 0;
    uint64_t sizes[STACKPTX__N_ARRAYS];
    int i;
    sizes[0] = node_cap * sizeof(stackptx__node);
    sizes[1] = ((uint64_t)L->max_depth + 1) * sizeof(stackptx__frame);
    sizes[2] = (uint64_t)L->max_nodes * STACKPTX__POOL_PER_NODE * 4;            /* pool */
    sizes[3] = (uint64_t)stackptx__pow2(2 * node_cap) * 4;                      /* hash */
    sizes[4] = (uint64_t)L->cap * STACKPTX_MAX_TYPES * 4;                       /* stacks */
    sizes[5] = (uint64_t)L->meta_cap * 4;
    sizes[6] = (uint64_t)L->n_slots * 4;
    sizes[7] = (uint64_t)n_in * 4 * 2;                                          /* in_node, copies */
    sizes[8] = (uint64_t)n_out * 4;                                             /* out_val */
    sizes[9] = (uint64_t)L->cap * 4;                                            /* AST producers */
    sizes[10] = node_cap * 4;                                                   /* emission list */
    sizes[11] = (uint64_t)STACKPTX__RC_N * (sizeof(stackptx__rc) + 4);
    sizes[12] = ((uint64_t)n_in + n_out) * 4;                                   /* in_ref, out_ref */
    sizes[13] = names + 16 + (node_cap + n_in) * 16 + 16;                       /* text */
    for (i = 0; i < STACKPTX__N_ARRAYS; i++) {
        off[i] = o;
        o += (sizes[i] + 7) & ~(uint64_t)7;
    }
    return o + 8;   /* alignment slack */
}

STACKPTX_DEF size_t stackptx_workspace_size(const stackptx_limits *lim, const stackptx_io *io)
{
    stackptx__lim L;
    uint64_t off[STACKPTX__N_ARRAYS], need, names = 0;
    if (!stackptx__io_ok(io, &names) || !stackptx__limits(lim, &L)) return 0;
    need = stackptx__layout(&L, io->n_inputs, io->n_outputs, names, off);
    if ((uint64_t)(size_t)need != need) return 0;
    return (size_t)need;
}

/* ---- table checks ----------------------------------------------------------------------- */

static int stackptx__row_ok(const stackptx_instr *r, uint32_t n_types)
{
    uint32_t i;
    if (!r->fmt || !r->fmt_len || r->n_results > 4 || r->n_operands > 4) return 0;
    for (i = 0; i < r->n_results; i++)
        if (r->result_type[i] >= n_types || r->result_width[i] - 1u > 7u) return 0;
    for (i = 0; i < r->n_operands; i++)
        if (r->operand_type[i] >= n_types || r->operand_width[i] - 1u > 7u) return 0;
    return 1;
}

/* The user stack types of a table: a count in range, built-in bases, register names. */
static int stackptx__user_types_ok(const stackptx_table *t)
{
    uint32_t i;
    if (!t->n_user_types) return 1;
    if (t->n_user_types > STACKPTX_MAX_TYPES - STACKPTX_N_TYPES || !t->user_type_base ||
        !t->user_reg_names)
        return 0;
    for (i = 0; i < t->n_user_types; i++) {
        const char *s = t->user_reg_names[i];
        if (t->user_type_base[i] >= STACKPTX_N_TYPES || !s || !s[0] || strlen(s) > STACKPTX__MAX_RT)
            return 0;
    }
    return 1;
}

static int stackptx__fmt_ok(const stackptx_instr *r)
{
    const char *s = r->fmt, *e = r->fmt + r->fmt_len;
    uint32_t slots = (uint32_t)r->n_results + r->n_operands;
    while (s < e) {
        const char *q = (const char *)memchr(s, '$', (size_t)(e - s));
        if (!q || q + 1 >= e) break;
        if (q[1] >= '0' && q[1] <= '9' && (uint32_t)(q[1] - '0') >= slots) return 0;
        s = q + 1;
    }
    return 1;
}

STACKPTX_DEF stackptx_status stackptx_check_table(const stackptx_table *t, uint32_t *bad_row)
{
    uint32_t i;
    if (bad_row) *bad_row = STACKPTX__NONE;
    if (!t || (!t->rows && t->n_rows)) return STACKPTX_ERR_INVALID_ARGUMENT;
    if (t->reg_type_names)
        for (i = 0; i < STACKPTX_N_TYPES; i++)
            if (!t->reg_type_names[i] || !t->reg_type_names[i][0] ||
                strlen(t->reg_type_names[i]) > STACKPTX__MAX_RT)
                return STACKPTX_ERR_BAD_TABLE;
    if (!stackptx__user_types_ok(t)) return STACKPTX_ERR_BAD_TABLE;
    for (i = 0; i < t->n_rows; i++)
        if (!stackptx__row_ok(&t->rows[i], STACKPTX_N_TYPES + t->n_user_types) ||
            !stackptx__fmt_ok(&t->rows[i])) {
            if (bad_row) *bad_row = i;
            return STACKPTX_ERR_BAD_TABLE;
        }
    return STACKPTX_OK;
}

/* ---- setup ------------------------------------------------------------------------------ */

static void stackptx__diag_reset(stackptx_diag *d)
{
    memset(d, 0, sizeof *d);
    d->first_limit_word = STACKPTX__NONE;
    d->error_word = STACKPTX__NONE;
}

/* Validates the shared arguments and carves the workspace. */
static stackptx_status stackptx__setup(stackptx__ctx *c, const stackptx_table *t, const stackptx_io *io,
                                       const stackptx_limits *lim, const stackptx_routines *r,
                                       void *ws, size_t ws_size)
{
    uint64_t off[STACKPTX__N_ARRAYS], need, names = 0;
    uint32_t i, pos;
    char *base;
    c->t = NULL;
    if (!t || (!t->rows && t->n_rows) || !stackptx__io_ok(io, &names) || !stackptx__limits(lim, &c->L))
        return STACKPTX_ERR_INVALID_ARGUMENT;
    if (r) {
        if (r->n && !r->offsets) return STACKPTX_ERR_INVALID_ARGUMENT;
        for (i = 0; i < r->n; i++)
            if (r->offsets[i + 1] < r->offsets[i]) return STACKPTX_ERR_INVALID_ARGUMENT;
        if (r->n && r->offsets[r->n] > r->offsets[0] && !r->words) return STACKPTX_ERR_INVALID_ARGUMENT;
    }
    if (!stackptx__user_types_ok(t)) return STACKPTX_ERR_BAD_TABLE;
    c->n_types = STACKPTX_N_TYPES + t->n_user_types;
    for (i = 0; i < c->n_types; i++)
        c->base[i] = (uint8_t)(i < STACKPTX_N_TYPES ? i : t->user_type_base[i - STACKPTX_N_TYPES]);
    for (i = 0; i < io->n_inputs; i++)
        if (io->input_types[i] >= c->n_types) return STACKPTX_ERR_INVALID_ARGUMENT;
    for (i = 0; i < io->n_outputs; i++)
        if (io->output_types[i] >= c->n_types) return STACKPTX_ERR_INVALID_ARGUMENT;
    if (t->reg_type_names || t->n_user_types) {
        for (i = 0; i < c->n_types; i++) {
            const char *s = i >= STACKPTX_N_TYPES ? t->user_reg_names[i - STACKPTX_N_TYPES]
                          : t->reg_type_names ? t->reg_type_names[i] : NULL;
            size_t n = s ? strlen(s) : 0;
            char *d = c->cdecl[i], *m = c->cmov[i];
            if (i < STACKPTX_N_TYPES && !t->reg_type_names) {   /* the built-in default */
                memcpy(d, stackptx__def_decl[i], 32); c->cdecl_len[i] = stackptx__def_decl_len[i];
                memcpy(m, stackptx__def_mov[i], 32); c->cmov_len[i] = stackptx__def_mov_len[i];
                continue;
            }
            if (!n || n > STACKPTX__MAX_RT) return STACKPTX_ERR_BAD_TABLE;
            memset(d, 0, 32);
            memset(m, 0, 32);
            memcpy(d, ".reg .", 6); memcpy(d + 6, s, n); memcpy(d + 6 + n, " %_s", 4);
            memcpy(m, "mov.", 4); memcpy(m + 4, s, n); m[4 + n] = ' ';
            c->cdecl_len[i] = (uint8_t)(n + 10);
            c->cmov_len[i] = (uint8_t)(n + 5);
        }
        c->decl = (const char (*)[32])c->cdecl; c->decl_len = c->cdecl_len;
        c->mov = (const char (*)[32])c->cmov; c->mov_len = c->cmov_len;
    } else {
        c->decl = stackptx__def_decl; c->decl_len = stackptx__def_decl_len;
        c->mov = stackptx__def_mov; c->mov_len = stackptx__def_mov_len;
    }
    need = stackptx__layout(&c->L, io->n_inputs, io->n_outputs, names, off);
    if (!ws || (uint64_t)ws_size < need) return STACKPTX_ERR_WORKSPACE_TOO_SMALL;
    base = (char *)ws + ((8u - (unsigned)((uintptr_t)ws & 7u)) & 7u);
    c->t = t; c->io = io; c->r = (r && r->n) ? r : NULL;
    c->node_cap = c->L.max_nodes + io->n_outputs;
    c->nodes = (stackptx__node *)(void *)(base + off[0]);
    c->frames = (stackptx__frame *)(void *)(base + off[1]);
    c->pool = (uint32_t *)(void *)(base + off[2]);
    c->pool_cap = c->L.max_nodes * STACKPTX__POOL_PER_NODE;
    c->hash = (uint32_t *)(void *)(base + off[3]);
    c->hfull = stackptx__pow2(2 * (uint64_t)c->node_cap);
    c->stk = (uint32_t *)(void *)(base + off[4]);
    c->meta = (uint32_t *)(void *)(base + off[5]);
    c->slots = (uint32_t *)(void *)(base + off[6]);
    c->in_node = (uint32_t *)(void *)(base + off[7]);
    c->copies = c->in_node + io->n_inputs;
    c->out_val = (uint32_t *)(void *)(base + off[8]);
    c->prod = (uint32_t *)(void *)(base + off[9]);
    c->list = (uint32_t *)(void *)(base + off[10]);
    c->rc = (stackptx__rc *)(void *)(base + off[11]);
    c->rc_tag = (uint32_t *)(void *)(c->rc + STACKPTX__RC_N);
    c->in_ref = (uint32_t *)(void *)(base + off[12]);
    c->out_ref = c->in_ref + io->n_inputs;
    c->text = base + off[13];
    /* the operand texts of the inputs and outputs: "%<name>", then 16 bytes of slack */
    pos = 0;
    for (i = 0; i < io->n_inputs; i++) {
        c->in_ref[i] = pos;
        c->text[pos] = '%';
        memcpy(c->text + pos + 1, io->input_names[i], io->input_name_lens[i]);
        pos += 1 + io->input_name_lens[i];
    }
    for (i = 0; i < io->n_outputs; i++) {
        c->out_ref[i] = pos;
        c->text[pos] = '%';
        memcpy(c->text + pos + 1, io->output_names[i], io->output_name_lens[i]);
        pos += 1 + io->output_name_lens[i];
    }
    memset(c->text + pos, 0, 16);
    c->tmp_text = pos + 16;
    c->refs16 = 1;
    for (i = 0; i < io->n_inputs; i++)
        if (io->input_name_lens[i] > 15) c->refs16 = 0;
    memset(c->rc_tag, 0, STACKPTX__RC_N * 4);
    return STACKPTX_OK;
}

/* Per-program reset (cost independent of the limits except n_slots and the inputs). */
static void stackptx__begin(stackptx__ctx *c, stackptx_diag *d)
{
    c->n_nodes = 0; c->n_pool = 0; c->n_meta = 0; c->n_copies = 0; c->top = 0;
    memset(c->sz, 0, sizeof c->sz);
    memset(c->slots, 0xFF, (size_t)c->L.n_slots * 4);
    if (c->io->n_inputs) memset(c->in_node, 0xFF, (size_t)c->io->n_inputs * 4);
    c->hmask = (c->hfull < 128 ? c->hfull : 128) - 1;
    c->hcount = 0;
    memset(c->hash, 0, ((size_t)c->hmask + 1) * 4);
    c->d = d;
    stackptx__diag_reset(d);
}

/* ---- row cache -------------------------------------------------------------------------- */

static void stackptx__rc_fill(stackptx__rc *e, const stackptx_instr *r, uint32_t n_types)
{
    uint32_t j, k, base;
    memset(e, 0, offsetof(stackptx__rc, piece_k));   /* the summary; the fmt part is set by split */
    if (!stackptx__row_ok(r, n_types)) return;
    e->ok = 1;
    e->n_res = r->n_results;
    e->n_ops = r->n_operands;
    e->vol = (r->flags & STACKPTX_F_VOLATILE) != 0;
    e->comm = (r->flags & STACKPTX_F_COMMUTATIVE) && r->n_operands >= 2 && r->operand_width[0] == 1 &&
              r->operand_width[1] == 1 && r->operand_type[0] == r->operand_type[1];
    for (j = 0, base = 0; j < r->n_operands; j++) {
        uint32_t t = r->operand_type[j], w = r->operand_width[j];
        e->ot[j] = (uint8_t)t; e->ow[j] = (uint8_t)w;
        for (k = 0; k < e->nn && e->need_t[k] != t; k++) {}
        if (k == e->nn) { e->need_t[k] = (uint8_t)t; e->nn++; }
        e->need_n[k] = (uint8_t)(e->need_n[k] + w);
        e->slot_res[r->n_results + j] = 0;
        e->slot_base[r->n_results + j] = (uint8_t)base;
        e->slot_w[r->n_results + j] = (uint8_t)w;
        base += w;
    }
    e->total = (uint8_t)base;
    for (j = 0, base = 0; j < r->n_results; j++) {
        uint32_t t = r->result_type[j], w = r->result_width[j];
        e->rt[j] = (uint8_t)t; e->rw[j] = (uint8_t)w;
        for (k = 0; k < e->np && e->push_t[k] != t; k++) {}
        if (k == e->np) { e->push_t[k] = (uint8_t)t; e->np++; }
        e->push_n[k] = (uint8_t)(e->push_n[k] + w);
        e->slot_res[j] = 1;
        e->slot_base[j] = (uint8_t)base;
        e->slot_w[j] = (uint8_t)w;
        base += w;
    }
    e->m = (uint8_t)base;
    for (k = 0; k < e->np; k++)
        for (j = 0; j < e->nn; j++)
            if (e->need_t[j] == e->push_t[k]) e->push_pop[k] = e->need_n[j];
    e->n_pieces = STACKPTX__PIECES_TODO;
}

/* Splits a short fmt at its slots (first emission of the row in a call). */
static void stackptx__rc_split(stackptx__rc *e, const stackptx_instr *r)
{
    uint32_t j;
    e->n_pieces = STACKPTX__PIECES_NONE;
    if (r->fmt_len <= STACKPTX__RC_TXT) {
        uint32_t slots = (uint32_t)r->n_results + r->n_operands, n = 0;
        memcpy(e->txt, r->fmt, r->fmt_len);
        e->txt[r->fmt_len] = '\n';
        memset(e->txt + r->fmt_len + 1, 0, sizeof e->txt - r->fmt_len - 1);
        e->fmt_len = (uint16_t)r->fmt_len;
        e->bound = r->fmt_len + 1u + 16u;
        for (j = 0; j + 1 < r->fmt_len && n <= STACKPTX__RC_PIECES; j++) {
            uint32_t s = (uint32_t)((unsigned char)r->fmt[j + 1] - '0');
            if (r->fmt[j] != '$' || s >= slots) continue;
            if (n < STACKPTX__RC_PIECES) { e->piece_end[n] = (uint16_t)j; e->piece_k[n] = (uint8_t)s; }
            e->bound += 2u + 18u * e->slot_w[s];
            n++;
            j++;
        }
        if (n <= STACKPTX__RC_PIECES) e->n_pieces = (uint8_t)n;
    }
}

STACKPTX__INLINE stackptx__rc *stackptx__rc_get(stackptx__ctx *c, uint32_t row)
{
    uint32_t slot = row & (STACKPTX__RC_N - 1);
    stackptx__rc *e = &c->rc[slot];
    if (c->rc_tag[slot] != row + 1) {
        stackptx__rc_fill(e, &c->t->rows[row], c->n_types);
        c->rc_tag[slot] = row + 1;
    }
    return e;
}

/* ---- the DAG ---------------------------------------------------------------------------- */

static uint32_t stackptx__mix(uint32_t h, uint32_t x)
{
    h ^= x;
    h *= 0x9E3779B1u;
    return h ^ (h >> 16);
}

static uint32_t stackptx__fin(uint32_t h)
{
    h ^= h >> 15; h *= 0x85EBCA77u; h ^= h >> 13; h *= 0xC2B2AE3Du;
    return h ^ (h >> 16);
}

static uint32_t stackptx__instr_hash(uint32_t row, const uint32_t *ops, uint32_t n, int comm)
{
    uint32_t h = stackptx__mix(0x1234567u, row), i = 0;
    if (comm) {
        uint32_t a = ops[0] < ops[1] ? ops[0] : ops[1], b = ops[0] ^ ops[1] ^ a;
        h = stackptx__mix(stackptx__mix(h, a), b);
        i = 2;
    }
    for (; i < n; i++) h = stackptx__mix(h, ops[i]);
    return stackptx__fin(h);
}

static uint32_t stackptx__const_hash(uint32_t type, uint64_t bits)
{
    uint32_t h = stackptx__mix(0x7654321u, 0xC000u | type);
    h = stackptx__mix(h, (uint32_t)bits);
    return stackptx__fin(stackptx__mix(h, (uint32_t)(bits >> 32)));
}

static void stackptx__hash_put(stackptx__ctx *c, uint32_t id)
{
    uint32_t i = c->nodes[id].hash & c->hmask, n;
    for (n = 0; n <= c->hmask; n++, i = (i + 1) & c->hmask)
        if (!c->hash[i]) { c->hash[i] = id + 1; return; }
}

/* Doubles the table (it is kept at most half full), rehashing from the node array. */
static void stackptx__hash_grow(stackptx__ctx *c)
{
    uint32_t id;
    if (c->hmask + 1 >= c->hfull) return;
    c->hmask = c->hmask * 2 + 1;
    memset(c->hash, 0, ((size_t)c->hmask + 1) * 4);
    for (id = 0; id < c->n_nodes; id++)
        if (c->nodes[id].hashed) stackptx__hash_put(c, id);
}

/* Fields are stored one by one, straight into the node (building a local template and copying
   it would reload freshly stored bytes). */
STACKPTX__INLINE void stackptx__init_node(stackptx__node *n, uint32_t kind, uint32_t type, uint32_t row,
                                          uint32_t first)
{
    n->bits = 0;
    n->row = row; n->first = first; n->ops = 0; n->hash = 0;
    n->tmp = STACKPTX__NONE;
    n->ref = 0; n->ref_len = 0;
    n->kind = (uint8_t)kind; n->type = (uint8_t)type;
    n->n_ops = 0; n->m = 0; n->mark = 0; n->hashed = 0; n->pad0 = 0; n->pad1 = 0;
}

STACKPTX__INLINE stackptx__node *stackptx__new_node(stackptx__ctx *c, uint32_t kind, uint32_t type)
{
    stackptx__node *n = &c->nodes[c->n_nodes];
    stackptx__init_node(n, kind, type, 0, 0);
    return n;
}

/* Input node of input i (created on first use); NONE at the node limit. */
static uint32_t stackptx__input(stackptx__ctx *c, uint32_t i)
{
    stackptx__node *n;
    if (c->in_node[i] != STACKPTX__NONE) return c->in_node[i];
    if (c->n_nodes >= c->L.max_nodes) return STACKPTX__NONE;
    n = stackptx__new_node(c, STACKPTX__N_INPUT, c->io->input_types[i]);
    n->row = i;
    n->ref = c->in_ref[i];
    n->ref_len = 1 + c->io->input_name_lens[i];
    c->in_node[i] = c->n_nodes;
    return c->n_nodes++;
}

/* Constant node (merged by type + bits); NONE at the node limit unless `reserved`. */
static uint32_t stackptx__const(stackptx__ctx *c, uint32_t type, uint64_t bits, int reserved)
{
    uint32_t h, i, k, e = 0;
    stackptx__node *n;
    bits = stackptx__canon(c, type, bits);
    h = stackptx__const_hash(type, bits);
    if ((c->hcount + 1) * 2 > c->hmask + 1) stackptx__hash_grow(c);
    i = h & c->hmask;
    for (k = 0; k <= c->hmask; k++, i = (i + 1) & c->hmask) {
        e = c->hash[i];
        if (!e) break;
        n = &c->nodes[e - 1];
        if (n->hash == h && n->kind == STACKPTX__N_CONST && n->type == type && n->bits == bits) return e - 1;
    }
    if (c->n_nodes >= (reserved ? c->node_cap : c->L.max_nodes)) return STACKPTX__NONE;
    n = stackptx__new_node(c, STACKPTX__N_CONST, type);
    n->bits = bits;
    n->hash = h;
    if (k <= c->hmask && !e) {
        n->hashed = 1;
        c->hash[i] = c->n_nodes + 1;
        c->hcount++;
    }
    return c->n_nodes++;
}

static int stackptx__same_ops(const uint32_t *a, const uint32_t *b, uint32_t n, int comm)
{
    uint32_t i;
    if (comm && !(a[0] == b[0] && a[1] == b[1]) && !(a[0] == b[1] && a[1] == b[0])) return 0;
    for (i = comm ? 2u : 0u; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* Instance of row `row` (summary e, e->m >= 1 result nodes) on operand ids ops[0..total):
   returns its first node (merged with an equal one unless volatile), or NONE at the limit. */
static uint32_t stackptx__instr(stackptx__ctx *c, uint32_t row, const stackptx__rc *e, const uint32_t *ops)
{
    uint32_t h = 0, i = 0, k = 0, hit = 0, id, j, w, first, n_ops = e->total, m = e->m;
    stackptx__node *n;
    if (!e->vol) {
        h = stackptx__instr_hash(row, ops, n_ops, e->comm);
        if ((c->hcount + 1) * 2 > c->hmask + 1) stackptx__hash_grow(c);
        i = h & c->hmask;
        for (k = 0; k <= c->hmask; k++, i = (i + 1) & c->hmask) {
            hit = c->hash[i];
            if (!hit) break;
            n = &c->nodes[hit - 1];
            if (n->hash == h && n->kind == STACKPTX__N_INSTR && n->row == row && n->n_ops == n_ops &&
                stackptx__same_ops(c->pool + n->ops, ops, n_ops, e->comm))
                return hit - 1;
        }
    }
    if (m > c->L.max_nodes - c->n_nodes || n_ops > c->pool_cap - c->n_pool) return STACKPTX__NONE;
    first = c->n_nodes;
    n = &c->nodes[first];
    for (j = 0; j < e->n_res; j++)
        for (w = 0; w < e->rw[j]; w++) stackptx__init_node(n++, STACKPTX__N_INSTR, e->rt[j], row, first);
    c->n_nodes += m;
    id = first;
    n = &c->nodes[id];
    n->ops = c->n_pool;
    n->n_ops = (uint8_t)n_ops;
    n->m = (uint8_t)m;
    n->hash = h;
    for (j = 0; j < n_ops; j++) c->pool[c->n_pool + j] = ops[j];
    c->n_pool += n_ops;
    if (!e->vol && k <= c->hmask && !hit) {
        n->hashed = 1;
        c->hash[i] = first + 1;
        c->hcount++;
    }
    return first;
}

/* ---- output writer ---------------------------------------------------------------------- */

static void stackptx__out_init(stackptx__out *o, char *buf, size_t cap, char *dummy)
{
    if (!buf) { buf = dummy; cap = 0; }
    o->base = o->w = buf;
    o->end = buf + cap;
    o->over = 0;
}

static size_t stackptx__out_len(const stackptx__out *o) { return (size_t)(o->w - o->base) + o->over; }

/* n bytes from s to d; fixed-size moves for short strings (no library call) */
STACKPTX__INLINE void stackptx__copy(char *d, const char *s, size_t n)
{
    if (n >= 8) {
        if (n <= 16) {
            uint64_t a, b;
            memcpy(&a, s, 8); memcpy(&b, s + n - 8, 8);
            memcpy(d, &a, 8); memcpy(d + n - 8, &b, 8);
        } else {
            memcpy(d, s, n);
        }
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4); memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4); memcpy(d + n - 4, &b, 4);
    } else if (n) {
        char a = s[0], b = s[n >> 1], e = s[n - 1];
        d[0] = a; d[n >> 1] = b; d[n - 1] = e;
    }
}

static void stackptx__put_slow(stackptx__out *o, const char *s, size_t n)
{
    if ((size_t)(o->end - o->w) >= n) {
        memcpy(o->w, s, n);
        o->w += n;
    } else {
        o->over += n;
        o->end = o->w;   /* nothing more is written */
    }
}

STACKPTX__INLINE void stackptx__put(stackptx__out *o, const char *s, size_t n)
{
    if ((size_t)(o->end - o->w) >= n) {
        stackptx__copy(o->w, s, n);
        o->w += n;
    } else {
        stackptx__put_slow(o, s, n);
    }
}

/* s has at least 16 readable bytes: short texts move as one 16-byte block (the bytes after
   the n written ones are scratch, overwritten later or left past the end of the text) */
STACKPTX__INLINE void stackptx__put16(stackptx__out *o, const char *s, size_t n)
{
    if (n <= 16 && (size_t)(o->end - o->w) >= 16) {
        memcpy(o->w, s, 16);
        o->w += n;
    } else {
        stackptx__put_slow(o, s, n);
    }
}

/* Direct writing: a pointer with room for n bytes in the output, or the scratch buffer `tmp`
   (then stackptx__done copies it through the checked writer). Numbers are written straight into
   the output: formatting them in a local buffer and copying would reload freshly stored bytes. */
STACKPTX__INLINE char *stackptx__room(stackptx__out *o, size_t n, char *tmp)
{
    return (size_t)(o->end - o->w) >= n ? o->w : tmp;
}

STACKPTX__INLINE void stackptx__done(stackptx__out *o, char *p, char *start, char *tmp)
{
    if (start == tmp) stackptx__put_slow(o, tmp, (size_t)(p - tmp));
    else o->w = p;
}

/* decimal digits of v at d; returns the end */
static char *stackptx__utoa(char *d, uint64_t v)
{
    uint64_t t = v;
    char *e;
    int n = 1;
    while (t >= 10) { t /= 10; n++; }
    e = d + n;
    while (n--) { d[n] = (char)('0' + v % 10); v /= 10; }
    return e;
}

STACKPTX__INLINE char *stackptx__utoa32(char *d, uint32_t v)
{
    if (v < 10) { *d = (char)('0' + v); return d + 1; }
    if (v < 100) { memcpy(d, stackptx__digits2 + 2 * v, 2); return d + 2; }
    return stackptx__utoa(d, v);
}

/* `digits` (4, 8 or 16) upper-case hex digits of v at d; returns the end */
static char *stackptx__hex(char *d, uint64_t v, int digits)
{
    char *e = d + digits;
    while (digits > 0) {
        digits -= 2;
        memcpy(d + digits, stackptx__hex2 + 2 * (v & 0xFF), 2);
        v >>= 8;
    }
    return e;
}

/* "%_s<tmp>" then the suffix (ns <= 3 bytes) */
STACKPTX__INLINE void stackptx__put_tmp(stackptx__out *o, uint32_t tmp, const char *suffix, size_t ns)
{
    char buf[24], *d = stackptx__room(o, sizeof buf, buf), *p = d;
    p[0] = '%'; p[1] = '_'; p[2] = 's';
    p = stackptx__utoa32(p + 3, tmp);
    if (ns) { memcpy(p, suffix, ns); p += ns; }
    stackptx__done(o, p, d, buf);
}

/* operand text of a value: %<input> or %_s<tmp> */
STACKPTX__INLINE void stackptx__put_ref(stackptx__out *o, const stackptx__ctx *c, uint32_t id)
{
    const stackptx__node *n = &c->nodes[id];
    stackptx__put16(o, c->text + n->ref, n->ref_len);
}

/* "mov.<rt> " (the prefix buffers hold 32 bytes, copied whole) */
STACKPTX__INLINE void stackptx__put_mov(stackptx__out *o, const stackptx__ctx *c, uint32_t type)
{
    char buf[40], *d = stackptx__room(o, sizeof buf, buf);
    memcpy(d, c->mov[type], 32);
    stackptx__done(o, d + c->mov_len[type], d, buf);
}

/* ".reg .<rt> %_s<tmp>;\n" */
static void stackptx__put_decl(stackptx__out *o, const stackptx__ctx *c, uint32_t type, uint32_t tmp)
{
    char buf[48], *d = stackptx__room(o, sizeof buf, buf), *p;
    memcpy(d, c->decl[type], 32);
    p = stackptx__utoa32(d + c->decl_len[type], tmp);
    p[0] = ';'; p[1] = '\n';
    stackptx__done(o, p + 2, d, buf);
}

/* "mov.<rt> %_s<tmp>, <literal>;\n" */
static void stackptx__put_const(stackptx__out *o, const stackptx__ctx *c, const stackptx__node *n)
{
    char buf[96], *d = stackptx__room(o, sizeof buf, buf), *p;
    uint64_t v = n->bits;
    memcpy(d, c->mov[n->type], 32);
    p = d + c->mov_len[n->type];
    p[0] = '%'; p[1] = '_'; p[2] = 's';
    p = stackptx__utoa32(p + 3, n->tmp);
    p[0] = ','; p[1] = ' ';
    p += 2;
    switch (stackptx__lit[c->base[n->type]]) {   /* the literal form (generated table) */
    case STACKPTX__LIT_PRED: *p++ = v ? '1' : '0'; break;
    case STACKPTX__LIT_HEX:   /* f16, bf16, the packed pairs, the b types: all their bits */
        *p++ = '0'; *p++ = 'x'; p = stackptx__hex(p, v, stackptx__bits[c->base[n->type]] >> 2); break;
    case STACKPTX__LIT_F32: *p++ = '0'; *p++ = 'f'; p = stackptx__hex(p, v, 8); break;
    case STACKPTX__LIT_F64: *p++ = '0'; *p++ = 'd'; p = stackptx__hex(p, v, 16); break;
    case STACKPTX__LIT_SIGNED: {
        unsigned b = stackptx__bits[c->base[n->type]];
        uint64_t mask = b >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << b) - 1;
        if (v >> (b - 1) & 1) { *p++ = '-'; v = (~v + 1) & mask; }
        p = stackptx__utoa(p, v);
        break;
    }
    default: p = stackptx__utoa(p, v); break;   /* STACKPTX__LIT_UNSIGNED */
    }
    *p++ = ';';
    *p++ = '\n';
    stackptx__done(o, p, d, buf);
}

/* vector slot k of the instance whose first node is f */
static void stackptx__put_vslot(stackptx__out *o, const stackptx__ctx *c, uint32_t f, const stackptx__rc *e,
                                uint32_t k)
{
    uint32_t base = e->slot_base[k], w = e->slot_w[k], i;
    const uint32_t *ops = c->pool + c->nodes[f].ops;
    stackptx__put(o, "{", 1);
    for (i = 0; i < w; i++) {
        if (i) stackptx__put(o, ", ", 2);
        stackptx__put_ref(o, c, e->slot_res[k] ? f + base + i : ops[base + i]);
    }
    stackptx__put(o, "}", 1);
}

/* slot k of the instance whose first node is f */
STACKPTX__INLINE void stackptx__put_slot(stackptx__out *o, const stackptx__ctx *c, uint32_t f,
                                         const stackptx__rc *e, uint32_t k)
{
    uint32_t base = e->slot_base[k];
    if (e->slot_w[k] != 1) stackptx__put_vslot(o, c, f, e, k);
    else if (e->slot_res[k]) stackptx__put_ref(o, c, f + base);
    else stackptx__put_ref(o, c, c->pool[c->nodes[f].ops + base]);
}

/* first '$' in [s, e), or e; eight bytes at a time */
static const char *stackptx__dollar(const char *s, const char *e)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (e - s >= 8) {
        uint64_t x;
        memcpy(&x, s, 8);
        x ^= 0x2424242424242424u;   /* '$' bytes become 0 */
        if ((x - ones) & ~x & highs) break;
        s += 8;
    }
    while (s < e && *s != '$') s++;
    return s;
}

static void stackptx__put_instr(stackptx__out *o, stackptx__ctx *c, uint32_t f)
{
    uint32_t row = c->nodes[f].row, i, pos = 0;
    stackptx__rc *e = stackptx__rc_get(c, row);
    if (e->n_pieces == STACKPTX__PIECES_TODO) stackptx__rc_split(e, &c->t->rows[row]);
    if (e->n_pieces != STACKPTX__PIECES_NONE && c->refs16 && (size_t)(o->end - o->w) >= e->bound) {
        /* fast path: the line fits for sure; every piece and operand text moves as 16 bytes */
        char *p = o->w;
        const char *t = e->txt, *text = c->text;
        const stackptx__node *nodes = c->nodes;
        const uint32_t *ops = c->pool + nodes[f].ops;
        for (i = 0; i < e->n_pieces; i++) {
            uint32_t len = e->piece_end[i] - pos, k = e->piece_k[i], base = e->slot_base[k], w = e->slot_w[k];
            if (len <= 16) memcpy(p, t + pos, 16);
            else memcpy(p, t + pos, len);
            p += len;
            if (w == 1) {
                const stackptx__node *n = &nodes[e->slot_res[k] ? f + base : ops[base]];
                memcpy(p, text + n->ref, 16);
                p += n->ref_len;
            } else {
                uint32_t q;
                *p++ = '{';
                for (q = 0; q < w; q++) {
                    const stackptx__node *n = &nodes[e->slot_res[k] ? f + base + q : ops[base + q]];
                    if (q) { p[0] = ','; p[1] = ' '; p += 2; }
                    memcpy(p, text + n->ref, 16);
                    p += n->ref_len;
                }
                *p++ = '}';
            }
            pos = e->piece_end[i] + 2u;
        }
        i = e->fmt_len + 1u - pos;
        if (i <= 16) memcpy(p, t + pos, 16);
        else memcpy(p, t + pos, i);
        o->w = p + i;
    } else if (e->n_pieces != STACKPTX__PIECES_NONE) {   /* pre-split fmt */
        for (i = 0; i < e->n_pieces; i++) {
            stackptx__put16(o, e->txt + pos, e->piece_end[i] - pos);
            stackptx__put_slot(o, c, f, e, e->piece_k[i]);
            pos = e->piece_end[i] + 2u;
        }
        stackptx__put16(o, e->txt + pos, e->fmt_len + 1u - pos);   /* with the '\n' */
    } else {                                      /* long or slot-heavy fmt: scan it */
        const stackptx_instr *r = &c->t->rows[row];
        const char *s = r->fmt, *end = r->fmt + r->fmt_len, *seg = s;
        uint32_t slots = (uint32_t)e->n_res + e->n_ops;
        for (;;) {
            uint32_t k;
            s = stackptx__dollar(s, end);
            if (end - s < 2) break;
            k = (uint32_t)((unsigned char)s[1] - '0');
            if (k >= slots) { s++; continue; }   /* not a slot: copied as is */
            stackptx__put(o, seg, (size_t)(s - seg));
            stackptx__put_slot(o, c, f, e, k);
            s += 2;
            seg = s;
        }
        stackptx__put(o, seg, (size_t)(end - seg));
        stackptx__put(o, "\n", 1);
    }
}

static int stackptx__same_name(const char *a, uint32_t al, const char *b, uint32_t bl)
{
    return al == bl && memcmp(a, b, al) == 0;
}

/* number a temporary: its operand text "%_s<tmp>" goes to its 16-byte text slot */
STACKPTX__INLINE void stackptx__number(stackptx__ctx *c, stackptx__node *n, uint32_t tmp)
{
    char *p = c->text + c->tmp_text + (size_t)tmp * 16, *e;
    memset(p, 0, 16);   /* the slot is read whole */
    p[0] = '%'; p[1] = '_'; p[2] = 's';
    e = stackptx__utoa32(p + 3, tmp);
    n->tmp = tmp;
    n->ref = c->tmp_text + tmp * 16;
    n->ref_len = (uint32_t)(e - p);
}

/* Marks, numbers and writes the stub for the values c->out_val[0..n_outputs). */
/* Reachability: one backward pass (operands precede their users); the marked constants and
   instances (by their first node) are listed in c->list in reverse creation order. Returns
   their number. */
static uint32_t stackptx__reach(stackptx__ctx *c)
{
    stackptx__node *nodes = c->nodes;
    uint32_t *list = c->list, nl = 0, i, j, k;
    for (k = 0; k < c->io->n_outputs; k++)
        if (c->out_val[k] != STACKPTX__NONE) nodes[c->out_val[k]].mark = 1;
    for (i = c->n_nodes; i-- > 0;) {
        const stackptx__node *n = &nodes[i];
        const uint32_t *ops;
        if (n->kind == STACKPTX__N_CONST) {
            if (n->mark) list[nl++] = i;
            continue;
        }
        if (n->kind != STACKPTX__N_INSTR || n->first != i) continue;
        for (j = 0; j < n->m && !nodes[i + j].mark; j++) {}
        if (j == n->m) continue;
        list[nl++] = i;
        ops = c->pool + n->ops;
        for (j = 0; j < n->n_ops; j++) nodes[ops[j]].mark = 1;
    }
    return nl;
}

static void stackptx__emit(stackptx__ctx *c, stackptx__out *o)
{
    const stackptx_io *io = c->io;
    stackptx__node *nodes = c->nodes;
    uint32_t *list = c->list, nl = stackptx__reach(c), i, j, k, next = 0, unwritten = 0;

    /* temporaries in creation order, declared as they are numbered */
    stackptx__put(o, "{\n", 2);
    for (i = nl; i-- > 0;) {
        stackptx__node *n = &nodes[list[i]];
        uint32_t m = n->kind == STACKPTX__N_CONST ? 1u : n->m;
        for (j = 0; j < m; j++) {
            stackptx__put_decl(o, c, n[j].type, next);
            stackptx__number(c, &n[j], next++);
        }
    }
    /* clobber copies (after the DAG temporaries) */
    for (k = 0; k < io->n_outputs; k++) {
        uint32_t v = c->out_val[k], in;
        if (v == STACKPTX__NONE || nodes[v].kind != STACKPTX__N_INPUT || nodes[v].tmp != STACKPTX__NONE) continue;
        in = nodes[v].row;
        for (j = 0; j < k; j++)
            if (c->out_val[j] != v && c->out_val[j] != STACKPTX__NONE && stackptx__same_name(io->output_names[j], io->output_name_lens[j],
                                                         io->input_names[in], io->input_name_lens[in]))
                break;
        if (j < k) {
            nodes[v].tmp = next;
            c->copies[c->n_copies++] = v;
            stackptx__put_decl(o, c, nodes[v].type, next++);
        }
    }

    for (i = nl; i-- > 0;) {
        if (nodes[list[i]].kind == STACKPTX__N_CONST) stackptx__put_const(o, c, &nodes[list[i]]);
        else stackptx__put_instr(o, c, list[i]);
    }
    for (i = 0; i < c->n_copies; i++) {
        const stackptx__node *n = &nodes[c->copies[i]];
        stackptx__put_mov(o, c, n->type);
        stackptx__put_tmp(o, n->tmp, ", ", 2);
        stackptx__put16(o, c->text + n->ref, n->ref_len);
        stackptx__put(o, ";\n", 2);
    }
    for (k = 0; k < io->n_outputs; k++) {
        const stackptx__node *n;
        if (c->out_val[k] == STACKPTX__NONE) { unwritten++; continue; }
        n = &nodes[c->out_val[k]];
        stackptx__put_mov(o, c, io->output_types[k]);
        stackptx__put16(o, c->text + c->out_ref[k], 1 + io->output_name_lens[k]);
        stackptx__put(o, ", ", 2);
        if (n->kind == STACKPTX__N_INPUT && n->tmp != STACKPTX__NONE) stackptx__put_tmp(o, n->tmp, ";\n", 2);
        else {
            stackptx__put16(o, c->text + n->ref, n->ref_len);
            stackptx__put(o, ";\n", 2);
        }
    }
    stackptx__put(o, "}\n", 2);
    c->d->emitted = nl + c->n_copies + io->n_outputs - unwritten;
    c->d->nodes = c->n_nodes;
}

/* ---- Stack PTX -------------------------------------------------------------------------- */

static void stackptx__limit_hit(stackptx__ctx *c, uint32_t flag)
{
    if (c->d->first_limit_word == STACKPTX__NONE) c->d->first_limit_word = c->top;
    c->d->flags |= flag;
}

STACKPTX__INLINE void stackptx__push(stackptx__ctx *c, uint32_t t, uint32_t id)
{
    c->stk[(size_t)t * c->L.cap + c->sz[t]++] = id;
}

/* INSTR in the mm-ptx dialect, operands present (mm-ptx's stack_ptx.h, _stack_ptx_ast_run_ptx
   and _stack_ptx_compile_ptx): operand 0 (component 0 first) comes off the top; the results go
   on last to first, so result 0 (component 0) ends on top, except a row without operands (a
   special register: mm-ptx pushes .x first, .w ends on top); a result that finds its stack full
   is dropped, the others still go on. */
static int stackptx__stack_instr_mm(stackptx__ctx *c, uint32_t row, const stackptx__rc *e, uint32_t *ops)
{
    uint32_t j, k, idx = 0, first, f, t, cap = c->L.cap;
    uint32_t owner[32];   /* result component f -> its type */
    for (j = 0; j < e->n_ops; j++) {
        t = e->ot[j];
        for (k = 0; k < e->ow[j]; k++) ops[idx++] = c->stk[(size_t)t * cap + --c->sz[t]];
    }
    if (!e->m) return 1;
    first = stackptx__instr(c, row, e, ops);
    if (first == STACKPTX__NONE) {
        for (k = 0; k < e->nn; k++) c->sz[e->need_t[k]] += e->need_n[k];   /* undo the pops */
        stackptx__limit_hit(c, STACKPTX_D_NODE_LIMIT);
        return 0;
    }
    for (j = 0, f = 0; j < e->n_res; j++)
        for (k = 0; k < e->rw[j]; k++) owner[f++] = e->rt[j];
    for (k = 0; k < f; k++) {
        uint32_t r = e->n_ops ? f - 1 - k : k;
        t = owner[r];
        if (c->sz[t] == cap) { stackptx__limit_hit(c, STACKPTX_D_STACK_OVERFLOW); continue; }
        stackptx__push(c, t, first + r);
    }
    return 1;
}

/* INSTR in Stack PTX; returns 1 when the word changed the state, 0 for a no-op. */
static int stackptx__stack_instr(stackptx__ctx *c, uint32_t row)
{
    const stackptx__rc *e;
    uint32_t ops[32];   /* operand ids, in operand order (<= 4 x 8) */
    uint32_t j, k, idx, first, id, cap = c->L.cap;
    if (row >= c->t->n_rows || !(e = stackptx__rc_get(c, row))->ok) {
        c->d->flags |= STACKPTX_D_MALFORMED_WORD;
        return 0;
    }
    for (k = 0; k < e->nn; k++)
        if (c->sz[e->need_t[k]] < e->need_n[k]) return 0;   /* missing operands */
    if (c->L.mm) return stackptx__stack_instr_mm(c, row, e, ops);
    for (k = 0; k < e->np; k++)                             /* room for the results */
        if (c->sz[e->push_t[k]] - e->push_pop[k] + e->push_n[k] > cap) {
            stackptx__limit_hit(c, STACKPTX_D_STACK_OVERFLOW);
            return 0;
        }
    /* pop: operands from last to first, a vector's last component on top */
    idx = e->total;
    for (j = e->n_ops; j-- > 0;) {
        uint32_t t = e->ot[j], w = e->ow[j], n = c->sz[t];
        const uint32_t *p = c->stk + (size_t)t * cap + n - w;
        idx -= w;
        for (k = 0; k < w; k++) ops[idx + k] = p[k];
        c->sz[t] = n - w;
    }
    if (!e->m) return 1;
    first = stackptx__instr(c, row, e, ops);
    if (first == STACKPTX__NONE) {
        for (k = 0; k < e->nn; k++) c->sz[e->need_t[k]] += e->need_n[k];   /* undo the pops */
        stackptx__limit_hit(c, STACKPTX_D_NODE_LIMIT);
        return 0;
    }
    id = first;
    for (j = 0; j < e->n_res; j++) {
        uint32_t t = e->rt[j], w = e->rw[j];
        uint32_t *p = c->stk + (size_t)t * cap + c->sz[t];
        for (k = 0; k < w; k++) p[k] = id++;
        c->sz[t] += w;
    }
    return 1;
}

/* META in the mm-ptx dialect (mm-ptx's _stack_ptx_ast_run_meta): yank_dup, swap_with, replace
   and drop pop their depth/count off the meta stack whether or not they then run; dup, swap,
   clear, rotate and reverse take none. rotate: the top goes two down (top-first t m b -> m b t);
   reverse: the whole stack; replace(d): the item at depth d (top = 0) becomes the top, which is
   popped; drop(n): pops n, only when more than n are there; yank_dup, swap_with and replace do
   nothing on a full stack. Returns 0 when the state did not change. */
static int stackptx__meta_mm(stackptx__ctx *c, uint32_t t, uint32_t op)
{
    uint32_t cap = c->L.cap, n = c->sz[t], d = 0, v, i;
    uint32_t *p = c->stk + (size_t)t * cap;
    if (op == STACKPTX_M_YANK_DUP || op == STACKPTX_M_SWAP_WITH || op == STACKPTX_M_REPLACE ||
        op == STACKPTX_M_DROP) {
        if (!c->n_meta) return 0;
        d = c->meta[--c->n_meta];
    }
    switch (op) {
    case STACKPTX_M_DUP:
    case STACKPTX_M_YANK_DUP:
        if (d >= n) return op == STACKPTX_M_YANK_DUP;
        if (n == cap) { stackptx__limit_hit(c, STACKPTX_D_STACK_OVERFLOW); return op == STACKPTX_M_YANK_DUP; }
        p[n] = p[n - 1 - d];
        c->sz[t] = n + 1;
        return 1;
    case STACKPTX_M_SWAP:
        if (n < 2) return 0;
        v = p[n - 1]; p[n - 1] = p[n - 2]; p[n - 2] = v;
        return 1;
    case STACKPTX_M_SWAP_WITH:
        if (d < n && n < cap) { v = p[n - 1]; p[n - 1] = p[n - 1 - d]; p[n - 1 - d] = v; }
        return 1;
    case STACKPTX_M_REPLACE:
        if (d < n && n < cap) { p[n - 1 - d] = p[n - 1]; c->sz[t] = n - 1; }
        return 1;
    case STACKPTX_M_DROP:
        if (d < n) c->sz[t] = n - d;
        return 1;
    case STACKPTX_M_CLEAR:
        if (!n) return 0;
        c->sz[t] = 0;
        return 1;
    case STACKPTX_M_ROTATE:
        if (n < 3) return 0;
        v = p[n - 1]; p[n - 1] = p[n - 2]; p[n - 2] = p[n - 3]; p[n - 3] = v;
        return 1;
    default: /* REVERSE */
        if (n < 2) return 0;
        for (i = 0; i < n / 2; i++) { v = p[i]; p[i] = p[n - 1 - i]; p[n - 1 - i] = v; }
        return 1;
    }
}

static int stackptx__meta(stackptx__ctx *c, uint32_t t, uint32_t op)
{
    uint32_t cap = c->L.cap, n = c->sz[t], d = 0, v, i;
    uint32_t *p = c->stk + (size_t)t * cap;
    if (op == STACKPTX_M_YANK_DUP || op == STACKPTX_M_SWAP_WITH || op == STACKPTX_M_REPLACE ||
        op == STACKPTX_M_ROTATE || op == STACKPTX_M_REVERSE) {
        if (!c->n_meta) return 0;
        d = c->meta[c->n_meta - 1];
    }
    switch (op) {
    case STACKPTX_M_DUP:
        if (!n) return 0;
        if (n == cap) { stackptx__limit_hit(c, STACKPTX_D_STACK_OVERFLOW); return 0; }
        p[n] = p[n - 1];
        c->sz[t] = n + 1;
        return 1;
    case STACKPTX_M_YANK_DUP:
        if (d >= n) return 0;
        if (n == cap) { stackptx__limit_hit(c, STACKPTX_D_STACK_OVERFLOW); return 0; }
        p[n] = p[n - 1 - d];
        c->sz[t] = n + 1;
        break;
    case STACKPTX_M_SWAP:
        if (n < 2) return 0;
        v = p[n - 1]; p[n - 1] = p[n - 2]; p[n - 2] = v;
        return 1;
    case STACKPTX_M_SWAP_WITH:
        if (d >= n) return 0;
        v = p[n - 1]; p[n - 1] = p[n - 1 - d]; p[n - 1 - d] = v;
        break;
    case STACKPTX_M_REPLACE:
        if (n < 2 || d >= n - 1) return 0;
        p[n - 2 - d] = p[n - 1];
        c->sz[t] = n - 1;
        break;
    case STACKPTX_M_DROP:
        if (!n) return 0;
        c->sz[t] = n - 1;
        return 1;
    case STACKPTX_M_CLEAR:
        if (!n) return 0;
        c->sz[t] = 0;
        return 1;
    case STACKPTX_M_ROTATE:
        if (d >= n) return 0;
        v = p[n - 1 - d];
        for (i = n - 1 - d; i < n - 1; i++) p[i] = p[i + 1];
        p[n - 1] = v;
        break;
    default: /* REVERSE */
        if (d > n) return 0;
        for (i = 0; i < d / 2; i++) { v = p[n - 1 - i]; p[n - 1 - i] = p[n - d + i]; p[n - d + i] = v; }
        break;
    }
    c->n_meta--;   /* the depth is consumed only by an op that executed */
    return 1;
}

/* The input a tagged INPUT word reads (its own index when that input has the tag: the usual
   case, one compare), or NONE when no input has the tag. */
static uint32_t stackptx__tagged_input(const stackptx_io *io, uint64_t w)
{
    uint32_t a = (uint32_t)(w >> 16) & 0xFFFF, tag = (uint32_t)(w >> 32), i;
    if (a < io->n_inputs && io->input_tags[a] == tag) return a;
    for (i = 0; i < io->n_inputs; i++)
        if (io->input_tags[i] == tag) return i;
    return STACKPTX__NONE;
}

static void stackptx__stack_run(stackptx__ctx *c, const uint64_t *words, uint32_t n_words)
{
    stackptx_diag *d = c->d;
    const stackptx_io *io = c->io;
    const uint64_t *wp = words;   /* the current frame lives in locals; frames[] keeps callers */
    uint32_t depth = 0, cap = c->L.cap, pos = 0, end = n_words, steps = 0, max_steps = c->L.max_steps;
    uint32_t noops = 0;
    for (;;) {
        uint64_t w;
        uint32_t kind, type, a, id;
        int did = 1;
        if (pos >= end) {
            if (!depth) break;
            if (c->L.mm) {   /* mm-ptx routines end in a RETURN word, which is a step */
                if (steps >= max_steps) { stackptx__limit_hit(c, STACKPTX_D_STEP_LIMIT); break; }
                steps++;
            }
            depth--;
            wp = c->frames[depth].w; pos = c->frames[depth].pos; end = c->frames[depth].end;
            continue;
        }
        if (!depth) c->top = pos;
        if (steps >= max_steps) { stackptx__limit_hit(c, STACKPTX_D_STEP_LIMIT); break; }
        steps++;
        w = wp[pos++];
        kind = (uint32_t)(w & 0xFF);
        type = (uint32_t)(w >> 8) & 0xFF;
        a = (uint32_t)(w >> 16) & 0xFFFF;
        switch (kind) {
        case STACKPTX_K_NOP: did = 0; break;
        case STACKPTX_K_INPUT:
            if ((w >> 32) && io->input_tags && (a = stackptx__tagged_input(io, w)) == STACKPTX__NONE) {
                d->flags |= STACKPTX_D_UNKNOWN_INPUT;
                goto malformed;
            }
            if (a >= io->n_inputs) goto malformed;
            type = io->input_types[a];
            if (c->sz[type] == cap) { stackptx__limit_hit(c, STACKPTX_D_STACK_OVERFLOW); did = 0; break; }
            id = stackptx__input(c, a);
            if (id == STACKPTX__NONE) { stackptx__limit_hit(c, STACKPTX_D_NODE_LIMIT); did = 0; break; }
            stackptx__push(c, type, id);
            break;
        case STACKPTX_K_CONST:
        case STACKPTX_K_CONST64: {
            uint64_t bits;
            if (kind == STACKPTX_K_CONST64) {
                if (pos >= end) goto malformed;
                bits = wp[pos++];
                if (type >= c->n_types) goto malformed;
            } else {
                if (type >= c->n_types) goto malformed;
                bits = w >> 32;
                if (c->base[type] == STACKPTX_T_S64 && (bits & 0x80000000u)) bits |= 0xFFFFFFFF00000000u;
            }
            if (c->sz[type] == cap) { stackptx__limit_hit(c, STACKPTX_D_STACK_OVERFLOW); did = 0; break; }
            id = stackptx__const(c, type, bits, 0);
            if (id == STACKPTX__NONE) { stackptx__limit_hit(c, STACKPTX_D_NODE_LIMIT); did = 0; break; }
            stackptx__push(c, type, id);
            break;
        }
        case STACKPTX_K_INSTR: did = stackptx__stack_instr(c, a); break;
        case STACKPTX_K_META_CONST:
            if (c->n_meta == c->L.meta_cap) { stackptx__limit_hit(c, STACKPTX_D_META_OVERFLOW); did = 0; break; }
            c->meta[c->n_meta++] = a;
            break;
        case STACKPTX_K_META:
            if (type >= c->n_types || a > STACKPTX_M_REVERSE) goto malformed;
            did = c->L.mm ? stackptx__meta_mm(c, type, a) : stackptx__meta(c, type, a);
            break;
        case STACKPTX_K_ROUTINE: {
            const uint32_t *off;
            if (!c->r || a >= c->r->n) goto malformed;
            if (depth >= c->L.max_depth) { stackptx__limit_hit(c, STACKPTX_D_DEPTH_LIMIT); did = 0; break; }
            c->frames[depth].w = wp; c->frames[depth].pos = pos; c->frames[depth].end = end;
            depth++;
            off = c->r->offsets;
            wp = c->r->words + off[a];
            pos = 0;
            end = off[a + 1] - off[a];
            break;
        }
        case STACKPTX_K_STORE:
            if (type >= c->n_types) goto malformed;
            if (a >= c->L.n_slots || !c->sz[type]) { did = 0; break; }
            c->slots[a] = c->stk[(size_t)type * cap + --c->sz[type]];
            break;
        case STACKPTX_K_LOAD:
            /* mm-ptx's load names no type: the value goes back on its own type's stack */
            if (c->L.mm && a < c->L.n_slots && c->slots[a] != STACKPTX__NONE) type = c->nodes[c->slots[a]].type;
            if (type >= c->n_types) goto malformed;
            if (a >= c->L.n_slots || c->slots[a] == STACKPTX__NONE || c->nodes[c->slots[a]].type != type) {
                did = 0;
                break;
            }
            if (c->sz[type] == cap) { stackptx__limit_hit(c, STACKPTX_D_STACK_OVERFLOW); did = 0; break; }
            stackptx__push(c, type, c->slots[a]);
            break;
        case STACKPTX_K_RETURN:
            if (!depth) { pos = end; break; }
            depth--;
            wp = c->frames[depth].w; pos = c->frames[depth].pos; end = c->frames[depth].end;
            break;
        default:
        malformed:
            d->flags |= STACKPTX_D_MALFORMED_WORD;
            did = 0;
            break;
        }
        noops += !did;
    }
    d->steps = steps;
    d->n_noops = noops;
}

/* Pops the outputs (zero constants for empty stacks) into c->out_val. */
static void stackptx__stack_outputs(stackptx__ctx *c)
{
    const stackptx_io *io = c->io;
    uint32_t k;
    for (k = 0; k < io->n_outputs; k++) {
        uint32_t t = io->output_types[k];
        if (c->sz[t]) {
            c->out_val[k] = c->stk[(size_t)t * c->L.cap + --c->sz[t]];
        } else {
            /* mm-ptx leaves an unsatisfied request's register untouched (NONE: no mov) */
            c->out_val[k] = c->L.mm ? STACKPTX__NONE : stackptx__const(c, t, 0, 1);   /* reserved room */
            c->d->n_unsatisfied++;
            c->d->flags |= STACKPTX_D_UNSATISFIED;
            if (k < 32) c->d->unsatisfied_mask |= 1u << k;
        }
    }
}

static stackptx_status stackptx__stack_one(stackptx__ctx *c, const uint64_t *words, uint32_t n_words,
                                           int strict, stackptx__out *o, stackptx_diag *d)
{
    stackptx__begin(c, d);
    stackptx__stack_run(c, words, n_words);
    stackptx__stack_outputs(c);
    stackptx__emit(c, o);
    if (o->over) return STACKPTX_ERR_BUFFER_TOO_SMALL;
    if (strict && d->n_unsatisfied) return STACKPTX_ERR_STRICT_UNSATISFIED;
    return STACKPTX_OK;
}

STACKPTX_DEF stackptx_status stackptx_compile(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    int strict, void *ws, size_t ws_size, char *out, size_t out_cap, size_t *out_len,
    stackptx_diag *diag)
{
    stackptx__ctx c;
    stackptx__out o;
    stackptx_diag local;
    stackptx_status st;
    char dummy[1];
    if (out_len) *out_len = 0;
    if (diag) stackptx__diag_reset(diag);
    if (!out_len || (!words && n_words) || n_words > UINT32_MAX || (!out && out_cap))
        return STACKPTX_ERR_INVALID_ARGUMENT;
    st = stackptx__setup(&c, t, io, lim, r, ws, ws_size);
    if (st != STACKPTX_OK) return st;
    stackptx__out_init(&o, out, out_cap, dummy);
    st = stackptx__stack_one(&c, words, (uint32_t)n_words, strict, &o, diag ? diag : &local);
    *out_len = stackptx__out_len(&o);
    return st;
}

STACKPTX_DEF stackptx_status stackptx_compile_many(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, const uint32_t *offsets, uint32_t n_programs,
    const stackptx_routines *r, int strict, void *ws, size_t ws_size, char *out, size_t out_cap,
    uint32_t *out_offsets, stackptx_diag *diags, uint32_t *n_done)
{
    stackptx__ctx c;
    stackptx_status st, result = STACKPTX_OK;
    stackptx_diag local;
    uint32_t i;
    size_t pos = 0, len;
    char dummy[1];
    if (n_done) *n_done = 0;
    if (!offsets || !out_offsets || (!out && out_cap)) return STACKPTX_ERR_INVALID_ARGUMENT;
    for (i = 0; i < n_programs; i++)
        if (offsets[i + 1] < offsets[i]) return STACKPTX_ERR_INVALID_ARGUMENT;
    if (!words && offsets[n_programs] > offsets[0]) return STACKPTX_ERR_INVALID_ARGUMENT;
    st = stackptx__setup(&c, t, io, lim, r, ws, ws_size);
    if (st != STACKPTX_OK) return st;
    for (i = 0; i < n_programs; i++) {
        stackptx__out o;
        stackptx_diag *d = diags ? &diags[i] : &local;
        stackptx__out_init(&o, out ? out + pos : NULL, out ? out_cap - pos : 0, dummy);
        st = stackptx__stack_one(&c, words + offsets[i], offsets[i + 1] - offsets[i], strict, &o, d);
        if (st == STACKPTX_ERR_BUFFER_TOO_SMALL) return st;
        len = stackptx__out_len(&o);
        if ((uint64_t)out_offsets[i] + len > UINT32_MAX) return STACKPTX_ERR_LIMIT;
        if (st == STACKPTX_ERR_STRICT_UNSATISFIED) result = st;
        pos += len;
        out_offsets[i + 1] = out_offsets[i] + (uint32_t)len;
        if (n_done) *n_done = i + 1;
    }
    return result;
}

/* ---- tapes (TAPES above; the interpreters' form of a program) -------------------------- */

/* Bounded tape writer: writes while it fits, then only counts. */
typedef struct stackptx__tw { uint32_t *w; size_t n, cap; } stackptx__tw;

STACKPTX__INLINE void stackptx__tput(stackptx__tw *t, uint32_t v)
{
    if (t->n < t->cap) t->w[t->n] = v;
    t->n++;
}

static void stackptx__trec(stackptx__tw *t, uint32_t w0, uint32_t dst, uint32_t x, uint32_t y,
                           const uint32_t *ops)
{
    uint32_t j;
    stackptx__tput(t, w0); stackptx__tput(t, dst); stackptx__tput(t, x); stackptx__tput(t, y);
    for (j = 0; j < 4; j++) stackptx__tput(t, ops ? ops[j] : STACKPTX__NONE);
}

/* The slot of node id (an input gets its record and slot on first use). */
static uint32_t stackptx__tslot(stackptx__ctx *c, stackptx__tw *t, uint32_t id, uint32_t *slot,
                                uint32_t *recs)
{
    stackptx__node *n = &c->nodes[id];
    if (n->tmp == STACKPTX__NONE && n->kind == STACKPTX__N_INPUT) {
        n->tmp = (*slot)++;
        stackptx__trec(t, STACKPTX_TAPE_INPUT | (uint32_t)n->type << 8 | 1u << 24, n->tmp, n->row, 0, NULL);
        (*recs)++;
    }
    return n->tmp;
}

static void stackptx__tape(stackptx__ctx *c, stackptx__tw *t)
{
    const stackptx_io *io = c->io;
    stackptx__node *nodes = c->nodes;
    uint32_t nl = stackptx__reach(c), i, j, k, slot = 0, recs = 0, ops[4];
    size_t head = t->n;
    for (k = 0; k < 4 + io->n_outputs; k++) stackptx__tput(t, 0);   /* filled below */
    for (i = nl; i-- > 0;) {
        stackptx__node *n = &nodes[c->list[i]];
        const uint32_t *pool;
        if (n->kind == STACKPTX__N_CONST) {
            n->tmp = slot++;
            stackptx__trec(t, STACKPTX_TAPE_CONST | (uint32_t)n->type << 8 | 1u << 24, n->tmp,
                           (uint32_t)n->bits, (uint32_t)(n->bits >> 32), NULL);
            recs++;
            continue;
        }
        pool = c->pool + n->ops;
        for (j = 0; j < 4; j++)
            ops[j] = j < n->n_ops ? stackptx__tslot(c, t, pool[j], &slot, &recs) : STACKPTX__NONE;
        for (j = 4; j < n->n_ops; j++) (void)stackptx__tslot(c, t, pool[j], &slot, &recs);
        stackptx__trec(t, STACKPTX_TAPE_INSTR | (uint32_t)n->type << 8 | (uint32_t)n->n_ops << 16
                          | (uint32_t)n->m << 24, slot, n->row, 0, ops);
        recs++;
        for (j = 0; j < n->m; j++) n[j].tmp = slot++;
    }
    for (k = 0; k < io->n_outputs; k++) {
        uint32_t v = c->out_val[k];
        v = v == STACKPTX__NONE ? STACKPTX__NONE : stackptx__tslot(c, t, v, &slot, &recs);
        if (head + 4 + k < t->cap) t->w[head + 4 + k] = v;
    }
    if (head + 4 <= t->cap) {
        t->w[head] = slot; t->w[head + 1] = recs; t->w[head + 2] = io->n_outputs;
        t->w[head + 3] = c->d->flags;
    }
    c->d->nodes = c->n_nodes;
    c->d->emitted = recs;
}

STACKPTX_DEF stackptx_status stackptx_tape_many(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, const uint32_t *offsets, uint32_t n_programs,
    const stackptx_routines *r, void *ws, size_t ws_size, uint32_t *out, size_t out_cap,
    uint64_t *out_offsets, stackptx_diag *diags, uint32_t *n_done)
{
    stackptx__ctx c;
    stackptx_status st;
    stackptx_diag local;
    stackptx__tw tw;
    uint32_t i;
    if (n_done) *n_done = 0;
    if (!offsets || !out_offsets || (!out && out_cap)) return STACKPTX_ERR_INVALID_ARGUMENT;
    for (i = 0; i < n_programs; i++)
        if (offsets[i + 1] < offsets[i]) return STACKPTX_ERR_INVALID_ARGUMENT;
    if (!words && offsets[n_programs] > offsets[0]) return STACKPTX_ERR_INVALID_ARGUMENT;
    st = stackptx__setup(&c, t, io, lim, r, ws, ws_size);
    if (st != STACKPTX_OK) return st;
    tw.w = out; tw.n = 0; tw.cap = out ? out_cap : 0;
    for (i = 0; i < n_programs; i++) {
        stackptx_diag *d = diags ? &diags[i] : &local;
        size_t start = tw.n;
        stackptx__begin(&c, d);
        stackptx__stack_run(&c, words + offsets[i], offsets[i + 1] - offsets[i]);
        stackptx__stack_outputs(&c);
        stackptx__tape(&c, &tw);
        if (tw.n > tw.cap) {
            tw.n = start;
            return STACKPTX_ERR_BUFFER_TOO_SMALL;
        }
        out_offsets[i + 1] = out_offsets[i] + (tw.n - start);
        if (n_done) *n_done = i + 1;
    }
    return STACKPTX_OK;
}

/* ---- AST PTX ---------------------------------------------------------------------------- */

static stackptx_status stackptx__ast_fail(stackptx__ctx *c, stackptx_status st, uint32_t word, uint32_t flag)
{
    c->d->error_word = word;
    c->d->flags |= flag;
    if (st == STACKPTX_ERR_LIMIT && c->d->first_limit_word == STACKPTX__NONE) c->d->first_limit_word = word;
    return st;
}

static stackptx_status stackptx__ast_run(stackptx__ctx *c, const uint64_t *words, uint32_t n_words,
                                         uint32_t *n_vals)
{
    stackptx_diag *d = c->d;
    const stackptx_io *io = c->io;
    uint32_t depth = 0, cap = c->L.cap, n = 0;
    uint32_t *stk = c->stk, *prod = c->prod;
    stackptx__frame *fr = c->frames;
    fr->w = words; fr->pos = 0; fr->end = n_words;
    for (;;) {
        uint64_t w;
        uint32_t kind, type, a, id;
        if (fr->pos >= fr->end) {
            if (!depth) break;
            fr = &c->frames[--depth];
            continue;
        }
        if (!depth) c->top = fr->pos;
        if (d->steps >= c->L.max_steps)
            return stackptx__ast_fail(c, STACKPTX_ERR_LIMIT, c->top, STACKPTX_D_STEP_LIMIT);
        d->steps++;
        w = fr->w[fr->pos++];
        kind = (uint32_t)(w & 0xFF);
        type = (uint32_t)(w >> 8) & 0xFF;
        a = (uint32_t)(w >> 16) & 0xFFFF;
        switch (kind) {
        case STACKPTX_K_INPUT:
            if ((w >> 32) && io->input_tags && (a = stackptx__tagged_input(io, w)) == STACKPTX__NONE) {
                d->flags |= STACKPTX_D_UNKNOWN_INPUT;
                goto bad;
            }
            if (a >= io->n_inputs) goto bad;
            if (n == cap) return stackptx__ast_fail(c, STACKPTX_ERR_LIMIT, c->top, STACKPTX_D_STACK_OVERFLOW);
            id = stackptx__input(c, a);
            if (id == STACKPTX__NONE) return stackptx__ast_fail(c, STACKPTX_ERR_LIMIT, c->top, STACKPTX_D_NODE_LIMIT);
            prod[n] = c->top; stk[n++] = id;
            break;
        case STACKPTX_K_CONST:
        case STACKPTX_K_CONST64: {
            uint64_t bits;
            if (kind == STACKPTX_K_CONST64) {
                if (fr->pos >= fr->end) goto bad;
                bits = fr->w[fr->pos++];
                if (type >= c->n_types) goto bad;
            } else {
                if (type >= c->n_types) goto bad;
                bits = w >> 32;
                if (c->base[type] == STACKPTX_T_S64 && (bits & 0x80000000u)) bits |= 0xFFFFFFFF00000000u;
            }
            if (n == cap) return stackptx__ast_fail(c, STACKPTX_ERR_LIMIT, c->top, STACKPTX_D_STACK_OVERFLOW);
            id = stackptx__const(c, type, bits, 0);
            if (id == STACKPTX__NONE) return stackptx__ast_fail(c, STACKPTX_ERR_LIMIT, c->top, STACKPTX_D_NODE_LIMIT);
            prod[n] = c->top; stk[n++] = id;
            break;
        }
        case STACKPTX_K_INSTR: {
            const stackptx__rc *e;
            uint32_t j, q, first;
            if (a >= c->t->n_rows) goto bad;
            e = stackptx__rc_get(c, a);
            if (!e->ok) return stackptx__ast_fail(c, STACKPTX_ERR_BAD_TABLE, c->top, 0);
            if (n < e->total) return stackptx__ast_fail(c, STACKPTX_ERR_AST_UNDERFLOW, c->top, 0);
            q = n - e->total;   /* the operands are stk[q .. n) in order */
            for (j = 0; j < e->n_ops; j++) {
                uint32_t wd = e->ow[j];
                while (wd--)
                    if (c->nodes[stk[q++]].type != e->ot[j])
                        return stackptx__ast_fail(c, STACKPTX_ERR_AST_TYPE_MISMATCH, c->top, 0);
            }
            if (e->m > cap - (n - e->total))
                return stackptx__ast_fail(c, STACKPTX_ERR_LIMIT, c->top, STACKPTX_D_STACK_OVERFLOW);
            n -= e->total;
            if (!e->m) break;
            first = stackptx__instr(c, a, e, stk + n);
            if (first == STACKPTX__NONE) return stackptx__ast_fail(c, STACKPTX_ERR_LIMIT, c->top, STACKPTX_D_NODE_LIMIT);
            for (j = 0; j < e->m; j++) { prod[n] = c->top; stk[n++] = first + j; }
            break;
        }
        case STACKPTX_K_ROUTINE: {
            const uint32_t *off;
            if (!c->r || a >= c->r->n) goto bad;
            if (depth >= c->L.max_depth) return stackptx__ast_fail(c, STACKPTX_ERR_LIMIT, c->top, STACKPTX_D_DEPTH_LIMIT);
            off = c->r->offsets;
            fr = &c->frames[++depth];
            fr->w = c->r->words + off[a];
            fr->pos = 0;
            fr->end = off[a + 1] - off[a];
            break;
        }
        default:
        bad:
            return stackptx__ast_fail(c, STACKPTX_ERR_AST_BAD_WORD, c->top, STACKPTX_D_MALFORMED_WORD);
        }
    }
    *n_vals = n;
    return STACKPTX_OK;
}

/* Runs an AST PTX program and binds its values to the outputs (the checks of section 5). */
static stackptx_status stackptx__ast_outputs(stackptx__ctx *c, const uint64_t *words, uint32_t n_words,
                                             stackptx_diag *d)
{
    const stackptx_io *io = c->io;
    uint32_t n = 0, k;
    stackptx_status st;
    stackptx__begin(c, d);
    st = stackptx__ast_run(c, words, n_words, &n);
    d->nodes = c->n_nodes;
    if (st != STACKPTX_OK) return st;
    if (n > io->n_outputs) return stackptx__ast_fail(c, STACKPTX_ERR_AST_LEFTOVER, c->prod[io->n_outputs], 0);
    if (n < io->n_outputs) return stackptx__ast_fail(c, STACKPTX_ERR_AST_TOO_FEW, n_words, 0);
    for (k = 0; k < n; k++) {
        if (c->nodes[c->stk[k]].type != io->output_types[k])
            return stackptx__ast_fail(c, STACKPTX_ERR_AST_OUTPUT_TYPE, c->prod[k], 0);
        c->out_val[k] = c->stk[k];
    }
    return STACKPTX_OK;
}

STACKPTX_DEF stackptx_status astptx_tape(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    void *ws, size_t ws_size, uint32_t *out, size_t out_cap, size_t *out_len, stackptx_diag *diag)
{
    stackptx__ctx c;
    stackptx__tw tw;
    stackptx_diag local, *d = diag ? diag : &local;
    stackptx_status st;
    if (out_len) *out_len = 0;
    if (diag) stackptx__diag_reset(diag);
    if (!out_len || (!words && n_words) || n_words > UINT32_MAX || (!out && out_cap) ||
        (lim && lim->dialect != STACKPTX_DIALECT_NUMPTX))
        return STACKPTX_ERR_INVALID_ARGUMENT;
    st = stackptx__setup(&c, t, io, lim, r, ws, ws_size);
    if (st != STACKPTX_OK) return st;
    st = stackptx__ast_outputs(&c, words, (uint32_t)n_words, d);
    if (st != STACKPTX_OK) return st;
    tw.w = out; tw.n = 0; tw.cap = out ? out_cap : 0;
    stackptx__tape(&c, &tw);
    *out_len = tw.n;
    return tw.n > tw.cap ? STACKPTX_ERR_BUFFER_TOO_SMALL : STACKPTX_OK;
}

STACKPTX_DEF stackptx_status astptx_compile(const stackptx_table *t, const stackptx_io *io,
    const stackptx_limits *lim, const uint64_t *words, size_t n_words, const stackptx_routines *r,
    void *ws, size_t ws_size, char *out, size_t out_cap, size_t *out_len, stackptx_diag *diag)
{
    stackptx__ctx c;
    stackptx__out o;
    stackptx_diag local, *d = diag ? diag : &local;
    stackptx_status st;
    char dummy[1];
    if (out_len) *out_len = 0;
    if (diag) stackptx__diag_reset(diag);
    if (!out_len || (!words && n_words) || n_words > UINT32_MAX || (!out && out_cap) ||
        (lim && lim->dialect != STACKPTX_DIALECT_NUMPTX))   /* AST PTX has one dialect */
        return STACKPTX_ERR_INVALID_ARGUMENT;
    st = stackptx__setup(&c, t, io, lim, r, ws, ws_size);
    if (st != STACKPTX_OK) return st;
    st = stackptx__ast_outputs(&c, words, (uint32_t)n_words, d);
    if (st != STACKPTX_OK) return st;
    stackptx__out_init(&o, out, out_cap, dummy);
    stackptx__emit(&c, &o);
    *out_len = stackptx__out_len(&o);
    return o.over ? STACKPTX_ERR_BUFFER_TOO_SMALL : STACKPTX_OK;
}

STACKPTX_DEF const char *stackptx_status_string(int status)
{
    static const char *const text[STACKPTX_STATUS_COUNT] = {
        "ok",
        "invalid argument",
        "output buffer too small",
        "workspace too small",
        "bad instruction table",
        "AST PTX: stack underflow",
        "AST PTX: operand type mismatch",
        "AST PTX: values left over",
        "AST PTX: too few values for the outputs",
        "AST PTX: bad word",
        "AST PTX: output type mismatch",
        "limit reached",
        "strict: an output is unsatisfied",
    };
    if (status < 0 || status >= STACKPTX_STATUS_COUNT) return "unknown status";
    return text[status];
}

#endif /* STACK_PTX_IMPLEMENTATION_DONE */
#endif /* STACK_PTX_IMPLEMENTATION */
