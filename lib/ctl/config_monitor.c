/*
 * The config loader's context section, monitors, meters and connection
 * tracking settings (config_internal.h; docs/config.md). Each key is
 * checked where it is written, so that errors carry its line; the engine
 * checks again when the context, the pipes and the entries are made.
 * Control thread only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/config_internal.h"
#include "flow/ct.h"

static int parse_u32(struct loader *L, const struct ynode *x, uint32_t lo,
		     uint32_t hi, uint32_t *v)
{
	uint64_t n;

	CHECK(y_u64(&L->d, x, hi, &n));
	if (n < lo)
		return yerr(&L->d, x, ERANGE, "%lu is below %u",
			    (unsigned long)n, lo);
	*v = (uint32_t)n;
	return 0;
}

int cfg_parse_meter(struct loader *L, const struct ynode *x,
		    struct dpflow_meter_cfg *m)
{
	static const char *const keys[] = {"alg", "cir", "cbs",		"ebs",
					   "pir", "pbs", "color_aware", NULL};
	/* keys of the other algorithm, refused by name */
	static const char *const srtcm_only[] = {"ebs", NULL};
	static const char *const trtcm_only[] = {"pir", "pbs", NULL};
	const char *const *wrong;
	struct ynode v;
	const char *alg;
	uint64_t n;

	memset(m, 0, sizeof(*m));
	CHECK(y_check_keys(&L->d, x, keys));
	if (!y_get(&L->d, x, "alg", &v))
		return yerr(&L->d, x, EINVAL,
			    "'alg' is missing (srtcm or trtcm)");
	CHECK(y_string(&L->d, &v, &alg));
	if (!strcmp(alg, "srtcm")) {
		m->alg = DPFLOW_METER_ALG_SRTCM;
		wrong = trtcm_only;
	} else if (!strcmp(alg, "trtcm")) {
		m->alg = DPFLOW_METER_ALG_TRTCM;
		wrong = srtcm_only;
	} else {
		return yerr(&L->d, &v, EINVAL,
			    "unknown meter algorithm '%s' (srtcm or trtcm)",
			    alg);
	}
	for (unsigned i = 0; wrong[i]; i++)
		if (y_get(&L->d, x, wrong[i], &v))
			return yerr(&L->d, &v, EINVAL,
				    "%s meters take %s, not '%s'", alg,
				    m->alg == DPFLOW_METER_ALG_SRTCM
					? "cir, cbs and ebs"
					: "cir, pir, cbs and pbs",
				    wrong[i]);
	if (!y_get(&L->d, x, "cir", &v))
		return yerr(&L->d, x, EINVAL,
			    "'cir' (bytes per second) is missing");
	CHECK(y_u64(&L->d, &v, UINT64_MAX, &m->cir));
	if (!y_get(&L->d, x, "cbs", &v))
		return yerr(&L->d, x, EINVAL, "'cbs' (bytes) is missing");
	CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
	m->cbs = (uint32_t)n;
	if (y_get(&L->d, x, "ebs", &v)) {
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		m->ebs = (uint32_t)n;
	}
	if (m->alg == DPFLOW_METER_ALG_TRTCM) {
		if (!y_get(&L->d, x, "pbs", &v))
			return yerr(&L->d, x, EINVAL,
				    "'pbs' (bytes) is missing");
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		m->pbs = (uint32_t)n;
		if (!y_get(&L->d, x, "pir", &v))
			return yerr(&L->d, x, EINVAL,
				    "'pir' (bytes per second) is missing");
		CHECK(y_u64(&L->d, &v, UINT64_MAX, &m->pir));
		if (m->pir < m->cir)
			return yerr(&L->d, &v, EINVAL,
				    "pir %lu is below cir %lu (a trtcm meter "
				    "needs pir >= cir)",
				    (unsigned long)m->pir,
				    (unsigned long)m->cir);
	}
	if (y_get(&L->d, x, "color_aware", &v))
		CHECK(y_bool(&L->d, &v, &m->color_aware));
	return 0;
}

int cfg_parse_context(struct loader *L, const struct ynode *x,
		      struct dpflow_ctx_params *cp,
		      struct dpflow_meter_cfg **meters)
{
	static const char *const keys[] = {"rss_queues", "rss_queue_size",
					   "shared_counters", "shared_meters",
					   NULL};
	struct ynode v;
	uint32_t n;

