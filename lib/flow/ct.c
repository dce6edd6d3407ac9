/*
 * Connection tracking (ct.h): images, the aging scan, removal and
 * inspection on the control thread, and out-of-line data-path calls.
 *
 * The control thread frees a connection the way the data path could see
 * it: CAS its control word to BUSY (so no data thread changes it any
 * more), read what the report needs, free its reply key and pool binding
 * (dpflow_ct_unbind), then publish FREE with the next generation. Data
 * threads holding the old word fail their CAS and look again. Reply keys
 * (alias slots) are never freed, counted or reported on their own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "flow/ct.h"

#define NS_PER_MS 1000000ull
#define HUGE_PAGE (2u << 20)

static const char *const state_names[DPFLOW_CT_STATE_COUNT] = {
    "none",	    "syn_sent",	       "syn_recv",	"established",
    "fin_wait",	    "close_wait",      "last_ack",	"time_wait",
    "close",	    "udp_unreplied",   "udp_replied",	"icmp_unreplied",
    "icmp_replied", "other_unreplied", "other_replied",
};

static const char *const stat_names[] = {
#define STAT_NAME_(name, str) str,
    DPFLOW_CT_FOREACH_STAT(STAT_NAME_)
#undef STAT_NAME_
};

const char *dpflow_ct_state_name(unsigned state)
{
	return state < DPFLOW_CT_STATE_COUNT ? state_names[state] : "unknown";
}

const char *dpflow_ct_stat_name(unsigned stat)
{
	return stat < DPFLOW_CT_STAT__COUNT ? stat_names[stat] : "unknown";
}

void dpflow_ct_params_default(struct dpflow_ct_params *p, uint32_t max_conns)
{
	static const uint32_t s = 1000;

	memset(p, 0, sizeof(*p));
	p->max_conns = max_conns;
	p->flags = DPFLOW_CT_F_TCP_LOOSE;
	p->timeout_ms[DPFLOW_CT_SYN_SENT] = 120 * s;
	p->timeout_ms[DPFLOW_CT_SYN_RECV] = 60 * s;
	p->timeout_ms[DPFLOW_CT_ESTABLISHED] = 432000 * s;
	p->timeout_ms[DPFLOW_CT_FIN_WAIT] = 120 * s;
	p->timeout_ms[DPFLOW_CT_CLOSE_WAIT] = 60 * s;
	p->timeout_ms[DPFLOW_CT_LAST_ACK] = 30 * s;
	p->timeout_ms[DPFLOW_CT_TIME_WAIT] = 120 * s;
	p->timeout_ms[DPFLOW_CT_CLOSE] = 10 * s;
	p->timeout_ms[DPFLOW_CT_UDP_UNREPLIED] = 30 * s;
	p->timeout_ms[DPFLOW_CT_UDP_REPLIED] = 120 * s;
	p->timeout_ms[DPFLOW_CT_ICMP_UNREPLIED] = 30 * s;
	p->timeout_ms[DPFLOW_CT_ICMP_REPLIED] = 30 * s;
	p->timeout_ms[DPFLOW_CT_OTHER_UNREPLIED] = 600 * s;
	p->timeout_ms[DPFLOW_CT_OTHER_REPLIED] = 600 * s;
}

static size_t round_line(size_t n)
{
	return (n + DPFLOW_CACHE_LINE - 1) & ~(size_t)(DPFLOW_CACHE_LINE - 1);
}

/*
 * Buckets for @max_conns connections of @keys keys each: a power of two,
 * slots >= 3/2 * keys * max_conns, so a full table is at most 2/3
 * occupied. (At 76% occupancy about 1 insert in 25000 finds both its
 * buckets full; at 67%, none in 350000.)
 */
static uint32_t n_buckets_for(uint32_t max_conns, unsigned keys)
{
	uint64_t want =
	    ((uint64_t)max_conns * keys * 3 / 2 + DPFLOW_CT_SLOTS - 1) /
	    DPFLOW_CT_SLOTS;
	uint32_t n = 2;

	while (n < want)
		n <<= 1;
	return n;
}

