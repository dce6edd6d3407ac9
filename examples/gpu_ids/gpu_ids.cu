/*
 * dpflow-gpu-ids: a GPU security pipeline on dpflow's GPU target, in the
 * shape of a DOCA GPUNetIO application (README.md maps each call to its
 * DOCA counterpart).
 *
 *   IN.pcap -> main thread (the wire) -> ring port -> CPU proxy -> rx ring
 *   rx ring -> receive kernel: parse, drop non-TCP, batch -> semaphore item
 *   semaphore item -> analysis kernel: scan payloads, flag, one alert per
 *                     new flagged flow -> tx ring; item DONE
 *   receive kernel: DONE item -> forward clean packets, drop flagged ones
 *   tx ring -> CPU proxy -> OUT.pcap (forwarded packets and alerts)
 *
 * The main thread replays IN.pcap into a ring port the proxy receives
 * from (with a live port the proxy would receive from it directly), knows
 * so how many packets went in, and ends once every one of them came back
 * through the transmit ring (sent or dropped) together with every alert.
 * SIGINT or SIGTERM stops it early, cleanly. Exit status: 0 done, 1 error,
 * 2 bad usage, 77 no GPU (skipped), 130 interrupted.
 */
#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <getopt.h>

#include "dpflow/clock.h"
#include "dpflow/port.h"
#include "dpflow/ring.h"

#include "ids.h"

#define QUEUE_SIZE	1024 /* descriptors per GPU ring */
#define WIRE_SIZE	4096 /* packets between the main thread and proxy */
#define RELAY_BURST	32
#define CHECK_NS	1000000ull /* how often the main loop looks around */
#define STALL_NS	10000000000ull /* nothing back for this long: stuck */
#define STOP_TIMEOUT_NS 5000000000ull

struct options {
	const char *in, *out;
	struct ids_rules rules;
	bool monitor;
	uint8_t src_ip[4], dst_ip[4];
	uint16_t src_port, dst_port;
	unsigned blocks, items, batch, flows, max_alerts, device;
};

struct app {
	struct options o;
	struct dpflow_gpu *gpu;
	struct dpflow_pool *pool;
	uint32_t pool_slots;
	struct dpflow_port *in, *wire, *out;
	struct dpflow_gpu_queue *q;
	struct dpflow_gpu_sem *sem;
	struct dpflow_gpu_kernel *k_rx, *k_an;
	struct dpflow_gpu_proxy *px;
	struct dpflow_gpu_proxy_stats pst;
	struct ids_counters *ctr, *ctr_dev; /* 2 * blocks rows, CPU_GPU */
	struct ids_rules *rules_dev;
	struct ids_flow_entry *flows_dev;
	uint32_t *alert_slot, *alert_slot_dev; /* pool slots kept for alerts */
	uint32_t n_alert_slots;
	uint32_t *alert_sent, *alert_sent_dev; /* CPU_GPU */
	unsigned int *alert_next_dev;
	bool gpu_busy; /* a kernel did not stop: its memory must stay */
	/* the wire: packets read from IN, not yet in the ring port */
	uint32_t burst[RELAY_BURST];
	unsigned have, at;
	uint64_t fed;
	bool in_done;
	uint64_t t_start, t_end;
};

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
	g_signal = sig;
}

/* ---- options ----------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: dpflow-gpu-ids [options] IN.pcap OUT.pcap\n"
	    "\n"
	    "Reads IN.pcap through a GPU queue; a receive kernel keeps TCP,\n"
	    "an analysis kernel scans each TCP payload for the rules and "
	    "sends one\n"
	    "alert (UDP) per flagged flow; forwarded packets and alerts "
	    "go to OUT.pcap.\n"
	    "\n"
	    "  -r, --rule BYTES       a signature (repeatable, up to %d, "
	    "1..%d bytes,\n"
	    "                         \\xHH and \\\\ escapes); default "
	    "\"/etc/passwd\" and \"cmd.exe\"\n"
	    "  -m, --monitor          forward flagged packets too (IDS); "
	    "default: drop them (IPS)\n"
	    "  -c, --collector IP:PORT  alert destination (default "
	    "192.0.2.2:5555)\n"
	    "  -s, --alert-src IP     alert source address (default "
	    "192.0.2.1, port 5555)\n"
	    "  -b, --blocks N         blocks per kernel (default 2)\n"
	    "  -i, --items N          semaphore items per block (default "
	    "4)\n"
	    "  -n, --batch N          packets per receive batch, 1..%d "
	    "(default %d)\n"
	    "  -f, --flows N          flagged-flow set entries, a power of "
	    "two (default 65536)\n"
	    "  -a, --max-alerts N     alert packets at most (default "
	    "4096)\n"
	    "  -d, --device N         CUDA device (default 0)\n"
	    "  -h, --help\n"
	    "\n"
	    "Exit status: 0 done, 1 error, 2 bad usage, 77 no GPU, 130 "
	    "interrupted.\n",
	    IDS_RULES_MAX, IDS_RULE_LEN_MAX, IDS_BATCH_MAX, IDS_BATCH_MAX);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Append rule @text (with \xHH and \\ escapes). 0 or -1 with a message. */
