/*
 * The balancer's control requests (docs/apps/l4lb.md), served through the
 * app's request op (dpflow/app.h; the control socket hands it every
 * "l4lb.*" request): JSON in, JSON out. A request that fails changes
 * nothing: edits go to the unpublished view, which is dropped on error,
 * and l4lb_commit() publishes all of a request or none.
 *
 *   l4lb.services       services, backends, counters
 *   l4lb.service.add    {service: {...}}: a service mapping (YAML keys)
 *   l4lb.service.rm     {name}
 *   l4lb.backend.add    {service, backend: {...}}
 *   l4lb.backend.rm     {service, addr, port}
 *   l4lb.backend.set    {service, addr, port, weight}: weight 0 drains
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/config_node.h"
#include "dpflow/metrics.h"

#include "l4lb/l4lb_config.h"
#include "l4lb/l4lb_ctl.h"
#include "l4lb/lb_internal.h"

static json_t *counter_json(const struct l4lb_counter *c)
{
	return json_pack("{s:I,s:I}", "pkts", (json_int_t)c->pkts, "bytes",
			 (json_int_t)c->bytes);
}

static json_t *addr_json(const struct l4lb_addr *a)
{
	char s[INET6_ADDRSTRLEN];

	lb_addr_str(a, s);
	return json_string(s);
}

/* "ADDR:PORT", "[ADDR]:PORT" for IPv6: what operators read (dpflowctl
 * prints it as it is). */
static json_t *endpoint_json(const struct l4lb_addr *a, uint16_t port)
{
	char s[LB_ENDPOINT_LEN];

	lb_endpoint_str(a, port, s);
	return json_string(s);
}

static json_t *services_json(const struct l4lb *lb)
{
	json_t *list = json_array(), *drops = json_object(), *o;
	uint64_t d[L4LB_DROP__COUNT];
	struct l4lb_conn_stats cs;

	for (int s = 0; s < (int)L4LB_SERVICES_MAX; s++) {
		const struct l4lb_service_cfg *c = l4lb_service_cfg(lb, s);
		struct l4lb_service_stats st;
		json_t *bl;

		if (!c)
			continue;
		bl = json_array();
		l4lb_service_stats(lb, s, &st);
		for (uint32_t b = 0; b < L4LB_BACKENDS_MAX; b++) {
			struct l4lb_backend_info bi;

			if (l4lb_backend_info(lb, b, &bi) ||
			    bi.service != (uint16_t)s)
				continue;
			json_array_append_new(
			    bl,
			    json_pack("{s:i,s:o,s:i,s:o,s:I,s:b,s:I,s:o,s:I}",
				      "id", (int)b, "addr",
				      addr_json(&bi.cfg.addr), "port",
				      bi.cfg.port, "endpoint",
				      endpoint_json(&bi.cfg.addr, bi.cfg.port),
				      "weight", (json_int_t)bi.cfg.weight, "up",
				      bi.up, "slots", (json_int_t)bi.slots,
				      "fwd", counter_json(&bi.fwd), "new_flows",
				      (json_int_t)bi.new_flows));
		}
		json_array_append_new(
		    list,
		    json_pack(
			"{s:s,s:o,s:s,s:i,s:o,s:s,s:o,s:o,s:o,s:I,s:I,s:I,s:o}",
			"name", c->name, "vip", addr_json(&c->vip), "proto",
			c->proto == 6 ? "tcp" : "udp", "port", c->port,
			"endpoint", endpoint_json(&c->vip, c->port), "mode",
			l4lb_mode_name(c->mode), "fwd", counter_json(&st.fwd),
			"reply", counter_json(&st.reply), "icmp",
			counter_json(&st.icmp), "new_flows",
			(json_int_t)st.new_flows, "untracked",
			(json_int_t)st.untracked, "rescheduled",
			(json_int_t)st.rescheduled, "backends", bl));
	}
	l4lb_drops(lb, d);
	for (unsigned i = 0; i < L4LB_DROP__COUNT; i++)
		json_object_set_new(drops, l4lb_drop_name(i),
				    json_integer((json_int_t)d[i]));
	l4lb_conn_stats_get(l4lb_conns((struct l4lb *)lb), &cs);
	o = json_pack(
	    "{s:b,s:o,s:{s:I,s:I,s:I,s:I,s:I},s:o}", "ok", 1, "services", list,
	    "conns", "capacity",
	    (json_int_t)l4lb_conn_capacity(l4lb_conns((struct l4lb *)lb)),
	    "created", (json_int_t)cs.created, "replaced",
	    (json_int_t)cs.replaced, "refused", (json_int_t)cs.refused,
	    "expired", (json_int_t)cs.expired, "drops", drops);
	return o;
}

