/*
 * Monitor pieces (meter.h): building, configuring, reading and scanning
 * counters, meter and aging images, and out-of-line data-path calls.
 *
 * Control calls run on the control thread and validate everything before
 * they write. Reads use atomic loads, so they may run while data threads
 * update the same slots.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flow/meter.h"

/* One monitor image kind: its magic and slot size. */
struct kind {
	uint32_t magic;
	uint16_t slot_size;
	const char *name;
};

static const struct kind counters_kind = {
    DPFLOW_COUNTERS_MAGIC, sizeof(struct dpflow_counter_slot), "counters"};
static const struct kind meters_kind = {DPFLOW_METERS_MAGIC,
					sizeof(struct dpflow_meter), "meters"};
static const struct kind aging_kind = {
    DPFLOW_AGING_MAGIC, sizeof(struct dpflow_aging_slot), "aging"};

static size_t round_line(size_t n)
{
	return (n + DPFLOW_CACHE_LINE - 1) & ~(size_t)(DPFLOW_CACHE_LINE - 1);
}

static size_t image_size(const struct kind *k, uint32_t n)
{
	if (n == 0 || n > DPFLOW_MONITOR_MAX)
		return 0;
	return sizeof(struct dpflow_monitor_image) +
	       round_line((size_t)n * k->slot_size);
}

static int image_init(const struct kind *k, void *mem, size_t size, uint32_t n,
		      struct dpflow_error *err)
{
	struct dpflow_monitor_image *h = (struct dpflow_monitor_image *)mem;
	size_t need = image_size(k, n);

	if (!need)
		return dpflow_error_set(err, EINVAL, "n",
					"%s: n %u not in 1..%u", k->name, n,
					DPFLOW_MONITOR_MAX);
	if (!mem || (uintptr_t)mem % DPFLOW_CACHE_LINE)
		return dpflow_error_set(err, EINVAL, "mem",
					"%s: memory %p is not 64-byte aligned",
					k->name, mem);
	if (size < need)
		return dpflow_error_set(err, EINVAL, "size",
					"%s: %zu bytes, %zu needed", k->name,
					size, need);
	memset(mem, 0, need);
	h->magic = k->magic;
	h->version = DPFLOW_MONITOR_VERSION;
	h->slot_size = k->slot_size;
	h->n = n;
	h->slot_off = sizeof(*h);
	h->size = need;
	return 0;
}

static void *image_create(const struct kind *k, uint32_t n,
			  struct dpflow_error *err)
{
	size_t size = image_size(k, n);
	void *mem;

	if (!size) {
		image_init(k, NULL, 0, n, err);
		return NULL;
	}
	mem = aligned_alloc(DPFLOW_CACHE_LINE, size);
	if (!mem) {
		dpflow_error_set(err, ENOMEM, NULL,
				 "%s: cannot allocate %zu bytes", k->name,
				 size);
		return NULL;
	}
	image_init(k, mem, size, n, NULL);
	return mem;
}

static int image_copy(const struct kind *k, void *dst, size_t dst_size,
		      const struct dpflow_monitor_image *src,
		      struct dpflow_error *err)
{
	if (!dst || (uintptr_t)dst % DPFLOW_CACHE_LINE)
		return dpflow_error_set(err, EINVAL, "dst",
					"%s: destination %p is not 64-byte "
					"aligned",
					k->name, dst);
	if (dst_size < src->size)
		return dpflow_error_set(err, EINVAL, "dst_size",
					"%s: %zu bytes, %lu needed", k->name,
					dst_size, (unsigned long)src->size);
	memcpy(dst, src, src->size);
	return 0;
}

static int check_index(const struct kind *k,
		       const struct dpflow_monitor_image *h, uint32_t idx,
		       struct dpflow_error *err)
{
	if (idx >= h->n)
		return dpflow_error_set(err, EINVAL, "index",
					"%s: index %u out of range (n = %u)",
					k->name, idx, h->n);
	return 0;
}

/* ---- counters ------------------------------------------------------------ */

size_t dpflow_counters_image_size(uint32_t n)
{
	return image_size(&counters_kind, n);
}

int dpflow_counters_image_init(void *mem, size_t size, uint32_t n,
			       struct dpflow_error *err)
{
	return image_init(&counters_kind, mem, size, n, err);
}

struct dpflow_counters *dpflow_counters_create(uint32_t n,
					       struct dpflow_error *err)
{
	return (struct dpflow_counters *)image_create(&counters_kind, n, err);
}

void dpflow_counters_destroy(struct dpflow_counters *c)
{
	free(c);
}

size_t dpflow_counters_image_bytes(const struct dpflow_counters *c)
{
	return c->hdr.size;
}

int dpflow_counters_image_copy(void *dst, size_t dst_size,
			       const struct dpflow_counters *src,
			       struct dpflow_error *err)
{
	return image_copy(&counters_kind, dst, dst_size, &src->hdr, err);
}

