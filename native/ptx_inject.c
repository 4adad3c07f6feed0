/* The compiled PTX Inject core: the implementation half of the single header ptx_inject.h. */
#define PTX_INJECT_IMPLEMENTATION
#include "ptx_inject.h"
