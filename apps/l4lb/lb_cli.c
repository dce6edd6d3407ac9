/*
 * `dpflowctl l4lb ...`: the balancer's client commands (the "l4lb.*"
 * requests of docs/apps/l4lb.md and their text output), registered with
 * dpflowctl through the app registry (dpflow/app.h). Built into a library
 * of its own that needs only jansson: dpflowctl links it, not the data
 * plane.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflow/app.h"

static const char *const usage_l4lb =
    "usage: dpflowctl l4lb COMMAND ...\n"
    "\n"
    "  services [--json]              services, backends (weight, health,\n"
    "                                 Maglev slots) and their counters\n"
    "  backends SERVICE [--json]      one service's backends\n"
    "  service-add FILE               add a service: a YAML or JSON mapping\n"
    "                                 as in a config's apps.l4lb.services\n"
    "                                 (backends included); '-' reads stdin\n"
    "  service-rm NAME                remove a service and its backends\n"
    "  backend-add SERVICE ADDR[:PORT] [WEIGHT [MAC]]\n"
    "                                 add a backend (weight 1 by default)\n"
    "  backend-rm SERVICE ADDR[:PORT] remove a backend (its flows move)\n"
    "  weight SERVICE ADDR[:PORT] W   set a backend's weight\n"
    "  drain SERVICE ADDR[:PORT]      weight 0: its tracked flows stay,\n"
    "                                 new flows go to the others\n"
    "\n"
    "IPv6 addresses with a port are written [ADDR]:PORT. Every change is\n"
    "applied whole or not at all. 'dpflowctl l4lb COMMAND --help' says\n"
    "more.\n";

enum sub {
	SERVICES,
	BACKENDS,
	SERVICE_ADD,
	SERVICE_RM,
	BACKEND_ADD,
	BACKEND_RM,
	WEIGHT,
	DRAIN,
};

/* Arguments each verb takes after its name. */
static const struct {
	int min_args, max_args;
} subs[] = {
    [SERVICES] = {0, 1},   [BACKENDS] = {1, 2},	   [SERVICE_ADD] = {1, 1},
    [SERVICE_RM] = {1, 1}, [BACKEND_ADD] = {2, 4}, [BACKEND_RM] = {2, 2},
    [WEIGHT] = {3, 3},	   [DRAIN] = {2, 2},
};

#define N_SUBS (sizeof(subs) / sizeof(subs[0]))

static int run_verb(const struct dpflow_app_client *cl, int argc, char **argv);

static const struct dpflow_app_verb verbs[] = {
    [SERVICES] = {"services",
		  "usage: dpflowctl l4lb services [--json]\n"
		  "\n"
		  "Each service (name, protocol, VIP:port, mode, packets\n"
		  "forwarded and replied, ICMP errors, new, untracked and\n"
		  "rescheduled flows) and under it its backends (weight,\n"
		  "health, Maglev slots, packets, new flows); then the\n"
		  "connection table and the non-zero drop reasons.\n"
		  "--json prints the server's reply (docs/apps/l4lb.md).\n",
		  run_verb},
    [BACKENDS] = {"backends",
		  "usage: dpflowctl l4lb backends SERVICE [--json]\n"
		  "\n"
		  "The backends of SERVICE: address, weight, health, Maglev\n"
		  "slots, packets forwarded, new flows. --json prints\n"
		  "{\"service\": SERVICE, \"backends\": [...]}, the service's\n"
		  "part of the server's `l4lb.services` reply.\n",
		  run_verb},
    [SERVICE_ADD] = {"service-add",
		     "usage: dpflowctl l4lb service-add FILE\n"
		     "\n"
		     "Add a service: FILE (YAML or JSON, - for standard\n"
		     "input) holds one mapping as a config's\n"
		     "apps.l4lb.services items, backends included.\n",
		     run_verb},
    [SERVICE_RM] = {"service-rm",
		    "usage: dpflowctl l4lb service-rm NAME\n"
		    "\n"
		    "Remove service NAME and its backends.\n",
		    run_verb},
    [BACKEND_ADD] = {"backend-add",
		     "usage: dpflowctl l4lb backend-add SERVICE ADDR[:PORT] "
		     "[WEIGHT [MAC]]\n"
		     "\n"
		     "Add a backend to SERVICE: weight 0..1000000 (default\n"
		     "1), MAC its next hop (default the backend gateway's).\n"
		     "An IPv6 address with a port is written [ADDR]:PORT.\n",
		     run_verb},
    [BACKEND_RM] = {"backend-rm",
		    "usage: dpflowctl l4lb backend-rm SERVICE ADDR[:PORT]\n"
		    "\n"
		    "Remove a backend of SERVICE; its flows move to the "
		    "others.\n",
		    run_verb},
    [WEIGHT] = {"weight",
		"usage: dpflowctl l4lb weight SERVICE ADDR[:PORT] W\n"
		"\n"
		"Set a backend's weight (0..1000000): its share of new "
		"flows.\n",
		run_verb},
    [DRAIN] = {"drain",
	       "usage: dpflowctl l4lb drain SERVICE ADDR[:PORT]\n"
	       "\n"
	       "Weight 0: the backend's tracked flows stay, new flows go to\n"
	       "the others.\n",
	       run_verb},
};

