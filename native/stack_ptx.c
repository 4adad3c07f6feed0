/* The compiled Stack PTX / AST PTX core: the implementation half of the single header stack_ptx.h. */
#define STACK_PTX_IMPLEMENTATION
#include "stack_ptx.h"
