/*
 * The L4 load balancer (docs/apps/l4lb.md), built on the flow API.
 *
 * Virtual services (an IPv4 or IPv6 VIP, TCP or UDP, one port or all)
 * spread new flows over weighted backends by Maglev hashing of the flow's
 * 5-tuple; a connection table keeps each tracked flow on its backend. Per
 * service the balancer forwards by full NAT (DNAT to the backend and SNAT
 * to the service's SNAT address, replies translated back) or by direct
 * server return in IP-in-IP or GUE (variant 1: IP directly in UDP)
 * encapsulation, as Katran does. ICMP errors about a tracked flow
 * (destination unreachable, packet too big) go to the flow's backend;
 * in NAT mode, those sent to the SNAT address go to the flow's client.
 *
 * On the flow API: the balancer owns a root pipe on its client port (and
 * on its backend port when that is another port) that matches the VIPs
 * and the SNAT addresses and forwards them to its software handler; the
 * handler does the stateful part in bursts and transmits with
 * dpflow_ctx_port_send(). Other traffic takes the pipe's miss forwarding
 * (dropped and counted as flow_miss_drop).
 *
 * State: the services, backends and Maglev tables form an immutable view
 * published by pointer swap; the control thread builds a new view for
 * every change, publishes it, waits for a grace period and frees the old
 * one (data threads are the context's RCU readers). Backend ids are stable
 * across views, so tracked flows keep pointing at their backend.
 *
 * Threads: l4lb_create/destroy and every control call are for the
 * context's control thread; the handler runs on data threads.
 */
#ifndef DPFLOW_L4LB_H
#define DPFLOW_L4LB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dpflow/error.h"
#include "dpflow/flow.h"

#include "l4lb/conn.h"

#define L4LB_SERVICES_MAX	64u
#define L4LB_BACKENDS_MAX	4096u
#define L4LB_NAME_MAX		32u
#define L4LB_GUE_PORT_DEFAULT	6080u
#define L4LB_SNAT_PORT_LO	1024u
#define L4LB_CONN_TABLE_DEFAULT (1u << 20)

enum l4lb_mode {
	L4LB_MODE_NAT = 0, /* DNAT + SNAT, replies through the balancer */
	L4LB_MODE_IPIP,	   /* DSR: IP-in-IP (IPv4 proto 4, IPv6 proto 41) */
	L4LB_MODE_GUE,	   /* DSR: GUE variant 1 (IP in UDP) */
};

enum l4lb_health_kind {
	L4LB_HEALTH_NONE = 0, /* always up */
	L4LB_HEALTH_TCP,      /* a TCP connect */
	L4LB_HEALTH_HTTP,     /* HTTP/1.0 GET, status 2xx or 3xx */
};

/* An IPv4 or IPv6 address, network order; IPv4 in the first 4 bytes. */
struct l4lb_addr {
	uint8_t b[16];
	uint8_t v6;
};

struct l4lb_backend_cfg {
	struct l4lb_addr addr;
	uint16_t port;	 /* 0: the packet's destination port */
	uint32_t weight; /* 0: draining */
	uint8_t mac[6];	 /* next-hop MAC; all zero: backend_gw_mac */
};

struct l4lb_health_cfg {
	uint8_t kind;	      /* enum l4lb_health_kind */
	uint16_t port;	      /* 0: the backend's port */
	char path[64];	      /* HTTP */
	uint32_t interval_ms; /* default 1000 */
	uint32_t timeout_ms;  /* default 500 */
	uint8_t fall;	      /* failures that take a backend down (3) */
	uint8_t rise;	      /* successes that bring it back (2) */
};

struct l4lb_service_cfg {
	char name[L4LB_NAME_MAX];
	struct l4lb_addr vip;
	uint8_t proto;		    /* 6 or 17 */
	uint16_t port;		    /* 0: all ports */
	uint8_t mode;		    /* enum l4lb_mode */
	struct l4lb_addr snat;	    /* NAT: source address toward backends */
	struct l4lb_addr encap_src; /* DSR: outer source address (the
				       backends have its family) */
	uint16_t gue_port;	    /* GUE: outer destination port */
	struct l4lb_health_cfg health;
};

/* The balancer's own settings (the service list comes separately). */
struct l4lb_cfg {
	uint16_t client_port;  /* context port id toward the clients */
	uint16_t backend_port; /* toward the backends (may be the same) */
	uint8_t client_mac[6]; /* our MAC on the client port */
	uint8_t backend_mac[6];
	uint8_t client_gw_mac[6];  /* destination MAC of frames to clients */
	uint8_t backend_gw_mac[6]; /* ... to backends without a MAC */
	uint16_t backend_mtu;  /* largest IP packet toward the backends (DSR:
				  with the outer headers); 0: no check */
	uint32_t conn_entries; /* 0: L4LB_CONN_TABLE_DEFAULT */
	uint32_t maglev_size;  /* 0: 65537 */
	struct l4lb_conn_timeouts timeouts;
	bool shared; /* several data threads (the connection table locks) */
};

/* Counters, summed over the data threads. */
#define L4LB_FOREACH_DROP(_)                         \
	_(NOT_IP, "not_ip")                          \
	_(FRAGMENT, "fragment")                      \
	_(NO_SERVICE, "no_service")                  \
	_(NO_BACKEND, "no_backend")                  \
	_(SNAT_EXHAUSTED, "snat_ports_exhausted")    \
	_(CONN_FULL, "conn_table_full")              \
	_(REPLY_NO_CONN, "reply_without_connection") \
	_(ICMP_NO_CONN, "icmp_without_connection")   \
	_(ICMP_BAD, "icmp_malformed")                \
	_(NO_HEADROOM, "no_headroom")                \
	_(TOO_BIG, "frame_too_big")

