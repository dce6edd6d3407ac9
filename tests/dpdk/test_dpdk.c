/*
 * Ports: the DPDK backend on virtual devices, with no hugepages and no NIC
 * (`--no-huge --no-pci`): net_ring (loopback, queues, a pair of ports),
 * net_pcap (files in and out, end of input), net_null (counts and sizes),
 * the EAL's arguments, and the URI errors.
 *
 * Criterion runs each test in a process of its own, so each one starts its
 * own EAL (one per process). Where the EAL cannot start on this machine
 * for a reason other than bad arguments (no permission, no memory), the
 * test is skipped, never passed.
 *
 * Built without DPDK, the program checks only that `dpdk:` URIs are
 * refused with a message saying so.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpflow/clock.h"
#include "dpflow/pool.h"
#include "dpflow/port.h"

#ifdef DPFLOW_HAVE_DPDK
#include <rte_eth_ring.h>
#include <rte_ring.h>
#endif

/* ---- fixtures ---- */

static char tmpdir[64];

static void dir_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dpflow-test-dpdk-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
	dpflow_clock_init();
}

static void dir_teardown(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char p[512];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", tmpdir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(tmpdir);
}

TestSuite(dpdk, .init = dir_setup, .fini = dir_teardown);

static struct dpflow_pool *pool_new(uint32_t n_slots, uint16_t data_room)
{
	struct dpflow_pool_params pp = {
	    .name = "test",
	    .n_slots = n_slots,
	    .data_room = data_room,
	};
	struct dpflow_error err;
	struct dpflow_pool *pool = dpflow_pool_create(&pp, &err);

	cr_assert_not_null(pool, "pool: %s", err.msg);
	return pool;
}

#ifndef DPFLOW_HAVE_DPDK

Test(dpdk, refused_without_dpdk)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_error err;

	cr_assert_null(dpflow_port_open(pool, "dpdk:net_null0", &err));
	cr_assert_str_eq(err.field, "kind");
	cr_assert_eq(err.code, ENOTSUP);
	cr_assert_not_null(strstr(err.msg, "built without DPDK (libdpdk-dev)"),
			   "message: %s", err.msg);
	dpflow_pool_destroy(pool);
}

#else

/* Skip when the EAL cannot start here for want of something (not bad
 * arguments: those are our bug). */
static void skip_if_no_eal(const struct dpflow_error *err)
{
	if (err->field && !strcmp(err->field, "eal") && err->code != EINVAL)
		cr_skip_test("the EAL cannot start on this machine: %s",
			     err->msg);
}

static struct dpflow_port *dpdk_open(struct dpflow_pool *pool, const char *uri)
{
	struct dpflow_error err;
	struct dpflow_port *port = dpflow_port_open(pool, uri, &err);

	if (!port)
		skip_if_no_eal(&err);
	cr_assert_not_null(port, "open '%s': %s (field %s, code %d)", uri,
			   err.msg, err.field ? err.field : "-", err.code);
	cr_assert_str_eq(dpflow_port_kind(port), "dpdk");
	return port;
}

static struct dpflow_port *pcap_open(struct dpflow_pool *pool, const char *uri)
{
	struct dpflow_error err;
	struct dpflow_port *port = dpflow_port_open(pool, uri, &err);

	cr_assert_not_null(port, "open '%s': %s", uri, err.msg);
	return port;
}

static struct dpflow_port_stats stats_of(const struct dpflow_port *port)
{
	struct dpflow_port_stats s;

	cr_assert_eq(dpflow_port_stats_get(port, &s), 0);
	return s;
}

/* Byte j of test frame i: distinct per frame and per position. */
static uint8_t pattern(unsigned i, unsigned j)
{
	return (uint8_t)(i * 31u + j * 7u + 1u);
}

/* Length of test frame i: 60 to 1514 bytes, varied. */
static uint16_t frame_len(unsigned i)
{
	return (uint16_t)(60 + (i * 97u) % 1455);
}

