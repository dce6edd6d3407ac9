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
    "applied whole or not at all.\n";

static int usage_err(const char *why)
{
	if (why)
		fprintf(stderr, "dpflowctl l4lb: %s\n\n", why);
	fputs(usage_l4lb, why ? stderr : stdout);
	return why ? EXIT_USAGE : 0;
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

static uint64_t num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

static void show(json_t *r)
{
	json_t *s, *b, *drops = json_object_get(r, "drops"), *v;
	json_t *conns = json_object_get(r, "conns");
	size_t i, j;
	const char *key;

	json_array_foreach(json_object_get(r, "services"), i, s)
	{
		printf(
		    "%-12s %s %s:%llu %-4s fwd %llu pkts, reply %llu pkts, "
		    "icmp %llu, new flows %llu, untracked %llu, rescheduled "
		    "%llu\n",
		    json_string_value(json_object_get(s, "name")),
		    json_string_value(json_object_get(s, "proto")),
		    json_string_value(json_object_get(s, "vip")),
		    (unsigned long long)num(s, "port"),
		    json_string_value(json_object_get(s, "mode")),
		    (unsigned long long)num(json_object_get(s, "fwd"), "pkts"),
		    (unsigned long long)num(json_object_get(s, "reply"),
					    "pkts"),
		    (unsigned long long)num(json_object_get(s, "icmp"), "pkts"),
		    (unsigned long long)num(s, "new_flows"),
		    (unsigned long long)num(s, "untracked"),
		    (unsigned long long)num(s, "rescheduled"));
		json_array_foreach(json_object_get(s, "backends"), j, b)
		{
			const char *a =
			    json_string_value(json_object_get(b, "addr"));
			char ap[80];

			snprintf(ap, sizeof(ap),
				 strchr(a, ':') ? "[%s]:%llu" : "%s:%llu", a,
				 (unsigned long long)num(b, "port"));
			printf(
			    "  %-30s weight %-4llu %-4s slots %-7llu fwd %llu "
			    "pkts, new flows %llu\n",
			    ap, (unsigned long long)num(b, "weight"),
			    json_is_true(json_object_get(b, "up")) ? "up"
								   : "down",
			    (unsigned long long)num(b, "slots"),
			    (unsigned long long)num(json_object_get(b, "fwd"),
						    "pkts"),
			    (unsigned long long)num(b, "new_flows"));
		}
	}
	printf("connections: capacity %llu, created %llu, replaced %llu, "
	       "refused %llu, expired %llu\n",
	       (unsigned long long)num(conns, "capacity"),
	       (unsigned long long)num(conns, "created"),
	       (unsigned long long)num(conns, "replaced"),
	       (unsigned long long)num(conns, "refused"),
	       (unsigned long long)num(conns, "expired"));
	json_object_foreach(drops, key, v) if (json_integer_value(v)) printf(
	    "drop %s: %llu\n", key, (unsigned long long)json_integer_value(v));
}

/* Send @req (taken) and report; 0 or an exit status. */
static int call(json_t *req, bool print)
{
	json_t *reply = client_call(req);

	if (!reply)
		return EXIT_FAIL;
	if (print)
		show(reply);
	json_decref(reply);
	return 0;
}

int cmd_l4lb(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;
	json_t *req;

	if (!sub || !strcmp(sub, "-h") || !strcmp(sub, "--help"))
		return usage_err(sub ? NULL : "which l4lb command?");
	if (!strcmp(sub, "services")) {
		bool json = argc == 3 && !strcmp(argv[2], "--json");
		json_t *reply;

		if (argc > 3 || (argc == 3 && !json))
			return usage_err("services takes only --json");
		reply = client_call(json_pack("{s:s}", "cmd", "l4lb.services"));
		if (!reply)
			return EXIT_FAIL;
		if (json) {
			char *s = json_dumps(reply, JSON_COMPACT |
							JSON_PRESERVE_ORDER);

			puts(s ? s : "?");
			free(s);
		} else {
			show(reply);
		}
		json_decref(reply);
		return 0;
	}
	if (!strcmp(sub, "service-add")) {
		char why[256];
		size_t len;
		char *text;
		json_t *svc;

		if (argc != 3)
			return usage_err("service-add FILE");
		text = read_file(argv[2], &len);
		if (!text)
			return EXIT_FAIL;
		svc = yaml_to_json(text, len, argv[2], why, sizeof(why));
		free(text);
		if (!svc) {
			fprintf(stderr, "dpflowctl l4lb: %s\n", why);
			return EXIT_FAIL;
		}
		return call(json_pack("{s:s,s:o}", "cmd", "l4lb.service.add",
				      "service", svc),
			    false);
	}
	if (!strcmp(sub, "service-rm")) {
		if (argc != 3)
			return usage_err("service-rm NAME");
		return call(json_pack("{s:s,s:s}", "cmd", "l4lb.service.rm",
				      "name", argv[2]),
			    false);
	}
	if (argc < 4)
		return usage_err("SERVICE ADDR[:PORT] expected");
	if (!strcmp(sub, "backend-add")) {
		json_t *b = json_object();

		if (argc > 6 || addr_port(b, argv[3]))
			return json_decref(b), usage_err("bad backend");
		if (argc > 4) {
			char *end;
			long w = strtol(argv[4], &end, 10);

			if (*end || w < 0 || w > 1000000)
				return json_decref(b),
				       usage_err("WEIGHT is 0..1000000");
			json_object_set_new(b, "weight", json_integer(w));
		}
		if (argc > 5)
			json_object_set_new(b, "mac", json_string(argv[5]));
		return call(json_pack("{s:s,s:s,s:o}", "cmd",
				      "l4lb.backend.add", "service", argv[2],
				      "backend", b),
			    false);
	}
	req = json_pack("{s:s,s:s}", "cmd", "l4lb.backend.set", "service",
			argv[2]);
	if (addr_port(req, argv[3]))
		return json_decref(req), usage_err("bad ADDR[:PORT]");
	if (!strcmp(sub, "backend-rm") && argc == 4) {
		json_object_set_new(req, "cmd", json_string("l4lb.backend.rm"));
	} else if (!strcmp(sub, "drain") && argc == 4) {
		json_object_set_new(req, "weight", json_integer(0));
	} else if (!strcmp(sub, "weight") && argc == 5) {
		char *end;
		long w = strtol(argv[4], &end, 10);

		if (*end || w < 0 || w > 1000000)
			return json_decref(req), usage_err("W is 0..1000000");
		json_object_set_new(req, "weight", json_integer(w));
	} else {
		json_decref(req);
		return usage_err("unknown l4lb command or arguments");
	}
	return call(req, false);
}