static int add_rule(struct ids_rules *r, const char *text)
{
	uint8_t *dst = r->bytes[r->n];
	unsigned len = 0;

	if (r->n == IDS_RULES_MAX) {
		fprintf(stderr, "--rule: at most %d rules\n", IDS_RULES_MAX);
		return -1;
	}
	for (const char *p = text; *p;) {
		int c = (unsigned char)*p++;

		if (c == '\\' && *p == '\\') {
			p++;
		} else if (c == '\\' && *p == 'x') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);

			if (lo < 0) {
				fprintf(stderr,
					"--rule '%s': \\x needs two hex "
					"digits\n",
					text);
				return -1;
			}
			c = hi << 4 | lo;
			p += 3;
		}
		if (len == IDS_RULE_LEN_MAX) {
			fprintf(stderr, "--rule '%s': longer than %d bytes\n",
				text, IDS_RULE_LEN_MAX);
			return -1;
		}
		dst[len++] = (uint8_t)c;
	}
	if (len == 0) {
		fprintf(stderr, "--rule: empty signature\n");
		return -1;
	}
	r->len[r->n++] = (uint8_t)len;
	return 0;
}

static int parse_uint(const char *opt, const char *s, unsigned lo, unsigned hi,
		      unsigned *v)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(s, &end, 0);
	if (errno || end == s || *end || x < lo || x > hi) {
		fprintf(stderr, "%s '%s': expected %u..%u\n", opt, s, lo, hi);
		return -1;
	}
	*v = (unsigned)x;
	return 0;
}

static int parse_ip(const char *opt, const char *s, uint8_t ip[4])
{
	if (inet_pton(AF_INET, s, ip) != 1) {
		fprintf(stderr, "%s '%s': not an IPv4 address\n", opt, s);
		return -1;
	}
	return 0;
}

/* IP:PORT */
static int parse_collector(const char *s, struct options *o)
{
	char ip[64];
	const char *colon = strrchr(s, ':');
	unsigned port;

	if (!colon || (size_t)(colon - s) >= sizeof(ip)) {
		fprintf(stderr, "--collector '%s': expected IP:PORT\n", s);
		return -1;
	}
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = 0;
	if (parse_ip("--collector", ip, o->dst_ip) < 0 ||
	    parse_uint("--collector port", colon + 1, 1, 65535, &port) < 0)
		return -1;
	o->dst_port = (uint16_t)port;
	return 0;
}

