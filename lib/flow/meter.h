/*
 * Monitor pieces of the flow engine: control API of per-entry counters,
 * srTCM / trTCM meters and aging slots (layouts and data-path code in
 * meter_impl.h).
 *
 * Each kind is a position-independent image: one 64-byte-aligned block
 * that may be copied byte for byte (dpflow_*_image_copy, a memcpy of
 * dpflow_*_image_bytes) to other memory, device memory included, and still
 * work. These tables are written by the data path, so the pipe layer keeps
 * one live image of each (no RCU double buffer).
 *
 * Threads:
 *  - data path (any number of threads at once): dpflow_counter_add,
 *    dpflow_counter_add_st (one writer per counter), dpflow_meter_color,
 *    dpflow_aging_touch, and their _impl versions;
 *  - control thread: everything else. Reads and read-resets are safe while
 *    data threads count (atomic loads and exchanges); configuring a meter
 *    or arming an aging slot is meant for a slot that no data thread uses
 *    yet (an entry not yet published), and copying an image gives a
 *    consistent copy only while no data thread writes it.
 *
 * Guarantees: control calls check every argument before writing, so a call
 * that fails (-EINVAL naming the field in @err) leaves the image unchanged.
 */
#ifndef DPFLOW_METER_H
#define DPFLOW_METER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpflow/error.h"
#include "flow/meter_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest number of slots of any monitor image. */
#define DPFLOW_MONITOR_MAX (1u << 28)

/* ---- counters ------------------------------------------------------------ */

/* Bytes of a counters image of @n slots (1..DPFLOW_MONITOR_MAX), or 0. */
size_t dpflow_counters_image_size(uint32_t n);

/*
 * Make a zeroed counters image of @n slots in caller memory @mem (64-byte
 * aligned, @size >= dpflow_counters_image_size(n)). Returns 0 or -EINVAL
 * ("n", "mem", "size").
 */
int dpflow_counters_image_init(void *mem, size_t size, uint32_t n,
			       struct dpflow_error *err);

/* Allocate and init (NULL + @err on -EINVAL or -ENOMEM). */
struct dpflow_counters *dpflow_counters_create(uint32_t n,
					       struct dpflow_error *err);
/* Free an image from dpflow_counters_create. Accepts NULL. */
void dpflow_counters_destroy(struct dpflow_counters *c);

/* Bytes in @c (what a copy must move). */
size_t dpflow_counters_image_bytes(const struct dpflow_counters *c);

/* memcpy @src to @dst (64-byte aligned, @dst_size bytes): 0 or -EINVAL. */
int dpflow_counters_image_copy(void *dst, size_t dst_size,
			       const struct dpflow_counters *src,
			       struct dpflow_error *err);

/* Out-of-line dpflow_counter_add_impl / _add_st_impl (@idx < n). */
void dpflow_counter_add(struct dpflow_counters *c, uint32_t idx,
			uint32_t bytes);
void dpflow_counter_add_st(struct dpflow_counters *c, uint32_t idx,
			   uint32_t bytes);

/*
 * Read counter @idx into *@pkts and *@bytes (either may be NULL). Returns 0
 * or -EINVAL ("index").
 */
int dpflow_counters_read(const struct dpflow_counters *c, uint32_t idx,
			 uint64_t *pkts, uint64_t *bytes,
			 struct dpflow_error *err);

/*
 * Read counter @idx and set it to zero, losing no concurrent atomic add
 * (each word is swapped with 0). Counters written with _add_st by another
 * thread may lose the reset: keep a baseline for those instead.
 */
int dpflow_counters_read_reset(struct dpflow_counters *c, uint32_t idx,
			       uint64_t *pkts, uint64_t *bytes,
			       struct dpflow_error *err);

/* ---- meters -------------------------------------------------------------- */

struct dpflow_meter_params {
	uint8_t alg;	  /* enum dpflow_meter_alg */
	bool color_aware; /* else colour-blind */
	uint64_t cir;	  /* committed rate, bytes per second */
	uint64_t pir;	  /* trTCM: peak rate, bytes/s, >= cir */
	uint32_t cbs;	  /* committed burst, bytes */
	uint32_t ebs;	  /* srTCM: excess burst, bytes */
	uint32_t pbs;	  /* trTCM: peak burst, bytes */
};

/* A meter's buckets (dpflow_meter_read). */
struct dpflow_meter_state {
	uint32_t tc;	  /* committed bucket, bytes */
	uint32_t te_tp;	  /* srTCM: excess bucket; trTCM: peak bucket */
	uint64_t last_ns; /* tokens credited up to this time */
};

