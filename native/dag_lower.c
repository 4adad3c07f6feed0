/* The compiled DAG -> Stack PTX lowering: the implementation half of dag_lower.h. */
#define DAG_LOWER_IMPLEMENTATION
#include "dag_lower.h"