	*meters = NULL;
	CHECK(y_check_keys(&L->d, x, keys));
	if (y_get(&L->d, x, "rss_queues", &v)) {
		CHECK(parse_u32(L, &v, 0, DPFLOW_RSS_QUEUES_MAX, &n));
		cp->rss_queues = (uint16_t)n;
	}
	if (y_get(&L->d, x, "rss_queue_size", &v)) {
		CHECK(parse_u32(L, &v, 2, 1u << 24, &cp->rss_queue_size));
		if (cp->rss_queue_size & (cp->rss_queue_size - 1))
			return yerr(&L->d, &v, EINVAL,
				    "%u is not a power of two",
				    cp->rss_queue_size);
	}
	if (y_get(&L->d, x, "shared_counters", &v))
		CHECK(parse_u32(L, &v, 0, 1u << 24, &cp->shared_counters));
	if (y_get(&L->d, x, "shared_meters", &v)) {
		struct dpflow_meter_cfg *m;

		if (!y_is_seq(&v))
			return yerr(&L->d, &v, EINVAL,
				    "expected a list of meters "
				    "({alg: srtcm, cir: ..., cbs: ...})");
		if (y_len(&v) > 1u << 20)
			return yerr(&L->d, &v, EINVAL,
				    "at most %u shared meters", 1u << 20);
		if (!y_len(&v))
			return 0;
		m = calloc(y_len(&v), sizeof(*m));
		if (!m)
			return yerr(&L->d, &v, ENOMEM, "out of memory");
		for (unsigned i = 0; i < y_len(&v); i++) {
			struct ynode it;
			int rc;

			y_item(&L->d, &v, i, &it);
			rc = cfg_parse_meter(L, &it, &m[i]);
			if (rc) {
				free(m);
				return rc;
			}
		}
		cp->shared_meters = y_len(&v);
		L->n_shared_meters = cp->shared_meters;
		*meters = m;
	}
	return 0;
}

int cfg_shared_meters_config(struct loader *L, const struct ynode *x,
			     const struct dpflow_meter_cfg *meters)
{
	struct ynode list;

	if (!meters || !y_get(&L->d, x, "shared_meters", &list))
		return 0;
	for (unsigned i = 0; i < y_len(&list); i++) {
		struct dpflow_error e = {0};
		struct ynode it;

		y_item(&L->d, &list, i, &it);
		if (dpflow_shared_meter_config(L->ctx, i + 1, &meters[i], &e))
			return yerr(&L->d, &it, e.code ? e.code : EINVAL, "%s",
				    e.msg);
	}
	return 0;
}

int cfg_parse_shared_counter(struct loader *L, const struct ynode *x,
			     uint32_t *id)
{
	uint32_t have = dpflow_ctx_shared_counters(L->ctx);
	uint64_t n;

	CHECK(y_u64(&L->d, x, UINT32_MAX, &n));
	if (n == 0 || n > have)
		return yerr(&L->d, x, EINVAL,
			    "shared counter %lu: the context has %u "
			    "(context.shared_counters; ids start at 1)",
			    (unsigned long)n, have);
	*id = (uint32_t)n;
	return 0;
}

int cfg_parse_aging(struct loader *L, const struct ynode *x, uint32_t *ms)
{
	return parse_u32(L, x, 1, UINT32_MAX, ms);
}

int cfg_parse_monitor(struct loader *L, const struct ynode *x,
		      struct dpflow_pipe_cfg *cfg)
{
	static const char *const keys[] = {"counter",  "shared_counter",
					   "meter",    "shared_meter",
					   "aging_ms", NULL};
	struct dpflow_monitor *mon = &cfg->monitor;
	struct ynode v;

	CHECK(y_check_keys(&L->d, x, keys));
	if (y_get(&L->d, x, "counter", &v))
		CHECK(y_bool(&L->d, &v, &mon->counter));
	if (y_get(&L->d, x, "shared_counter", &v))
		CHECK(cfg_parse_shared_counter(L, &v, &mon->shared_counter));
	if (y_get(&L->d, x, "meter", &v))
		CHECK(cfg_parse_meter(L, &v, &mon->meter));
	if (y_get(&L->d, x, "shared_meter", &v)) {
		uint64_t n;

		if (mon->meter.alg)
			return yerr(&L->d, &v, EINVAL,
				    "a pipe has either 'meter' (one per "
				    "entry) or 'shared_meter', not both");
		CHECK(y_u64(&L->d, &v, UINT32_MAX, &n));
		if (n == 0 || n > L->n_shared_meters)
			return yerr(&L->d, &v, EINVAL,
				    "shared meter %lu: the context has %u "
				    "(context.shared_meters; ids start at 1)",
				    (unsigned long)n, L->n_shared_meters);
		mon->shared_meter = (uint32_t)n;
	}
	if (y_get(&L->d, x, "aging_ms", &v))
		CHECK(cfg_parse_aging(L, &v, &mon->aging_ms));
	if (cfg->type == DPFLOW_PIPE_CT &&
	    (mon->counter || mon->shared_counter || mon->meter.alg ||
	     mon->shared_meter || mon->aging_ms))
		return yerr(&L->d, x, EINVAL,
			    "a ct pipe has no entries to count, meter or age "
			    "(connections age by ct.timeouts_ms)");
	return 0;
}

