/* dag_lower.h - lower an expression DAG to a Stack PTX program (C99, single header).

   The DSL (numptx/dsl) records each traced node as it is created; this turns that record into
   the Stack PTX words numptx/dsl/lower.py:to_stack would write, without a Python object per
   op. The algorithm is the same, word for word (tests/test_dsl.py checks both agree):
   postorder from each root, last root first (so the first output ends on top); an INSTR node
   used more than once is computed once and kept with META dup + STORE(slot), later uses LOAD
   it; inputs and constants are pushed again at each use.

   RECORD (uint64 words, nodes back to back in creation order, which is topological):
     INPUT   1 word:  INPUT | type << 8 | k << 16   (type: the value type; emitted without it)
     CONST   1 word:  the CONST word as in Stack PTX
     CONST64 2 words: the CONST64 word and its data word
     INSTR   1 + n_operands(row) words: INSTR | row << 16, then the operand node indices
             (each < this node's index). The row must have exactly one result (scalar).
   Node i's uses = operand references among all recorded nodes (dead ones too) + references
   from roots. ROOTS: a node index, or DAGLOWER_ROOT_INPUT | k for input k pushed as it is.

   dag_lower(table, rec, n_rec, roots, n_roots, ws, ws_size, out, out_cap, &out_len, &n_slots,
             &n_instr)
     ws: dag_lower_workspace_size(n_nodes) bytes (n_nodes = number of nodes in rec; any
     upper bound works, e.g. n_rec). out: out_cap words; *out_len = words written.
     Returns STACKPTX_OK; STACKPTX_ERR_INVALID_ARGUMENT for a malformed record (unknown kind,
     row out of range or not single-result, operand index not earlier, truncated record, root
     out of range, input k > 65535) or NULL pointers; STACKPTX_ERR_WORKSPACE_TOO_SMALL;
     STACKPTX_ERR_BUFFER_TOO_SMALL (*out_len = words needed so far: grow out and retry;
     9 * n_nodes + 2 * n_roots always suffices); STACKPTX_ERR_LIMIT beyond 65536 slots or
     2^28 nodes.
     *err_index (if not NULL) = the record word or root index at fault.
   No recursion, no allocation, no global state. */
#ifndef DAG_LOWER_H
#define DAG_LOWER_H

#include <stddef.h>
#include <stdint.h>

#include "stack_ptx.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DAGLOWER_ROOT_INPUT 0x8000000000000000ull

size_t dag_lower_workspace_size(uint32_t n_nodes);
stackptx_status dag_lower(const stackptx_table *t, const uint64_t *rec, size_t n_rec,
                          const uint64_t *roots, uint32_t n_roots, void *ws, size_t ws_size,
                          uint64_t *out, size_t out_cap, size_t *out_len, uint32_t *n_slots,
                          uint32_t *n_instr, uint32_t *err_index);

#ifdef __cplusplus
}
#endif
#endif /* DAG_LOWER_H */

#ifdef DAG_LOWER_IMPLEMENTATION
#ifndef DAG_LOWER_IMPLEMENTATION_DONE
#define DAG_LOWER_IMPLEMENTATION_DONE

#define DAGLOWER__NONE 0xFFFFFFFFu
#define DAGLOWER__POST 0x80000000u          /* stack entry: the node's operands are done */
#define DAGLOWER__MAX_NODES 0x10000000u

/* per node: its record offset, uses, slot (or NONE); then the DFS stack (5 per node + 1) */
size_t dag_lower_workspace_size(uint32_t n_nodes)
{
    if (n_nodes > DAGLOWER__MAX_NODES) return 0;
    return ((size_t)n_nodes * 8u + 1u) * sizeof(uint32_t);
}

static int daglower__emit(uint64_t w, uint64_t *out, size_t out_cap, size_t *n)
{
    if (*n < out_cap) out[*n] = w;
    (*n)++;
    return *n <= out_cap;
}

