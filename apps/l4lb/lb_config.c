/*
 * The balancer's YAML section (docs/apps/l4lb.md): `apps: {l4lb: ...}` of
 * a dpflow config, read with the config loader's YAML helpers so that
 * errors read alike ("FILE:LINE: apps.l4lb.services[0].vip: ...").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "ctl/yaml_doc.h"

#include "l4lb/l4lb_config.h"
#include "l4lb/lb_internal.h"
#include "l4lb/maglev.h"

static int parse_addr(struct ydoc *d, const struct ynode *x,
		      struct l4lb_addr *a)
{
	const char *s;

	if (y_string(d, x, &s))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, a->b) == 1)
		return 0;
	if (inet_pton(AF_INET6, s, a->b) == 1) {
		a->v6 = 1;
		return 0;
	}
	return yerr(d, x, EINVAL, "'%s' is not an IPv4 or IPv6 address", s);
}

static int parse_mac(struct ydoc *d, const struct ynode *x, uint8_t mac[6])
{
	const char *s;
	unsigned v[6];
	char extra;

	if (y_string(d, x, &s))
		return -EINVAL;
	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5], &extra) != 6)
		return yerr(d, x, EINVAL, "'%s' is not a MAC address", s);
	for (unsigned i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return yerr(d, x, EINVAL, "'%s' is not a MAC address",
				    s);
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

static int opt_u64(struct ydoc *d, const struct ynode *map, const char *key,
		   uint64_t max, uint64_t *v)
{
	struct ynode x;

	if (!y_get(d, map, key, &x))
		return 0;
	return y_u64(d, &x, max, v);
}

static int opt_mac(struct ydoc *d, const struct ynode *map, const char *key,
		   uint8_t mac[6])
{
	struct ynode x;

	return y_get(d, map, key, &x) ? parse_mac(d, &x, mac) : 0;
}

static int opt_addr(struct ydoc *d, const struct ynode *map, const char *key,
		    struct l4lb_addr *a)
{
	struct ynode x;

	return y_get(d, map, key, &x) ? parse_addr(d, &x, a) : 0;
}

static int port_of(struct ydoc *d, struct dpflow_ctx *ctx,
		   const struct ynode *map, const char *key, int dflt,
		   uint16_t *port)
{
	struct ynode x;
	const char *s;
	int id;

	if (!y_get(d, map, key, &x)) {
		if (dflt < 0)
			return yerr(d, map, EINVAL, "'%s' is missing", key);
		*port = (uint16_t)dflt;
		return 0;
	}
	if (y_string(d, &x, &s))
		return -EINVAL;
	id = dpflow_ctx_port_find(ctx, s);
	if (id < 0)
		return yerr(d, &x, ENOENT, "no port named '%s'", s);
	*port = (uint16_t)id;
	return 0;
}

static int parse_health(struct ydoc *d, const struct ynode *h,
			struct l4lb_health_cfg *hc)
{
	static const char *const keys[] = {"type",	  "port",	"path",
					   "interval_ms", "timeout_ms", "fall",
					   "rise",	  NULL};
	struct ynode x;
	uint64_t v;
	const char *s;

	if (y_check_keys(d, h, keys))
		return -EINVAL;
	if (y_get(d, h, "type", &x)) {
		if (y_string(d, &x, &s))
			return -EINVAL;
		if (!strcmp(s, "none"))
			hc->kind = L4LB_HEALTH_NONE;
		else if (!strcmp(s, "tcp"))
			hc->kind = L4LB_HEALTH_TCP;
		else if (!strcmp(s, "http"))
			hc->kind = L4LB_HEALTH_HTTP;
		else
			return yerr(d, &x, EINVAL,
				    "'%s': expected none, tcp or http", s);
	}
	v = hc->port;
	if (opt_u64(d, h, "port", 65535, &v))
		return -EINVAL;
	hc->port = (uint16_t)v;
	if (y_get(d, h, "path", &x)) {
		if (y_string(d, &x, &s))
			return -EINVAL;
		if (s[0] != '/' || strlen(s) >= sizeof(hc->path) ||
		    strpbrk(s, " \r\n"))
			return yerr(d, &x, EINVAL,
				    "a path starts with '/', has no spaces "
				    "and at most %zu bytes",
				    sizeof(hc->path) - 1);
		snprintf(hc->path, sizeof(hc->path), "%s", s);
	}
	v = hc->interval_ms;
	if (opt_u64(d, h, "interval_ms", 3600000, &v))
		return -EINVAL;
	hc->interval_ms = (uint32_t)v;
	v = hc->timeout_ms;
	if (opt_u64(d, h, "timeout_ms", 600000, &v))
		return -EINVAL;
	hc->timeout_ms = (uint32_t)v;
	v = hc->fall;
	if (opt_u64(d, h, "fall", 100, &v))
		return -EINVAL;
	hc->fall = (uint8_t)v;
	v = hc->rise;
	if (opt_u64(d, h, "rise", 100, &v))
		return -EINVAL;
	hc->rise = (uint8_t)v;
	if (!hc->interval_ms || !hc->timeout_ms || !hc->fall || !hc->rise)
		return yerr(d, h, EINVAL,
			    "interval_ms, timeout_ms, fall and rise are > 0");
	return 0;
}

int l4lb_config_backend(struct ydoc *d, const struct ynode *x,
			struct l4lb_backend_cfg *b)
{
	static const char *const keys[] = {"addr", "port", "weight", "mac",
					   NULL};
	struct ynode a;
	uint64_t v;

	memset(b, 0, sizeof(*b));
	b->weight = 1;
	if (!y_is_map(x))
		return yerr(d, x, EINVAL, "a backend is a mapping (addr: ...)");
	if (y_check_keys(d, x, keys))
		return -EINVAL;
	if (!y_get(d, x, "addr", &a))
		return yerr(d, x, EINVAL, "'addr' is missing");
	if (parse_addr(d, &a, &b->addr))
		return -EINVAL;
	v = 0;
	if (opt_u64(d, x, "port", 65535, &v))
		return -EINVAL;
	b->port = (uint16_t)v;
	v = 1;
	if (opt_u64(d, x, "weight", 1000000, &v))
		return -EINVAL;
	b->weight = (uint32_t)v;
	return opt_mac(d, x, "mac", b->mac);
}

int l4lb_config_service(struct ydoc *d, const struct ynode *x,
			struct l4lb_service_cfg *s)
{
	static const char *const keys[] = {
	    "name",	 "vip",	     "proto",  "port",	   "mode", "snat",
	    "encap_src", "gue_port", "health", "backends", NULL};
	struct ynode a;
	const char *str;
	uint64_t v;

	memset(s, 0, sizeof(*s));
	s->proto = 6;
	s->health.interval_ms = 1000;
	s->health.timeout_ms = 500;
	s->health.fall = 3;
	s->health.rise = 2;
	snprintf(s->health.path, sizeof(s->health.path), "/");
	if (!y_is_map(x))
		return yerr(d, x, EINVAL, "a service is a mapping (name: ...)");
	if (y_check_keys(d, x, keys))
		return -EINVAL;
	if (!y_get(d, x, "name", &a))
		return yerr(d, x, EINVAL, "'name' is missing");
	if (y_string(d, &a, &str))
		return -EINVAL;
	if (strlen(str) >= L4LB_NAME_MAX)
		return yerr(d, &a, EINVAL, "at most %u bytes",
			    L4LB_NAME_MAX - 1);
	snprintf(s->name, sizeof(s->name), "%s", str);
	if (!y_get(d, x, "vip", &a))
		return yerr(d, x, EINVAL, "'vip' is missing");
	if (parse_addr(d, &a, &s->vip))
		return -EINVAL;
	if (y_get(d, x, "proto", &a)) {
		if (y_string(d, &a, &str))
			return -EINVAL;
		if (!strcmp(str, "tcp"))
			s->proto = 6;
		else if (!strcmp(str, "udp"))
			s->proto = 17;
		else
			return yerr(d, &a, EINVAL, "expected tcp or udp");
	}
	v = 0;
	if (opt_u64(d, x, "port", 65535, &v))
		return -EINVAL;
	s->port = (uint16_t)v;
	if (y_get(d, x, "mode", &a)) {
		if (y_string(d, &a, &str))
			return -EINVAL;
		if (!strcmp(str, "nat"))
			s->mode = L4LB_MODE_NAT;
		else if (!strcmp(str, "ipip"))
			s->mode = L4LB_MODE_IPIP;
		else if (!strcmp(str, "gue"))
			s->mode = L4LB_MODE_GUE;
		else
			return yerr(d, &a, EINVAL, "expected nat, ipip or gue");
	}
	if (opt_addr(d, x, "snat", &s->snat) ||
	    opt_addr(d, x, "encap_src", &s->encap_src))
		return -EINVAL;
	v = L4LB_GUE_PORT_DEFAULT;
	if (opt_u64(d, x, "gue_port", 65535, &v))
		return -EINVAL;
	s->gue_port = (uint16_t)v;
	if (y_get(d, x, "health", &a) && parse_health(d, &a, &s->health))
		return -EINVAL;
	return 0;
}

/* Add service @x and its backends to @lb. */
static int load_service(struct ydoc *d, struct l4lb *lb, const struct ynode *x)
{
	struct l4lb_service_cfg s;
	struct dpflow_error e = {0};
	struct ynode bs, b;
	int id;

	if (l4lb_config_service(d, x, &s))
		return -EINVAL;
	id = l4lb_service_add(lb, &s, &e);
	if (id < 0)
		return yerr(d, x, e.code, "%s%s%s", e.field ? e.field : "",
			    e.field ? ": " : "", e.msg);
	if (!y_get(d, x, "backends", &bs))
		return 0;
	if (!y_is_seq(&bs))
		return yerr(d, &bs, EINVAL, "a list of backends");
	for (unsigned i = 0; y_item(d, &bs, i, &b); i++) {
		struct l4lb_backend_cfg bc;

		if (l4lb_config_backend(d, &b, &bc))
			return -EINVAL;
		if (l4lb_backend_add(lb, id, &bc, &e) < 0)
			return yerr(d, &b, e.code, "%s", e.msg);
	}
	return 0;
}