/* @v (a JSON object) as a config node, for the config's parsers. */
struct yjson {
	struct dpflow_cfg_doc *doc;
	struct dpflow_cfg_node root;
};

static int yjson_load(struct yjson *y, json_t *v, const char *path,
		      struct dpflow_error *err)
{
	char *text = json_dumps(v, JSON_COMPACT);

	memset(y, 0, sizeof(*y));
	if (!text)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	y->doc = dpflow_cfg_doc_parse(text, strlen(text), "request", err);
	free(text);
	if (!y->doc)
		return dpflow_error_set(err, EINVAL, path, "not an object");
	dpflow_cfg_doc_root(y->doc, path, &y->root);
	return 0;
}

static void yjson_free(struct yjson *y)
{
	dpflow_cfg_doc_free(y->doc);
}

static int need_keys(json_t *in, const char *const *keys,
		     struct dpflow_error *err)
{
	const char *key;
	json_t *v;

	json_object_foreach(in, key, v)
	{
		bool ok = !strcmp(key, "cmd") || !strcmp(key, "id");

		for (unsigned i = 0; keys[i] && !ok; i++)
			ok = !strcmp(keys[i], key);
		if (!ok)
			return dpflow_error_set(err, EINVAL, NULL,
						"unknown key '%s'", key);
	}
	return 0;
}

static int service_of(struct l4lb *lb, json_t *in, struct dpflow_error *err)
{
	const char *name = json_string_value(json_object_get(in, "service"));
	int id;

	if (!name)
		return dpflow_error_set(err, EINVAL, "service",
					"'service' (a name) is missing");
	id = l4lb_service_find(lb, name);
	if (id < 0)
		return dpflow_error_set(err, ENOENT, "service",
					"no service '%s'", name);
	return id;
}

/* The backend that {service, addr, port} names. */
static int backend_of(struct l4lb *lb, json_t *in, struct dpflow_error *err)
{
	const char *a = json_string_value(json_object_get(in, "addr"));
	json_t *port = json_object_get(in, "port");
	struct l4lb_addr addr;
	json_int_t p = 0;
	int svc = service_of(lb, in, err), id;

	if (svc < 0)
		return svc;
	memset(&addr, 0, sizeof(addr));
	if (!a || (inet_pton(AF_INET, a, addr.b) != 1 &&
		   !(addr.v6 = inet_pton(AF_INET6, a, addr.b) == 1)))
		return dpflow_error_set(err, EINVAL, "addr",
					"'addr' is not an address");
	if (port) {
		p = json_integer_value(port);
		if (!json_is_integer(port) || p < 0 || p > 65535)
			return dpflow_error_set(err, EINVAL, "port",
						"'port' is 0..65535");
	}
	id = l4lb_backend_find(lb, svc, &addr, (uint16_t)p);
	if (id < 0) {
		char ep[LB_ENDPOINT_LEN];

		lb_endpoint_str(&addr, (uint16_t)p, ep);
		return dpflow_error_set(err, ENOENT, "addr",
					"no backend %s in that service", ep);
	}
	return id;
}

