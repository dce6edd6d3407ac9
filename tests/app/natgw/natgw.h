/*
 * natgw: a stateful source-NAT gateway (masquerade), a dpflow app written
 * only against the public API (include/dpflow); the proof asked for by
 * issue 23 that an app needs no internal header. README.md in this folder
 * describes its section and counters.
 *
 * The gateway holds no packet code: on load it creates four pipes on the
 * context and its data path is theirs.
 *
 *   inside port  -> natgw_inside   (lpm on outer.ipv4.src: the inside
 *                                   prefixes set meta.reg1 = 1; miss: drop)
 *   outside port -> natgw_outside  (basic on outer.ipv4.dst: the pool
 *                                   addresses; miss: drop)
 *   both         -> natgw_conn     (ct: snat from the pool, save meta.reg1,
 *                                   opens meta.reg1, tcp_strict, replace;
 *                                   miss: drop)
 *                -> natgw_fwd      (basic on meta.port and the reply bit of
 *                                   meta.ct_flags, meta.reg1 == 1:
 *                                   inside and not a reply -> outside port,
 *                                   outside and a reply -> inside port;
 *                                   miss: drop)
 *
 * Only a packet with meta.reg1 set opens a connection (ct opens), so only
 * the inside opens them: a packet from outside is tracked against the
 * connections there are, and one that belongs to none takes natgw_conn's
 * miss, with no slot or binding taken. A connection keeps meta.reg1 as
 * its opening packet carried it (1), so every packet of it, replies
 * included, reaches natgw_fwd marked; natgw_fwd's check of the mark is a
 * second guard, and its port and reply bit drop a packet of a connection
 * that comes the wrong way.
 *
 * Counters come from the pipes' own statistics and entry counters: the
 * app keeps none on the data path.
 *
 * Threads: every call here is for the context's control thread.
 */
#ifndef NATGW_H
#define NATGW_H

#include <stdint.h>
#include <stdio.h>

#include "dpflow/config_node.h"
#include "dpflow/error.h"
#include "dpflow/flow.h"

/* Pool addresses (IPv4), inside prefixes, and connections at most. */
#define NATGW_ADDRS_MAX	      8u
#define NATGW_PREFIXES_MAX    1024u
#define NATGW_CONNECTIONS_MAX (1u << 26)
#define NATGW_CONNECTIONS_DEF 65536u

/* The register that marks a connection the inside opened. */
#define NATGW_MARK_REG 1u

/*
 * Why the gateway dropped a packet: _(ID, name, help). Each is the miss
 * of one of its pipes, except OTHER (a rewrite failed: dpflow's own drop
 * reasons say which).
 */
#define NATGW_FOREACH_DROP(_)                                           \
	_(NOT_INSIDE, "not_inside",                                     \
	  "from the inside port, its source in no inside prefix")       \
	_(NOT_TO_POOL, "not_to_pool",                                   \
	  "from the outside port, to no pool address")                  \
	_(NO_CONNECTION, "no_connection",                               \
	  "no connection: from outside and of none (only the inside "   \
	  "opens), not trackable, invalid, table full or no free "      \
	  "binding")                                                    \
	_(NOT_FROM_INSIDE, "not_from_inside",                           \
	  "of a connection, the wrong way: a reply in from the inside " \
	  "port or the opening direction in from the outside port")     \
	_(OTHER, "other", "dropped while rewritten (dpflow's drop reasons)")

enum natgw_drop {
#define NATGW_DROP_ENUM_(id, name, help) NATGW_DROP_##id,
	NATGW_FOREACH_DROP(NATGW_DROP_ENUM_)
#undef NATGW_DROP_ENUM_
	    NATGW_DROP__COUNT
};

/* The gateway's section (apps.natgw), as read. */
struct natgw_cfg {
	uint16_t inside_port, outside_port;
	unsigned n_prefixes;
	struct {
		uint8_t addr[4];
		uint8_t len;
	} prefix[NATGW_PREFIXES_MAX];
	unsigned n_addrs;
	uint8_t addr[NATGW_ADDRS_MAX][4];
	uint16_t port_lo, port_hi;
	uint32_t connections;
};

struct natgw_stats {
	uint64_t conn_live, conn_created, conn_expired, conn_replaced;
	uint64_t nat_exhausted; /* new connections refused: no free binding;
				   each packet that asked counts */
	uint64_t pkts_out;	/* inside -> outside, translated */
	uint64_t pkts_in;	/* outside -> inside, translated back */
	uint64_t dropped;	/* every packet in that did not leave */
	uint64_t drop[NATGW_DROP__COUNT];
};

struct natgw;

/*
 * Read section @section (apps.natgw) against the ports of @ctx into
 * @cfg. 0, or -errno with the error ("FILE:LINE: apps.natgw.KEY: ...") in
 * the section's document error.
 */
int natgw_config_read(struct dpflow_ctx *ctx,
		      const struct dpflow_cfg_node *section,
		      struct natgw_cfg *cfg);

/*
 * Create the gateway's pipes and entries on @ctx from @cfg. Errors about
 * the section (a port with a root pipe already, a pipe name taken, a pipe
 * the engine refuses) are reported at @section. Returns the gateway or
 * NULL. The flow API has no pipe removal: pipes created before a later
 * one failed stay on the context (which the caller then destroys, as
 * `dpflow run` does when an app fails to load).
 */
struct natgw *natgw_create(struct dpflow_ctx *ctx, const struct natgw_cfg *cfg,
			   const struct dpflow_cfg_node *section);
/* Free the gateway (NULL ok); its pipes stay with the context. */
void natgw_destroy(struct natgw *gw);

const struct natgw_cfg *natgw_cfg(const struct natgw *gw);
void natgw_stats_get(const struct natgw *gw, struct natgw_stats *s);

/* The ops' output: `dpflow validate`, the banner, the exit report,
 * Prometheus families and the natgw.stats reply (one line of JSON, the
 * request's id copied; malloc'ed). */
void natgw_describe(const struct natgw *gw, FILE *out);
void natgw_banner(const struct natgw *gw, FILE *out);
void natgw_report(const struct natgw *gw, FILE *out);
void natgw_metrics(const struct natgw *gw, FILE *out);
char *natgw_request(const struct natgw *gw, const char *cmd, const char *req,
		    size_t len);

#endif /* NATGW_H */