/* Allocate @n frames of @pool, frame i = (first + i) of the pattern. */
static void frames_make(struct dpflow_pool *pool, uint32_t *idx, unsigned n,
			unsigned first, uint64_t *bytes)
{
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, n), 0);
	for (unsigned i = 0; i < n; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);
		uint8_t *d = dpflow_pkt_data(pool, idx[i]);

		m->data_len = frame_len(first + i);
		for (unsigned j = 0; j < m->data_len; j++)
			d[j] = pattern(first + i, j);
		if (bytes)
			*bytes += m->data_len;
	}
}

static void frame_check(struct dpflow_pool *pool, uint32_t idx, unsigned i)
{
	const struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx);
	const uint8_t *d = dpflow_pkt_data(pool, idx);

	cr_assert_eq(m->data_len, frame_len(i), "frame %u: length %u, want %u",
		     i, m->data_len, frame_len(i));
	for (unsigned j = 0; j < m->data_len; j++)
		cr_assert_eq(d[j], pattern(i, j), "frame %u byte %u", i, j);
}

/* Transmit all @n packets (retrying what the device does not take yet). */
static void tx_all(struct dpflow_port *port, uint16_t queue,
		   struct dpflow_pool *pool, const uint32_t *idx, unsigned n)
{
	unsigned done = 0;

	for (unsigned tries = 0; done < n && tries < 100000; tries++) {
		uint16_t burst = (uint16_t)(n - done > 32 ? 32 : n - done);

		done +=
		    dpflow_port_tx_burst(port, queue, pool, idx + done, burst);
	}
	cr_assert_eq(done, n, "transmitted %u of %u", done, n);
}

/* Receive up to @n packets from @queue, polling a bounded number of times. */
static unsigned rx_some(struct dpflow_port *port, uint16_t queue, uint32_t *idx,
			unsigned n)
{
	unsigned got = 0;

	for (unsigned polls = 0; got < n && polls < 10000; polls++) {
		uint16_t burst = (uint16_t)(n - got > 32 ? 32 : n - got);
		uint16_t k =
		    dpflow_port_rx_burst(port, queue, idx + got, burst);

		got += k;
		if (!k)
			usleep(10);
	}
	return got;
}

/* ---- net_ring ---- */

#define RING_N 200

Test(dpdk, ring_loopback_bytes_and_counters)
{
	struct dpflow_pool *pool = pool_new(1024, 0);
	struct dpflow_port *port = dpdk_open(pool, "dpdk:net_ring0");
	uint32_t sent[RING_N], got[RING_N + 1];
	uint64_t bytes = 0, before = dpflow_clock_realtime_ns();
	struct dpflow_port_stats s;

	cr_assert_eq(dpflow_port_rx_queues(port), 1);
	cr_assert_eq(dpflow_port_tx_queues(port), 1);
	cr_assert_eq(dpflow_port_link_type(port), 1);
	cr_assert_eq(dpflow_port_rx_done(port), false, "a ring never ends");
	frames_make(pool, sent, RING_N, 0, &bytes);
	tx_all(port, 0, pool, sent, RING_N);
	cr_assert_eq(dpflow_pool_avail(pool), 1024, "sent packets are freed");
	cr_assert_eq(rx_some(port, 0, got, RING_N), RING_N);
	for (unsigned i = 0; i < RING_N; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, got[i]);

		frame_check(pool, got[i], i);
		cr_assert_eq(m->port, dpflow_port_id(port));
		cr_assert_eq(m->queue, 0);
		cr_assert_eq(m->data_off, pool->headroom);
		cr_assert_geq(m->rx_ts_ns, before);
	}
	cr_assert_eq(rx_some(port, 0, got + RING_N, 1), 0, "nothing more");
	s = stats_of(port);
	cr_assert_eq(s.tx_pkts, RING_N);
	cr_assert_eq(s.tx_bytes, bytes);
	cr_assert_eq(s.rx_pkts, RING_N);
	cr_assert_eq(s.rx_bytes, bytes);
	cr_assert_eq(s.tx_errors + s.rx_errors + s.rx_dropped + s.rx_oversize,
		     0);
	dpflow_pool_free_bulk(pool, got, RING_N);
	cr_assert_eq(dpflow_pool_avail(pool), 1024);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_port_close(port);
	dpflow_pool_destroy(pool);
}

