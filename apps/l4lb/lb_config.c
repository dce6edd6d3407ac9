/*
 * The balancer's YAML section (docs/apps/l4lb.md): `apps: {l4lb: ...}` of
 * a dpflow config, read through config nodes (dpflow/config_node.h) so
 * that errors read as the loader's ("FILE:LINE:
 * apps.l4lb.services[0].vip: ...").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dpflow/config_node.h"
#include "dpflow/maglev.h"

#include "l4lb/l4lb_config.h"
#include "l4lb/lb_internal.h"

static int parse_addr(const struct dpflow_cfg_node *x, struct l4lb_addr *a)
{
	const char *s;

	if (dpflow_cfg_string(x, &s))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, a->b) == 1)
		return 0;
	if (inet_pton(AF_INET6, s, a->b) == 1) {
		a->v6 = 1;
		return 0;
	}
	return dpflow_cfg_error(x, EINVAL,
				"'%s' is not an IPv4 or IPv6 address", s);
}

static int parse_mac(const struct dpflow_cfg_node *x, uint8_t mac[6])
{
	const char *s;
	unsigned v[6];
	char extra;

	if (dpflow_cfg_string(x, &s))
		return -EINVAL;
	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5], &extra) != 6)
		return dpflow_cfg_error(x, EINVAL, "'%s' is not a MAC address",
					s);
	for (unsigned i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return dpflow_cfg_error(x, EINVAL,
						"'%s' is not a MAC address", s);
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

static int opt_mac(const struct dpflow_cfg_node *map, const char *key,
		   uint8_t mac[6])
{
	struct dpflow_cfg_node x;

	return dpflow_cfg_get(map, key, &x) ? parse_mac(&x, mac) : 0;
}

static int opt_addr(const struct dpflow_cfg_node *map, const char *key,
		    struct l4lb_addr *a)
{
	struct dpflow_cfg_node x;

	return dpflow_cfg_get(map, key, &x) ? parse_addr(&x, a) : 0;
}

static int port_of(struct dpflow_ctx *ctx, const struct dpflow_cfg_node *map,
		   const char *key, int dflt, uint16_t *port)
{
	struct dpflow_cfg_node x;
	const char *s;
	int id;

	if (!dpflow_cfg_get(map, key, &x)) {
		if (dflt < 0)
			return dpflow_cfg_error(map, EINVAL, "'%s' is missing",
						key);
		*port = (uint16_t)dflt;
		return 0;
	}
	if (dpflow_cfg_string(&x, &s))
		return -EINVAL;
	id = dpflow_ctx_port_find(ctx, s);
	if (id < 0)
		return dpflow_cfg_error(&x, ENOENT, "no port named '%s'", s);
	*port = (uint16_t)id;
	return 0;
}

static int parse_health(const struct dpflow_cfg_node *h,
			struct l4lb_health_cfg *hc)
{
	static const char *const keys[] = {"type",	  "port",	"path",
					   "interval_ms", "timeout_ms", "fall",
					   "rise",	  NULL};
	struct dpflow_cfg_node x;
	uint64_t v;
	const char *s;

	if (dpflow_cfg_check_keys(h, keys))
		return -EINVAL;
	if (dpflow_cfg_get(h, "type", &x)) {
		if (dpflow_cfg_string(&x, &s))
			return -EINVAL;
		if (!strcmp(s, "none"))
			hc->kind = L4LB_HEALTH_NONE;
		else if (!strcmp(s, "tcp"))
			hc->kind = L4LB_HEALTH_TCP;
		else if (!strcmp(s, "http"))
			hc->kind = L4LB_HEALTH_HTTP;
		else
			return dpflow_cfg_error(
			    &x, EINVAL, "'%s': expected none, tcp or http", s);
	}
	v = hc->port;
	if (dpflow_cfg_opt_u64(h, "port", 65535, &v))
		return -EINVAL;
	hc->port = (uint16_t)v;
	if (dpflow_cfg_get(h, "path", &x)) {
		if (dpflow_cfg_string(&x, &s))
			return -EINVAL;
		if (s[0] != '/' || strlen(s) >= sizeof(hc->path) ||
		    strpbrk(s, " \r\n"))
			return dpflow_cfg_error(
			    &x, EINVAL,
			    "a path starts with '/', has no spaces "
			    "and at most %zu bytes",
			    sizeof(hc->path) - 1);
		snprintf(hc->path, sizeof(hc->path), "%s", s);
	}
	v = hc->interval_ms;
	if (dpflow_cfg_opt_u64(h, "interval_ms", 3600000, &v))
		return -EINVAL;
	hc->interval_ms = (uint32_t)v;
	v = hc->timeout_ms;
	if (dpflow_cfg_opt_u64(h, "timeout_ms", 600000, &v))
		return -EINVAL;
	hc->timeout_ms = (uint32_t)v;
	v = hc->fall;
	if (dpflow_cfg_opt_u64(h, "fall", 100, &v))
		return -EINVAL;
	hc->fall = (uint8_t)v;
	v = hc->rise;
	if (dpflow_cfg_opt_u64(h, "rise", 100, &v))
		return -EINVAL;
	hc->rise = (uint8_t)v;
	if (!hc->interval_ms || !hc->timeout_ms || !hc->fall || !hc->rise)
		return dpflow_cfg_error(
		    h, EINVAL,
		    "interval_ms, timeout_ms, fall and rise are > 0");
	return 0;
}

int l4lb_config_backend(const struct dpflow_cfg_node *x,
			struct l4lb_backend_cfg *b)
{
	static const char *const keys[] = {"addr", "port", "weight", "mac",
					   NULL};
	struct dpflow_cfg_node a;
	uint64_t v;

	memset(b, 0, sizeof(*b));
	b->weight = 1;
	if (!dpflow_cfg_is_map(x))
		return dpflow_cfg_error(x, EINVAL,
					"a backend is a mapping (addr: ...)");
	if (dpflow_cfg_check_keys(x, keys))
		return -EINVAL;
	if (!dpflow_cfg_get(x, "addr", &a))
		return dpflow_cfg_error(x, EINVAL, "'addr' is missing");
	if (parse_addr(&a, &b->addr))
		return -EINVAL;
	v = 0;
	if (dpflow_cfg_opt_u64(x, "port", 65535, &v))
		return -EINVAL;
	b->port = (uint16_t)v;
	v = 1;
	if (dpflow_cfg_opt_u64(x, "weight", 1000000, &v))
		return -EINVAL;
	b->weight = (uint32_t)v;
	return opt_mac(x, "mac", b->mac);
}

int l4lb_config_service(const struct dpflow_cfg_node *x,
			struct l4lb_service_cfg *s)
{
	static const char *const keys[] = {
	    "name",	 "vip",	     "proto",  "port",	   "mode", "snat",
	    "encap_src", "gue_port", "health", "backends", NULL};
	struct dpflow_cfg_node a;
	const char *str;
	uint64_t v;

	memset(s, 0, sizeof(*s));
	s->proto = 6;
	s->health.interval_ms = 1000;
	s->health.timeout_ms = 500;
	s->health.fall = 3;
	s->health.rise = 2;
	snprintf(s->health.path, sizeof(s->health.path), "/");
	if (!dpflow_cfg_is_map(x))
		return dpflow_cfg_error(x, EINVAL,
					"a service is a mapping (name: ...)");
	if (dpflow_cfg_check_keys(x, keys))
		return -EINVAL;
	if (!dpflow_cfg_get(x, "name", &a))
		return dpflow_cfg_error(x, EINVAL, "'name' is missing");
	if (dpflow_cfg_string(&a, &str))
		return -EINVAL;
	if (strlen(str) >= L4LB_NAME_MAX)
		return dpflow_cfg_error(&a, EINVAL, "at most %u bytes",
					L4LB_NAME_MAX - 1);
	snprintf(s->name, sizeof(s->name), "%s", str);
	if (!dpflow_cfg_get(x, "vip", &a))
		return dpflow_cfg_error(x, EINVAL, "'vip' is missing");
	if (parse_addr(&a, &s->vip))
		return -EINVAL;
	if (dpflow_cfg_get(x, "proto", &a)) {
		if (dpflow_cfg_string(&a, &str))
			return -EINVAL;
		if (!strcmp(str, "tcp"))
			s->proto = 6;
		else if (!strcmp(str, "udp"))
			s->proto = 17;
		else
			return dpflow_cfg_error(&a, EINVAL,
						"expected tcp or udp");
	}
	v = 0;
	if (dpflow_cfg_opt_u64(x, "port", 65535, &v))
		return -EINVAL;
	s->port = (uint16_t)v;
	if (dpflow_cfg_get(x, "mode", &a)) {
		if (dpflow_cfg_string(&a, &str))
			return -EINVAL;
		if (!strcmp(str, "nat"))
			s->mode = L4LB_MODE_NAT;
		else if (!strcmp(str, "ipip"))
			s->mode = L4LB_MODE_IPIP;
		else if (!strcmp(str, "gue"))
			s->mode = L4LB_MODE_GUE;
		else
			return dpflow_cfg_error(&a, EINVAL,
						"expected nat, ipip or gue");
	}
	if (opt_addr(x, "snat", &s->snat) ||
	    opt_addr(x, "encap_src", &s->encap_src))
		return -EINVAL;
	v = L4LB_GUE_PORT_DEFAULT;
	if (dpflow_cfg_opt_u64(x, "gue_port", 65535, &v))
		return -EINVAL;
	s->gue_port = (uint16_t)v;
	if (dpflow_cfg_get(x, "health", &a) && parse_health(&a, &s->health))
		return -EINVAL;
	return 0;
}

/* Add service @x and its backends to @lb. */
static int load_service(struct l4lb *lb, const struct dpflow_cfg_node *x)
{
	struct l4lb_service_cfg s;
	struct dpflow_error e = {0};
	struct dpflow_cfg_node bs, b;
	int id;

	if (l4lb_config_service(x, &s))
		return -EINVAL;
	id = l4lb_service_add(lb, &s, &e);
	if (id < 0)
		return dpflow_cfg_error(x, e.code, "%s%s%s",
					e.field ? e.field : "",
					e.field ? ": " : "", e.msg);
	if (!dpflow_cfg_get(x, "backends", &bs))
		return 0;
	if (!dpflow_cfg_is_seq(&bs))
		return dpflow_cfg_error(&bs, EINVAL, "a list of backends");
	for (unsigned i = 0; dpflow_cfg_item(&bs, i, &b); i++) {
		struct l4lb_backend_cfg bc;

		if (l4lb_config_backend(&b, &bc))
			return -EINVAL;
		if (l4lb_backend_add(lb, id, &bc, &e) < 0)
			return dpflow_cfg_error(&b, e.code, "%s", e.msg);
	}
	return 0;
}