/* A state name of dpflow_ct_state_name(), 1..DPFLOW_CT_STATE_COUNT - 1. */
static int ct_state_lookup(const char *name)
{
	for (unsigned s = 1; s < DPFLOW_CT_STATE_COUNT; s++)
		if (!strcmp(dpflow_ct_state_name(s), name))
			return (int)s;
	return -1;
}

/* meta.reg0 .. meta.reg3 at @x: its number in *@reg. */
static int parse_reg(struct loader *L, const struct ynode *x, uint8_t *reg)
{
	uint16_t f;

	CHECK(cfg_parse_field_name(L, x, &f));
	if (f < DPFLOW_FIELD_META_REG0 || f > DPFLOW_FIELD_META_REG3)
		return yerr(&L->d, x, EINVAL,
			    "'%s': expected meta.reg0 .. meta.reg3", y_str(x));
	*reg = (uint8_t)(f - DPFLOW_FIELD_META_REG0);
	return 0;
}

/* ct.snat: {addrs: [ADDR...], ports: [FIRST, LAST], tries: N} */
static int parse_snat(struct loader *L, const struct ynode *x,
		      struct dpflow_ct_snat_cfg *sn)
{
	static const char *const keys[] = {"addrs", "ports", "tries", NULL};
	unsigned n4 = 0, n6 = 0;
	struct ynode v, it;
	uint32_t u;

	CHECK(y_check_keys(&L->d, x, keys));
	if (!y_get(&L->d, x, "addrs", &v))
		return yerr(&L->d, x, EINVAL,
			    "'addrs' is missing: the addresses new "
			    "connections take as their source");
	if (!y_is_seq(&v) || !y_len(&v))
		return yerr(&L->d, &v, EINVAL,
			    "expected a list of IPv4 or IPv6 addresses");
	for (unsigned i = 0; i < y_len(&v); i++) {
		const char *a;
		unsigned k = sn->n_addrs;

		y_item(&L->d, &v, i, &it);
		a = y_str(&it);
		if (a && inet_pton(AF_INET, a, sn->addr[k]) == 1)
			sn->family[k] = 4, n4++;
		else if (a && inet_pton(AF_INET6, a, sn->addr[k]) == 1)
			sn->family[k] = 6, n6++;
		else
			return yerr(&L->d, &it, EINVAL,
				    "'%s' is not an IPv4 or IPv6 address",
				    a ? a : "");
		if (n4 > DPFLOW_CT_SNAT_ADDRS_MAX / 2 ||
		    n6 > DPFLOW_CT_SNAT_ADDRS_MAX / 2)
			return yerr(&L->d, &it, EINVAL,
				    "at most %u addresses of each family",
				    DPFLOW_CT_SNAT_ADDRS_MAX / 2);
		for (unsigned j = 0; j < k; j++)
			if (sn->family[j] == sn->family[k] &&
			    !memcmp(sn->addr[j], sn->addr[k], 16))
				return yerr(&L->d, &it, EINVAL,
					    "'%s' is there already", a);
		sn->n_addrs++;
	}
	if (y_get(&L->d, x, "ports", &v)) {
		struct ynode p0, p1;

		if (!y_is_seq(&v) || y_len(&v) != 2)
			return yerr(&L->d, &v, EINVAL,
				    "expected [FIRST, LAST] (ports 1..65535)");
		y_item(&L->d, &v, 0, &p0);
		y_item(&L->d, &v, 1, &p1);
		CHECK(parse_u32(L, &p0, 1, 65535, &u));
		sn->port_lo = (uint16_t)u;
		CHECK(parse_u32(L, &p1, 1, 65535, &u));
		sn->port_hi = (uint16_t)u;
		if (sn->port_lo > sn->port_hi)
			return yerr(&L->d, &v, EINVAL,
				    "first port %u is above the last, %u",
				    sn->port_lo, sn->port_hi);
	}
	if (y_get(&L->d, x, "tries", &v)) {
		CHECK(parse_u32(L, &v, 1, 65535, &u));
		sn->tries = (uint16_t)u;
	}
	return 0;
}

int cfg_parse_ct(struct loader *L, const struct ynode *x,
		 struct dpflow_ct_cfg *ct)
{
	static const char *const keys[] = {"inner", "lookup_only", "tcp_strict",
					   "evict", "replace",	   "user_reg",
					   "save",  "snat",	   "dnat",
					   "opens", "timeouts_ms", NULL};
	static const char *const flags[] = {"inner", "lookup_only",
					    "tcp_strict", "evict", "replace"};
	bool *const flag_at[] = {&ct->inner, &ct->lookup_only, &ct->tcp_strict,
				 &ct->evict, &ct->replace};
	struct ynode v;