static size_t image_size(uint32_t max_conns, unsigned keys, unsigned n_pools)
{
	uint32_t nb;

	if (max_conns == 0 || max_conns > DPFLOW_CT_CAPACITY_MAX ||
	    n_pools > DPFLOW_CT_POOLS_MAX)
		return 0;
	nb = n_buckets_for(max_conns, keys);
	return sizeof(struct dpflow_ct_image) +
	       n_pools * sizeof(struct dpflow_ct_pool) +
	       (size_t)nb * DPFLOW_CT_SLOTS * sizeof(uint64_t) +
	       round_line((size_t)nb * sizeof(uint32_t)) +
	       (size_t)nb * DPFLOW_CT_SLOTS *
		   (sizeof(struct dpflow_ct_slot) +
		    sizeof(struct dpflow_ct_vslot));
}

static unsigned keys_of(const struct dpflow_ct_params *p)
{
	return p->flags & DPFLOW_CT_F_NAT ? 2u : 1u;
}

size_t dpflow_ct_image_size(uint32_t max_conns)
{
	return image_size(max_conns, 1, 0);
}

size_t dpflow_ct_image_size_params(const struct dpflow_ct_params *p)
{
	return p ? image_size(p->max_conns, keys_of(p), p->n_pools) : 0;
}