Test(dpdk, ring_queues_stay_apart)
{
	struct dpflow_pool *pool = pool_new(1024, 0);
	struct dpflow_port *port = dpdk_open(pool, "dpdk:net_ring0,queues=4");
	uint32_t idx[16], got[17];

	cr_assert_eq(dpflow_port_rx_queues(port), 4);
	cr_assert_eq(dpflow_port_tx_queues(port), 4);
	for (uint16_t q = 0; q < 4; q++) {
		frames_make(pool, idx, 4, q * 4u, NULL);
		tx_all(port, q, pool, idx, 4);
	}
	for (uint16_t q = 0; q < 4; q++) {
		unsigned n = rx_some(port, q, got, 17);

		cr_assert_eq(n, 4, "queue %u: %u packets", q, n);
		for (unsigned i = 0; i < 4; i++) {
			frame_check(pool, got[i], q * 4u + i);
			cr_assert_eq(dpflow_pool_meta(pool, got[i])->queue, q);
		}
		dpflow_pool_free_bulk(pool, got, 4);
	}
	cr_assert_eq(stats_of(port).rx_pkts, 16);
	dpflow_port_close(port);
	cr_assert_eq(dpflow_pool_avail(pool), 1024);
	dpflow_pool_destroy(pool);
}

/* Two ethdevs on two rings made here (rte_eth_from_rings): what one sends
 * the other receives. */
Test(dpdk, ring_pair_both_ways)
{
	struct dpflow_pool *pool = pool_new(1024, 0);
	struct dpflow_port *first = dpdk_open(pool, "dpdk:net_ring0");
	struct rte_ring *r1 = rte_ring_create("test_r1", 1024, SOCKET_ID_ANY,
					      RING_F_SP_ENQ | RING_F_SC_DEQ);
	struct rte_ring *r2 = rte_ring_create("test_r2", 1024, SOCKET_ID_ANY,
					      RING_F_SP_ENQ | RING_F_SC_DEQ);
	struct dpflow_port *a, *b;
	uint32_t idx[RING_N], got[RING_N];
	uint64_t bytes = 0;

	cr_assert(r1 && r2);
	cr_assert_geq(rte_eth_from_rings("test_pa", &r1, 1, &r2, 1, 0), 0);
	cr_assert_geq(rte_eth_from_rings("test_pb", &r2, 1, &r1, 1, 0), 0);
	/* rte_eth_from_rings names its ports net_ring_NAME */
	a = dpdk_open(pool, "dpdk:net_ring_test_pa");
	b = dpdk_open(pool, "dpdk:net_ring_test_pb");
	cr_assert_neq(dpflow_port_id(a), dpflow_port_id(b));
	frames_make(pool, idx, RING_N, 0, &bytes);
	tx_all(a, 0, pool, idx, RING_N);
	cr_assert_eq(rx_some(a, 0, got, 1), 0, "a does not hear itself");
	cr_assert_eq(rx_some(b, 0, got, RING_N), RING_N);
	for (unsigned i = 0; i < RING_N; i++) {
		frame_check(pool, got[i], i);
		cr_assert_eq(dpflow_pool_meta(pool, got[i])->port,
			     dpflow_port_id(b));
	}
	/* and back */
	tx_all(b, 0, pool, got, RING_N);
	cr_assert_eq(rx_some(a, 0, idx, RING_N), RING_N);
	for (unsigned i = 0; i < RING_N; i++)
		frame_check(pool, idx[i], i);
	cr_assert_eq(stats_of(a).tx_bytes, bytes);
	cr_assert_eq(stats_of(a).rx_bytes, bytes);
	cr_assert_eq(stats_of(b).tx_bytes, bytes);
	cr_assert_eq(stats_of(b).rx_bytes, bytes);
	dpflow_pool_free_bulk(pool, idx, RING_N);
	dpflow_port_close(b);
	dpflow_port_close(a);
	dpflow_port_close(first);
	cr_assert_eq(dpflow_pool_avail(pool), 1024);
	dpflow_pool_destroy(pool);
}