/* Member @key of @o: an integer (0 when absent or not one), a string ("-"
 * when absent or not one), as dpflowctl's own output reads them. */
static unsigned long long json_num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (unsigned long long)json_integer_value(v)
				  : 0;
}

static const char *json_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "-";
}

/* Split "ADDR[:PORT]" / "[V6]:PORT" / "V6" into @req's addr and port. */
static int addr_port(json_t *req, const char *s)
{
	char buf[96];
	const char *colon = strrchr(s, ':');
	long port = 0;
	char *end;

	if (strlen(s) >= sizeof(buf))
		return -1;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return -1;
		memcpy(buf, s + 1, (size_t)(close - s - 1));
		buf[close - s - 1] = 0;
		if (close[1] == ':')
			port = strtol(close + 2, &end, 10);
		else if (close[1])
			return -1;
		else
			end = (char *)"";
	} else if (colon && strchr(s, ':') == colon) { /* IPv4:PORT */
		memcpy(buf, s, (size_t)(colon - s));
		buf[colon - s] = 0;
		port = strtol(colon + 1, &end, 10);
	} else { /* IPv4 or bare IPv6 */
		snprintf(buf, sizeof(buf), "%s", s);
		end = (char *)"";
	}
	if (*end || port < 0 || port > 65535)
		return -1;
	json_object_set_new(req, "addr", json_string(buf));
	json_object_set_new(req, "port", json_integer(port));
	return 0;
}

static void show_backends(json_t *s)
{
	json_t *b;
	size_t j;

	json_array_foreach(json_object_get(s, "backends"), j, b)
	{
		/* the server writes it: [ADDR]:PORT for IPv6 */
		printf("  %-30s weight %-4llu %-4s slots %-7llu fwd %llu "
		       "pkts, new flows %llu\n",
		       json_str(b, "endpoint"), json_num(b, "weight"),
		       json_is_true(json_object_get(b, "up")) ? "up" : "down",
		       json_num(b, "slots"),
		       json_num(json_object_get(b, "fwd"), "pkts"),
		       json_num(b, "new_flows"));
	}
}

static void show(json_t *r)
{
	json_t *s, *drops = json_object_get(r, "drops"), *v;
	json_t *conns = json_object_get(r, "conns");
	const char *key;
	size_t i;

	json_array_foreach(json_object_get(r, "services"), i, s)
	{
		printf("%-12s %s %s %-4s fwd %llu pkts, reply %llu pkts, "
		       "icmp %llu, new flows %llu, untracked %llu, "
		       "rescheduled %llu\n",
		       json_str(s, "name"), json_str(s, "proto"),
		       json_str(s, "endpoint"), json_str(s, "mode"),
		       json_num(json_object_get(s, "fwd"), "pkts"),
		       json_num(json_object_get(s, "reply"), "pkts"),
		       json_num(json_object_get(s, "icmp"), "pkts"),
		       json_num(s, "new_flows"), json_num(s, "untracked"),
		       json_num(s, "rescheduled"));
		show_backends(s);
	}
	printf("connections: capacity %llu, created %llu, replaced %llu, "
	       "refused %llu, expired %llu\n",
	       json_num(conns, "capacity"), json_num(conns, "created"),
	       json_num(conns, "replaced"), json_num(conns, "refused"),
	       json_num(conns, "expired"));
	json_object_foreach(drops, key, v) if (json_integer_value(v))
	    printf("drop %s: %lld\n", key, (long long)json_integer_value(v));
}

/* `services` and `backends SERVICE`: the l4lb.services reply shown. */
static int cmd_show(const struct dpflow_app_client *cl, enum sub k,
		    const char *service, bool json)
{
	json_t *reply = cl->call(json_pack("{s:s}", "cmd", "l4lb.services"));
	json_t *s = NULL, *out;
	size_t i;
	int rc = 0;

	if (!reply)
		return DPFLOW_APP_EXIT_FAIL;
	if (k == SERVICES) {
		if (json)
			cl->print_json(reply);
		else
			show(reply);
		json_decref(reply);
		return 0;
	}
	json_array_foreach(json_object_get(reply, "services"), i, s)
	{
		if (!strcmp(json_str(s, "name"), service))
			break;
	}
	if (i == json_array_size(json_object_get(reply, "services"))) {
		fprintf(stderr, "dpflowctl l4lb: no service named '%s'\n",
			service);
		rc = DPFLOW_APP_EXIT_FAIL;
	} else if (json) {
		out = json_pack("{s:s,s:O}", "service", service, "backends",
				json_object_get(s, "backends"));
		cl->print_json(out);
		json_decref(out);
	} else {
		show_backends(s);
	}
	json_decref(reply);
	return rc;
}

