/*
 * dpflow-gpu-ids: what the host (gpu_ids.cu) and the two persistent
 * kernels (ids_kernels.cu) share: the batch a semaphore item carries from
 * the receive kernel to the analysis kernel, the signature rules, the
 * flagged-flow set, the per-block counters and the alert's wire format.
 *
 * Everything here is plain data laid out the same on both sides; the
 * device code only ever sees device addresses of it.
 */
#ifndef DPFLOW_EXAMPLE_IDS_H
#define DPFLOW_EXAMPLE_IDS_H

#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/gpu.h"
#include "dpflow/gpu_dev.cuh"
#include "dpflow/pool.h"

/* Packets per receive batch at most: one per thread of a block. */
#define IDS_BATCH_MAX	 256
#define IDS_THREADS	 IDS_BATCH_MAX
#define IDS_RULES_MAX	 16
#define IDS_RULE_LEN_MAX 64
/* Payload bytes scanned per packet: the pool's default data room, so a
   whole payload (the sample's pool keeps that default) */
#define IDS_PAYLOAD_MAX 2048

/*
 * The alert: one UDP datagram per newly flagged flow, from alert_src to
 * the collector, carrying IDS_ALERT_PAYLOAD_LEN bytes (network order):
 *
 *   offset  size  field
 *   0       4     magic "DPFA"
 *   4       1     version (1)
 *   5       1     rule id (0-based, in the order the rules were given)
 *   6       1     IP version of the flow (4 or 6)
 *   7       1     IP protocol (6)
 *   8       2     source port
 *   10      2     destination port
 *   12      4     alert number (0, 1, ... in the order they were sent)
 *   16      16    source address (IPv4: 4 bytes, then zeros)
 *   32      16    destination address
 *   48      8     receive time of the flagged packet, ns since the epoch
 *
 * The IPv4 header has a valid checksum; the UDP checksum is 0 (none).
 */
#define IDS_ALERT_MAGIC	      "DPFA"
#define IDS_ALERT_VERSION     1
#define IDS_ALERT_PAYLOAD_LEN 56
#define IDS_ALERT_FRAME_LEN   (14 + 20 + 8 + IDS_ALERT_PAYLOAD_LEN)
/* struct dpflow_gpu_desc.user of an alert (data packets carry verdicts) */
#define IDS_ALERT_USER 0xa1e27u

/* A flow as the alert names it: directional, as the flagged packet saw it. */
struct ids_flow_key {
	uint8_t src[16]; /* network order; IPv4 in the first 4 bytes */
	uint8_t dst[16];
	uint16_t sport; /* host order */
	uint16_t dport;
	uint8_t ipver; /* 4 or 6 */
	uint8_t proto;
	uint8_t pad[2]; /* zero: keys are compared and hashed whole */
};

/* One TCP packet of a batch. */
struct ids_pkt {
	struct dpflow_gpu_pkt pkt; /* as received: goes back to the tx ring */
	struct ids_flow_key key;
	uint16_t pay_off; /* TCP payload within the frame */
	uint16_t pay_len;
	uint32_t verdict; /* set by the analysis: 0 clean, else 1 + rule id */
};

/* A semaphore item's payload: the TCP packets of one receive batch. */
struct ids_batch {
	uint32_t n;
	uint32_t reserved;
	struct ids_pkt pkt[IDS_BATCH_MAX];
};

/* The signatures, in device memory; a packet is flagged by the lowest id. */
struct ids_rules {
	uint32_t n;
	uint8_t len[IDS_RULES_MAX];
	uint8_t bytes[IDS_RULES_MAX][IDS_RULE_LEN_MAX];
};

/* An entry of the flagged-flow set (open addressing, device memory). */
enum ids_flow_state {
	IDS_FLOW_EMPTY = 0,
	IDS_FLOW_BUSY, /* its key is being written */
	IDS_FLOW_FULL,
};

struct ids_flow_entry {
	uint32_t state; /* enum ids_flow_state */
	uint32_t rule;	/* the rule that flagged it first */
	struct ids_flow_key key;
};

/*
 * Counters of one block, in CPU_GPU memory: written by the block's thread
 * 0 only (whole values, never read back by the GPU), read by the host.
 * Receive blocks fill the first part, analysis blocks the second.
 */
struct ids_counters {
	/* receive kernel */
	uint64_t rx;		  /* packets received */
	uint64_t tcp;		  /* kept for analysis */
	uint64_t non_tcp;	  /* dropped at once (malformed included) */
	uint64_t batches;	  /* semaphore items posted READY */
	uint64_t forwarded;	  /* TCP packets sent on */
	uint64_t dropped_flagged; /* flagged TCP packets dropped */
	uint64_t error_items;	  /* items that came back as ERROR */
	uint64_t lost;		  /* packets not handed back: the transmit
				     ring stayed full for TX_WAIT_NS */
	uint64_t stuck_items;	  /* items still out at exit */
	/* analysis kernel */
	uint64_t analysed;    /* packets scanned */
	uint64_t flagged;     /* packets matching a rule */
	uint64_t alerts;      /* alert packets sent */
	uint64_t alerts_lost; /* new flagged flows without an alert: no
				 alert slot left, flow set full, or no
				 transmit room */
	uint64_t items;	      /* items analysed */
	uint64_t reserved[2];
};

/* The receive kernel's arguments. */
struct ids_rx_args {
	struct dpflow_gpu_qdev *q;
	struct dpflow_gpu_sem_dev *sem;
	struct dpflow_gpu_kctl *ctl;
	struct ids_counters *ctr; /* one per block */
	uint32_t items;		  /* semaphore items per block */
	uint32_t batch;		  /* packets per receive call */
	uint32_t monitor;	  /* forward flagged packets too */
};

/* The analysis kernel's arguments. */
struct ids_an_args {
	struct dpflow_gpu_qdev *q;
	struct dpflow_gpu_sem_dev *sem;
	struct dpflow_gpu_kctl *ctl;
	struct ids_counters *ctr; /* one per block */
	const struct ids_rules *rules;
	struct ids_flow_entry *flows;
	uint32_t flow_mask;	    /* entries - 1, a power of two minus one */
	uint32_t items;		    /* semaphore items per block */
	struct dpflow_pool pool;    /* device view of the packet pool */
	const uint32_t *alert_slot; /* pool slots kept for alerts */
	uint32_t *alert_sent;	    /* CPU_GPU: 1 once alert i is sent */
	unsigned int *alert_next;   /* next alert number to take */
	uint32_t n_alert;
	uint16_t src_port, dst_port;  /* alert UDP ports */
	uint8_t src_ip[4], dst_ip[4]; /* alert addresses */
	uint8_t src_mac[6], dst_mac[6];
};

/*
 * Host side of ids_kernels.cu. ids_kernels_load() loads both kernels
 * before either runs (they wait on each other: see there); the launch
 * calls start @blocks blocks of IDS_THREADS threads on @k's stream.
 * 0 or -errno with @err set.
 */
int ids_kernels_load(struct dpflow_error *err);
int ids_rx_launch(struct dpflow_gpu_kernel *k, unsigned blocks,
		  const struct ids_rx_args *args, struct dpflow_error *err);
int ids_an_launch(struct dpflow_gpu_kernel *k, unsigned blocks,
		  const struct ids_an_args *args, struct dpflow_error *err);

#endif /* DPFLOW_EXAMPLE_IDS_H */