static uint32_t gcd(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Check pool @i of @p; 0 or -EINVAL naming "pools" (the message says
 * which pool and field). */
static int check_pool(const struct dpflow_ct_params *p, unsigned i,
		      struct dpflow_error *err)
{
	const struct dpflow_ct_pool_cfg *c = &p->pools[i];

	if (c->family != 4 && c->family != 6)
		return dpflow_error_set(err, EINVAL, "pools",
					"ct: pools[%u].family %u, not 4 or 6",
					i, c->family);
	if (c->n_addrs == 0 || c->n_addrs > DPFLOW_CT_POOL_ADDRS_MAX)
		return dpflow_error_set(
		    err, EINVAL, "pools", "ct: pools[%u].n_addrs %u, not 1..%u",
		    i, c->n_addrs, DPFLOW_CT_POOL_ADDRS_MAX);
	if (c->port_lo == 0 || c->port_lo > c->port_hi)
		return dpflow_error_set(
		    err, EINVAL, "pools",
		    "ct: pools[%u] ports %u-%u, not a range "
		    "in 1..65535",
		    i, c->port_lo, c->port_hi);
	return 0;
}

/* Copy pool config @c into image pool @d. */
static void pool_init(struct dpflow_ct_pool *d,
		      const struct dpflow_ct_pool_cfg *c)
{
	uint32_t total = c->n_addrs * ((uint32_t)c->port_hi - c->port_lo + 1),
		 s;

	memset(d, 0, sizeof(*d));
	for (unsigned a = 0; a < c->n_addrs; a++)
		memcpy(d->addr[a], c->addr[a], c->family == 6 ? 16 : 4);
	d->family = c->family;
	d->n_addrs = c->n_addrs;
	d->port_lo = c->port_lo;
	d->port_hi = c->port_hi;
	d->tries = c->tries ? c->tries : DPFLOW_CT_NAT_TRIES_DEFAULT;
	/* a step near the golden ratio of the size, prime to it: the
	 * candidates of one flow spread over the pool and visit all of it */
	s = (uint32_t)((uint64_t)total * 2654435769u >> 32) | 1u;
	while (gcd(s, total) != 1)
		s += 2;
	d->stride = s % total ? s % total : 1;
}

int dpflow_ct_image_init(void *mem, size_t size,
			 const struct dpflow_ct_params *p,
			 struct dpflow_error *err)
{
	struct dpflow_ct_image *ct = (struct dpflow_ct_image *)mem;
	size_t need;
	uint32_t nb;

	if (!p)
		return dpflow_error_set(err, EINVAL, "params",
					"ct: no parameters");
	if (!dpflow_ct_image_size(p->max_conns))
		return dpflow_error_set(err, EINVAL, "max_conns",
					"ct: max_conns %u not in 1..%u",
					p->max_conns, DPFLOW_CT_CAPACITY_MAX);
	if (p->flags & ~(uint32_t)(DPFLOW_CT_F_TCP_LOOSE | DPFLOW_CT_F_EVICT |
				   DPFLOW_CT_F_REPLACE | DPFLOW_CT_F_NAT))
		return dpflow_error_set(err, EINVAL, "flags",
					"ct: unknown flags 0x%x", p->flags);
	if (p->n_pools > DPFLOW_CT_POOLS_MAX)
		return dpflow_error_set(err, EINVAL, "n_pools",
					"ct: %u pools, at most %u", p->n_pools,
					DPFLOW_CT_POOLS_MAX);
	for (unsigned i = 0; i < p->n_pools; i++)
		if (check_pool(p, i, err))
			return -EINVAL;
	need = dpflow_ct_image_size_params(p);
	for (unsigned s = 1; s < DPFLOW_CT_STATE_COUNT; s++)
		if (p->timeout_ms[s] > DPFLOW_CT_TIMEOUT_MAX)
			return dpflow_error_set(
			    err, EINVAL, "timeout_ms",
			    "ct: timeout %u ms of state %s above %u ms",
			    p->timeout_ms[s], state_names[s],
			    DPFLOW_CT_TIMEOUT_MAX);
	if (!mem || (uintptr_t)mem % DPFLOW_CACHE_LINE)
		return dpflow_error_set(err, EINVAL, "mem",
					"ct: memory %p is not 64-byte aligned",
					mem);
	if (size < need)
		return dpflow_error_set(err, EINVAL, "size",
					"ct: %zu bytes, %zu needed", size,
					need);

	nb = n_buckets_for(p->max_conns, keys_of(p));
	memset(mem, 0, need);
	ct->magic = DPFLOW_CT_MAGIC;
	ct->version = DPFLOW_CT_VERSION;
	ct->flags = (uint16_t)p->flags;
	ct->n_buckets = nb;
	ct->max_conns = p->max_conns;
	ct->seed = p->seed;
	ct->n_pools = (uint16_t)p->n_pools;
	for (unsigned i = 0; i < p->n_pools; i++)
		pool_init(&dpflow_ct_pools(ct)[i], &p->pools[i]);
	ct->ctrl_off = sizeof(*ct) + p->n_pools * sizeof(struct dpflow_ct_pool);
	ct->locks_off =
	    ct->ctrl_off + (uint64_t)nb * DPFLOW_CT_SLOTS * sizeof(uint64_t);
	ct->slots_off =
	    ct->locks_off + round_line((size_t)nb * sizeof(uint32_t));
	ct->size = need;
	ct->busy_spins =
	    p->busy_spins ? p->busy_spins : DPFLOW_CT_BUSY_SPINS_DEFAULT;
	for (unsigned s = 1; s < DPFLOW_CT_STATE_COUNT; s++)
		ct->timeout_ms[s] = p->timeout_ms[s];
	return 0;
}

struct dpflow_ct_image *dpflow_ct_create(const struct dpflow_ct_params *p,
					 struct dpflow_error *err)
{
	size_t size = dpflow_ct_image_size_params(p), align, len;
	void *mem;

	if (!size) {
		dpflow_ct_image_init(NULL, 0, p, err);
		return NULL;
	}
	/* large images in transparent huge pages: a lookup touches two
	 * random lines, each a TLB miss in 4 KiB pages */
	align = size >= HUGE_PAGE ? HUGE_PAGE : DPFLOW_CACHE_LINE;
	len = (size + align - 1) & ~(align - 1);
	mem = aligned_alloc(align, len);
	if (!mem) {
		dpflow_error_set(err, ENOMEM, NULL,
				 "ct: cannot allocate %zu bytes", size);
		return NULL;
	}
	if (align == HUGE_PAGE)
		(void)madvise(mem, len, MADV_HUGEPAGE);
	if (dpflow_ct_image_init(mem, size, p, err)) {
		free(mem);
		return NULL;
	}
	return (struct dpflow_ct_image *)mem;
}

void dpflow_ct_destroy(struct dpflow_ct_image *ct)
{
	free(ct);
}

size_t dpflow_ct_image_bytes(const struct dpflow_ct_image *ct)
{
	return ct->size;
}

int dpflow_ct_image_copy(void *dst, size_t dst_size,
			 const struct dpflow_ct_image *src,
			 struct dpflow_error *err)
{
	if (!dst || (uintptr_t)dst % DPFLOW_CACHE_LINE)
		return dpflow_error_set(err, EINVAL, "dst",
					"ct: destination %p is not 64-byte "
					"aligned",
					dst);
	if (dst_size < src->size)
		return dpflow_error_set(err, EINVAL, "dst_size",
					"ct: %zu bytes, %lu needed", dst_size,
					(unsigned long)src->size);
	memcpy(dst, src, src->size);
	return 0;
}

uint32_t dpflow_ct_n_slots(const struct dpflow_ct_image *ct)
{
	return ct->n_buckets * DPFLOW_CT_SLOTS;
}

int dpflow_ct_set_timeout(struct dpflow_ct_image *ct, unsigned state,
			  uint32_t ms, struct dpflow_error *err)
{
	if (state == DPFLOW_CT_NONE || state >= DPFLOW_CT_STATE_COUNT)
		return dpflow_error_set(err, EINVAL, "state", "ct: no state %u",
					state);
	if (ms > DPFLOW_CT_TIMEOUT_MAX)
		return dpflow_error_set(err, EINVAL, "timeout_ms",
					"ct: timeout %u ms above %u ms", ms,
					DPFLOW_CT_TIMEOUT_MAX);
	dpflow_atomic_store32(&ct->timeout_ms[state], ms);
	return 0;
}

/* ---- data path ----------------------------------------------------------- */

void dpflow_ct_process(struct dpflow_ct_image *ct,
		       const struct dpflow_ct_pkt *pkt, uint64_t now_ns,
		       uint32_t user_new, struct dpflow_ct_result *res)
{
	dpflow_ct_process_impl(ct, pkt, now_ns, user_new, res);
}

void dpflow_ct_track(struct dpflow_ct_image *ct,
		     const struct dpflow_ct_pkt *pkt, uint64_t now_ns,
		     uint32_t user_new, const struct dpflow_ct_value *init,
		     struct dpflow_ct_result *res, struct dpflow_ct_value *val)
{
	dpflow_ct_track_impl(ct, pkt, now_ns, user_new, init, res, val);
}

void dpflow_ct_lookup(struct dpflow_ct_image *ct,
		      const struct dpflow_ct_pkt *pkt, uint64_t now_ns,
		      struct dpflow_ct_result *res)
{
	dpflow_ct_lookup_impl(ct, pkt, now_ns, res);
}

void dpflow_ct_lookup_val(struct dpflow_ct_image *ct,
			  const struct dpflow_ct_pkt *pkt, uint64_t now_ns,
			  struct dpflow_ct_result *res,
			  struct dpflow_ct_value *val)
{
	dpflow_ct_lookup_val_impl(ct, pkt, now_ns, res, val);
}

/* Packets keyed, hashed and prefetched together. */
#define CT_CHUNK 32

/* Prefetch the slot lines of bucket @b whose signature is @sig (with
 * @val their value blocks too). Whether there was one. */
static bool prefetch_matches(struct dpflow_ct_image *ct, const uint64_t *ctrl,
			     uint32_t b, uint64_t sig, bool val)
{
	const struct dpflow_ct_slot *slots = dpflow_ct_slots(ct);
	uint32_t base = b * DPFLOW_CT_SLOTS;
	uint32_t m = dpflow_ct_match(ctrl, base, sig);
	bool any = m != 0;

	for (; m; m &= m - 1) {
		uint32_t i = base + dpflow_ct_ctz(m);

		DPFLOW_PREFETCH(&slots[i]);
		if (val)
			DPFLOW_PREFETCH(&dpflow_ct_vals(ct)[i]);
	}
	return any;
}

/*
 * Three passes over each chunk, as DPDK's bulk hash lookup: keys and
 * hashes (prefetching both buckets' control lines), then the slot lines
 * whose signature matches (prefetched), then the packets in order. The
 * cache misses of a chunk overlap instead of queueing one by one. Inlined
 * into both callers, so that dpflow_ct_process_burst (no init blocks, no
 * value copies) carries no value code.
 */
static DPFLOW_ALWAYS_INLINE uint16_t track_burst(
    struct dpflow_ct_image *ct, const struct dpflow_ct_pkt *pkts, uint16_t n,
    uint64_t now_ns, const uint32_t *user_new,
    const struct dpflow_ct_value *const *init, struct dpflow_ct_result *res,
    struct dpflow_ct_value *vals, bool replies)
{
	struct dpflow_ct_key keys[CT_CHUNK];
	struct dpflow_ct_loc loc[CT_CHUNK];
	uint64_t hash[CT_CHUNK];
	bool from_lo[CT_CHUNK];
	const uint64_t *ctrl = dpflow_ct_ctrl(ct);

	for (uint16_t base = 0; base < n; base += CT_CHUNK) {
		uint16_t m = n - base < CT_CHUNK ? n - base : CT_CHUNK;

		for (uint16_t j = 0; j < m; j++) {
			from_lo[j] =
			    dpflow_ct_key_make(&pkts[base + j], &keys[j]);
			hash[j] = dpflow_ct_hash(&keys[j], ct->seed);
			dpflow_ct_locate(ct, hash[j], &loc[j]);
			DPFLOW_PREFETCH(&ctrl[loc[j].b1 * DPFLOW_CT_SLOTS]);
			DPFLOW_PREFETCH(&ctrl[loc[j].b2 * DPFLOW_CT_SLOTS]);
		}
		/* a connection sits in its other bucket only when its own
		 * was full: that one's matches only when the first has none
		 * (a lookup reads it then) */
		for (uint16_t j = 0; j < m; j++)
			if (!prefetch_matches(ct, ctrl, loc[j].b1, loc[j].sig,
					      vals != NULL))
				prefetch_matches(ct, ctrl, loc[j].b2,
						 loc[j].sig, vals != NULL);
		for (uint16_t j = 0; j < m; j++) {
			const struct dpflow_ct_pkt *p = &pkts[base + j];

			dpflow_ct_track_key_impl(
			    ct, &keys[j], hash[j], from_lo[j], p->proto,
			    p->tcp_flags, now_ns,
			    user_new ? user_new[base + j] : 0,
			    init ? init[base + j] : NULL, &res[base + j],
			    vals ? &vals[base + j] : NULL);
			if (replies)
				dpflow_ct_reply_targets_impl(ct, &res[base + j],
							     &vals[base + j]);
		}
	}
	return n;
}

uint16_t dpflow_ct_track_burst(struct dpflow_ct_image *ct,
			       const struct dpflow_ct_pkt *pkts, uint16_t n,
			       uint64_t now_ns, const uint32_t *user_new,
			       const struct dpflow_ct_value *const *init,
			       struct dpflow_ct_result *res,
			       struct dpflow_ct_value *vals)
{
	return track_burst(ct, pkts, n, now_ns, user_new, init, res, vals,
			   false);
}

uint16_t dpflow_ct_track_burst_replies(
    struct dpflow_ct_image *ct, const struct dpflow_ct_pkt *pkts, uint16_t n,
    uint64_t now_ns, const uint32_t *user_new,
    const struct dpflow_ct_value *const *init, struct dpflow_ct_result *res,
    struct dpflow_ct_value *vals)
{
	return track_burst(ct, pkts, n, now_ns, user_new, init, res, vals,
			   true);
}

uint16_t dpflow_ct_process_burst(struct dpflow_ct_image *ct,
				 const struct dpflow_ct_pkt *pkts, uint16_t n,
				 uint64_t now_ns, const uint32_t *user_new,
				 struct dpflow_ct_result *res)
{
	return track_burst(ct, pkts, n, now_ns, user_new, NULL, res, NULL,
			   false);
}

/* ---- control thread ------------------------------------------------------ */

static bool is_alias(uint64_t w)
{
	return (w & DPFLOW_CT_W_ALIAS) != 0;
}

/* Fill @info from slot @i whose control word was @w, at @now_ns. */
static void describe(struct dpflow_ct_image *ct, uint32_t i, uint64_t w,
		     uint64_t now_ns, struct dpflow_ct_info *info)
{
	const struct dpflow_ct_slot *s = &dpflow_ct_slots(ct)[i];
	struct dpflow_ct_key key;
	uint64_t now_ms = now_ns / NS_PER_MS;
	uint32_t idle = (uint32_t)now_ms - dpflow_ct_w_time(w);
	bool orig_lo = (w & DPFLOW_CT_W_ORIG_LO) != 0;

	for (unsigned j = 0; j < 5; j++)
		key.w[j] = dpflow_atomic_load64(&s->key[j]);
	memset(info, 0, sizeof(*info));
	info->conn = i;
	info->user = dpflow_atomic_load32(&s->user);
	info->state = (uint8_t)dpflow_ct_w_state(w);
	info->replied = (w & DPFLOW_CT_W_REPLIED) != 0;
	info->dead = (w & DPFLOW_CT_W_STATUS) == DPFLOW_CT_W_DEAD;
	dpflow_ct_key_tuple(&key, orig_lo, &info->orig);
	dpflow_ct_value_load(ct, i, &info->value);
	info->reply_slot = dpflow_atomic_load32(&s->twin);
	if (info->reply_slot >= dpflow_ct_n_slots(ct))
		info->reply_slot = DPFLOW_TABLE_MISS;
	/* replies: the translated tuple, reversed */
	dpflow_ct_key_tuple(&key, !orig_lo, &info->reply);
	if (info->value.flags & DPFLOW_CT_VAL_SNAT) {
		memcpy(info->reply.dst, info->value.nat_src, 16);
		info->reply.dport = info->value.nat_sport;
	}
	if (info->value.flags & DPFLOW_CT_VAL_DNAT) {
		memcpy(info->reply.src, info->value.nat_dst, 16);
		info->reply.sport = info->value.nat_dport;
	}
	/* a last-seen time in the future (another thread's clock) reads as
	 * now */
	if (idle >= 0x80000000u || idle > now_ms)
		idle = 0;
	info->last_seen_ns = (now_ms - idle) * NS_PER_MS;
	info->created_ns = dpflow_atomic_load64(&s->created_ns);
}

/*
 * Free connection @i if its control word is still @w (READY or DEAD, not
 * a reply key): BUSY, read the report, free its reply key and binding,
 * FREE with the next generation. Returns false if the word changed (a
 * packet refreshed it, or it went away).
 */
static bool free_slot(struct dpflow_ct_image *ct, uint32_t i, uint64_t w,
		      uint64_t now_ns, unsigned stat, dpflow_ct_cb cb,
		      void *arg)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	uint64_t busy = (w & DPFLOW_CT_W_GEN) | DPFLOW_CT_W_BUSY;
	struct dpflow_ct_info info;

	if (!dpflow_atomic_cas64(&ctrl[i], &w, busy))
		return false;
	if (cb)
		describe(ct, i, w, now_ns, &info);
	dpflow_ct_unbind(ct, i);
	dpflow_atomic_store64_rel(
	    &ctrl[i], (w + (1ull << DPFLOW_CT_W_GEN_SHIFT)) & DPFLOW_CT_W_GEN);
	dpflow_atomic_add64(&ct->n_live, (uint64_t)-1);
	dpflow_ct_stat_add(ct, stat);
	if (cb)
		cb(&info, arg);
	return true;
}