/* net_ring's nodeaction names the ethdev after the ring, not the vdev: the
 * port is found through its device. (net_ring keeps the rings it created
 * after close, so such a device cannot be probed again in the process.) */
Test(dpdk, ring_port_found_through_device)
{
	struct dpflow_pool *pool = pool_new(64, 0);
	struct dpflow_port *port =
	    dpdk_open(pool, "dpdk:net_ring1;nodeaction=rn:0:CREATE");

	cr_assert_eq(dpflow_port_rx_queues(port), 1);
	dpflow_port_close(port);
	dpflow_pool_destroy(pool);
}

Test(dpdk, reopen_after_close)
{
	struct dpflow_pool *pool = pool_new(64, 0);
	struct dpflow_error err;

	for (int round = 0; round < 3; round++) {
		struct dpflow_port *port = dpdk_open(pool, "dpdk:net_ring3");
		struct dpflow_port *again =
		    dpflow_port_open(pool, "dpdk:net_ring3", &err);
		uint32_t idx[1], got[1];

		cr_assert_null(again, "one device, one port");
		cr_assert_str_eq(err.field, "device");
		cr_assert_eq(err.code, EBUSY, "%s", err.msg);
		frames_make(pool, idx, 1, (unsigned)round, NULL);
		tx_all(port, 0, pool, idx, 1);
		cr_assert_eq(rx_some(port, 0, got, 1), 1);
		frame_check(pool, got[0], (unsigned)round);
		dpflow_pool_free_bulk(pool, got, 1);
		cr_assert_eq(stats_of(port).rx_pkts, 1, "fresh counters");
		dpflow_port_close(port);
	}
	dpflow_pool_destroy(pool);
}

/* ---- net_pcap ---- */

#define PCAP_N 24