void dpflow_counter_add(struct dpflow_counters *c, uint32_t idx, uint32_t bytes)
{
	dpflow_counter_add_impl(c, idx, bytes);
}

void dpflow_counter_add_st(struct dpflow_counters *c, uint32_t idx,
			   uint32_t bytes)
{
	dpflow_counter_add_st_impl(c, idx, bytes);
}

int dpflow_counters_read(const struct dpflow_counters *c, uint32_t idx,
			 uint64_t *pkts, uint64_t *bytes,
			 struct dpflow_error *err)
{
	const struct dpflow_counter_slot *s;
	int rc = check_index(&counters_kind, &c->hdr, idx, err);

	if (rc)
		return rc;
	s = dpflow_counter_at((struct dpflow_counters *)(uintptr_t)c, idx);
	if (pkts)
		*pkts = dpflow_atomic_load64(&s->pkts);
	if (bytes)
		*bytes = dpflow_atomic_load64(&s->bytes);
	return 0;
}

int dpflow_counters_read_reset(struct dpflow_counters *c, uint32_t idx,
			       uint64_t *pkts, uint64_t *bytes,
			       struct dpflow_error *err)
{
	struct dpflow_counter_slot *s;
	uint64_t p, b;
	int rc = check_index(&counters_kind, &c->hdr, idx, err);

	if (rc)
		return rc;
	s = dpflow_counter_at(c, idx);
	p = dpflow_atomic_xchg64(&s->pkts, 0);
	b = dpflow_atomic_xchg64(&s->bytes, 0);
	if (pkts)
		*pkts = p;
	if (bytes)
		*bytes = b;
	return 0;
}

/* ---- meters -------------------------------------------------------------- */

size_t dpflow_meters_image_size(uint32_t n)
{
	return image_size(&meters_kind, n);
}

int dpflow_meters_image_init(void *mem, size_t size, uint32_t n,
			     struct dpflow_error *err)
{
	return image_init(&meters_kind, mem, size, n, err);
}

struct dpflow_meters *dpflow_meters_create(uint32_t n, struct dpflow_error *err)
{
	return (struct dpflow_meters *)image_create(&meters_kind, n, err);
}

void dpflow_meters_destroy(struct dpflow_meters *m)
{
	free(m);
}

size_t dpflow_meters_image_bytes(const struct dpflow_meters *m)
{
	return m->hdr.size;
}

int dpflow_meters_image_copy(void *dst, size_t dst_size,
			     const struct dpflow_meters *src,
			     struct dpflow_error *err)
{
	return image_copy(&meters_kind, dst, dst_size, &src->hdr, err);
}

/*
 * Nanoseconds after which a bucket of @burst bytes fed at @rate bytes/s is
 * full whatever it held: any interval that long credits at least
 * floor(dt * rate / 1e9) >= burst tokens. UINT64_MAX when @rate is 0.
 * burst < 2^33 here, so burst * 1e9 < 2^63.
 */
static uint64_t fill_ns(uint64_t burst, uint64_t rate)
{
	if (rate == 0)
		return UINT64_MAX;
	return (burst * DPFLOW_NS_PER_S + rate - 1) / rate;
}

int dpflow_meter_config(struct dpflow_meters *m, uint32_t idx,
			const struct dpflow_meter_params *p, uint64_t now_ns,
			struct dpflow_error *err)
{
	struct dpflow_meter *mt;
	int rc = check_index(&meters_kind, &m->hdr, idx, err);

	if (rc)
		return rc;
	if (!p)
		return dpflow_error_set(err, EINVAL, "params",
					"meter %u: no parameters", idx);
	if (p->alg > DPFLOW_METER_TRTCM)
		return dpflow_error_set(err, EINVAL, "alg",
					"meter %u: unknown algorithm %u", idx,
					p->alg);
	if (p->alg == DPFLOW_METER_TRTCM && p->pir < p->cir)
		return dpflow_error_set(err, EINVAL, "pir",
					"meter %u: pir %lu below cir %lu "
					"(RFC 2698)",
					idx, (unsigned long)p->pir,
					(unsigned long)p->cir);

	mt = dpflow_meter_at(m, idx);
	memset(mt, 0, sizeof(*mt));
	mt->alg = p->alg;
	mt->color_aware = p->color_aware;
	mt->cir = p->cir;
	mt->cbs = p->cbs;
	if (p->alg == DPFLOW_METER_TRTCM) {
		mt->pir = p->pir;
		mt->ebs_pbs = p->pbs;
		mt->fill_c_ns = fill_ns(p->cbs, p->cir);
		mt->fill_p_ns = fill_ns(p->pbs, p->pir);
	} else if (p->alg == DPFLOW_METER_SRTCM) {
		mt->ebs_pbs = p->ebs;
		mt->fill_c_ns = fill_ns((uint64_t)p->cbs + p->ebs, p->cir);
	}
	dpflow_atomic_store64(&mt->last_ns, now_ns);
	dpflow_atomic_store64_rel(&mt->tokens,
				  (uint64_t)mt->cbs << 32 | mt->ebs_pbs);
	return 0;
}

