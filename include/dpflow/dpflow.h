/*
 * dpflow: packet data planes on CPUs and GPUs. The umbrella header: include
 * this one and get every public module.
 */
#ifndef DPFLOW_DPFLOW_H
#define DPFLOW_DPFLOW_H

#include "dpflow/common.h"
#include "dpflow/error.h"
#include "dpflow/log.h"
#include "dpflow/clock.h"
#include "dpflow/meta.h"
#include "dpflow/burst.h"
#include "dpflow/ring.h"
#include "dpflow/pool.h"
#include "dpflow/parse.h"
#include "dpflow/port.h"
#include "dpflow/gen.h"

#define DPFLOW_VERSION "0.1.0"

#endif /* DPFLOW_DPFLOW_H */