/* Send @req (taken); 0 or an exit status. */
static int call(const struct dpflow_app_client *cl, json_t *req)
{
	json_t *reply = cl->call(req);

	if (!reply)
		return DPFLOW_APP_EXIT_FAIL;
	json_decref(reply);
	return 0;
}

/* Weight @s (0..1000000) into @req; false when it is not one. */
static bool weight(json_t *req, const char *s)
{
	char *end;
	long w = strtol(s, &end, 10);

	if (!*s || *end || w < 0 || w > 1000000)
		return false;
	json_object_set_new(req, "weight", json_integer(w));
	return true;
}

/* `service-add FILE`: the mapping in FILE sent as l4lb.service.add. */
static int service_add(const struct dpflow_app_client *cl, const char *file)
{
	char why[256];
	size_t len;
	char *text = cl->read_file(file, &len);
	json_t *svc;

	if (!text)
		return DPFLOW_APP_EXIT_FAIL;
	svc = cl->yaml_to_json(text, len, file, why, sizeof(why));
	free(text);
	if (!svc) {
		fprintf(stderr, "dpflowctl l4lb: %s\n", why);
		return DPFLOW_APP_EXIT_FAIL;
	}
	return call(cl, json_pack("{s:s,s:o}", "cmd", "l4lb.service.add",
				  "service", svc));
}

/* `backend-add SERVICE ADDR[:PORT] [WEIGHT [MAC]]` (@n arguments). */
static int backend_add(const struct dpflow_app_client *cl, const char *cmd,
		       int n, char **argv)
{
	json_t *b = json_object();

	if (addr_port(b, argv[2])) {
		json_decref(b);
		return cl->usage_error(cmd, "'%s' is not ADDR[:PORT]", argv[2]);
	}
	if (n > 2 && !weight(b, argv[3])) {
		json_decref(b);
		return cl->usage_error(cmd, "WEIGHT '%s' is not 0..1000000",
				       argv[3]);
	}
	if (n > 3)
		json_object_set_new(b, "mac", json_string(argv[4]));
	return call(cl, json_pack("{s:s,s:s,s:o}", "cmd", "l4lb.backend.add",
				  "service", argv[1], "backend", b));
}

/*
 * Every verb: @argv[0] names it, @argv[1..] are its arguments (dpflowctl
 * found the verb and answered --help).
 */
static int run_verb(const struct dpflow_app_client *cl, int argc, char **argv)
{
	char cmd[32];
	json_t *req;
	enum sub k = SERVICES;
	int n = argc - 1;

	while (k < N_SUBS && strcmp(argv[0], verbs[k].name))
		k++;
	snprintf(cmd, sizeof(cmd), "l4lb %s", argv[0]);
	if (k == SERVICES || k == BACKENDS) {
		bool json = argc > 1 && !strcmp(argv[argc - 1], "--json");

		if (n - json < subs[k].min_args)
			return cl->usage_error(cmd, "which SERVICE?");
		if (n - json > subs[k].min_args)
			return cl->usage_error(cmd, "unknown argument '%s'",
					       argv[1 + subs[k].min_args]);
		return cmd_show(cl, k, k == BACKENDS ? argv[1] : NULL, json);
	}
	if (n < subs[k].min_args || n > subs[k].max_args)
		return cl->usage_error(cmd, "%s arguments",
				       n < subs[k].min_args ? "too few"
							    : "too many");
	switch (k) {
	case SERVICE_ADD:
		return service_add(cl, argv[1]);
	case SERVICE_RM:
		return call(cl, json_pack("{s:s,s:s}", "cmd", "l4lb.service.rm",
					  "name", argv[1]));
	case BACKEND_ADD:
		return backend_add(cl, cmd, n, argv);
	default:
		break;
	}
	req =
	    json_pack("{s:s,s:s}", "cmd",
		      k == BACKEND_RM ? "l4lb.backend.rm" : "l4lb.backend.set",
		      "service", argv[1]);
	if (addr_port(req, argv[2])) {
		json_decref(req);
		return cl->usage_error(cmd, "'%s' is not ADDR[:PORT]", argv[2]);
	}
	if (k == DRAIN)
		json_object_set_new(req, "weight", json_integer(0));
	if (k == WEIGHT && !weight(req, argv[3])) {
		json_decref(req);
		return cl->usage_error(cmd, "W '%s' is not 0..1000000",
				       argv[3]);
	}
	return call(cl, req);
}

static const struct dpflow_app_cli l4lb_cli = {
    .app = "l4lb",
    .summary = "the L4 load balancer app's services\nand backends "
	       "(l4lb --help)",
    .usage = usage_l4lb,
    .verbs = verbs,
    .n_verbs = N_SUBS,
};

DPFLOW_APP_CLI_REGISTER(l4lb_cli)
