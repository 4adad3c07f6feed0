/* interp_ops.h - helpers the c column of numptx/instructions.py may call (the batch
   interpreter's row semantics, generated into interp_rows.h). C99, static inline, no state.
   Each helper computes exactly what the row's NumPy semantic computes (tests/test_interp_rows.py). */
#ifndef NXI_OPS_H
#define NXI_OPS_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#endif
