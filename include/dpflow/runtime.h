/*
 * The runtime: worker threads that run a context's pipes on live ports.
 *
 * Each worker owns a share of the ports' receive queues (queue q of every
 * port goes to worker q % workers, in port order) and transmits on its own
 * transmit queue of each port (worker w uses queue w % tx_queues; a queue
 * shared by several workers is serialised). A worker loops, to
 * completion: receive a burst, spread it by RSS, run the pipes on its own
 * packets, transmit; it reports a quiescent state (QSBR) between bursts.
 *
 * RSS: with more than one worker every received packet is hashed with the
 * Toeplitz function of Microsoft's RSS specification over its outer
 * addresses and ports, taken in a canonical order (the lower address and
 * its port first) so that both directions of a flow hash alike whatever
 * the key; the hash picks the owning worker through a 128-entry
 * redirection table filled round robin. Packets owned by another worker
 * are handed to it over a single-producer single-consumer ring per pair of
 * workers. A worker receives only while every ring it hands to has room
 * for a burst (else the packets wait in the port, whose own drops count
 * an overload); a packet that still finds its ring full is dropped and
 * counted per worker. The key is random at start (getrandom)
 * unless the configuration gives one.
 *
 * The thread that creates the runtime is its control thread: it applies
 * entry batches (with dpflow_entries_process(), as an offline thread),
 * runs aging and serves the control socket and metrics while the workers
 * run. dpflow_rt_stop() stops receiving, lets the workers finish what the
 * handoff rings hold, and joins them; the ports stay open (the context
 * owns them).
 */
#ifndef DPFLOW_RUNTIME_H
#define DPFLOW_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/flow.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DPFLOW_WORKERS_MAX  64
#define DPFLOW_RSS_KEY_LEN  40
#define DPFLOW_RSS_RETA_LEN 128

struct dpflow_rt;

/* Who decides a packet's worker (dpflow_rt_cfg.rss). */
enum dpflow_rt_rss {
	DPFLOW_RT_RSS_SOFT = 0, /* dpflow's symmetric Toeplitz hash; packets
				   handed between workers (the default) */
	DPFLOW_RT_RSS_PORT,	/* the port's own spreading: a packet is run
				   by the worker of the queue it came on, no
				   hash, no handoff (for ports whose queues
				   already keep a flow's two directions on
				   one queue index: AF_PACKET fanout, a NIC
				   with a symmetric RSS key) */
};

struct dpflow_rt_cfg {
	uint16_t workers; /* 1..DPFLOW_WORKERS_MAX; 0: 1 */
	const int *cpus;  /* NULL: no pinning; else cpus[w] for worker w */
	bool rss_key_set; /* use @rss_key; else a random key */
	uint8_t rss_key[DPFLOW_RSS_KEY_LEN];
	uint16_t burst;	       /* packets per receive burst; 0: 32 */
	uint8_t rss;	       /* enum dpflow_rt_rss */
	uint32_t handoff_size; /* slots of each handoff ring, power of 2;
				  0: 1024 */
};

/* What one worker did; read from any thread (relaxed loads). */
struct dpflow_worker_stats {
	uint64_t rx_pkts;	   /* received from its queues */
	uint64_t rx_bursts;	   /* non-empty receive bursts */
	uint64_t pkts;		   /* run through the pipes by this worker */
	uint64_t handoff_out;	   /* handed to other workers */
	uint64_t handoff_in;	   /* taken from other workers */
	uint64_t handoff_drops;	   /* a handoff ring was full */
	uint64_t handoff_waits;	   /* passes that left the receive queues
				      alone: a peer's handoff ring was full */
	uint64_t idle_polls;	   /* polls of every queue that found nothing */
	uint64_t tx_timed;	   /* packets held by the timing wheels until
				      their tx_time_ns, then sent */
	uint64_t tx_timed_refused; /* timed packets dropped: their time was
				      beyond the wheel's horizon (~1 s) */
	uint64_t busy_ns;	   /* time spent on bursts that had packets */
	int cpu;		   /* pinned CPU, or -1 */
};

/*
 * A runtime over @ctx's ports and pipes (the context's pool and ports are
 * used as they are). Validates @cfg: error field "workers", "cpus",
 * "burst" or "handoff_size". Nothing runs until dpflow_rt_start().
 */
struct dpflow_rt *dpflow_rt_create(struct dpflow_ctx *ctx,
				   const struct dpflow_rt_cfg *cfg,
				   struct dpflow_error *err);

/* Start the workers. 0, or a negative errno (a thread or pinning failed:
 * nothing is left running). */
int dpflow_rt_start(struct dpflow_rt *rt, struct dpflow_error *err);

/*
 * True once every port's input is finite and exhausted (pcap files) and
 * the workers have nothing left in hand. A runtime on live ports never is.
 */
bool dpflow_rt_inputs_done(const struct dpflow_rt *rt);

/* Stop receiving, drain the handoff rings through the pipes, join the
 * workers. Idempotent. */
void dpflow_rt_stop(struct dpflow_rt *rt);

/* Stops it if running, then frees it. NULL ok. */
void dpflow_rt_destroy(struct dpflow_rt *rt);

unsigned dpflow_rt_workers(const struct dpflow_rt *rt);
int dpflow_rt_worker_stats(const struct dpflow_rt *rt, unsigned worker,
			   struct dpflow_worker_stats *s);
/* The RSS key in use (DPFLOW_RSS_KEY_LEN bytes). */
const uint8_t *dpflow_rt_rss_key(const struct dpflow_rt *rt);

/*
 * The symmetric Toeplitz hash of the runtime's RSS over a parsed packet's
 * outer headers (meta filled by the parser): IPv4 or IPv6 addresses, then
 * TCP, UDP or SCTP ports, in canonical order; 0 for other packets.
 */
uint32_t dpflow_rss_toeplitz_sym(const uint8_t key[DPFLOW_RSS_KEY_LEN],
				 const struct dpflow_pkt_meta *m);

/* The plain Toeplitz hash of @len (<= 36) bytes of @in under @key. */
uint32_t dpflow_toeplitz(const uint8_t key[DPFLOW_RSS_KEY_LEN],
			 const uint8_t *in, unsigned len);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_RUNTIME_H */
