/*
 * Exact-match table: the library's view.
 *
 * The API (parameters, calls, threads, guarantees) is public:
 * dpflow/table_exact.h. This header adds what the pipe engine, the GPU
 * target and the table's tests need beside it: the image layout, the hash
 * and the inline lookups (table_exact_impl.h, shared by the CPU and the
 * GPU), and the sizing constants of table_exact.c.
 */
#ifndef DPFLOW_FLOW_TABLE_EXACT_H
#define DPFLOW_FLOW_TABLE_EXACT_H

#include "dpflow/table_exact.h"
#include "flow/table_exact_impl.h"

/* Fewest buckets an image has (128 slots). */
#define DPFLOW_EXACT_MIN_BUCKETS 16

#endif /* DPFLOW_FLOW_TABLE_EXACT_H */
