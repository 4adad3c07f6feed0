#define NXI_IMPLEMENTATION
#define NXLM_IMPLEMENTATION
#include "interp.h"
#include "lm.h"