enum l4lb_drop {
#define L4LB_DROP_ENUM_(n, s) L4LB_DROP_##n,
	L4LB_FOREACH_DROP(L4LB_DROP_ENUM_)
#undef L4LB_DROP_ENUM_
	    L4LB_DROP__COUNT
};

const char *l4lb_drop_name(unsigned d);
/* "nat", "ipip" or "gue". */
const char *l4lb_mode_name(unsigned mode);

struct l4lb_counter {
	uint64_t pkts;
	uint64_t bytes;
};

struct l4lb_service_stats {
	struct l4lb_counter fwd;   /* client -> backend */
	struct l4lb_counter reply; /* backend -> client (NAT) */
	struct l4lb_counter icmp;  /* ICMP errors sent to a backend */
	uint64_t new_flows;	   /* flows given a backend by Maglev */
	uint64_t untracked;	   /* forwarded without a table entry */
	uint64_t rescheduled;	   /* of new_flows: tracked flows whose backend
				      went down or was removed, given another */
};

struct l4lb_backend_info {
	uint32_t id;
	uint16_t service;
	struct l4lb_backend_cfg cfg;
	bool up;	/* health */
	uint32_t slots; /* Maglev slots it holds */
	struct l4lb_counter fwd;
	uint64_t new_flows;
};

struct l4lb;

/*
 * A balancer on @ctx: opens no ports (they are the context's), creates
 * its root pipe(s) and registers the software handler "l4lb". NULL +
 * @err on error (nothing left behind).
 */
struct l4lb *l4lb_create(struct dpflow_ctx *ctx, const struct l4lb_cfg *cfg,
			 struct dpflow_error *err);
void l4lb_destroy(struct l4lb *lb);

/* Add a service (name unique): its id, or -errno + @err. */
int l4lb_service_add(struct l4lb *lb, const struct l4lb_service_cfg *s,
		     struct dpflow_error *err);
/* Remove service @name and its backends. 0 or -ENOENT. */
int l4lb_service_remove(struct l4lb *lb, const char *name,
			struct dpflow_error *err);
int l4lb_service_find(const struct l4lb *lb, const char *name);

/* Add a backend to service @svc: its id, or -errno + @err. */
int l4lb_backend_add(struct l4lb *lb, int svc, const struct l4lb_backend_cfg *b,
		     struct dpflow_error *err);
/* The backend id of @addr/@port in service @svc, or -ENOENT. */
int l4lb_backend_find(const struct l4lb *lb, int svc,
		      const struct l4lb_addr *addr, uint16_t port);
int l4lb_backend_remove(struct l4lb *lb, uint32_t id, struct dpflow_error *err);
/* Weight 0 drains: tracked flows stay, new ones go elsewhere. */
int l4lb_backend_set_weight(struct l4lb *lb, uint32_t id, uint32_t weight,
			    struct dpflow_error *err);
/* Health state (from the health checker or a test). */
int l4lb_backend_set_up(struct l4lb *lb, uint32_t id, bool up,
			struct dpflow_error *err);

/*
 * Publish what the calls above changed: one new view (Maglev tables of
 * changed services rebuilt), swapped in, the old one freed after a grace
 * period. Calls batch: nothing is visible to packets until this.
 * 0 or -errno + @err (then the previous view stays in force).
 */
int l4lb_commit(struct l4lb *lb, struct dpflow_error *err);
/* Drop the edits made since the last commit. */
void l4lb_abort(struct l4lb *lb);

/* The backend id Maglev gives flow @k in service @svc now, or -ENOENT. */
int l4lb_pick(const struct l4lb *lb, int svc, const struct l4lb_conn_key *k);

int l4lb_service_stats(const struct l4lb *lb, int svc,
		       struct l4lb_service_stats *s);
int l4lb_backend_info(const struct l4lb *lb, uint32_t id,
		      struct l4lb_backend_info *info);
/* Configured service @svc (NULL when none). */
const struct l4lb_service_cfg *l4lb_service_cfg(const struct l4lb *lb, int svc);
void l4lb_drops(const struct l4lb *lb, uint64_t drops[L4LB_DROP__COUNT]);
struct l4lb_conn_table *l4lb_conns(struct l4lb *lb);

/* Print services, backends and counters (dpflow run's exit report). */
void l4lb_print(const struct l4lb *lb, FILE *f);
/*
 * Print the configured services and their backends to @out, under
 * "apps:\n  l4lb:\n", as `dpflow validate` lists them: "service NAME:
 * PROTO VIP:PORT, mode MODE, snat ADDR" (encap_src in DSR modes), then
 * "backend ADDR:PORT weight W" lines; IPv6 endpoints as [ADDR]:PORT, a
 * port of 0 left out (a VIP's "(every port)").
 */
void l4lb_describe(const struct l4lb *lb, FILE *out);

/*
 * The data path, as a dpflow software handler: takes ownership of @n
 * packets, parsed, from port @port of the context's pool.
 */
void l4lb_handle(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		 uint16_t n);

#endif /* DPFLOW_L4LB_H */
