/*
 * Longest-prefix-match tables: the library's view.
 *
 * The API (parameters, calls, threads, guarantees) is public:
 * dpflow/table_lpm.h. This header adds what the pipe engine, the GPU
 * target and the table's tests need beside it: the image layouts and the
 * inline lookups (table_lpm_impl.h, shared by the CPU and the GPU).
 */
#ifndef DPFLOW_FLOW_TABLE_LPM_H
#define DPFLOW_FLOW_TABLE_LPM_H

#include "dpflow/table_lpm.h"
#include "flow/table_lpm_impl.h"

#endif /* DPFLOW_FLOW_TABLE_LPM_H */