Test(dpdk, pcap_file_in_file_out)
{
	char in[128], out[128], uri[512];
	struct dpflow_pool *wpool = pool_new(64, 4096);
	struct dpflow_pool *pool = pool_new(256, 0);
	struct dpflow_port *w, *port, *r;
	uint32_t idx[PCAP_N + 5], got[PCAP_N + 5];
	uint64_t bytes = 0;
	unsigned n = 0;

	/* the input, written by dpflow's pcap port: PCAP_N frames and one of
	 * 3000 bytes (above the receive pool's data room) in the middle */
	snprintf(in, sizeof(in), "%s/in.pcap", tmpdir);
	snprintf(out, sizeof(out), "%s/out.pcap", tmpdir);
	snprintf(uri, sizeof(uri), "pcap:tx=%s", in);
	w = pcap_open(NULL, uri);
	frames_make(wpool, idx, PCAP_N / 2, 0, &bytes);
	tx_all(w, 0, wpool, idx, PCAP_N / 2);
	cr_assert_eq(dpflow_pool_alloc_bulk(wpool, idx, 1), 0);
	dpflow_pool_meta(wpool, idx[0])->data_len = 3000;
	memset(dpflow_pkt_data(wpool, idx[0]), 0xab, 3000);
	tx_all(w, 0, wpool, idx, 1);
	frames_make(wpool, idx, PCAP_N / 2, PCAP_N / 2, &bytes);
	tx_all(w, 0, wpool, idx, PCAP_N / 2);
	dpflow_port_close(w);

	snprintf(uri, sizeof(uri), "dpdk:net_pcap0;rx_pcap=%s;tx_pcap=%s", in,
		 out);
	port = dpdk_open(pool, uri);
	for (unsigned polls = 0; polls < 10000 && !dpflow_port_rx_done(port);
	     polls++) {
		cr_assert_leq(n, PCAP_N);
		n += dpflow_port_rx_burst(port, 0, got + n, 5);
	}
	cr_assert(dpflow_port_rx_done(port), "the end of the file is seen");
	cr_assert_eq(n, PCAP_N, "%u frames read", n);
	for (unsigned i = 0; i < PCAP_N; i++)
		frame_check(pool, got[i], i);
	cr_assert_eq(stats_of(port).rx_pkts, PCAP_N);
	cr_assert_eq(stats_of(port).rx_bytes, bytes);
	cr_assert_eq(stats_of(port).rx_oversize + stats_of(port).rx_errors, 1,
		     "the 3000-byte frame is dropped and counted");
	cr_assert_eq(dpflow_port_rx_burst(port, 0, got + n, 5), 0);
	/* what goes out lands in the output file */
	tx_all(port, 0, pool, got, PCAP_N);
	cr_assert_eq(stats_of(port).tx_pkts, PCAP_N);
	cr_assert_eq(stats_of(port).tx_bytes, bytes);
	dpflow_port_close(port);
	cr_assert_eq(dpflow_pool_avail(pool), 256);

	snprintf(uri, sizeof(uri), "pcap:rx=%s", out);
	r = pcap_open(pool, uri);
	n = 0;
	for (unsigned polls = 0; polls < 1000 && !dpflow_port_rx_done(r);
	     polls++)
		n += dpflow_port_rx_burst(r, 0, got + n,
					  (uint16_t)(PCAP_N + 1 - n));
	cr_assert_eq(n, PCAP_N, "%u frames in the output", n);
	for (unsigned i = 0; i < PCAP_N; i++)
		frame_check(pool, got[i], i);
	dpflow_pool_free_bulk(pool, got, n);
	dpflow_port_close(r);
	dpflow_pool_destroy(pool);
	dpflow_pool_destroy(wpool);
}

Test(dpdk, pcap_without_input_is_done)
{
	char uri[256];
	struct dpflow_pool *pool = pool_new(64, 0);
	struct dpflow_port *port;

	snprintf(uri, sizeof(uri), "dpdk:net_pcap1;tx_pcap=%s/o.pcap", tmpdir);
	port = dpdk_open(pool, uri);
	cr_assert(dpflow_port_rx_done(port), "no rx_pcap: no input");
	dpflow_port_close(port);
	dpflow_pool_destroy(pool);
}

/* ---- net_null ---- */

Test(dpdk, null_counts_and_sizes)
{
	struct dpflow_pool *pool = pool_new(256, 0);
	struct dpflow_pool *big = pool_new(8, 4096);
	struct dpflow_port *port = dpdk_open(pool, "dpdk:net_null0;size=128");
	uint32_t idx[32];
	uint64_t bytes = 0;
	struct dpflow_port_stats s;

	for (unsigned i = 0; i < 10000 / 32; i++) {
		frames_make(pool, idx, 32, i, &bytes);
		cr_assert_eq(dpflow_port_tx_burst(port, 0, pool, idx, 32), 32,
			     "net_null takes every packet");
	}
	cr_assert_eq(dpflow_pool_avail(pool), 256);
	s = stats_of(port);
	cr_assert_eq(s.tx_pkts, 10000 / 32 * 32);
	cr_assert_eq(s.tx_bytes, bytes);
	cr_assert_eq(s.tx_errors, 0);

	/* a packet no mbuf of this port can hold: dropped, counted */
	cr_assert_eq(dpflow_pool_alloc_bulk(big, idx, 1), 0);
	dpflow_pool_meta(big, idx[0])->data_len = 3000;
	cr_assert_eq(dpflow_port_tx_burst(port, 0, big, idx, 1), 1);
	cr_assert_eq(stats_of(port).tx_errors, 1);
	cr_assert_eq(stats_of(port).tx_pkts, s.tx_pkts);
	cr_assert_eq(dpflow_pool_avail(big), 8);

	for (int round = 0; round < 3; round++) {
		cr_assert_eq(dpflow_port_rx_burst(port, 0, idx, 32), 32);
		for (unsigned i = 0; i < 32; i++)
			cr_assert_eq(dpflow_pool_meta(pool, idx[i])->data_len,
				     128);
		dpflow_pool_free_bulk(pool, idx, 32);
	}
	s = stats_of(port);
	cr_assert_eq(s.rx_pkts, 96);
	cr_assert_eq(s.rx_bytes, 96 * 128);
	cr_assert_eq(dpflow_port_rx_done(port), false);
	dpflow_port_close(port);
	dpflow_pool_destroy(big);
	dpflow_pool_destroy(pool);
}