static int parse_top(struct dpflow_ctx *ctx, const struct dpflow_cfg_node *x,
		     struct l4lb_cfg *c)
{
	static const char *const keys[] = {
	    "client_port", "backend_port",	 "client_mac",
	    "backend_mac", "client_gateway_mac", "backend_gateway_mac",
	    "conn_table",  "maglev_size",	 "backend_mtu",
	    "timeouts",	   "services",		 NULL};
	static const char *const tkeys[] = {"half_open_ms", "established_ms",
					    "closing_ms", NULL};
	struct dpflow_cfg_node t;
	uint64_t v;

	memset(c, 0, sizeof(*c));
	if (!dpflow_cfg_is_map(x))
		return dpflow_cfg_error(x, EINVAL,
					"a mapping (client_port: ...)");
	if (dpflow_cfg_check_keys(x, keys) ||
	    port_of(ctx, x, "client_port", -1, &c->client_port) ||
	    port_of(ctx, x, "backend_port", c->client_port, &c->backend_port) ||
	    opt_mac(x, "client_mac", c->client_mac))
		return -EINVAL;
	memcpy(c->backend_mac, c->client_mac, 6);
	if (opt_mac(x, "backend_mac", c->backend_mac) ||
	    opt_mac(x, "client_gateway_mac", c->client_gw_mac))
		return -EINVAL;
	memcpy(c->backend_gw_mac, c->client_gw_mac, 6);
	if (opt_mac(x, "backend_gateway_mac", c->backend_gw_mac))
		return -EINVAL;
	v = 1500;
	if (dpflow_cfg_opt_u64(x, "backend_mtu", 65535, &v))
		return -EINVAL;
	if (v && v < 1280)
		return dpflow_cfg_error(
		    x, EINVAL,
		    "backend_mtu: at least 1280 (IPv6's minimum), or 0 "
		    "for no check");
	c->backend_mtu = (uint16_t)v;
	v = L4LB_CONN_TABLE_DEFAULT;
	if (dpflow_cfg_opt_u64(x, "conn_table", L4LB_CONN_MAX, &v))
		return -EINVAL;
	c->conn_entries = (uint32_t)v;
	v = DPFLOW_MAGLEV_SIZE_DEFAULT;
	if (dpflow_cfg_opt_u64(x, "maglev_size", DPFLOW_MAGLEV_SIZE_MAX, &v))
		return -EINVAL;
	c->maglev_size = (uint32_t)v;
	if (dpflow_cfg_get(x, "timeouts", &t)) {
		if (dpflow_cfg_check_keys(&t, tkeys))
			return -EINVAL;
		v = 0;
		if (dpflow_cfg_opt_u64(&t, "half_open_ms", 86400000, &v))
			return -EINVAL;
		c->timeouts.half_open = (uint32_t)v;
		v = 0;
		if (dpflow_cfg_opt_u64(&t, "established_ms", 86400000 * 5ull,
				       &v))
			return -EINVAL;
		c->timeouts.established = (uint32_t)v;
		v = 0;
		if (dpflow_cfg_opt_u64(&t, "closing_ms", 86400000, &v))
			return -EINVAL;
		c->timeouts.closing = (uint32_t)v;
	}
	return 0;
}

struct l4lb *l4lb_config_load(struct dpflow_ctx *ctx,
			      const struct dpflow_cfg_node *x, bool shared,
			      struct dpflow_error *err)
{
	struct dpflow_cfg_node svcs, s;
	struct l4lb_cfg cfg;
	struct l4lb *lb;

	if (parse_top(ctx, x, &cfg))
		return NULL;
	cfg.shared = shared;
	lb = l4lb_create(ctx, &cfg, err);
	if (!lb) {
		char msg[DPFLOW_ERROR_MSG_MAX];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		dpflow_cfg_error(x, err->code ? err->code : EINVAL, "%s%s%s",
				 err->field ? err->field : "",
				 err->field ? ": " : "", msg);
		return NULL;
	}
	if (dpflow_cfg_get(x, "services", &svcs)) {
		if (!dpflow_cfg_is_seq(&svcs)) {
			dpflow_cfg_error(&svcs, EINVAL, "a list of services");
			goto fail;
		}
		for (unsigned i = 0; dpflow_cfg_item(&svcs, i, &s); i++)
			if (load_service(lb, &s))
				goto fail;
	}
	if (l4lb_commit(lb, err))
		goto fail;
	return lb;
fail:
	l4lb_destroy(lb);
	return NULL;
}