/* 0: run; 1: --help printed; -1: bad usage (message printed). */
static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
	    {"rule", required_argument, NULL, 'r'},
	    {"monitor", no_argument, NULL, 'm'},
	    {"collector", required_argument, NULL, 'c'},
	    {"alert-src", required_argument, NULL, 's'},
	    {"blocks", required_argument, NULL, 'b'},
	    {"items", required_argument, NULL, 'i'},
	    {"batch", required_argument, NULL, 'n'},
	    {"flows", required_argument, NULL, 'f'},
	    {"max-alerts", required_argument, NULL, 'a'},
	    {"device", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, bad = 0;

	memset(o, 0, sizeof(*o));
	o->blocks = 2;
	o->items = 4;
	o->batch = IDS_BATCH_MAX;
	o->flows = 65536;
	o->max_alerts = 4096;
	o->src_port = o->dst_port = 5555;
	memcpy(o->src_ip, "\xc0\x00\x02\x01", 4); /* 192.0.2.1 */
	memcpy(o->dst_ip, "\xc0\x00\x02\x02", 4); /* 192.0.2.2 */
	while ((c = getopt_long(argc, argv, "r:mc:s:b:i:n:f:a:d:h", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'r':
			bad |= add_rule(&o->rules, optarg);
			break;
		case 'm':
			o->monitor = true;
			break;
		case 'c':
			bad |= parse_collector(optarg, o);
			break;
		case 's':
			bad |= parse_ip("--alert-src", optarg, o->src_ip);
			break;
		case 'b':
			bad |=
			    parse_uint("--blocks", optarg, 1, 64, &o->blocks);
			break;
		case 'i':
			bad |= parse_uint("--items", optarg, 1, 64, &o->items);
			break;
		case 'n':
			bad |= parse_uint("--batch", optarg, 1, IDS_BATCH_MAX,
					  &o->batch);
			break;
		case 'f':
			bad |= parse_uint("--flows", optarg, 64, 1u << 24,
					  &o->flows);
			if (o->flows & (o->flows - 1)) {
				fprintf(stderr,
					"--flows %u: not a power of two\n",
					o->flows);
				bad = -1;
			}
			break;
		case 'a':
			bad |= parse_uint("--max-alerts", optarg, 1, 65536,
					  &o->max_alerts);
			break;
		case 'd':
			bad |=
			    parse_uint("--device", optarg, 0, 255, &o->device);
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			bad = -1;
			break;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "expected IN.pcap and OUT.pcap\n");
		bad = -1;
	} else {
		o->in = argv[optind];
		o->out = argv[optind + 1];
		/* a port URI separates its keys with commas */
		if (strchr(o->in, ',') || strchr(o->out, ',')) {
			fprintf(stderr, "file names may not contain ','\n");
			bad = -1;
		}
	}
	if (!bad && o->rules.n == 0) {
		add_rule(&o->rules, "/etc/passwd");
		add_rule(&o->rules, "cmd.exe");
	}
	if (bad)
		fprintf(stderr, "(dpflow-gpu-ids --help lists the options)\n");
	return bad ? -1 : 0;
}

/* ---- setup ------------------------------------------------------------- */

static int cuda_error(struct dpflow_error *err, cudaError_t rc,
		      const char *what)
{
	return dpflow_error_set(err, EIO, "cuda", "%s: %s (%s)", what,
				cudaGetErrorString(rc), cudaGetErrorName(rc));
}

/* Device memory holding a copy of @size bytes at @src. */
static void *upload(struct app *a, const void *src, size_t size,
		    struct dpflow_error *err)
{
	void *dev;
	cudaError_t rc;

	if (dpflow_gpu_mem_alloc(a->gpu, size, 0, DPFLOW_GPU_MEM_GPU, NULL,
				 &dev, err) < 0)
		return NULL;
	rc = cudaMemcpy(dev, src, size, cudaMemcpyHostToDevice);
	if (rc != cudaSuccess) {
		cuda_error(err, rc, "cudaMemcpy to the device");
		dpflow_gpu_mem_free(a->gpu, dev);
		return NULL;
	}
	return dev;
}

/*
 * Every packet that can be somewhere at once: the wire, both GPU rings,
 * the proxy's send FIFO (twice the ring), the semaphore items, the alert
 * slots, a relay burst; and a margin for the pcap reader's burst.
 */
static uint32_t pool_slots(const struct options *o)
{
	return WIRE_SIZE + 2 * QUEUE_SIZE + 2 * QUEUE_SIZE +
	       o->blocks * o->items * IDS_BATCH_MAX + o->max_alerts +
	       RELAY_BURST + 1024;
}

static int open_ports(struct app *a, struct dpflow_error *err)
{
	struct dpflow_pool_params pp = {};
	char uri[4096 + 16];

	a->pool_slots = pool_slots(&a->o);
	pp.name = "ids";
	pp.n_slots = a->pool_slots;
	a->pool = dpflow_pool_create(&pp, err);
	if (!a->pool)
		return -1;
	snprintf(uri, sizeof(uri), "pcap:rx=%s", a->o.in);
	a->in = dpflow_port_open(a->pool, uri, err);
	if (!a->in)
		return -1;
	snprintf(uri, sizeof(uri), "ring:ids-wire,size=%d", WIRE_SIZE);
	a->wire = dpflow_port_open(a->pool, uri, err);
	if (!a->wire)
		return -1;
	snprintf(uri, sizeof(uri), "pcap:tx=%s", a->o.out);
	a->out = dpflow_port_open(NULL, uri, err);
	return a->out ? 0 : -1;
}

/* Pool slots for the alerts, their list on the device, their marks. */
static int setup_alerts(struct app *a, struct dpflow_error *err)
{
	uint32_t n = a->o.max_alerts;
	void *h, *d;

	a->alert_slot = (uint32_t *)calloc(n, sizeof(uint32_t));
	if (!a->alert_slot)
		return dpflow_error_set(err, ENOMEM, "alerts", "out of memory");
	while (a->n_alert_slots < n) {
		unsigned k =
		    n - a->n_alert_slots < 256 ? n - a->n_alert_slots : 256;

		if (dpflow_pool_alloc_bulk(
			a->pool, a->alert_slot + a->n_alert_slots, k) < 0)
			return dpflow_error_set(err, ENOBUFS, "alerts",
						"pool too small for %u alerts",
						n);
		a->n_alert_slots += k;
	}
	a->alert_slot_dev =
	    (uint32_t *)upload(a, a->alert_slot, n * sizeof(uint32_t), err);
	if (!a->alert_slot_dev)
		return -1;
	if (dpflow_gpu_mem_alloc(a->gpu, n * sizeof(uint32_t), 0,
				 DPFLOW_GPU_MEM_CPU_GPU, &h, &d, err) < 0)
		return -1;
	a->alert_sent = (uint32_t *)h;
	a->alert_sent_dev = (uint32_t *)d;
	if (dpflow_gpu_mem_alloc(a->gpu, sizeof(unsigned int), 0,
				 DPFLOW_GPU_MEM_GPU, NULL, &d, err) < 0)
		return -1;
	a->alert_next_dev = (unsigned int *)d;
	return 0;
}

static int setup_gpu(struct app *a, struct dpflow_error *err)
{
	const struct options *o = &a->o;
	struct dpflow_gpu_queue_params qp = {};
	size_t ctr_size = 2 * o->blocks * sizeof(struct ids_counters);
	void *h, *d;

	/* zero-copy: kernels read the frames in the pool's slots and write
	   the alerts into slots of their own (dpflow_gpu_pool_register) */
	qp.pool = a->pool;
	qp.size = QUEUE_SIZE;
	qp.path = DPFLOW_GPU_PATH_ZERO_COPY;
	a->q = dpflow_gpu_queue_create(a->gpu, &qp, err);
	if (!a->q)
		return -1;
	/* kernel-kernel: device memory */
	a->sem = dpflow_gpu_sem_create(a->gpu, o->blocks * o->items,
				       sizeof(struct ids_batch),
				       DPFLOW_GPU_MEM_GPU, err);
	if (!a->sem)
		return -1;
	if (dpflow_gpu_mem_alloc(a->gpu, ctr_size, 0, DPFLOW_GPU_MEM_CPU_GPU,
				 &h, &d, err) < 0)
		return -1;
	a->ctr = (struct ids_counters *)h;
	a->ctr_dev = (struct ids_counters *)d;
	a->rules_dev =
	    (struct ids_rules *)upload(a, &o->rules, sizeof(o->rules), err);
	if (!a->rules_dev)
		return -1;
	if (dpflow_gpu_mem_alloc(
		a->gpu, (size_t)o->flows * sizeof(struct ids_flow_entry), 0,
		DPFLOW_GPU_MEM_GPU, NULL, &d, err) < 0)
		return -1;
	a->flows_dev = (struct ids_flow_entry *)d;
	return setup_alerts(a, err);
}

/* Launch both kernels (analysis first: it waits for items), then the
   proxy, which watches the receive kernel. */
static int start(struct app *a, struct dpflow_error *err)
{
	const struct options *o = &a->o;
	struct ids_rx_args rx = {};
	struct ids_an_args an = {};
	struct dpflow_gpu_proxy_params xp = {};

	a->k_rx = dpflow_gpu_kernel_create(a->gpu, "ids-receive", err);
	a->k_an = dpflow_gpu_kernel_create(a->gpu, "ids-analyse", err);
	if (!a->k_rx || !a->k_an || ids_kernels_load(err) < 0)
		return -1;

	an.q = rx.q = dpflow_gpu_queue_dev(a->q);
	an.sem = rx.sem = dpflow_gpu_sem_dev(a->sem);
	an.items = rx.items = o->items;
	rx.ctl = dpflow_gpu_kernel_ctl(a->k_rx);
	rx.ctr = a->ctr_dev;
	rx.batch = o->batch;
	rx.monitor = o->monitor;
	an.ctl = dpflow_gpu_kernel_ctl(a->k_an);
	an.ctr = a->ctr_dev + o->blocks;
	an.rules = a->rules_dev;
	an.flows = a->flows_dev;
	an.flow_mask = o->flows - 1;
	if (dpflow_gpu_pool_dev_view(a->gpu, a->pool, &an.pool) < 0)
		return dpflow_error_set(err, ENOENT, "pool",
					"pool not registered");
	an.alert_slot = a->alert_slot_dev;
	an.alert_sent = a->alert_sent_dev;
	an.alert_next = a->alert_next_dev;
	an.n_alert = a->n_alert_slots;
	an.src_port = o->src_port;
	an.dst_port = o->dst_port;
	memcpy(an.src_ip, o->src_ip, 4);
	memcpy(an.dst_ip, o->dst_ip, 4);
	memcpy(an.src_mac, "\x02\x00\x00\x00\x00\x01", 6);
	memcpy(an.dst_mac, "\x02\x00\x00\x00\x00\x02", 6);
	if (ids_an_launch(a->k_an, o->blocks, &an, err) < 0 ||
	    ids_rx_launch(a->k_rx, o->blocks, &rx, err) < 0)
		return -1;

	xp.queue = a->q;
	xp.rx_port = a->wire;
	xp.tx_port = a->out;
	xp.burst = 32;
	xp.watch = a->k_rx;
	a->px = dpflow_gpu_proxy_start(&xp, err);
	return a->px ? 0 : -1;
}

/* ---- running ----------------------------------------------------------- */

/* Sum the receive rows into @rx and the analysis rows into @an. */
static void read_counters(const struct app *a, struct ids_counters *rx,
			  struct ids_counters *an)
{
	const unsigned words = sizeof(struct ids_counters) / 8;
	uint64_t *r = (uint64_t *)rx, *n = (uint64_t *)an;

	memset(rx, 0, sizeof(*rx));
	memset(an, 0, sizeof(*an));
	for (unsigned b = 0; b < a->o.blocks; b++) {
		const volatile uint64_t *sr =
		    (const volatile uint64_t *)&a->ctr[b];
		const volatile uint64_t *sn =
		    (const volatile uint64_t *)&a->ctr[a->o.blocks + b];

		for (unsigned i = 0; i < words; i++) {
			r[i] += sr[i];
			n[i] += sn[i];
		}
	}
}

/* Alerts marked sent (read after the proxy's counters: see send_alert). */
static uint64_t alerts_marked(const struct app *a)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < a->n_alert_slots; i++)
		n += __atomic_load_n(&a->alert_sent[i], __ATOMIC_ACQUIRE) != 0;
	return n;
}