int dpflow_meter_read(const struct dpflow_meters *m, uint32_t idx,
		      struct dpflow_meter_state *st, struct dpflow_error *err)
{
	const struct dpflow_meter *mt;
	uint64_t tok;
	int rc = check_index(&meters_kind, &m->hdr, idx, err);

	if (rc)
		return rc;
	if (!st)
		return dpflow_error_set(err, EINVAL, "state",
					"meter %u: no state to fill", idx);
	mt = dpflow_meter_at((struct dpflow_meters *)(uintptr_t)m, idx);
	tok = dpflow_atomic_load64_acq(&mt->tokens);
	st->tc = (uint32_t)(tok >> 32);
	st->te_tp = (uint32_t)tok;
	st->last_ns = dpflow_atomic_load64(&mt->last_ns);
	return 0;
}

unsigned dpflow_meter_color(struct dpflow_meters *m, uint32_t idx,
			    uint64_t now_ns, uint32_t bytes, unsigned in_color)
{
	return dpflow_meter_color_impl(dpflow_meter_at(m, idx), now_ns, bytes,
				       in_color);
}

const char *dpflow_meter_color_name(unsigned color)
{
	static const char *const names[] = {"green", "yellow", "red"};

	return color < DPFLOW_ARRAY_SIZE(names) ? names[color] : "unknown";
}

/* ---- aging --------------------------------------------------------------- */

size_t dpflow_aging_image_size(uint32_t n)
{
	return image_size(&aging_kind, n);
}

int dpflow_aging_image_init(void *mem, size_t size, uint32_t n,
			    struct dpflow_error *err)
{
	return image_init(&aging_kind, mem, size, n, err);
}

struct dpflow_aging *dpflow_aging_create(uint32_t n, struct dpflow_error *err)
{
	return (struct dpflow_aging *)image_create(&aging_kind, n, err);
}

void dpflow_aging_destroy(struct dpflow_aging *a)
{
	free(a);
}

size_t dpflow_aging_image_bytes(const struct dpflow_aging *a)
{
	return a->hdr.size;
}

int dpflow_aging_image_copy(void *dst, size_t dst_size,
			    const struct dpflow_aging *src,
			    struct dpflow_error *err)
{
	return image_copy(&aging_kind, dst, dst_size, &src->hdr, err);
}

int dpflow_aging_arm(struct dpflow_aging *a, uint32_t idx, uint32_t timeout_ms,
		     uint64_t now_ns, struct dpflow_error *err)
{
	struct dpflow_aging_slot *s;
	int rc = check_index(&aging_kind, &a->hdr, idx, err);

	if (rc)
		return rc;
	if (timeout_ms == 0)
		return dpflow_error_set(err, EINVAL, "timeout_ms",
					"aging %u: timeout 0 (use disarm)",
					idx);
	s = dpflow_aging_at(a, idx);
	dpflow_atomic_store64(&s->last_ms, now_ns / DPFLOW_NS_PER_MS);
	dpflow_atomic_store32(&s->timeout_ms, timeout_ms);
	return 0;
}

int dpflow_aging_disarm(struct dpflow_aging *a, uint32_t idx,
			struct dpflow_error *err)
{
	int rc = check_index(&aging_kind, &a->hdr, idx, err);

	if (rc)
		return rc;
	dpflow_atomic_store32(&dpflow_aging_at(a, idx)->timeout_ms, 0);
	return 0;
}

void dpflow_aging_touch(struct dpflow_aging *a, uint32_t idx, uint64_t now_ns)
{
	dpflow_aging_touch_impl(a, idx, now_ns);
}

uint32_t dpflow_aging_scan(struct dpflow_aging *a, uint64_t now_ns,
			   uint32_t *cursor, uint32_t budget,
			   dpflow_aging_cb cb, void *arg)
{
	uint64_t now_ms = now_ns / DPFLOW_NS_PER_MS;
	uint32_t n = a->hdr.n, i, left, aged = 0;

	i = cursor ? *cursor % n : 0;
	left = cursor ? (budget < n ? budget : n) : n;
	for (; left; left--, i = i + 1 == n ? 0 : i + 1) {
		struct dpflow_aging_slot *s = dpflow_aging_at(a, i);
		uint32_t timeout = dpflow_atomic_load32(&s->timeout_ms);
		uint64_t last;

		if (!timeout)
			continue;
		last = dpflow_atomic_load64(&s->last_ms);
		if (now_ms < last || now_ms - last < timeout)
			continue;
		dpflow_atomic_store32(&s->timeout_ms, 0);
		aged++;
		if (cb)
			cb(i, last * DPFLOW_NS_PER_MS, arg);
	}
	if (cursor)
		*cursor = i;
	return aged;
}