/* A connection (not a reply key) READY or DEAD. */
static bool is_live(uint64_t w)
{
	uint64_t st = w & DPFLOW_CT_W_STATUS;

	return (st == DPFLOW_CT_W_READY || st == DPFLOW_CT_W_DEAD) &&
	       !is_alias(w);
}

uint32_t dpflow_ct_age(struct dpflow_ct_image *ct, uint64_t now_ns,
		       uint32_t *cursor, uint32_t budget, dpflow_ct_cb cb,
		       void *arg)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	uint32_t n = dpflow_ct_n_slots(ct), i, left, expired = 0;
	uint32_t now_ms = (uint32_t)(now_ns / NS_PER_MS);

	i = cursor ? *cursor % n : 0;
	left = cursor ? (budget < n ? budget : n) : n;
	for (; left; left--, i = i + 1 == n ? 0 : i + 1) {
		uint64_t w = dpflow_atomic_load64(&ctrl[i]);

		/* a refreshed word fails the CAS: look at it again; reply
		 * keys go with their connections */
		while (!is_alias(w) &&
		       ((w & DPFLOW_CT_W_STATUS) == DPFLOW_CT_W_DEAD ||
			((w & DPFLOW_CT_W_STATUS) == DPFLOW_CT_W_READY &&
			 dpflow_ct_expired(ct, w, now_ms)))) {
			if (free_slot(ct, i, w, now_ns, DPFLOW_CT_STAT_EXPIRED,
				      cb, arg)) {
				expired++;
				break;
			}
			w = dpflow_atomic_load64(&ctrl[i]);
		}
	}
	if (cursor)
		*cursor = i;
	return expired;
}

