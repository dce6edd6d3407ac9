/*
 * The gateway's section, `apps: {natgw: {...}}`, read through config nodes
 * (dpflow/config_node.h): every error names the file, the line and the
 * key path, as the config loader's do.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config_node.h"
#include "dpflow/flow.h"

#include "natgw.h"

/* The port named by @key of @map, required. */
static int port_of(struct dpflow_ctx *ctx, const struct dpflow_cfg_node *map,
		   const char *key, uint16_t *port)
{
	struct dpflow_cfg_node x;
	const char *name;
	int id;

	if (!dpflow_cfg_get(map, key, &x))
		return dpflow_cfg_error(map, EINVAL, "'%s' is missing", key);
	if (dpflow_cfg_string(&x, &name))
		return -EINVAL;
	id = dpflow_ctx_port_find(ctx, name);
	if (id < 0)
		return dpflow_cfg_error(&x, ENOENT, "no port named '%s'", name);
	*port = (uint16_t)id;
	return 0;
}

/* An IPv4 address, or with @len an IPv4 prefix (a bare address: /32). */
static int parse_ipv4(const struct dpflow_cfg_node *x, uint8_t addr[4],
		      uint8_t *len)
{
	char buf[32], *slash, *end;
	const char *s;
	unsigned long l = 32;

	if (dpflow_cfg_string(x, &s))
		return -EINVAL;
	if (strlen(s) >= sizeof(buf))
		goto bad;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (slash) {
		if (!len)
			goto bad;
		*slash++ = '\0';
		errno = 0;
		l = strtoul(slash, &end, 10);
		if (!*slash || *end || errno || l > 32)
			goto bad;
	}
	if (inet_pton(AF_INET, buf, addr) == 1) {
		if (len)
			*len = (uint8_t)l;
		return 0;
	}
	if (strchr(buf, ':'))
		return dpflow_cfg_error(x, ENOTSUP,
					"'%s': natgw translates IPv4 only", s);
bad:
	return dpflow_cfg_error(x, EINVAL,
				len ? "'%s' is not an IPv4 prefix (A.B.C.D/N)"
				    : "'%s' is not an IPv4 address",
				s);
}

/* The sequence at @key of @map, required, with 1..@max items. */
static int seq_of(const struct dpflow_cfg_node *map, const char *key,
		  unsigned max, struct dpflow_cfg_node *seq)
{
	if (!dpflow_cfg_get(map, key, seq))
		return dpflow_cfg_error(map, EINVAL, "'%s' is missing", key);
	if (!dpflow_cfg_is_seq(seq) || !dpflow_cfg_len(seq))
		return dpflow_cfg_error(seq, EINVAL,
					"expected a list of 1 to "
					"%u items",
					max);
	if (dpflow_cfg_len(seq) > max)
		return dpflow_cfg_error(seq, EINVAL, "%u items: at most %u",
					dpflow_cfg_len(seq), max);
	return 0;
}

static int read_prefixes(const struct dpflow_cfg_node *section,
			 struct natgw_cfg *c)
{
	struct dpflow_cfg_node seq, x;

	if (seq_of(section, "inside", NATGW_PREFIXES_MAX, &seq))
		return -EINVAL;
	for (unsigned i = 0; dpflow_cfg_item(&seq, i, &x); i++) {
		uint8_t *a = c->prefix[i].addr, len;
		uint32_t v, mask;

		if (parse_ipv4(&x, a, &len))
			return -EINVAL;
		v = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 |
		    (uint32_t)a[2] << 8 | a[3];
		mask = len ? ~0u << (32 - len) : 0;
		if (v & ~mask)
			return dpflow_cfg_error(&x, EINVAL,
						"'%s' has bits set past /%u",
						dpflow_cfg_str(&x), len);
		for (unsigned j = 0; j < i; j++)
			if (c->prefix[j].len == len &&
			    !memcmp(c->prefix[j].addr, a, 4))
				return dpflow_cfg_error(&x, EEXIST,
							"'%s' is given twice",
							dpflow_cfg_str(&x));
		c->prefix[i].len = len;
		c->n_prefixes = i + 1;
	}
	return 0;
}

static int read_addrs(const struct dpflow_cfg_node *section,
		      struct natgw_cfg *c)
{
	struct dpflow_cfg_node seq, x;

	if (seq_of(section, "addrs", NATGW_ADDRS_MAX, &seq))
		return -EINVAL;
	for (unsigned i = 0; dpflow_cfg_item(&seq, i, &x); i++) {
		if (parse_ipv4(&x, c->addr[i], NULL))
			return -EINVAL;
		for (unsigned j = 0; j < i; j++)
			if (!memcmp(c->addr[j], c->addr[i], 4))
				return dpflow_cfg_error(&x, EEXIST,
							"'%s' is given twice",
							dpflow_cfg_str(&x));
		c->n_addrs = i + 1;
	}
	return 0;
}

/* ports: [FIRST, LAST], 1 <= FIRST <= LAST <= 65535; default 1024-65535 */
static int read_ports(const struct dpflow_cfg_node *section,
		      struct natgw_cfg *c)
{
	struct dpflow_cfg_node seq, x;
	uint64_t v[2];

	c->port_lo = 1024;
	c->port_hi = 65535;
	if (!dpflow_cfg_get(section, "ports", &seq))
		return 0;
	if (!dpflow_cfg_is_seq(&seq) || dpflow_cfg_len(&seq) != 2)
		return dpflow_cfg_error(&seq, EINVAL,
					"expected [FIRST, LAST] (ports of the "
					"pool)");
	for (unsigned i = 0; i < 2; i++) {
		dpflow_cfg_item(&seq, i, &x);
		if (dpflow_cfg_u64(&x, 65535, &v[i]))
			return -EINVAL;
		if (!v[i])
			return dpflow_cfg_error(&x, EINVAL,
						"port 0 cannot be bound");
	}
	if (v[0] > v[1])
		return dpflow_cfg_error(&seq, EINVAL,
					"first port %u is after last port %u",
					(unsigned)v[0], (unsigned)v[1]);
	c->port_lo = (uint16_t)v[0];
	c->port_hi = (uint16_t)v[1];
	return 0;
}

int natgw_config_read(struct dpflow_ctx *ctx,
		      const struct dpflow_cfg_node *section,
		      struct natgw_cfg *c)
{
	static const char *const keys[] = {
	    "inside_port", "outside_port", "inside", "addrs",
	    "ports",	   "connections",  NULL};
	uint64_t conns = NATGW_CONNECTIONS_DEF;
	struct dpflow_cfg_node x;

	memset(c, 0, sizeof(*c));
	if (dpflow_cfg_check_keys(section, keys) ||
	    port_of(ctx, section, "inside_port", &c->inside_port) ||
	    port_of(ctx, section, "outside_port", &c->outside_port))
		return -EINVAL;
	if (c->inside_port == c->outside_port) {
		dpflow_cfg_get(section, "outside_port", &x);
		return dpflow_cfg_error(&x, EINVAL,
					"'%s' is the inside port too: the "
					"gateway needs two ports",
					dpflow_cfg_str(&x));
	}
	if (read_prefixes(section, c) || read_addrs(section, c) ||
	    read_ports(section, c) ||
	    dpflow_cfg_opt_u64(section, "connections", NATGW_CONNECTIONS_MAX,
			       &conns))
		return -EINVAL;
	if (!conns) {
		dpflow_cfg_get(section, "connections", &x);
		return dpflow_cfg_error(&x, EINVAL, "at least 1 connection");
	}
	c->connections = (uint32_t)conns;
	return 0;
}