Test(dpdk, null_pool_short_keeps_packets_in_device)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_port *port = dpdk_open(pool, "dpdk:net_null0");
	uint32_t idx[32];

	cr_assert_eq(dpflow_port_rx_burst(port, 0, idx, 32), 8);
	cr_assert_eq(stats_of(port).rx_nobuf, 1, "a call cut short");
	cr_assert_eq(dpflow_port_rx_burst(port, 0, idx + 8, 32), 0);
	cr_assert_eq(stats_of(port).rx_nobuf, 2);
	dpflow_pool_free_bulk(pool, idx, 8);
	cr_assert_eq(stats_of(port).rx_pkts, 8);
	dpflow_port_close(port);
	dpflow_pool_destroy(pool);
}

/* ---- the EAL ---- */

#define EAL_TEST_ARGS                                           \
	"--no-huge -m 256 --no-pci --no-shconf --no-telemetry " \
	"--log-level=error"

Test(dpdk, eal_args_given_and_vdev_from_eal)
{
	struct dpflow_pool *pool = pool_new(64, 0);
	/* ';' in eal stands for ',': --vdev=net_null7,size=96 */
	struct dpflow_port *a =
	    dpdk_open(pool, "dpdk:net_null7,eal=" EAL_TEST_ARGS
			    " --vdev=net_null7;size=96");
	struct dpflow_port *b =
	    dpdk_open(pool, "dpdk:net_ring0,eal=" EAL_TEST_ARGS
			    " --vdev=net_null7;size=96");
	struct dpflow_port *c = dpdk_open(pool, "dpdk:net_null8");
	uint32_t idx[4];

	cr_assert_eq(dpflow_port_rx_burst(a, 0, idx, 4), 4);
	for (unsigned i = 0; i < 4; i++)
		cr_assert_eq(dpflow_pool_meta(pool, idx[i])->data_len, 96,
			     "the EAL's --vdev arguments hold");
	dpflow_pool_free_bulk(pool, idx, 4);
	dpflow_port_close(c);
	dpflow_port_close(b);
	dpflow_port_close(a);
	dpflow_pool_destroy(pool);
}

Test(dpdk, eal_bad_args_fail_and_stay_failed)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_error err;

	cr_assert_null(dpflow_port_open(
	    pool, "dpdk:net_null0,eal=--no-such-eal-option", &err));
	cr_assert_str_eq(err.field, "eal");
	cr_assert_eq(err.code, EINVAL, "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "EAL initialisation failed"), "%s",
			   err.msg);
	cr_assert_null(dpflow_port_open(pool, "dpdk:net_null0", &err));
	cr_assert_str_eq(err.field, "eal");
	cr_assert_not_null(strstr(err.msg, "failed to start earlier"), "%s",
			   err.msg);
	dpflow_pool_destroy(pool);
}

/* ---- URI errors ---- */

/* Strings held in the case (Criterion copies the cases to each test). */
struct dpdk_uri_case {
	char first[64]; /* opened first, when set (starts the EAL) */
	char uri[96];
	char field[16];
	int code;
	char in_msg[48]; /* a substring of the message */
};