static int check_conn(const struct dpflow_ct_image *ct, uint32_t conn,
		      struct dpflow_error *err)
{
	if (conn >= dpflow_ct_n_slots(ct))
		return dpflow_error_set(err, EINVAL, "conn",
					"ct: connection %u out of range (%u "
					"slots)",
					conn, dpflow_ct_n_slots(ct));
	return 0;
}

/* -ENOENT for slot @conn, whose word @w is not a live connection. */
static int no_conn(struct dpflow_ct_image *ct, uint32_t conn, uint64_t w,
		   struct dpflow_error *err)
{
	if (is_alias(w) && (w & DPFLOW_CT_W_STATUS) == DPFLOW_CT_W_READY)
		return dpflow_error_set(
		    err, ENOENT, "conn",
		    "ct: slot %u is the reply key of connection %u", conn,
		    dpflow_atomic_load32(&dpflow_ct_slots(ct)[conn].twin));
	return dpflow_error_set(err, ENOENT, "conn", "ct: no connection at %u",
				conn);
}

int dpflow_ct_remove(struct dpflow_ct_image *ct, uint32_t conn,
		     struct dpflow_error *err)
{
	int rc = check_conn(ct, conn, err);

	if (rc)
		return rc;
	for (;;) {
		uint64_t w = dpflow_atomic_load64(&dpflow_ct_ctrl(ct)[conn]);

		if (!is_live(w))
			return no_conn(ct, conn, w, err);
		if (free_slot(ct, conn, w, 0, DPFLOW_CT_STAT_REMOVED, NULL,
			      NULL))
			return 0;
	}
}