/* Bytes of a meters image of @n meters, or 0 if @n is out of range. */
size_t dpflow_meters_image_size(uint32_t n);

/*
 * Make a meters image of @n unconfigured meters (DPFLOW_METER_NONE: every
 * packet green) in caller memory. Returns 0 or -EINVAL ("n", "mem",
 * "size").
 */
int dpflow_meters_image_init(void *mem, size_t size, uint32_t n,
			     struct dpflow_error *err);
struct dpflow_meters *dpflow_meters_create(uint32_t n,
					   struct dpflow_error *err);
void dpflow_meters_destroy(struct dpflow_meters *m);
size_t dpflow_meters_image_bytes(const struct dpflow_meters *m);
int dpflow_meters_image_copy(void *dst, size_t dst_size,
			     const struct dpflow_meters *src,
			     struct dpflow_error *err);

/*
 * Configure meter @idx from @p with both buckets full at @now_ns (as the
 * RFCs start). Any burst may be 0 and any rate 0 (a bucket that never
 * refills). Returns 0 or -EINVAL naming "index", "params", "alg" or "pir"
 * (trTCM needs pir >= cir, RFC 2698 §2). Meant for a meter no data thread
 * uses yet.
 */
int dpflow_meter_config(struct dpflow_meters *m, uint32_t idx,
			const struct dpflow_meter_params *p, uint64_t now_ns,
			struct dpflow_error *err);

/* Read meter @idx's buckets. Returns 0 or -EINVAL ("index", "state"). */
int dpflow_meter_read(const struct dpflow_meters *m, uint32_t idx,
		      struct dpflow_meter_state *st, struct dpflow_error *err);

/* Out-of-line dpflow_meter_color_impl on meter @idx (< n). */
unsigned dpflow_meter_color(struct dpflow_meters *m, uint32_t idx,
			    uint64_t now_ns, uint32_t bytes, unsigned in_color);

/* "green", "yellow", "red", or "unknown". */
const char *dpflow_meter_color_name(unsigned color);

/* ---- aging --------------------------------------------------------------- */

/* Called once for each entry that aged out: its index and last hit. */
typedef void (*dpflow_aging_cb)(uint32_t idx, uint64_t last_hit_ns, void *arg);

size_t dpflow_aging_image_size(uint32_t n);
/* A new aging image has every slot disarmed. */
int dpflow_aging_image_init(void *mem, size_t size, uint32_t n,
			    struct dpflow_error *err);
struct dpflow_aging *dpflow_aging_create(uint32_t n, struct dpflow_error *err);
void dpflow_aging_destroy(struct dpflow_aging *a);
size_t dpflow_aging_image_bytes(const struct dpflow_aging *a);
int dpflow_aging_image_copy(void *dst, size_t dst_size,
			    const struct dpflow_aging *src,
			    struct dpflow_error *err);

/*
 * Arm slot @idx: it ages out once no hit came for @timeout_ms
 * milliseconds, counting from @now_ns (taken as its last hit). Returns 0
 * or -EINVAL ("index", "timeout_ms": 1..UINT32_MAX).
 */
int dpflow_aging_arm(struct dpflow_aging *a, uint32_t idx, uint32_t timeout_ms,
		     uint64_t now_ns, struct dpflow_error *err);

/* Disarm slot @idx (it is never reported). 0 or -EINVAL ("index"). */
int dpflow_aging_disarm(struct dpflow_aging *a, uint32_t idx,
			struct dpflow_error *err);

/* Out-of-line dpflow_aging_touch_impl (@idx < n). */
void dpflow_aging_touch(struct dpflow_aging *a, uint32_t idx, uint64_t now_ns);

/*
 * Report and disarm every armed slot with now_ms - last_ms >= timeout_ms
 * (both in whole milliseconds: now_ms = @now_ns / 1e6), calling @cb (may be
 * NULL) with the slot and its last hit (last_ms * 1e6). With @cursor NULL
 * the whole image is scanned; otherwise @budget slots from *@cursor
 * (wrapping) and *@cursor moves past them, so a large table can be aged a
 * slice at a time. Returns the number reported. Control thread.
 */
uint32_t dpflow_aging_scan(struct dpflow_aging *a, uint64_t now_ns,
			   uint32_t *cursor, uint32_t budget,
			   dpflow_aging_cb cb, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_METER_H */