static struct dpdk_uri_case uri_cases[] = {
    {"", "dpdk:", "device", EINVAL, "a device is needed"},
    {"", "dpdk", "device", EINVAL, "a device is needed"},
    {"", "dpdk:queues=2", "device", EINVAL, "a device is needed"},
    {"", "dpdk:net_null0,foo=1", "key", EINVAL, "'foo' (value '1')"},
    {"", "dpdk:net_null0,bar", "key", EINVAL, "'bar'"},
    {"", "dpdk:net_null0,queues=0", "queues", EINVAL, "queues=0: a number"},
    {"", "dpdk:net_null0,queues=65", "queues", EINVAL, "queues=65"},
    {"", "dpdk:net_null0,queues=x", "queues", EINVAL, "queues=x"},
    {"", "dpdk:net_null0,queues=2,queues=3", "queues", EINVAL, "twice"},
    {"", "dpdk:net_null0,rxd=abc", "rxd", EINVAL, "rxd=abc"},
    {"", "dpdk:net_null0,rxd=0", "rxd", EINVAL, "rxd=0"},
    {"", "dpdk:net_null0,txd=40000", "txd", EINVAL, "txd=40000"},
    {"", "dpdk:net_null0,mbufs=-1", "mbufs", EINVAL, "mbufs=-1"},
    {"", "dpdk:net_null0,mbufs=100", "mbufs", EINVAL, "mbufs=100"},
    {"", "dpdk:net_null0,txtime=2", "txtime", EINVAL, "txtime=2"},
    {"", "dpdk:net_null0,txtime=", "txtime", EINVAL, "missing value"},
    {"", "dpdk:net_null0,eal=", "eal", EINVAL, "missing value"},
    {"", "dpdk:net_null0,eal", "eal", EINVAL, "missing value"},
    {"", "dpdk:net_null0,eal=a,eal=b", "eal", EINVAL, "twice"},
    {"", "dpdk:net_nosuch0", "device", 0, "cannot probe device 'net_nosuch0'"},
    {"dpdk:net_null1", "dpdk:0000:99:00.0", "device", 0,
     "cannot probe device '0000:99:00.0'"},
    {"dpdk:net_null1", "dpdk:net_null1", "device", EBUSY, "already open"},
    {"dpdk:net_null1", "dpdk:net_null2,eal=--no-huge -m 64", "eal", EINVAL,
     "the EAL already runs with"},
    {"", "dpdk:net_ring4,queues=17", "queues", EINVAL, "has 16 receive"},
    {"", "dpdk:net_ring5,txtime=1", "txtime", ENOTSUP,
     "lacks the send-on-timestamp"},
};

ParameterizedTestParameters(dpdk, uri_rejected)
{
	return cr_make_param_array(struct dpdk_uri_case, uri_cases,
				   DPFLOW_ARRAY_SIZE(uri_cases));
}

ParameterizedTest(struct dpdk_uri_case *c, dpdk, uri_rejected)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_port *first = NULL, *port;
	struct dpflow_error err;

	if (c->first[0])
		first = dpdk_open(pool, c->first);
	port = dpflow_port_open(pool, c->uri, &err);
	cr_assert_null(port, "'%s' accepted", c->uri);
	skip_if_no_eal(&err);
	cr_assert_not_null(err.field, "'%s': no field", c->uri);
	cr_assert_str_eq(err.field, c->field, "'%s': field %s, want %s (%s)",
			 c->uri, err.field, c->field, err.msg);
	if (c->code)
		cr_assert_eq(err.code, c->code, "'%s': code %d, want %d (%s)",
			     c->uri, err.code, c->code, err.msg);
	else
		cr_assert_gt(err.code, 0, "'%s': no code (%s)", c->uri,
			     err.msg);
	cr_assert_not_null(strstr(err.msg, c->in_msg),
			   "'%s': message '%s' lacks '%s'", c->uri, err.msg,
			   c->in_msg);
	dpflow_port_close(first);
	dpflow_pool_destroy(pool);
}

#endif /* DPFLOW_HAVE_DPDK */