/* The proxy and both kernels still run. -1 with a message otherwise. */
static int healthy(struct app *a)
{
	struct dpflow_gpu_kernel *ks[] = {a->k_rx, a->k_an};
	struct dpflow_error err;

	if (dpflow_gpu_proxy_error(a->px, &err) < 0) {
		fprintf(stderr, "dpflow-gpu-ids: proxy stopped: %s\n", err.msg);
		return -1;
	}
	for (unsigned i = 0; i < 2; i++) {
		int r = dpflow_gpu_kernel_poll(ks[i], &err);

		if (r < 0) {
			fprintf(stderr, "dpflow-gpu-ids: %s\n", err.msg);
			return -1;
		}
		if (r == 0) {
			fprintf(stderr,
				"dpflow-gpu-ids: kernel %s ended on its own\n",
				i ? "ids-analyse" : "ids-receive");
			return -1;
		}
	}
	return 0;
}

/* Move packets from IN to the wire. Returns how many moved. */
static unsigned relay(struct app *a)
{
	unsigned k;

	if (a->at == a->have && !a->in_done) {
		a->have = dpflow_port_rx_burst(a->in, 0, a->burst, RELAY_BURST);
		a->at = 0;
		if (a->have == 0 && dpflow_port_rx_done(a->in)) {
			a->in_done = true;
			printf("end of input: %llu packets read\n",
			       (unsigned long long)a->fed);
		}
	}
	if (a->at == a->have)
		return 0;
	k = dpflow_ring_enqueue_burst(dpflow_port_ring_rx(a->wire),
				      a->burst + a->at, a->have - a->at);
	a->at += k;
	a->fed += k;
	return k;
}

