/*
 * ACL table: the library's view.
 *
 * The API (rule lists, images, calls, threads, guarantees) is public:
 * dpflow/table_acl.h. This header adds what the pipe engine, the GPU
 * target and the table's tests need beside it: the image layout and the
 * inline lookup code (table_acl_impl.h, shared by the CPU and the GPU).
 */
#ifndef DPFLOW_FLOW_TABLE_ACL_H
#define DPFLOW_FLOW_TABLE_ACL_H

#include "dpflow/table_acl.h"
#include "flow/table_acl_impl.h"

#endif /* DPFLOW_FLOW_TABLE_ACL_H */