static int parse_top(struct ydoc *d, struct dpflow_ctx *ctx,
		     const struct ynode *x, struct l4lb_cfg *c)
{
	static const char *const keys[] = {
	    "client_port", "backend_port",	 "client_mac",
	    "backend_mac", "client_gateway_mac", "backend_gateway_mac",
	    "conn_table",  "maglev_size",	 "backend_mtu",
	    "timeouts",	   "services",		 NULL};
	static const char *const tkeys[] = {"half_open_ms", "established_ms",
					    "closing_ms", NULL};
	struct ynode t;
	uint64_t v;

	memset(c, 0, sizeof(*c));
	if (!y_is_map(x))
		return yerr(d, x, EINVAL, "a mapping (client_port: ...)");
	if (y_check_keys(d, x, keys) ||
	    port_of(d, ctx, x, "client_port", -1, &c->client_port) ||
	    port_of(d, ctx, x, "backend_port", c->client_port,
		    &c->backend_port) ||
	    opt_mac(d, x, "client_mac", c->client_mac))
		return -EINVAL;
	memcpy(c->backend_mac, c->client_mac, 6);
	if (opt_mac(d, x, "backend_mac", c->backend_mac) ||
	    opt_mac(d, x, "client_gateway_mac", c->client_gw_mac))
		return -EINVAL;
	memcpy(c->backend_gw_mac, c->client_gw_mac, 6);
	if (opt_mac(d, x, "backend_gateway_mac", c->backend_gw_mac))
		return -EINVAL;
	v = 1500;
	if (opt_u64(d, x, "backend_mtu", 65535, &v))
		return -EINVAL;
	if (v && v < 1280)
		return yerr(d, x, EINVAL,
			    "backend_mtu: at least 1280 (IPv6's minimum), or 0 "
			    "for no check");
	c->backend_mtu = (uint16_t)v;
	v = L4LB_CONN_TABLE_DEFAULT;
	if (opt_u64(d, x, "conn_table", L4LB_CONN_MAX, &v))
		return -EINVAL;
	c->conn_entries = (uint32_t)v;
	v = L4LB_MAGLEV_SIZE_DEFAULT;
	if (opt_u64(d, x, "maglev_size", L4LB_MAGLEV_SIZE_MAX, &v))
		return -EINVAL;
	c->maglev_size = (uint32_t)v;
	if (y_get(d, x, "timeouts", &t)) {
		if (y_check_keys(d, &t, tkeys))
			return -EINVAL;
		v = 0;
		if (opt_u64(d, &t, "half_open_ms", 86400000, &v))
			return -EINVAL;
		c->timeouts.half_open = (uint32_t)v;
		v = 0;
		if (opt_u64(d, &t, "established_ms", 86400000 * 5ull, &v))
			return -EINVAL;
		c->timeouts.established = (uint32_t)v;
		v = 0;
		if (opt_u64(d, &t, "closing_ms", 86400000, &v))
			return -EINVAL;
		c->timeouts.closing = (uint32_t)v;
	}
	return 0;
}

