/*
 * The balancer's internals, shared by its control side (lb.c) and its
 * data path (lb_fwd.c). Not for applications.
 */
#ifndef DPFLOW_L4LB_INTERNAL_H
#define DPFLOW_L4LB_INTERNAL_H

#include "l4lb/l4lb.h"

/* Service lookup: open addressing over (vip, proto, port). */
#define SVC_HASH_SIZE	256u
#define SVC_NONE	0xffffu
#define LB_BACKEND_NONE UINT32_MAX /* a Maglev slot without backend */
#define LB_LIVE(service, gen) \
	(1ull << 32 | (uint64_t)(service) << 16 | (uint64_t)(gen))

/* A service as packets see it. */
struct lb_service {
	bool used;
	struct l4lb_service_cfg cfg;
	uint32_t *maglev; /* backend ids; NULL: no backend */
	uint32_t m;
};

/* A backend as packets see it. */
struct lb_backend {
	bool used;
	bool up;
	uint16_t service;
	uint16_t gen;  /* changes whenever the id is given to a new backend:
			  flows tracked to the old one are rescheduled */
	uint64_t live; /* LB_LIVE(service, gen) while used and up, else 0
			  (set at commit): what a tracked flow must match */
	struct l4lb_backend_cfg cfg;
	uint8_t dst_mac[6]; /* cfg.mac or the backend gateway MAC */
	/* DSR services: the outer headers (Ethernet, IP, UDP for GUE) with
	 * tos, lengths and protocol zero, and the IPv4 header's sum */
	uint8_t hdr_len;
	uint32_t hdr_sum;
	uint8_t hdr[64];
};

/* One published view of every service and backend. Immutable. */
struct lb_view {
	struct lb_service svc[L4LB_SERVICES_MAX];
	struct lb_backend be[L4LB_BACKENDS_MAX];
	uint16_t svc_hash[SVC_HASH_SIZE];  /* service ids by (vip,proto,port) */
	uint16_t snat_hash[SVC_HASH_SIZE]; /* NAT services by SNAT address */
};

/* Per data thread counters (one shard a thread, cache-line apart). */
struct lb_shard {
	struct l4lb_service_stats svc[L4LB_SERVICES_MAX];
	struct l4lb_counter be_fwd[L4LB_BACKENDS_MAX];
	uint64_t be_new[L4LB_BACKENDS_MAX];
	uint64_t drops[L4LB_DROP__COUNT];
} DPFLOW_CACHE_ALIGNED;

struct l4lb {
	struct dpflow_ctx *ctx;
	struct lb_view *view; /* published; data threads read it */
	struct l4lb_conn_table *conns;
	struct l4lb_cfg cfg;
	struct lb_shard *shards; /* DPFLOW_THREAD_SHARDS */
	/* control side: the next view being edited, and what changed */
	struct lb_view *next;
	bool svc_dirty[L4LB_SERVICES_MAX];
	/* the root pipe of each input port (client, backend): match-all,
	 * to the handler */
	struct dpflow_pipe *root[2];
	struct lb_health *health; /* per backend id, lb_health.c */
	uint16_t backend_gen;	  /* the last generation given */
};

struct lb_health;
/* Close the health checks in flight and free their state. */
void lb_health_free(struct l4lb *lb);
/* Forget backend id @id's health history (the id has a new backend). */
void lb_health_reset(struct l4lb *lb, uint32_t id);

/* Build backend @b's encapsulation template for service @s. */
void lb_encap_template(struct lb_backend *b, const struct l4lb_service_cfg *s,
		       const uint8_t src_mac[6]);

/* "ADDR:PORT" as operators read it, "[ADDR]:PORT" for IPv6 (exit report,
 * dpflowctl replies, metrics labels, logs); LB_ENDPOINT_LEN bytes hold
 * any (INET6_ADDRSTRLEN, brackets, colon, five digits). */
#define LB_ENDPOINT_LEN 56
void lb_endpoint_str(const struct l4lb_addr *a, uint16_t port,
		     char out[LB_ENDPOINT_LEN]);
/* The address alone ("10.0.1.1", "2001:db8::1"); INET6_ADDRSTRLEN
 * bytes. */
void lb_addr_str(const struct l4lb_addr *a, char *out);

/* l4lb_describe() without its "apps:" and "  l4lb:" lines: what the
 * app's describe op prints under them. */
void lb_describe_services(const struct l4lb *lb, FILE *out);

/* Hash of (address, proto, port) into the service tables. */
uint32_t lb_svc_hash(const uint8_t addr[16], uint8_t v6, uint8_t proto,
		     uint16_t port);

/* Service id for (dst, proto, dport) in @v: exact port first, then the
 * all-ports service; SVC_NONE. */
uint16_t lb_svc_lookup(const struct lb_view *v, const uint8_t dst[16],
		       uint8_t v6, uint8_t proto, uint16_t dport);
/* NAT service whose SNAT address is @dst, or SVC_NONE. */
uint16_t lb_snat_lookup(const struct lb_view *v, const uint8_t dst[16],
			uint8_t v6);

#endif /* DPFLOW_L4LB_INTERNAL_H */
