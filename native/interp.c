#define NXI_IMPLEMENTATION
#include "interp.h"