struct l4lb *l4lb_config_load(struct dpflow_ctx *ctx, const char *path,
			      bool shared, struct dpflow_error *err)
{
	struct ydoc d = {.file = path, .err = err};
	struct ynode root = {0}, apps, x, svcs, s;
	yaml_parser_t parser;
	struct l4lb_cfg cfg;
	struct l4lb *lb = NULL;
	FILE *f = fopen(path, "rb");

	memset(err, 0, sizeof(*err));
	if (!f) {
		dpflow_error_set(err, errno, "config", "%s: %s", path,
				 strerror(errno));
		return NULL;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, &d.doc)) {
		dpflow_error_set(err, EINVAL, NULL, "%s: invalid YAML", path);
		yaml_parser_delete(&parser);
		fclose(f);
		return NULL;
	}
	yaml_parser_delete(&parser);
	fclose(f);
	root.n = yaml_document_get_root_node(&d.doc);
	if (!root.n || !y_is_map(&root) || !y_get(&d, &root, "apps", &apps) ||
	    !y_get(&d, &apps, "l4lb", &x))
		goto out; /* no balancer here: NULL, err->code 0 */
	if (parse_top(&d, ctx, &x, &cfg))
		goto out;
	cfg.shared = shared;
	lb = l4lb_create(ctx, &cfg, err);
	if (!lb) {
		char msg[DPFLOW_ERROR_MSG_MAX];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		yerr(&d, &x, err->code ? err->code : EINVAL, "%s%s%s",
		     err->field ? err->field : "", err->field ? ": " : "", msg);
		goto out;
	}
	if (y_get(&d, &x, "services", &svcs)) {
		if (!y_is_seq(&svcs)) {
			yerr(&d, &svcs, EINVAL, "a list of services");
			goto fail;
		}
		for (unsigned i = 0; y_item(&d, &svcs, i, &s); i++)
			if (load_service(&d, lb, &s))
				goto fail;
	}
	if (l4lb_commit(lb, err))
		goto fail;
	goto out;
fail:
	l4lb_destroy(lb);
	lb = NULL;
out:
	yaml_document_delete(&d.doc);
	return lb;
}
