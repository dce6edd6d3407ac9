/*
 * Definitions shared by every flow-engine table kind (exact, LPM, ACL, ...).
 * Header only; safe to include from any thread and from device code.
 */
#ifndef DPFLOW_TABLE_H
#define DPFLOW_TABLE_H

#include <stdint.h>

/* A lookup that found nothing: never a valid entry index (value). */
#define DPFLOW_TABLE_MISS UINT32_MAX

#endif /* DPFLOW_TABLE_H */