uint32_t dpflow_ct_flush(struct dpflow_ct_image *ct, uint64_t now_ns,
			 dpflow_ct_cb cb, void *arg)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	uint32_t n = dpflow_ct_n_slots(ct), removed = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t w = dpflow_atomic_load64(&ctrl[i]);

		while (is_live(w)) {
			if (free_slot(ct, i, w, now_ns, DPFLOW_CT_STAT_REMOVED,
				      cb, arg)) {
				removed++;
				break;
			}
			w = dpflow_atomic_load64(&ctrl[i]);
		}
	}
	return removed;
}

int dpflow_ct_get(struct dpflow_ct_image *ct, uint32_t conn, uint64_t now_ns,
		  struct dpflow_ct_info *info, struct dpflow_error *err)
{
	uint64_t *ctrl = dpflow_ct_ctrl(ct);
	int rc = check_conn(ct, conn, err);

	if (rc)
		return rc;
	for (;;) {
		uint64_t w = dpflow_atomic_load64_acq(&ctrl[conn]);

		if (!is_live(w))
			return no_conn(ct, conn, w, err);
		describe(ct, conn, w, now_ns, info);
		dpflow_atomic_fence_acq();
		if ((dpflow_atomic_load64(&ctrl[conn]) & DPFLOW_CT_W_IDENT) ==
		    (w & DPFLOW_CT_W_IDENT))
			return 0;
	}
}