static void print_stall(struct app *a, const struct dpflow_gpu_proxy_stats *s,
			uint64_t alerts)
{
	struct ids_counters rx, an;

	read_counters(a, &rx, &an);
	fprintf(stderr,
		"dpflow-gpu-ids: nothing came back for %llu s: fed %llu, "
		"proxy rx %llu, back %llu (tx %llu dropped %llu errors "
		"%llu), alerts %llu; receive kernel rx %llu batches %llu "
		"forwarded %llu; analysis items %llu\n",
		(unsigned long long)(STALL_NS / 1000000000ull),
		(unsigned long long)a->fed, (unsigned long long)s->rx_pkts,
		(unsigned long long)(s->tx_pkts + s->tx_dropped + s->tx_errors),
		(unsigned long long)s->tx_pkts,
		(unsigned long long)s->tx_dropped,
		(unsigned long long)s->tx_errors, (unsigned long long)alerts,
		(unsigned long long)rx.rx, (unsigned long long)rx.batches,
		(unsigned long long)rx.forwarded, (unsigned long long)an.items);
}

/*
 * Input done: is everything back? Every packet fed went through the
 * receive ring and came back through the transmit ring (sent or dropped),
 * and so did every alert. 1 yes, 0 not yet, -1 stalled (message printed).
 */