	memset(ct, 0, sizeof(*ct));
	CHECK(y_check_keys(&L->d, x, keys));
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(flags); i++)
		if (y_get(&L->d, x, flags[i], &v))
			CHECK(y_bool(&L->d, &v, flag_at[i]));
	if (ct->evict && ct->replace)
		return yerr(&L->d, x, EINVAL,
			    "'evict' and 'replace' exclude each other "
			    "(replace reuses expired connections too)");
	if (y_get(&L->d, x, "user_reg", &v)) {
		CHECK(parse_reg(L, &v, &ct->user_reg));
		ct->user = true;
	}
	if (y_get(&L->d, x, "save", &v)) {
		if (!y_is_seq(&v))
			return yerr(&L->d, &v, EINVAL,
				    "expected a list of registers "
				    "(meta.reg0 .. meta.reg3)");
		for (unsigned i = 0; i < y_len(&v); i++) {
			struct ynode it;
			uint8_t r = 0;

			y_item(&L->d, &v, i, &it);
			CHECK(parse_reg(L, &it, &r));
			if (ct->save_regs & (1u << r))
				return yerr(&L->d, &it, EINVAL,
					    "meta.reg%u is there already", r);
			ct->save_regs |= (uint8_t)(1u << r);
		}
	}
	if (y_get(&L->d, x, "opens", &v)) {
		CHECK(parse_reg(L, &v, &ct->open_reg));
		ct->opens = true;
		if (ct->lookup_only)
			return yerr(&L->d, &v, EINVAL,
				    "a lookup_only pipe opens no connections");
	}
	if (y_get(&L->d, x, "dnat", &v)) {
		static const char *const dkeys[] = {"pipe", "reg", NULL};
		struct ynode t;

		if (!y_is_map(&v))
			return yerr(&L->d, &v, EINVAL,
				    "expected {pipe: NAME, reg: meta.regN}");
		CHECK(y_check_keys(&L->d, &v, dkeys));
		if (!y_get(&L->d, &v, "pipe", &t) || !y_str(&t))
			return yerr(&L->d, &v, EINVAL,
				    "'pipe' is missing: the table of "
				    "destinations, by register");
		ct->dnat_pipe = dpflow_pipe_find(L->ctx, y_str(&t));
		if (!ct->dnat_pipe)
			return yerr(&L->d, &t, ENOENT, "no pipe named '%s'",
				    y_str(&t));
		if (!y_get(&L->d, &v, "reg", &t))
			return yerr(&L->d, &v, EINVAL,
				    "'reg' is missing: the register whose "
				    "value picks the destination");
		CHECK(parse_reg(L, &t, &ct->dnat_reg));
		if (ct->inner || ct->lookup_only)
			return yerr(&L->d, &v, EINVAL, "destination NAT %s",
				    ct->inner ? "translates the outer headers: "
						"not with 'inner'"
					      : "binds new connections: not "
						"with 'lookup_only'");
	}
	if (y_get(&L->d, x, "snat", &v)) {
		CHECK(parse_snat(L, &v, &ct->snat));
		if (ct->inner || ct->lookup_only)
			return yerr(&L->d, &v, EINVAL, "source NAT %s",
				    ct->inner ? "translates the outer headers: "
						"not with 'inner'"
					      : "binds new connections: not "
						"with 'lookup_only'");
	}
	if (y_get(&L->d, x, "timeouts_ms", &v)) {
		if (!y_is_map(&v))
			return yerr(&L->d, &v, EINVAL,
				    "expected a mapping STATE: "
				    "milliseconds");
		for (unsigned i = 0; i < y_len(&v); i++) {
			const char *name = NULL;
			struct ynode t;
			int s;

			if (!y_pair(&L->d, &v, i, &name, &t))
				return yerr(&L->d, &v, EINVAL,
					    "keys must be plain text");
			s = ct_state_lookup(name);
			if (s < 0)
				return yerr(&L->d, &t, EINVAL,
					    "unknown connection state '%s' "
					    "(established, syn_sent, "
					    "udp_unreplied...: see "
					    "docs/config.md)",
					    name);
			/* 0: never (docs/config.md) */
			CHECK(parse_u32(L, &t, 0, DPFLOW_CT_TIMEOUT_MAX,
					&ct->timeout_ms[s]));
			if (!ct->timeout_ms[s])
				ct->timeout_ms[s] = DPFLOW_CT_TIMEOUT_NEVER;
		}
	}
	return 0;
}