int dpflow_ct_set_user(struct dpflow_ct_image *ct, uint32_t conn, uint32_t user,
		       struct dpflow_error *err)
{
	int rc = check_conn(ct, conn, err);
	uint64_t w;

	if (rc)
		return rc;
	w = dpflow_atomic_load64_acq(&dpflow_ct_ctrl(ct)[conn]);
	if ((w & DPFLOW_CT_W_STATUS) != DPFLOW_CT_W_READY || is_alias(w))
		return dpflow_error_set(err, ENOENT, "conn",
					"ct: no live connection at %u", conn);
	dpflow_atomic_store32(&dpflow_ct_slots(ct)[conn].user, user);
	return 0;
}

uint32_t dpflow_ct_count(struct dpflow_ct_image *ct)
{
	const uint64_t *ctrl = dpflow_ct_ctrl(ct);
	uint32_t n = dpflow_ct_n_slots(ct), count = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t w = dpflow_atomic_load64(&ctrl[i]);

		count += (w & DPFLOW_CT_W_STATUS) == DPFLOW_CT_W_READY &&
			 !is_alias(w);
	}
	return count;
}

void dpflow_ct_stats_get(struct dpflow_ct_image *ct, struct dpflow_ct_stats *s)
{
	s->live = dpflow_atomic_load64(&ct->n_live);
	for (unsigned i = 0; i < DPFLOW_CT_STAT__COUNT; i++)
		s->stat[i] = dpflow_atomic_load64(&ct->stats[i]);
}

int dpflow_ct_pool_stats_get(struct dpflow_ct_image *ct, unsigned pool,
			     struct dpflow_ct_pool_stats *s,
			     struct dpflow_error *err)
{
	const struct dpflow_ct_pool *p;

	if (pool >= ct->n_pools)
		return dpflow_error_set(err, EINVAL, "pool",
					"ct: no pool %u (%u pools)", pool,
					ct->n_pools);
	p = &dpflow_ct_pools(ct)[pool];
	s->bound = dpflow_atomic_load64(&p->bound);
	s->exhausted = dpflow_atomic_load64(&p->exhausted);
	s->size = p->n_addrs * ((uint32_t)p->port_hi - p->port_lo + 1);
	return 0;
}
