/*
 * `dpflowctl l4lb ...`: the L4 load balancer app's requests (the
 * "l4lb.*" commands of docs/apps/l4lb.md).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpflowctl.h"

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

static const struct {
	const char *name;
	int min_args, max_args; /* after the command's name */
	const char *usage;
} subs[] = {
    [SERVICES] = {"services", 0, 1,
		  "usage: dpflowctl l4lb services [--json]\n"
		  "\n"
		  "Each service (name, protocol, VIP:port, mode, packets\n"
		  "forwarded and replied, ICMP errors, new, untracked and\n"
		  "rescheduled flows) and under it its backends (weight,\n"
		  "health, Maglev slots, packets, new flows); then the\n"
		  "connection table and the non-zero drop reasons.\n"
		  "--json prints the server's reply (docs/apps/l4lb.md).\n"},
    [BACKENDS] = {"backends", 1, 2,
		  "usage: dpflowctl l4lb backends SERVICE [--json]\n"
		  "\n"
		  "The backends of SERVICE: address, weight, health, Maglev\n"
		  "slots, packets forwarded, new flows. --json prints\n"
		  "{\"service\": SERVICE, \"backends\": [...]}, the service's\n"
		  "part of the server's `l4lb.services` reply.\n"},
    [SERVICE_ADD] = {"service-add", 1, 1,
		     "usage: dpflowctl l4lb service-add FILE\n"
		     "\n"
		     "Add a service: FILE (YAML or JSON, - for standard\n"
		     "input) holds one mapping as a config's\n"
		     "apps.l4lb.services items, backends included.\n"},
    [SERVICE_RM] = {"service-rm", 1, 1,
		    "usage: dpflowctl l4lb service-rm NAME\n"
		    "\n"
		    "Remove service NAME and its backends.\n"},
    [BACKEND_ADD] = {"backend-add", 2, 4,
		     "usage: dpflowctl l4lb backend-add SERVICE ADDR[:PORT] "
		     "[WEIGHT [MAC]]\n"
		     "\n"
		     "Add a backend to SERVICE: weight 0..1000000 (default\n"
		     "1), MAC its next hop (default the backend gateway's).\n"
		     "An IPv6 address with a port is written [ADDR]:PORT.\n"},
    [BACKEND_RM] = {"backend-rm", 2, 2,
		    "usage: dpflowctl l4lb backend-rm SERVICE ADDR[:PORT]\n"
		    "\n"
		    "Remove a backend of SERVICE; its flows move to the "
		    "others.\n"},
    [WEIGHT] = {"weight", 3, 3,
		"usage: dpflowctl l4lb weight SERVICE ADDR[:PORT] W\n"
		"\n"
		"Set a backend's weight (0..1000000): its share of new "
		"flows.\n"},
    [DRAIN] = {"drain", 2, 2,
	       "usage: dpflowctl l4lb drain SERVICE ADDR[:PORT]\n"
	       "\n"
	       "Weight 0: the backend's tracked flows stay, new flows go to\n"
	       "the others.\n"},
};

#define N_SUBS (sizeof(subs) / sizeof(subs[0]))

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
static int cmd_show(enum sub k, const char *service, bool json)
{
	json_t *reply = client_call(json_pack("{s:s}", "cmd", "l4lb.services"));
	json_t *s = NULL, *out;
	size_t i;
	int rc = 0;

	if (!reply)
		return EXIT_FAIL;
	if (k == SERVICES) {
		if (json)
			print_json(reply);
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
		rc = EXIT_FAIL;
	} else if (json) {
		out = json_pack("{s:s,s:O}", "service", service, "backends",
				json_object_get(s, "backends"));
		print_json(out);
		json_decref(out);
	} else {
		show_backends(s);
	}
	json_decref(reply);
	return rc;
}

/* Send @req (taken); 0 or an exit status. */
static int call(json_t *req)
{
	json_t *reply = client_call(req);

	if (!reply)
		return EXIT_FAIL;
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

int cmd_l4lb(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : NULL;
	char cmd[32];
	json_t *req, *b;
	enum sub k = SERVICES;
	bool found = false;
	int n;

	for (size_t i = 0; name && i < N_SUBS && !found; i++)
		if (!strcmp(name, subs[i].name)) {
			k = (enum sub)i;
			found = true;
		}
	if (any_help(argc, argv)) {
		if (!found && !is_help(name))
			return usage_error("l4lb", "unknown l4lb command '%s'",
					   name);
		return help_text(found ? subs[k].usage : usage_l4lb, NULL);
	}
	if (!name)
		return usage_error("l4lb", "which l4lb command?");
	if (!found)
		return usage_error("l4lb", "unknown l4lb command '%s'", name);
	snprintf(cmd, sizeof(cmd), "l4lb %s", name);
	n = argc - 2;
	if (k == SERVICES || k == BACKENDS) {
		bool json = argc > 2 && !strcmp(argv[argc - 1], "--json");

		if (n - json < subs[k].min_args)
			return usage_error(cmd, "which SERVICE?");
		if (n - json > subs[k].min_args)
			return usage_error(cmd, "unknown argument '%s'",
					   argv[2 + subs[k].min_args]);
		return cmd_show(k, k == BACKENDS ? argv[2] : NULL, json);
	}
	if (n < subs[k].min_args || n > subs[k].max_args)
		return usage_error(cmd, "%s arguments",
				   n < subs[k].min_args ? "too few"
							: "too many");
	switch (k) {
	case SERVICE_ADD: {
		char why[256];
		size_t len;
		char *text = read_file(argv[2], &len);
		json_t *svc;

		if (!text)
			return EXIT_FAIL;
		svc = yaml_to_json(text, len, argv[2], why, sizeof(why));
		free(text);
		if (!svc) {
			fprintf(stderr, "dpflowctl l4lb: %s\n", why);
			return EXIT_FAIL;
		}
		return call(json_pack("{s:s,s:o}", "cmd", "l4lb.service.add",
				      "service", svc));
	}
	case SERVICE_RM:
		return call(json_pack("{s:s,s:s}", "cmd", "l4lb.service.rm",
				      "name", argv[2]));
	case BACKEND_ADD:
		b = json_object();
		if (addr_port(b, argv[3])) {
			json_decref(b);
			return usage_error(cmd, "'%s' is not ADDR[:PORT]",
					   argv[3]);
		}
		if (n > 2 && !weight(b, argv[4])) {
			json_decref(b);
			return usage_error(cmd, "WEIGHT '%s' is not 0..1000000",
					   argv[4]);
		}
		if (n > 3)
			json_object_set_new(b, "mac", json_string(argv[5]));
		return call(json_pack("{s:s,s:s,s:o}", "cmd",
				      "l4lb.backend.add", "service", argv[2],
				      "backend", b));
	default:
		break;
	}
	req =
	    json_pack("{s:s,s:s}", "cmd",
		      k == BACKEND_RM ? "l4lb.backend.rm" : "l4lb.backend.set",
		      "service", argv[2]);
	if (addr_port(req, argv[3])) {
		json_decref(req);
		return usage_error(cmd, "'%s' is not ADDR[:PORT]", argv[3]);
	}
	if (k == DRAIN)
		json_object_set_new(req, "weight", json_integer(0));
	if (k == WEIGHT && !weight(req, argv[4])) {
		json_decref(req);
		return usage_error(cmd, "W '%s' is not 0..1000000", argv[4]);
	}
	return call(req);
}