stackptx_status dag_lower(const stackptx_table *t, const uint64_t *rec, size_t n_rec,
                          const uint64_t *roots, uint32_t n_roots, void *ws, size_t ws_size,
                          uint64_t *out, size_t out_cap, size_t *out_len, uint32_t *n_slots,
                          uint32_t *n_instr, uint32_t *err_index)
{
    uint32_t *off, *uses, *slot, *stack, n_nodes = 0, i, sp, r, slots = 0, instrs = 0;
    size_t pos = 0, n = 0, need, cap;
    int fits = 1;
    uint32_t dummy;
    if (!err_index) err_index = &dummy;
    *err_index = DAGLOWER__NONE;
    if (!t || (!rec && n_rec) || (!roots && n_roots) || !out_len || !n_slots || !n_instr ||
        (!out && out_cap) || n_rec > DAGLOWER__MAX_NODES * 5ull)
        return STACKPTX_ERR_INVALID_ARGUMENT;
    *out_len = 0;
    *n_slots = *n_instr = 0;
    /* count nodes (every node takes at least one word, so n_rec bounds them) */
    need = dag_lower_workspace_size((uint32_t)(n_rec < DAGLOWER__MAX_NODES ? n_rec : DAGLOWER__MAX_NODES));
    if (!ws || ws_size < need) {
        /* the exact count may need less: measure it first */
        for (pos = 0; pos < n_rec; n_nodes++) {
            uint64_t w = rec[pos];
            uint32_t kind = (uint32_t)(w & 0xFFu);
            if (n_nodes >= DAGLOWER__MAX_NODES) return STACKPTX_ERR_LIMIT;
            if (kind == STACKPTX_K_CONST64) pos += 2;
            else if (kind == STACKPTX_K_INSTR) {
                uint32_t row = (uint32_t)((w >> 16) & 0xFFFFu);
                if (row >= t->n_rows) { *err_index = (uint32_t)pos; return STACKPTX_ERR_INVALID_ARGUMENT; }
                pos += 1u + t->rows[row].n_operands;
            } else pos += 1;
        }
        need = dag_lower_workspace_size(n_nodes);
        if (!ws || ws_size < need) return STACKPTX_ERR_WORKSPACE_TOO_SMALL;
        n_nodes = 0;
    }
    off = (uint32_t *)ws;
    /* the nodes the workspace holds (8 words each + 1): records past that are refused */
    cap = ws_size >= sizeof(uint32_t) ? (ws_size / sizeof(uint32_t) - 1) / 8 : 0;
    /* pass 1: validate records, offsets, uses */
    for (pos = 0; pos < n_rec; n_nodes++) {
        uint64_t w = rec[pos];
        uint32_t kind = (uint32_t)(w & 0xFFu), k;
        if (n_nodes >= cap || n_nodes >= DAGLOWER__MAX_NODES)
            return n_nodes >= DAGLOWER__MAX_NODES ? STACKPTX_ERR_LIMIT : STACKPTX_ERR_WORKSPACE_TOO_SMALL;
        off[n_nodes] = (uint32_t)pos;
        if (kind == STACKPTX_K_INPUT || kind == STACKPTX_K_CONST) {
            if (((w >> 8) & 0xFFu) >= STACKPTX_N_TYPES) break;
            if (kind == STACKPTX_K_INPUT && (w >> 32)) break;
            pos += 1;
        } else if (kind == STACKPTX_K_CONST64) {            /* + its data word */
            if (pos + 1 >= n_rec || ((w >> 8) & 0xFFu) >= STACKPTX_N_TYPES || (w >> 16)) break;
            pos += 2;
        } else if (kind == STACKPTX_K_INSTR) {              /* + operand indices */
            const stackptx_instr *row;
            uint32_t ri = (uint32_t)((w >> 16) & 0xFFFFu);
            if (ri >= t->n_rows || (w >> 32) || (w & 0xFF00u)) break;
            row = &t->rows[ri];
            if (row->n_results != 1 || row->result_width[0] != 1 || row->n_operands > 4 ||
                pos + row->n_operands >= n_rec)
                break;
            for (k = 0; k < row->n_operands; k++)
                if (rec[pos + 1 + k] >= n_nodes) break;
            if (k < row->n_operands) { pos += 1 + k; break; }
            pos += 1u + row->n_operands;
        } else {
            break;
        }
    }
    if (pos < n_rec) { *err_index = (uint32_t)pos; return STACKPTX_ERR_INVALID_ARGUMENT; }
    uses = off + n_nodes;
    slot = uses + n_nodes;
    stack = slot + n_nodes;
    for (i = 0; i < n_nodes; i++) { uses[i] = 0; slot[i] = DAGLOWER__NONE; }
    for (i = 0; i < n_nodes; i++) {
        uint64_t w = rec[off[i]];
        if ((w & 0xFFu) == STACKPTX_K_INSTR) {
            uint32_t k, m = t->rows[(w >> 16) & 0xFFFFu].n_operands;
            for (k = 0; k < m; k++) uses[rec[off[i] + 1 + k]]++;
        }
    }
    for (r = 0; r < n_roots; r++) {
        uint64_t root = roots[r];
        if (root & DAGLOWER_ROOT_INPUT) {
            if ((root & ~DAGLOWER_ROOT_INPUT) > 0xFFFFu) { *err_index = r; return STACKPTX_ERR_INVALID_ARGUMENT; }
        } else if (root >= n_nodes) {
            *err_index = r;
            return STACKPTX_ERR_INVALID_ARGUMENT;
        } else {
            uses[root]++;
        }
    }
    /* pass 2: emit, last root first */
    for (r = n_roots; r-- > 0;) {
        uint64_t root = roots[r];
        if (root & DAGLOWER_ROOT_INPUT) {
            fits &= daglower__emit(STACKPTX_K_INPUT | (root & 0xFFFFu) << 16, out, out_cap, &n);
            continue;
        }
        sp = 0;
        stack[sp++] = (uint32_t)root;
        while (sp) {
            uint32_t e = stack[--sp], node = e & ~DAGLOWER__POST;
            uint64_t w = rec[off[node]];
            uint32_t kind = (uint32_t)(w & 0xFFu);
            if (e & DAGLOWER__POST) {                       /* operands done: the instruction */
                const stackptx_instr *row = &t->rows[(w >> 16) & 0xFFFFu];
                uint64_t type = row->result_type[0];
                fits &= daglower__emit(w, out, out_cap, &n);
                instrs++;
                if (uses[node] > 1) {
                    if (slots > 0xFFFFu) return STACKPTX_ERR_LIMIT;
                    slot[node] = slots;
                    fits &= daglower__emit(STACKPTX_WORD(STACKPTX_K_META, type, STACKPTX_M_DUP, 0),
                                           out, out_cap, &n);
                    fits &= daglower__emit(STACKPTX_WORD(STACKPTX_K_STORE, type, slots, 0), out,
                                           out_cap, &n);
                    slots++;
                }
            } else if (kind == STACKPTX_K_INSTR) {
                if (slot[node] != DAGLOWER__NONE) {              /* computed before: load */
                    uint64_t type = t->rows[(w >> 16) & 0xFFFFu].result_type[0];
                    fits &= daglower__emit(STACKPTX_WORD(STACKPTX_K_LOAD, type, slot[node], 0), out,
                                           out_cap, &n);
                } else {
                    uint32_t k = t->rows[(w >> 16) & 0xFFFFu].n_operands;
                    stack[sp++] = node | DAGLOWER__POST;
                    while (k-- > 0) stack[sp++] = (uint32_t)rec[off[node] + 1 + k];
                }
            } else if (kind == STACKPTX_K_INPUT) {
                fits &= daglower__emit(w & ~(uint64_t)0xFF00u, out, out_cap, &n);
            } else {
                fits &= daglower__emit(w, out, out_cap, &n);
                if (kind == STACKPTX_K_CONST64) fits &= daglower__emit(rec[off[node] + 1], out, out_cap, &n);
            }
        }
    }
    *out_len = n;
    *n_slots = slots;
    *n_instr = instrs;
    return fits ? STACKPTX_OK : STACKPTX_ERR_BUFFER_TOO_SMALL;
}

#endif /* DAG_LOWER_IMPLEMENTATION_DONE */
#endif /* DAG_LOWER_IMPLEMENTATION */