static int all_back(struct app *a, uint64_t now, uint64_t *last_back,
		    uint64_t *last_change)
{
	struct dpflow_gpu_proxy_stats s;
	uint64_t back, alerts;

	dpflow_gpu_proxy_stats_get(a->px, &s);
	back = s.tx_pkts + s.tx_dropped + s.tx_errors;
	alerts = alerts_marked(a);
	if (s.rx_pkts == a->fed && back == a->fed + alerts)
		return 1;
	if (back != *last_back) {
		*last_back = back;
		*last_change = now;
	} else if (now - *last_change > STALL_NS) {
		print_stall(a, &s, alerts);
		return -1;
	}
	return 0;
}

/*
 * Relay IN into the pipeline until everything is back (seen twice in a
 * row, CHECK_NS apart, as the counters are read while they move), a
 * signal comes, or something fails. Returns the exit status.
 */
static int run(struct app *a)
{
	struct timespec nap = {0, 10000};
	uint64_t next_check = 0, last_back = UINT64_MAX, last_change = 0;
	int quiet = 0;

	for (;;) {
		unsigned moved = relay(a);
		uint64_t now = dpflow_clock_ns();

		if (g_signal) {
			printf("interrupted (signal %d): stopping\n",
			       (int)g_signal);
			return 130;
		}
		if (!a->in_done || a->at != a->have)
			last_change = now;
		if (now >= next_check) {
			int r = 0;

			next_check = now + CHECK_NS;
			if (healthy(a) < 0)
				return 1;
			if (a->in_done && a->at == a->have)
				r = all_back(a, now, &last_back, &last_change);
			if (r < 0)
				return 1;
			quiet = r ? quiet + 1 : 0;
			if (quiet == 2)
				return 0;
		}
		if (!moved)
			nanosleep(&nap, NULL);
	}
}

/* ---- shutdown ---------------------------------------------------------- */

/*
 * Stop the receive kernel (it takes back its items and tells the analysis
 * kernel to exit), then the analysis kernel, then the proxy (which sends
 * what is left in the transmit ring). Returns 0 or -1 (message printed).
 */