static int service_add(struct l4lb *lb, json_t *in, struct dpflow_error *err)
{
	static const char *const keys[] = {"service", NULL};
	json_t *s = json_object_get(in, "service"), *bl;
	struct l4lb_service_cfg sc;
	struct yjson y;
	int rc, id;
	size_t i;

	if ((rc = need_keys(in, keys, err)))
		return rc;
	if (!json_is_object(s))
		return dpflow_error_set(err, EINVAL, "service",
					"'service' is an object");
	bl = json_object_get(s, "backends");
	if (bl && !json_is_array(bl))
		return dpflow_error_set(err, EINVAL, "service.backends",
					"a list of backends");
	if ((rc = yjson_load(&y, s, "service", err)))
		return rc;
	rc = l4lb_config_service(&y.root, &sc);
	yjson_free(&y);
	if (rc)
		return rc;
	id = l4lb_service_add(lb, &sc, err);
	if (id < 0)
		return id;
	json_array_foreach(bl, i, s)
	{
		struct l4lb_backend_cfg bc;

		if ((rc = yjson_load(&y, s, "service.backends[]", err)))
			return rc;
		rc = l4lb_config_backend(&y.root, &bc);
		yjson_free(&y);
		if (rc)
			return rc;
		rc = l4lb_backend_add(lb, id, &bc, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int backend_add(struct l4lb *lb, json_t *in, struct dpflow_error *err)
{
	static const char *const keys[] = {"service", "backend", NULL};
	json_t *b = json_object_get(in, "backend");
	struct l4lb_backend_cfg bc;
	struct yjson y;
	int rc, svc;

	if ((rc = need_keys(in, keys, err)))
		return rc;
	svc = service_of(lb, in, err);
	if (svc < 0)
		return svc;
	if (!json_is_object(b))
		return dpflow_error_set(err, EINVAL, "backend",
					"'backend' is an object");
	if ((rc = yjson_load(&y, b, "backend", err)))
		return rc;
	rc = l4lb_config_backend(&y.root, &bc);
	yjson_free(&y);
	if (rc)
		return rc;
	rc = l4lb_backend_add(lb, svc, &bc, err);
	return rc < 0 ? rc : 0;
}

static int handle(struct l4lb *lb, const char *cmd, json_t *in,
		  struct dpflow_error *err)
{
	static const char *const rm_keys[] = {"service", "addr", "port", NULL};
	static const char *const set_keys[] = {"service", "addr", "port",
					       "weight", NULL};
	static const char *const name_keys[] = {"name", NULL};
	int rc, id;

	if (!strcmp(cmd, "l4lb.service.add"))
		return service_add(lb, in, err);
	if (!strcmp(cmd, "l4lb.backend.add"))
		return backend_add(lb, in, err);
	if (!strcmp(cmd, "l4lb.service.rm")) {
		const char *name =
		    json_string_value(json_object_get(in, "name"));

		if ((rc = need_keys(in, name_keys, err)))
			return rc;
		if (!name)
			return dpflow_error_set(err, EINVAL, "name",
						"'name' is missing");
		return l4lb_service_remove(lb, name, err);
	}
	if (!strcmp(cmd, "l4lb.backend.rm")) {
		if ((rc = need_keys(in, rm_keys, err)))
			return rc;
		id = backend_of(lb, in, err);
		return id < 0 ? id : l4lb_backend_remove(lb, (uint32_t)id, err);
	}
	/* l4lb.backend.set */
	{
		json_t *w = json_object_get(in, "weight");
		json_int_t wv = json_integer_value(w);

		if ((rc = need_keys(in, set_keys, err)))
			return rc;
		if (!json_is_integer(w) || wv < 0 || wv > 1000000)
			return dpflow_error_set(err, EINVAL, "weight",
						"'weight' is 0..1000000");
		id = backend_of(lb, in, err);
		return id < 0 ? id
			      : l4lb_backend_set_weight(lb, (uint32_t)id,
							(uint32_t)wv, err);
	}
}

static char *reply_of(json_t *in, json_t *out)
{
	json_t *id = json_object_get(in, "id");
	char *text;

	if (id)
		json_object_set(out, "id", id);
	text = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(out);
	return text;
}

char *l4lb_ctl_request(void *arg, const char *cmd, const char *req, size_t len)
{
	static const char *const cmds[] = {"l4lb.services",
					   "l4lb.service.add",
					   "l4lb.service.rm",
					   "l4lb.backend.add",
					   "l4lb.backend.rm",
					   "l4lb.backend.set",
					   NULL};
	struct l4lb *lb = arg;
	struct dpflow_error err = {0};
	json_t *in, *out;
	char *text;
	unsigned i;
	int rc;

	for (i = 0; cmds[i] && strcmp(cmds[i], cmd); i++)
		;
	if (!cmds[i] && strncmp(cmd, L4LB_CTL_PREFIX, strlen(L4LB_CTL_PREFIX)))
		return NULL;
	in = json_loadb(req, len, JSON_DECODE_ANY, NULL);
	if (!in)
		return NULL;
	if (!cmds[i]) {
		/* the app's name, not one of its commands */
		char msg[256];
		int n =
		    snprintf(msg, sizeof(msg), "unknown cmd '%.64s' (", cmd);

		for (unsigned k = 0; cmds[k]; k++)
			n += snprintf(msg + n, sizeof(msg) - (size_t)n, "%s%s",
				      k ? ", " : "", cmds[k]);
		snprintf(msg + n, sizeof(msg) - (size_t)n, ")");
		out = json_pack("{s:b,s:s,s:s}", "ok", 0, "error", msg, "field",
				"cmd");
	} else if (i == 0) {
		out = services_json(lb);
	} else {
		rc = handle(lb, cmd, in, &err);
		if (!rc)
			rc = l4lb_commit(lb, &err);
		else
			l4lb_abort(lb);
		if (rc)
			out = json_pack("{s:b,s:s,s:s}", "ok", 0, "error",
					err.msg[0] ? err.msg : "failed",
					"field", err.field ? err.field : "");
		else
			out = json_pack("{s:b}", "ok", 1);
	}
	text = out ? reply_of(in, out) : NULL;
	json_decref(in);
	return text;
}

/* ---- Prometheus metrics --------------------------------------------------
 */

/* NAME{service="SERVICE"[,dir="DIR"] VALUE */
static void service_sample(FILE *f, const char *name, const char *svc,
			   const char *dir, uint64_t v)
{
	fprintf(f, "%s{service=\"", name);
	dpflow_metrics_put_label(f, svc);
	if (dir)
		fprintf(f, "\",dir=\"%s", dir);
	fprintf(f, "\"} %llu\n", (unsigned long long)v);
}

/* NAME{service="SERVICE",backend="ADDR:PORT"} VALUE */
static void backend_sample(FILE *f, const char *name, const char *svc,
			   const struct l4lb_backend_info *bi, uint64_t v)
{
	char a[LB_ENDPOINT_LEN];

	lb_endpoint_str(&bi->cfg.addr, bi->cfg.port, a);
	fprintf(f, "%s{service=\"", name);
	dpflow_metrics_put_label(f, svc);
	fprintf(f, "\",backend=\"%s\"} %llu\n", a, (unsigned long long)v);
}

void l4lb_metrics_render(void *arg, FILE *f)
{
	static const char *const dirs[] = {"fwd", "reply", "icmp"};
	static const char *const snames[] = {
	    "dpflow_l4lb_service_packets_total",
	    "dpflow_l4lb_service_bytes_total",
	    "dpflow_l4lb_service_new_flows_total",
	    "dpflow_l4lb_service_untracked_total",
	    "dpflow_l4lb_service_rescheduled_total"};
	static const char *const shelp[] = {
	    "packets of a service: dir fwd, reply (NAT) or icmp (relayed)",
	    "bytes of a service by direction",
	    "flows given a backend by Maglev",
	    "packets forwarded without a connection entry (table full)",
	    "tracked flows moved off a backend gone down or removed"};
	const struct l4lb *lb = arg;
	uint64_t d[L4LB_DROP__COUNT];
	struct l4lb_conn_stats cs;
	struct l4lb_service_stats st[L4LB_SERVICES_MAX];
	const struct l4lb_service_cfg *cfg[L4LB_SERVICES_MAX];

	for (int s = 0; s < (int)L4LB_SERVICES_MAX; s++) {
		cfg[s] = l4lb_service_cfg(lb, s);
		if (cfg[s])
			l4lb_service_stats(lb, s, &st[s]);
	}
	for (unsigned k = 0; k < DPFLOW_ARRAY_SIZE(snames); k++) {
		dpflow_metrics_put_help(f, snames[k], "counter", shelp[k]);
		for (int s = 0; s < (int)L4LB_SERVICES_MAX; s++) {
			if (!cfg[s])
				continue;
			if (k >= 2) { /* one sample: snames[2...] in order */
				const uint64_t one[] = {st[s].new_flows,
							st[s].untracked,
							st[s].rescheduled};

				service_sample(f, snames[k], cfg[s]->name, NULL,
					       one[k - 2]);
				continue;
			}
			for (unsigned dir = 0; dir < 3; dir++) {
				const struct l4lb_counter *c =
				    dir == 0   ? &st[s].fwd
				    : dir == 1 ? &st[s].reply
					       : &st[s].icmp;

				service_sample(f, snames[k], cfg[s]->name,
					       dirs[dir],
					       k ? c->bytes : c->pkts);
			}
		}
	}

	static const char *const bnames[] = {
	    "dpflow_l4lb_backend_packets_total",
	    "dpflow_l4lb_backend_bytes_total",
	    "dpflow_l4lb_backend_new_flows_total",
	    "dpflow_l4lb_backend_up",
	    "dpflow_l4lb_backend_weight",
	    "dpflow_l4lb_backend_maglev_slots"};
	static const char *const btypes[] = {"counter", "counter", "counter",
					     "gauge",	"gauge",   "gauge"};
	static const char *const bhelp[] = {
	    "packets sent to a backend",
	    "bytes sent to a backend",
	    "flows Maglev gave a backend",
	    "1 when health checks pass",
	    "the backend's weight (0: draining)",
	    "Maglev table slots the backend holds"};
	for (unsigned k = 0; k < DPFLOW_ARRAY_SIZE(bnames); k++) {
		dpflow_metrics_put_help(f, bnames[k], btypes[k], bhelp[k]);
		for (uint32_t b = 0; b < L4LB_BACKENDS_MAX; b++) {
			struct l4lb_backend_info bi;
			uint64_t v;

			if (l4lb_backend_info(lb, b, &bi) || !cfg[bi.service])
				continue;
			v = k == 0   ? bi.fwd.pkts
			    : k == 1 ? bi.fwd.bytes
			    : k == 2 ? bi.new_flows
			    : k == 3 ? bi.up
			    : k == 4 ? bi.cfg.weight
				     : bi.slots;
			backend_sample(f, bnames[k], cfg[bi.service]->name, &bi,
				       v);
		}
	}
	l4lb_conn_stats_get(l4lb_conns((struct l4lb *)lb), &cs);
	dpflow_metrics_put_help(
	    f, "dpflow_l4lb_conn_capacity", "gauge",
	    "connection table entries (NAT uses two a flow)");
	fprintf(f, "dpflow_l4lb_conn_capacity %u\n",
		l4lb_conn_capacity(l4lb_conns((struct l4lb *)lb)));
	dpflow_metrics_put_help(
	    f, "dpflow_l4lb_conn_events_total", "counter",
	    "connection table: created, replaced (LRU), refused (bucket of "
	    "established flows), expired (reused)");
	fprintf(f,
		"dpflow_l4lb_conn_events_total{event=\"created\"} %llu\n"
		"dpflow_l4lb_conn_events_total{event=\"replaced\"} %llu\n"
		"dpflow_l4lb_conn_events_total{event=\"refused\"} %llu\n"
		"dpflow_l4lb_conn_events_total{event=\"expired\"} %llu\n",
		(unsigned long long)cs.created, (unsigned long long)cs.replaced,
		(unsigned long long)cs.refused, (unsigned long long)cs.expired);
	l4lb_drops(lb, d);
	dpflow_metrics_put_help(f, "dpflow_l4lb_drops_total", "counter",
				"packets the balancer dropped, by reason");
	for (unsigned i = 0; i < L4LB_DROP__COUNT; i++)
		fprintf(f, "dpflow_l4lb_drops_total{reason=\"%s\"} %llu\n",
			l4lb_drop_name(i), (unsigned long long)d[i]);
}