static int stop(struct app *a)
{
	struct dpflow_gpu_kernel *ks[] = {a->k_rx, a->k_an};
	struct dpflow_error err;
	int ret = 0;

	for (unsigned i = 0; i < 2; i++) {
		int r;

		if (!ks[i])
			continue;
		r = dpflow_gpu_kernel_stop(ks[i], STOP_TIMEOUT_NS, &err);
		if (r < 0) {
			fprintf(stderr, "dpflow-gpu-ids: %s\n", err.msg);
			a->gpu_busy |= r == -ETIMEDOUT;
			ret = -1;
		}
	}
	if (a->px && dpflow_gpu_proxy_stop(a->px, &a->pst, &err) < 0) {
		fprintf(stderr, "dpflow-gpu-ids: proxy: %s\n", err.msg);
		ret = -1;
	}
	a->px = NULL;
	return ret;
}

/*
 * Give every packet still held here back to the pool and close the ports
 * (the ring port frees what it holds, OUT is flushed). Returns the slots
 * back in the pool.
 */
static uint32_t release_packets(struct app *a)
{
	if (a->alert_sent && !a->gpu_busy) {
		for (uint32_t i = 0; i < a->n_alert_slots; i++)
			if (!__atomic_load_n(&a->alert_sent[i],
					     __ATOMIC_ACQUIRE))
				dpflow_pool_free_bulk(a->pool,
						      &a->alert_slot[i], 1);
		a->n_alert_slots = 0;
	}
	if (a->at < a->have)
		dpflow_pool_free_bulk(a->pool, a->burst + a->at,
				      a->have - a->at);
	a->at = a->have = 0;
	dpflow_port_close(a->in);
	dpflow_port_close(a->wire);
	dpflow_port_close(a->out);
	a->in = a->wire = a->out = NULL;
	return a->pool ? dpflow_pool_avail(a->pool) : 0;
}

static void destroy(struct app *a)
{
	if (a->gpu_busy) {
		/* a kernel may still use all of it: leave it to the exit */
		return;
	}
	dpflow_gpu_kernel_destroy(a->k_rx);
	dpflow_gpu_kernel_destroy(a->k_an);
	dpflow_gpu_queue_destroy(a->q);
	dpflow_gpu_sem_destroy(a->sem);
	if (a->gpu) {
		dpflow_gpu_mem_free(a->gpu, a->ctr);
		dpflow_gpu_mem_free(a->gpu, a->rules_dev);
		dpflow_gpu_mem_free(a->gpu, a->flows_dev);
		dpflow_gpu_mem_free(a->gpu, a->alert_slot_dev);
		dpflow_gpu_mem_free(a->gpu, a->alert_sent);
		dpflow_gpu_mem_free(a->gpu, a->alert_next_dev);
		if (a->pool)
			dpflow_gpu_pool_unregister(a->gpu, a->pool);
	}
	free(a->alert_slot);
	dpflow_pool_destroy(a->pool);
	dpflow_gpu_close(a->gpu);
}

static void print_rules(const struct ids_rules *r)
{
	printf("rules:");
	for (uint32_t i = 0; i < r->n; i++) {
		printf(" %u \"", i);
		for (unsigned j = 0; j < r->len[i]; j++) {
			uint8_t c = r->bytes[i][j];

			if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
				putchar(c);
			else
				printf("\\x%02x", c);
		}
		putchar('"');
	}
	putchar('\n');
}

/*
 * The counters, and (after a full run) whether they add up: every packet
 * read came back once, as forwarded, dropped non-TCP or dropped flagged,
 * and the proxy saw exactly that plus the alerts. Returns 0 or -1.
 */
static int report(struct app *a, bool complete, uint32_t back)
{
	struct ids_counters rx, an;
	const struct dpflow_gpu_proxy_stats *s = &a->pst;
	double secs = (double)(a->t_end - a->t_start) / 1e9;
	int ret = 0;

	read_counters(a, &rx, &an);
	printf(
	    "counters: rx=%llu tcp=%llu non_tcp=%llu flagged=%llu "
	    "alerts=%llu alerts_lost=%llu forwarded=%llu "
	    "dropped_flagged=%llu batches=%llu error_items=%llu lost=%llu "
	    "stuck_items=%llu\n",
	    (unsigned long long)rx.rx, (unsigned long long)rx.tcp,
	    (unsigned long long)rx.non_tcp, (unsigned long long)an.flagged,
	    (unsigned long long)an.alerts, (unsigned long long)an.alerts_lost,
	    (unsigned long long)rx.forwarded,
	    (unsigned long long)rx.dropped_flagged,
	    (unsigned long long)rx.batches, (unsigned long long)rx.error_items,
	    (unsigned long long)rx.lost, (unsigned long long)rx.stuck_items);
	printf("proxy: rx=%llu tx=%llu dropped=%llu tx_errors=%llu "
	       "rx_ring_full=%llu\n",
	       (unsigned long long)s->rx_pkts, (unsigned long long)s->tx_pkts,
	       (unsigned long long)s->tx_dropped,
	       (unsigned long long)s->tx_errors,
	       (unsigned long long)s->rx_ring_full);
	printf("pool: %u of %u slots back\n", back, a->pool_slots);
	printf("time: %.3f s, %.0f packets/s\n", secs,
	       secs > 0 ? (double)rx.rx / secs : 0.0);
	if (an.alerts_lost || rx.error_items)
		printf("note: %llu flagged flows got no alert (raise "
		       "--max-alerts or --flows)\n",
		       (unsigned long long)an.alerts_lost);
	if (!complete)
		return 0;

	struct {
		const char *what;
		uint64_t got, want;
	} checks[] = {
	    {"packets received by the kernels", rx.rx, a->fed},
	    {"TCP + non-TCP", rx.tcp + rx.non_tcp, rx.rx},
	    {"packets analysed", an.analysed, rx.tcp},
	    {"TCP packets handed back", rx.forwarded + rx.dropped_flagged,
	     rx.tcp},
	    {"packets sent by the proxy", s->tx_pkts, rx.forwarded + an.alerts},
	    {"packets dropped by the proxy", s->tx_dropped,
	     rx.non_tcp + rx.dropped_flagged},
	    {"lost and stuck", rx.lost + rx.stuck_items + s->tx_errors, 0},
	    {"pool slots back", back, a->pool_slots},
	};
	for (unsigned i = 0; i < DPFLOW_ARRAY_SIZE(checks); i++) {
		if (checks[i].got == checks[i].want)
			continue;
		fprintf(stderr,
			"dpflow-gpu-ids: counters do not add up: %s: %llu, "
			"expected %llu\n",
			checks[i].what, (unsigned long long)checks[i].got,
			(unsigned long long)checks[i].want);
		ret = -1;
	}
	return ret;
}

int main(int argc, char **argv)
{
	static struct app app;
	struct app *a = &app;
	struct dpflow_error err;
	struct sigaction sa = {};
	int status, r;
	uint32_t back;

	r = parse_options(argc, argv, &a->o);
	if (r)
		return r > 0 ? 0 : 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* dpflow_gpu_count is the first CUDA call: it also sets the module
	   loading mode (see ids_kernels_load) */
	if (dpflow_gpu_count(&err) == 0) {
		printf("skipped: no GPU: %s\n", err.msg);
		return 77;
	}
	dpflow_clock_init();
	a->gpu = dpflow_gpu_open((int)a->o.device, &err);
	if (!a->gpu) {
		printf("skipped: %s\n", err.msg);
		return 77;
	}
	printf("dpflow-gpu-ids: %s -> %s on %s: %u receive + %u analysis "
	       "blocks of %d threads, %u items per block, batches of %u; "
	       "flagged packets %s\n",
	       a->o.in, a->o.out, dpflow_gpu_name(a->gpu), a->o.blocks,
	       a->o.blocks, IDS_THREADS, a->o.items, a->o.batch,
	       a->o.monitor ? "forwarded (monitor)" : "dropped");
	print_rules(&a->o.rules);

	sa.sa_handler = on_signal;
	sa.sa_flags = (int)SA_RESETHAND; /* a second signal kills */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (open_ports(a, &err) < 0 || setup_gpu(a, &err) < 0 ||
	    start(a, &err) < 0) {
		fprintf(stderr, "dpflow-gpu-ids: %s\n", err.msg);
		stop(a);
		release_packets(a);
		destroy(a);
		return 1;
	}
	a->t_start = dpflow_clock_ns();
	status = run(a);
	a->t_end = dpflow_clock_ns();
	if (stop(a) < 0)
		status = 1;
	back = release_packets(a);
	if (report(a, status == 0, back) < 0)
		status = 1;
	destroy(a);
	return status;
}
