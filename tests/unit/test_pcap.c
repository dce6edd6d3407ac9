/*
 * Ports: the pcap backend (round trip, pcapng, every link type, pool
 * exhaustion, oversize and truncated frames), the ring backend, and the
 * generic layer's URI errors and ids.
 *
 * Every capture is written by the test itself into a fresh temporary
 * directory, byte by byte, so each case states exactly what is on disk.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include "dpflow/clock.h"
#include "dpflow/log.h"
#include "dpflow/pool.h"
#include "dpflow/port.h"
#include "dpflow/ring.h"

/* ---- fixtures ---- */

static char tmpdir[64];

static void dir_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dpflow-test-pcap-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
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

TestSuite(pcap, .init = dir_setup, .fini = dir_teardown);
TestSuite(pcapng, .init = dir_setup, .fini = dir_teardown);
TestSuite(link, .init = dir_setup, .fini = dir_teardown);
TestSuite(uri, .init = dir_setup, .fini = dir_teardown);
TestSuite(ring);

/* A path in the test's directory (one of a few static buffers). */
static const char *tpath(const char *name)
{
	static char buf[4][256];
	static unsigned next;
	char *p = buf[next++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	return p;
}

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

static struct dpflow_port *port_open_ok(struct dpflow_pool *pool,
					const char *uri)
{
	struct dpflow_error err;
	struct dpflow_port *port = dpflow_port_open(pool, uri, &err);

	cr_assert_not_null(port, "open '%s': %s (field %s)", uri, err.msg,
			   err.field ? err.field : "-");
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

/* ---- a pcap writer, by hand ---- */

struct rec {
	uint64_t ts_ns;
	const uint8_t *data;
	uint32_t caplen;
	uint32_t len; /* wire length; 0: caplen */
};

/* Nanosecond pcap, host byte order, as libpcap itself writes it. */
static void write_pcap(const char *path, uint32_t linktype, const struct rec *r,
		       unsigned n)
{
	FILE *f = fopen(path, "wb");
	uint32_t gh[6] = {0xa1b23c4d, 0x00040002, 0, 0, 262144, linktype};

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(gh, sizeof(gh), 1, f), 1);
	for (unsigned i = 0; i < n; i++) {
		uint32_t rh[4] = {
		    (uint32_t)(r[i].ts_ns / 1000000000u),
		    (uint32_t)(r[i].ts_ns % 1000000000u),
		    r[i].caplen,
		    r[i].len ? r[i].len : r[i].caplen,
		};
		cr_assert_eq(fwrite(rh, sizeof(rh), 1, f), 1);
		if (r[i].caplen)
			cr_assert_eq(fwrite(r[i].data, r[i].caplen, 1, f), 1);
	}
	cr_assert_eq(fclose(f), 0);
}

/* Ethernet frames 0..n-1 of lengths len[i], filled with pattern(i, .). */
static void write_eth_frames(const char *path, const uint32_t *len, unsigned n,
			     uint64_t ts0)
{
	static uint8_t data[16][4096];
	struct rec r[16];

	cr_assert_leq(n, 16);
	for (unsigned i = 0; i < n; i++) {
		cr_assert_leq(len[i], sizeof(data[i]));
		for (unsigned j = 0; j < len[i]; j++)
			data[i][j] = pattern(i, j);
		r[i] = (struct rec){ts0 + i, data[i], len[i], 0};
	}
	write_pcap(path, 1, r, n);
}

static void check_frame(struct dpflow_pool *pool, uint32_t idx, unsigned i,
			uint32_t len)
{
	const uint8_t *d = dpflow_pkt_data(pool, idx);

	cr_assert_eq(dpflow_pool_meta(pool, idx)->data_len, len,
		     "frame %u: length %u, want %u", i,
		     dpflow_pool_meta(pool, idx)->data_len, len);
	for (unsigned j = 0; j < len; j++)
		cr_assert_eq(d[j], pattern(i, j), "frame %u byte %u", i, j);
}

/* ---- pcap round trip ---- */

#define RT_N	12
#define TS_BASE UINT64_C(1700000000123456789)

Test(pcap, round_trip_bytes_lengths_timestamps)
{
	static const uint16_t lens[RT_N] = {60,	 14, 1514, 61, 128, 2048,
					    999, 64, 65,   1,  300, 1500};
	struct dpflow_pool *pool = pool_new(64, 0);
	const char *file = tpath("rt.pcap");
	char uri[300];
	uint32_t idx[RT_N], got[DPFLOW_BURST_MAX];
	uint64_t want_ts[RT_N], before, after, bytes = 0;
	struct dpflow_port *tx, *rx;
	struct dpflow_port_stats s;
	unsigned n = 0;

	snprintf(uri, sizeof(uri), "pcap:tx=%s", file);
	tx = port_open_ok(NULL, uri);
	cr_assert_str_eq(dpflow_port_kind(tx), "pcap");
	cr_assert_str_eq(dpflow_port_name(tx), uri);
	cr_assert_eq(dpflow_port_rx_done(tx), true, "no input: done");
	cr_assert_eq(dpflow_port_link_type(tx), -1);

	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, RT_N), 0);
	for (unsigned i = 0; i < RT_N; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);
		uint8_t *d = dpflow_pkt_data(pool, idx[i]);
		for (unsigned j = 0; j < lens[i]; j++)
			d[j] = pattern(i, j);
		m->data_len = lens[i];
		bytes += lens[i];
		/* tx_time_ns wins over rx_ts_ns; rx_ts_ns is the fallback. */
		/* Every third has neither stamp: it gets the time of the
		 * write (want_ts 0). */
		want_ts[i] = i % 3 == 2 ? 0 : TS_BASE + i * 1000003u;
		if (i % 3 == 0) {
			m->tx_time_ns = want_ts[i];
			m->rx_ts_ns = 42;
		} else if (i % 3 == 1) {
			m->rx_ts_ns = want_ts[i];
		}
	}
	before = dpflow_clock_realtime_ns();
	cr_assert_eq(dpflow_port_tx_burst(tx, 0, pool, idx, 5), 5);
	cr_assert_eq(dpflow_port_tx_burst(tx, 0, pool, idx + 5, RT_N - 5),
		     RT_N - 5);
	after = dpflow_clock_realtime_ns();
	cr_assert_eq(dpflow_pool_avail(pool), 64, "tx frees the slots");
	s = stats_of(tx);
	cr_assert_eq(s.tx_pkts, RT_N);
	cr_assert_eq(s.tx_bytes, bytes);
	cr_assert_eq(s.tx_errors, 0);
	dpflow_port_close(tx);

	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_link_type(rx), 1);
	cr_assert_eq(dpflow_port_rx_done(rx), false);
	while (!dpflow_port_rx_done(rx)) {
		/* Odd burst size: bursts do not line up with the file. */
		uint16_t k = dpflow_port_rx_burst(rx, 0, got, 5);
		for (uint16_t j = 0; j < k; j++, n++) {
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, got[j]);
			cr_assert_lt(n, RT_N);
			check_frame(pool, got[j], n, lens[n]);
			cr_assert_eq(m->data_off, pool->headroom);
			cr_assert_eq(m->port, dpflow_port_id(rx));
			cr_assert_eq(m->queue, 0);
			if (!want_ts[n]) {
				/* Stamped at the write: within the window. */
				cr_assert_geq(m->rx_ts_ns, before);
				cr_assert_leq(m->rx_ts_ns, after);
			} else {
				cr_assert_eq(m->rx_ts_ns, want_ts[n],
					     "frame %u ts %llu want %llu", n,
					     (unsigned long long)m->rx_ts_ns,
					     (unsigned long long)want_ts[n]);
			}
		}
		dpflow_pool_free_bulk(pool, got, k);
	}
	cr_assert_eq(n, RT_N);
	s = stats_of(rx);
	cr_assert_eq(s.rx_pkts, RT_N);
	cr_assert_eq(s.rx_bytes, bytes);
	cr_assert_eq(s.rx_nobuf + s.rx_oversize + s.rx_skipped, 0);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 5), 0, "after the end");
	dpflow_port_close(rx);
	cr_assert_eq(dpflow_pool_avail(pool), 64);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_destroy(pool);
}

Test(pcap, bare_file_means_rx)
{
	static const uint32_t lens[3] = {60, 70, 80};
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("bare.pcap");
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;

	write_eth_frames(file, lens, 3, TS_BASE);
	snprintf(uri, sizeof(uri), "pcap:%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 3);
	for (unsigned i = 0; i < 3; i++) {
		check_frame(pool, got[i], i, lens[i]);
		cr_assert_eq(dpflow_pool_meta(pool, got[i])->rx_ts_ns,
			     TS_BASE + i);
	}
	cr_assert(dpflow_port_rx_done(rx));
	dpflow_pool_free_bulk(pool, got, 3);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcap, rx_and_tx_on_one_port)
{
	static const uint32_t lens[2] = {100, 200};
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *in = tpath("in.pcap"), *out = tpath("out.pcap");
	char uri[600];
	uint32_t got[8];
	struct dpflow_port *p;

	write_eth_frames(in, lens, 2, TS_BASE);
	snprintf(uri, sizeof(uri), "pcap:rx=%s,tx=%s", in, out);
	p = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_rx_burst(p, 0, got, 8), 2);
	/* Forwarded as received: the rx stamps are written out. */
	cr_assert_eq(dpflow_port_tx_burst(p, 0, pool, got, 2), 2);
	dpflow_port_close(p);

	snprintf(uri, sizeof(uri), "pcap:%s", out);
	p = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_rx_burst(p, 0, got, 8), 2);
	for (unsigned i = 0; i < 2; i++) {
		check_frame(pool, got[i], i, lens[i]);
		cr_assert_eq(dpflow_pool_meta(pool, got[i])->rx_ts_ns,
			     TS_BASE + i);
	}
	dpflow_pool_free_bulk(pool, got, 2);
	dpflow_port_close(p);
	dpflow_pool_destroy(pool);
}

Test(pcap, pool_exhaustion_loses_nothing)
{
	uint32_t lens[10];
	struct dpflow_pool *pool = pool_new(4, 0);
	const char *file = tpath("ten.pcap");
	char uri[300];
	uint32_t got[32];
	struct dpflow_port *rx;
	struct dpflow_port_stats s;
	uint16_t k;

	for (unsigned i = 0; i < 10; i++)
		lens[i] = 60 + i;
	write_eth_frames(file, lens, 10, TS_BASE);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);

	k = dpflow_port_rx_burst(rx, 0, got, 32);
	cr_assert_eq(k, 4, "the pool holds 4");
	for (unsigned i = 0; i < 4; i++)
		check_frame(pool, got[i], i, lens[i]);
	s = stats_of(rx);
	cr_assert_eq(s.rx_nobuf, 1);
	cr_assert_eq(s.rx_pkts, 4);

	/* Nothing free: nothing received, the stall counted again. */
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got + 4, 32), 0);
	cr_assert_eq(stats_of(rx).rx_nobuf, 2);
	cr_assert_eq(dpflow_port_rx_done(rx), false);

	dpflow_pool_free_bulk(pool, got, 4);
	k = dpflow_port_rx_burst(rx, 0, got, 32);
	cr_assert_eq(k, 4);
	for (unsigned i = 0; i < 4; i++)
		check_frame(pool, got[i], 4 + i, lens[4 + i]);
	dpflow_pool_free_bulk(pool, got, 4);

	k = dpflow_port_rx_burst(rx, 0, got, 32);
	cr_assert_eq(k, 2, "the last two, the pool no longer short");
	for (unsigned i = 0; i < 2; i++)
		check_frame(pool, got[i], 8 + i, lens[8 + i]);
	cr_assert(dpflow_port_rx_done(rx));
	s = stats_of(rx);
	cr_assert_eq(s.rx_pkts, 10);
	cr_assert_eq(s.rx_nobuf, 3);
	dpflow_pool_free_bulk(pool, got, 2);
	cr_assert_eq(dpflow_pool_avail(pool), 4, "unused slots given back");
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcap, oversize_dropped_and_counted)
{
	/* data room 256: 256 fits, 257 does not. */
	static const uint32_t lens[5] = {100, 257, 256, 4000, 60};
	static const uint32_t want[3] = {0, 2, 4}; /* frames delivered */
	struct dpflow_pool *pool = pool_new(8, 256);
	const char *file = tpath("big.pcap");
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;
	struct dpflow_port_stats s;

	write_eth_frames(file, lens, 5, TS_BASE);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 3);
	for (unsigned i = 0; i < 3; i++) {
		check_frame(pool, got[i], want[i], lens[want[i]]);
		cr_assert_eq(dpflow_pool_meta(pool, got[i])->rx_ts_ns,
			     TS_BASE + want[i]);
	}
	s = stats_of(rx);
	cr_assert_eq(s.rx_oversize, 2);
	cr_assert_eq(s.rx_pkts, 3);
	cr_assert_eq(s.rx_bytes, 100 + 256 + 60);
	dpflow_pool_free_bulk(pool, got, 3);
	cr_assert_eq(dpflow_pool_avail(pool), 8);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcap, oversize_counts_the_synthesised_header)
{
	/* SLL payloads of 242 and 243 bytes: 256 and 257 as Ethernet. */
	static uint8_t f[2][16 + 243];
	struct rec r[2] = {
	    {TS_BASE, f[0], 16 + 243, 0},
	    {TS_BASE + 1, f[1], 16 + 242, 0},
	};
	struct dpflow_pool *pool = pool_new(8, 256);
	const char *file = tpath("sllbig.pcap");
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;

	for (unsigned i = 0; i < 2; i++) {
		f[i][14] = 0x08; /* protocol 0x0800 */
		f[i][16] = 0x45;
	}
	write_pcap(file, 113, r, 2);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 1);
	cr_assert_eq(dpflow_pool_meta(pool, got[0])->data_len, 256);
	cr_assert_eq(dpflow_pool_meta(pool, got[0])->rx_ts_ns, TS_BASE + 1);
	cr_assert_eq(stats_of(rx).rx_oversize, 1);
	dpflow_pool_free_bulk(pool, got, 1);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcap, long_run_of_dropped_frames_is_bounded_per_call)
{
	uint32_t lens[12];
	struct dpflow_pool *pool = pool_new(8, 128);
	const char *file = tpath("run.pcap");
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;
	unsigned calls = 0;

	/* Ten frames too big for the data room, then two that fit. */
	for (unsigned i = 0; i < 12; i++)
		lens[i] = i < 10 ? 200 : 64;
	write_eth_frames(file, lens, 12, TS_BASE);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 4), 0);
	cr_assert_eq(stats_of(rx).rx_oversize, 4, "at most n dropped a call");
	cr_assert_eq(dpflow_port_rx_done(rx), false);
	uint16_t k = 0;
	while (!k && calls++ < 10)
		k = dpflow_port_rx_burst(rx, 0, got, 4);
	cr_assert_eq(k, 2);
	check_frame(pool, got[0], 10, 64);
	check_frame(pool, got[1], 11, 64);
	cr_assert_eq(stats_of(rx).rx_oversize, 10);
	dpflow_pool_free_bulk(pool, got, 2);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcap, truncated_capture_delivers_captured_bytes)
{
	static uint8_t f[80];
	struct rec r[2] = {
	    {TS_BASE, f, 80, 1500}, /* snapped at 80 of 1500 */
	    {TS_BASE + 5, f, 80, 80},
	};
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("snap.pcap");
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;
	struct dpflow_port_stats s;

	for (unsigned j = 0; j < sizeof(f); j++)
		f[j] = pattern(0, j);
	write_pcap(file, 1, r, 2);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 2);
	check_frame(pool, got[0], 0, 80);
	check_frame(pool, got[1], 0, 80);
	s = stats_of(rx);
	cr_assert_eq(s.rx_truncated, 1);
	cr_assert_eq(s.rx_bytes, 160);
	dpflow_pool_free_bulk(pool, got, 2);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

static char logged[512];

static void log_capture(enum dpflow_log_level level, const char *module,
			const char *msg, void *arg)
{
	(void)arg;
	snprintf(logged, sizeof(logged), "%d %s %s", (int)level, module, msg);
}

Test(pcap, file_cut_mid_record_ends_input)
{
	static const uint32_t lens[3] = {100, 100, 100};
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("cut.pcap");
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;

	write_eth_frames(file, lens, 3, TS_BASE);
	/* 24 + 3 * (16 + 100): cut 10 bytes into the last frame. */
	cr_assert_eq(truncate(file, 24 + 2 * 116 + 16 + 10), 0);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	dpflow_log_set_sink(log_capture, NULL);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 2);
	dpflow_log_set_sink(NULL, NULL);
	cr_assert(dpflow_port_rx_done(rx));
	cr_assert_eq(stats_of(rx).rx_errors, 1);
	/* Not logged: kept for finish, with the packet and libpcap's
	 * reason (one message, in the caller's words). */
	cr_assert_eq(logged[0], '\0', "%s", logged);
	{
		struct dpflow_error err = {0};

		cr_assert_eq(dpflow_port_finish(rx, &err), -EIO);
		cr_assert_not_null(strstr(err.msg, "packet 3: truncated dump "
						   "file"),
				   "%s", err.msg);
		cr_assert_not_null(strstr(err.msg, file), "%s", err.msg);
	}
	dpflow_pool_free_bulk(pool, got, 2);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcap, queue_and_direction_checks)
{
	static const uint32_t lens[1] = {60};
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("q.pcap"), *out = tpath("q-out.pcap");
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx, *tx;

	write_eth_frames(file, lens, 1, TS_BASE);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	snprintf(uri, sizeof(uri), "pcap:tx=%s", out);
	tx = port_open_ok(NULL, uri);

	cr_assert_eq(dpflow_port_rx_burst(rx, 1, got, 8), 0, "one queue");
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 0), 0);
	cr_assert_eq(dpflow_port_rx_burst(tx, 0, got, 8), 0, "tx-only port");
	cr_assert_eq(dpflow_port_rx_burst(NULL, 0, got, 8), 0);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 1);
	/* An rx-only port accepts nothing: the caller keeps the packet. */
	cr_assert_eq(dpflow_port_tx_burst(rx, 0, pool, got, 1), 0);
	cr_assert_eq(dpflow_port_tx_burst(tx, 1, pool, got, 1), 0);
	cr_assert_eq(dpflow_pool_avail(pool), 7);
	cr_assert_eq(dpflow_port_tx_burst(tx, 0, pool, got, 1), 1);
	cr_assert_eq(dpflow_pool_avail(pool), 8);
	cr_assert_eq(dpflow_port_stats_get(NULL, NULL), -EINVAL);
	cr_assert_null(dpflow_port_name(NULL));
	dpflow_port_close(NULL);
	dpflow_port_close(tx);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcap, ids_in_order_of_opening)
{
	struct dpflow_port *a, *b, *c;

	a = port_open_ok(NULL, "ring:a");
	b = port_open_ok(NULL, "ring:b");
	cr_assert_eq(dpflow_port_id(a), 0);
	cr_assert_eq(dpflow_port_id(b), 1);
	dpflow_port_close(a);
	/* The lowest free id is reused. */
	c = port_open_ok(NULL, "ring:c");
	cr_assert_eq(dpflow_port_id(c), 0);
	dpflow_port_close(b);
	dpflow_port_close(c);
}

/* ---- pcapng, by hand ---- */

struct buf {
	uint8_t b[4096];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	cr_assert_leq(b->n + n, sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put32(struct buf *b, uint32_t v)
{
	put(b, &v, 4);
}

static void put16(struct buf *b, uint16_t v)
{
	put(b, &v, 2);
}

static void pad4(struct buf *b)
{
	static const uint8_t z[4];

	put(b, z, (4 - b->n % 4) % 4);
}

/* Section header block, host byte order, no options. */
static void ng_shb(struct buf *b)
{
	put32(b, 0x0a0d0d0a);
	put32(b, 28);
	put32(b, 0x1a2b3c4d);
	put16(b, 1);
	put16(b, 0);
	put32(b, 0xffffffff); /* section length: unknown (-1) */
	put32(b, 0xffffffff);
	put32(b, 28);
}

/* Interface description block; @tsresol < 0: no if_tsresol (us). */
static void ng_idb(struct buf *b, uint16_t linktype, int tsresol)
{
	uint32_t len = tsresol < 0 ? 20 : 32;

	put32(b, 1);
	put32(b, len);
	put16(b, linktype);
	put16(b, 0);
	put32(b, 0); /* snaplen: none */
	if (tsresol >= 0) {
		put16(b, 9); /* if_tsresol */
		put16(b, 1);
		put(b, &(uint8_t){(uint8_t)tsresol}, 1);
		pad4(b);
		put32(b, 0); /* opt_endofopt */
	}
	put32(b, len);
}

/* Enhanced packet block on interface 0; @ts in the interface's units. */
static void ng_epb(struct buf *b, uint64_t ts, const uint8_t *data,
		   uint32_t caplen, uint32_t origlen)
{
	uint32_t len = 32 + (caplen + 3) / 4 * 4;

	put32(b, 6);
	put32(b, len);
	put32(b, 0);
	put32(b, (uint32_t)(ts >> 32));
	put32(b, (uint32_t)ts);
	put32(b, caplen);
	put32(b, origlen);
	put(b, data, caplen);
	pad4(b);
	put32(b, len);
}

static void write_buf(const char *path, const struct buf *b)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(b->b, b->n, 1, f), 1);
	cr_assert_eq(fclose(f), 0);
}

Test(pcapng, read_ns_resolution)
{
	static const uint32_t lens[3] = {60, 61, 100};
	static uint8_t data[3][100];
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("ns.pcapng");
	struct buf b = {.n = 0};
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;
	struct dpflow_port_stats s;

	ng_shb(&b);
	ng_idb(&b, 1, 9);
	for (unsigned i = 0; i < 3; i++) {
		for (unsigned j = 0; j < lens[i]; j++)
			data[i][j] = pattern(i, j);
		/* Frame 2 captured 50 bytes of 100. */
		ng_epb(&b, TS_BASE + i * 333, data[i], i == 2 ? 50 : lens[i],
		       lens[i]);
	}
	write_buf(file, &b);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_link_type(rx), 1);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 3);
	for (unsigned i = 0; i < 3; i++) {
		check_frame(pool, got[i], i, i == 2 ? 50 : lens[i]);
		cr_assert_eq(dpflow_pool_meta(pool, got[i])->rx_ts_ns,
			     TS_BASE + i * 333);
	}
	cr_assert(dpflow_port_rx_done(rx));
	s = stats_of(rx);
	cr_assert_eq(s.rx_truncated, 1);
	cr_assert_eq(s.rx_pkts, 3);
	dpflow_pool_free_bulk(pool, got, 3);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcapng, read_default_us_resolution_as_ns)
{
	static uint8_t data[64];
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("us.pcapng");
	struct buf b = {.n = 0};
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;

	for (unsigned j = 0; j < sizeof(data); j++)
		data[j] = pattern(0, j);
	ng_shb(&b);
	ng_idb(&b, 1, -1);
	ng_epb(&b, UINT64_C(1700000000123456), data, 64, 64);
	write_buf(file, &b);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 1);
	check_frame(pool, got[0], 0, 64);
	cr_assert_eq(dpflow_pool_meta(pool, got[0])->rx_ts_ns,
		     UINT64_C(1700000000123456000));
	dpflow_pool_free_bulk(pool, got, 1);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(pcapng, sll2_interface)
{
	static uint8_t f[20 + 40];
	static const uint8_t mac[6] = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("sll2.pcapng");
	struct buf b = {.n = 0};
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;
	const uint8_t *d;

	f[0] = 0x86;
	f[1] = 0xdd;
	f[11] = 6;
	memcpy(f + 12, mac, 6);
	for (unsigned j = 0; j < 40; j++)
		f[20 + j] = j ? pattern(1, j) : 0x60;
	ng_shb(&b);
	ng_idb(&b, 276, 9);
	ng_epb(&b, TS_BASE, f, sizeof(f), sizeof(f));
	write_buf(file, &b);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_link_type(rx), 276);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 1);
	d = dpflow_pkt_data(pool, got[0]);
	cr_assert_eq(dpflow_pool_meta(pool, got[0])->data_len, 14 + 40);
	cr_assert_arr_eq(d + 6, mac, 6);
	cr_assert_eq(d[12], 0x86);
	cr_assert_eq(d[13], 0xdd);
	cr_assert_arr_eq(d + 14, f + 20, 40);
	dpflow_pool_free_bulk(pool, got, 1);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

/* ---- link types ---- */

#define PAY_LEN 40

struct link_case {
	char desc[64];	   /* an array: see struct uri_case */
	uint32_t linktype; /* in the file header */
	int dlt;	   /* what the port reports */
	uint8_t hdr[20];   /* pseudo-header before the payload */
	uint8_t hdr_len;
	bool af_host; /* hdr is @af in host byte order (BSD loopback) */
	uint32_t af;
	uint8_t first;	    /* first payload byte (IP version nibble) */
	uint8_t pay_len;    /* payload bytes */
	uint16_t ethertype; /* synthesised */
	bool skip;	    /* the frame is skipped, counted in rx_skipped */
	uint8_t src[6];	    /* synthesised source MAC */
	bool as_is;	    /* Ethernet: delivered unchanged */
};

/* clang-format off */
static struct link_case link_cases[] = {
	{.desc = "ethernet as is", .linktype = 1, .dlt = 1,
	 .first = 0x02, .pay_len = PAY_LEN, .as_is = true},
	{.desc = "sll ipv4, 6-byte address", .linktype = 113, .dlt = 113,
	 .hdr = {0, 0, 0, 1, 0, 6, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0,
		 0x08, 0x00}, .hdr_len = 16,
	 .first = 0x45, .pay_len = PAY_LEN, .ethertype = 0x0800,
	 .src = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55}},
	{.desc = "sll ipv6, 4-byte address gives a zero mac",
	 .linktype = 113, .dlt = 113,
	 .hdr = {0, 4, 0x03, 0x0a, 0, 4, 10, 0, 0, 1, 0, 0, 0, 0, 0x86, 0xdd},
	 .hdr_len = 16, .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd},
	{.desc = "sll arp", .linktype = 113, .dlt = 113,
	 .hdr = {0, 1, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x06},
	 .hdr_len = 16, .first = 0x00, .pay_len = PAY_LEN, .ethertype = 0x0806,
	 .src = {1, 2, 3, 4, 5, 6}},
	{.desc = "sll 802.2 protocol is skipped", .linktype = 113, .dlt = 113,
	 .skip = true,
	 .hdr = {0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x00, 0x04},
	 .hdr_len = 16, .first = 0x42, .pay_len = PAY_LEN},
	{.desc = "sll header cut short is skipped", .linktype = 113, .dlt = 113, .skip = true,
	 .hdr = {0, 0, 0, 1, 0, 6, 1, 2, 3, 4}, .hdr_len = 10},
	{.desc = "sll2 ipv6, 6-byte address", .linktype = 276, .dlt = 276,
	 .hdr = {0x86, 0xdd, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 0x02, 0xaa, 0xbb,
		 0xcc, 0xdd, 0xee, 0, 0}, .hdr_len = 20,
	 .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd,
	 .src = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}},
	{.desc = "sll2 ipv4, no address", .linktype = 276, .dlt = 276,
	 .hdr = {0x08, 0x00, 0, 0, 0, 0, 0, 1, 0x03, 0x04, 0, 0}, .hdr_len = 20,
	 .first = 0x45, .pay_len = PAY_LEN, .ethertype = 0x0800},
	{.desc = "sll2 header cut short is skipped", .linktype = 276, .skip = true,
	 .dlt = 276, .hdr = {0x08, 0x00, 0, 0}, .hdr_len = 4},
	{.desc = "raw (LINKTYPE_RAW 101) ipv4, reported as DLT_RAW 12",
	 .linktype = 101, .dlt = 12,
	 .first = 0x45, .pay_len = PAY_LEN, .ethertype = 0x0800},
	{.desc = "raw (101) ipv6", .linktype = 101, .dlt = 12,
	 .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd},
	{.desc = "raw (DLT 12 in the file) ipv6", .linktype = 12, .dlt = 12,
	 .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd},
	{.desc = "raw (DLT 14 in the file) ipv4", .linktype = 14, .dlt = 14,
	 .first = 0x45, .pay_len = PAY_LEN, .ethertype = 0x0800},
	{.desc = "raw version 5 is skipped", .linktype = 101, .dlt = 12, .skip = true,
	 .first = 0x50, .pay_len = PAY_LEN},
	{.desc = "raw ipv4 (228)", .linktype = 228, .dlt = 228,
	 .first = 0x45, .pay_len = PAY_LEN, .ethertype = 0x0800},
	{.desc = "raw ipv6 (229)", .linktype = 229, .dlt = 229,
	 .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd},
	{.desc = "null AF_INET host order", .linktype = 0, .dlt = 0,
	 .af_host = true, .af = 2, .hdr_len = 4,
	 .first = 0x45, .pay_len = PAY_LEN, .ethertype = 0x0800},
	{.desc = "null AF_INET6 24 (NetBSD, OpenBSD)", .linktype = 0, .dlt = 0,
	 .af_host = true, .af = 24, .hdr_len = 4,
	 .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd},
	{.desc = "null AF_INET6 28 (FreeBSD)", .linktype = 0, .dlt = 0,
	 .af_host = true, .af = 28, .hdr_len = 4,
	 .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd},
	{.desc = "null AF_INET6 30 (Darwin)", .linktype = 0, .dlt = 0,
	 .af_host = true, .af = 30, .hdr_len = 4,
	 .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd},
	{.desc = "null AF_INET written on a host of the other byte order",
	 .linktype = 0, .dlt = 0, .af_host = true, .af = 0x02000000,
	 .hdr_len = 4, .first = 0x45, .pay_len = PAY_LEN, .ethertype = 0x0800},
	{.desc = "null unknown family is skipped", .linktype = 0, .dlt = 0, .skip = true,
	 .af_host = true, .af = 7, .hdr_len = 4,
	 .first = 0x45, .pay_len = PAY_LEN},
	{.desc = "null header cut short is skipped", .linktype = 0, .dlt = 0, .skip = true,
	 .hdr = {2, 0}, .hdr_len = 2},
	{.desc = "loop AF_INET network order", .linktype = 108, .dlt = 108,
	 .hdr = {0, 0, 0, 2}, .hdr_len = 4,
	 .first = 0x45, .pay_len = PAY_LEN, .ethertype = 0x0800},
	{.desc = "loop AF_INET6 (24) network order", .linktype = 108,
	 .dlt = 108, .hdr = {0, 0, 0, 24}, .hdr_len = 4,
	 .first = 0x60, .pay_len = PAY_LEN, .ethertype = 0x86dd},
	{.desc = "loop AF bytes in little-endian order are not AF_INET", .skip = true,
	 .linktype = 108, .dlt = 108, .hdr = {2, 0, 0, 0}, .hdr_len = 4,
	 .first = 0x45, .pay_len = PAY_LEN},
};
/* clang-format on */

ParameterizedTestParameters(link, types)
{
	return cr_make_param_array(struct link_case, link_cases,
				   DPFLOW_ARRAY_SIZE(link_cases));
}

ParameterizedTest(struct link_case *c, link, types)
{
	static const uint8_t zero[6];
	uint8_t rec[20 + PAY_LEN], pay[PAY_LEN];
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("link.pcap");
	char uri[300];
	uint32_t got[8];
	struct dpflow_port *rx;
	struct dpflow_port_stats s;
	uint16_t k;

	for (unsigned j = 0; j < c->pay_len; j++)
		pay[j] = j ? pattern(3, j) : c->first;
	if (c->af_host)
		memcpy(rec, &c->af, 4);
	else
		memcpy(rec, c->hdr, c->hdr_len);
	memcpy(rec + c->hdr_len, pay, c->pay_len);
	write_pcap(
	    file, c->linktype,
	    &(struct rec){TS_BASE, rec, (uint32_t)(c->hdr_len + c->pay_len), 0},
	    1);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_link_type(rx), c->dlt, "%s: link type %d",
		     c->desc, dpflow_port_link_type(rx));
	k = dpflow_port_rx_burst(rx, 0, got, 8);
	s = stats_of(rx);
	cr_assert(dpflow_port_rx_done(rx), "%s", c->desc);
	if (c->skip) {
		cr_assert_eq(k, 0, "%s: skipped", c->desc);
		cr_assert_eq(s.rx_skipped, 1, "%s", c->desc);
		cr_assert_eq(dpflow_pool_avail(pool), 8);
		goto out;
	}
	cr_assert_eq(k, 1, "%s", c->desc);
	cr_assert_eq(s.rx_skipped, 0, "%s", c->desc);
	const struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, got[0]);
	const uint8_t *d = dpflow_pkt_data(pool, got[0]);
	cr_assert_eq(m->rx_ts_ns, TS_BASE, "%s", c->desc);
	if (c->as_is) {
		cr_assert_eq(m->data_len, c->pay_len, "%s", c->desc);
		cr_assert_arr_eq(d, pay, c->pay_len, "%s", c->desc);
	} else {
		cr_assert_eq(m->data_len, 14 + c->pay_len, "%s", c->desc);
		cr_assert_arr_eq(d, zero, 6, "%s: dst mac", c->desc);
		cr_assert_arr_eq(d + 6, c->src, 6, "%s: src mac", c->desc);
		cr_assert_eq((d[12] << 8) | d[13], c->ethertype,
			     "%s: ethertype %04x", c->desc,
			     (d[12] << 8) | d[13]);
		cr_assert_arr_eq(d + 14, pay, c->pay_len, "%s: payload",
				 c->desc);
	}
	cr_assert_eq(s.rx_bytes, m->data_len);
	dpflow_pool_free_bulk(pool, got, 1);
out:
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

Test(link, written_by_libpcap_dump)
{
	/* libpcap maps DLT_RAW to LINKTYPE_RAW in the file and back. */
	static uint8_t ip[28] = {0x45};
	struct dpflow_pool *pool = pool_new(8, 0);
	const char *file = tpath("dead.pcap");
	struct pcap_pkthdr h = {.caplen = 28, .len = 28};
	char uri[300];
	uint32_t got[8];
	pcap_t *dead = pcap_open_dead(DLT_RAW, 65535);
	pcap_dumper_t *dump;
	struct dpflow_port *rx;
	const uint8_t *d;

	cr_assert_not_null(dead);
	dump = pcap_dump_open(dead, file);
	cr_assert_not_null(dump, "%s", pcap_geterr(dead));
	h.ts.tv_sec = 1700000000;
	h.ts.tv_usec = 250000;
	pcap_dump((u_char *)dump, &h, ip);
	pcap_dump_close(dump);
	pcap_close(dead);

	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	rx = port_open_ok(pool, uri);
	cr_assert_eq(dpflow_port_link_type(rx), DLT_RAW);
	cr_assert_eq(dpflow_port_rx_burst(rx, 0, got, 8), 1);
	d = dpflow_pkt_data(pool, got[0]);
	cr_assert_eq(dpflow_pool_meta(pool, got[0])->data_len, 14 + 28);
	cr_assert_eq(d[12], 0x08);
	cr_assert_eq(d[13], 0x00);
	cr_assert_eq(d[14], 0x45);
	/* A microsecond file read at nanosecond precision. */
	cr_assert_eq(dpflow_pool_meta(pool, got[0])->rx_ts_ns,
		     UINT64_C(1700000000250000000));
	dpflow_pool_free_bulk(pool, got, 1);
	dpflow_port_close(rx);
	dpflow_pool_destroy(pool);
}

/* ---- URI errors ---- */

/* Strings held in the case, as in struct link_case. */
struct uri_case {
	char uri[48];
	char field[16];
	int code;
	char in_msg[32]; /* a substring of the message */
};

static struct uri_case uri_cases[] = {
    {"nosuch:x", "kind", EINVAL, "nosuch"},
    {"", "kind", EINVAL, "missing port kind"},
    {":rx=a", "kind", EINVAL, "missing port kind"},
    {"pcap", "rx", EINVAL, "needs rx=FILE"},
    {"pcap:", "rx", EINVAL, "needs rx=FILE"},
    {"pcap:rx=", "rx", EINVAL, "missing value"},
    {"pcap:tx", "tx", EINVAL, "missing value"},
    {"pcap:rx", "rx", EINVAL, "missing value"},
    {"pcap:tx=/tmp/x.pcap,foo=bar", "key", EINVAL, "'foo' (value 'bar')"},
    {"pcap:tx=/tmp/x.pcap,snaplen", "key", EINVAL, "'snaplen'"},
    {"pcap:rx=a.pcap,rx=b.pcap", "rx", EINVAL, "b.pcap"},
    {"pcap:a.pcap,rx=b.pcap", "rx", EINVAL, "twice"},
    {"pcap:tx=a.pcap,,rx=b", "uri", EINVAL, "empty argument"},
    {"pcap:rx=/nonexistent-dir/in.pcap", "rx", ENOENT,
     "/nonexistent-dir/in.pcap"},
    {"pcap:tx=/nonexistent-dir/out.pcap", "tx", ENOENT,
     "/nonexistent-dir/out.pcap"},
    {"ring:", "name", EINVAL, "needs a name"},
    {"ring", "name", EINVAL, "needs a name"},
    {"ring:size=8", "name", EINVAL, "needs a name"},
    {"ring:r,size=abc", "size", EINVAL, "'abc'"},
    {"ring:r,size=100", "size", EINVAL, "'100'"},
    {"ring:r,size=1", "size", EINVAL, "'1'"},
    {"ring:r,size=0", "size", EINVAL, "'0'"},
    {"ring:r,size=-4", "size", EINVAL, "'-4'"},
    {"ring:r,size=2147483648", "size", EINVAL, "'2147483648'"},
    {"ring:r,size=", "size", EINVAL, "missing value"},
    {"ring:r,size", "size", EINVAL, "missing value"},
    {"ring:r,size=8,size=16", "size", EINVAL, "twice"},
    {"ring:r,loop=1", "loop", EINVAL, "'1'"},
    {"ring:r,bogus=1", "key", EINVAL, "'bogus' (value '1')"},
    {"afpacket:", "interface", EINVAL, "an interface name"},
    {"afpacket:queues=2", "interface", EINVAL, "an interface name"},
    {"afpacket:nosuchif0", "interface", ENODEV, "no interface 'nosuchif0'"},
    {"afpacket:lo,queues=0", "queues", EINVAL, "queues=0: a number"},
    {"afpacket:lo,queues=65", "queues", EINVAL, "queues=65: a number"},
    {"afpacket:lo,queues=x", "queues", EINVAL, "queues=x"},
    {"afpacket:lo,queues=2,queues=3", "queues", EINVAL, "twice"},
    {"afpacket:lo,blocks=1", "blocks", EINVAL, "blocks=1"},
    {"afpacket:lo,block_size=5000", "block_size", EINVAL, "page size"},
    {"afpacket:lo,blocks=65536,block_size=65536", "blocks", EINVAL, "at most"},
    {"afpacket:lo,fanout=", "fanout", EINVAL, "missing value"},
    {"afpacket:lo,bogus=1", "key", EINVAL, "'bogus' (value '1')"},
    {"afxdp:", "interface", EINVAL, "an interface name"},
    {"afxdp:queues=2", "interface", EINVAL, "an interface name"},
    {"afxdp:nosuchif0", "interface", ENODEV, "no interface 'nosuchif0'"},
    {"afxdp:lo,queues=0", "queues", EINVAL, "queues=0: a number"},
    {"afxdp:lo,queues=65", "queues", EINVAL, "queues=65: a number"},
    {"afxdp:lo,start_queue=x", "start_queue", EINVAL, "start_queue=x"},
    {"afxdp:lo,mode=fast", "mode", EINVAL, "auto, native or skb"},
    {"afxdp:lo,copy=maybe", "copy", EINVAL, "auto, on or off"},
    {"afxdp:lo,frames=100", "frames", EINVAL, "a power of two"},
    {"afxdp:lo,frames=32", "frames", EINVAL, "frames=32: a number"},
    {"afxdp:lo,mode=skb,mode=native", "mode", EINVAL, "twice"},
    {"afxdp:lo,bogus=1", "key", EINVAL, "'bogus' (value '1')"},
};

ParameterizedTestParameters(uri, rejected)
{
	return cr_make_param_array(struct uri_case, uri_cases,
				   DPFLOW_ARRAY_SIZE(uri_cases));
}

ParameterizedTest(struct uri_case *c, uri, rejected)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_error err;
	struct dpflow_port *port = dpflow_port_open(pool, c->uri, &err);

	cr_assert_null(port, "'%s' accepted", c->uri);
	cr_assert_not_null(err.field, "'%s': no field", c->uri);
	cr_assert_str_eq(err.field, c->field, "'%s': field %s, want %s (%s)",
			 c->uri, err.field, c->field, err.msg);
	cr_assert_eq(err.code, c->code, "'%s': code %d, want %d (%s)", c->uri,
		     err.code, c->code, err.msg);
	cr_assert_not_null(strstr(err.msg, c->in_msg),
			   "'%s': message '%s' lacks '%s'", c->uri, err.msg,
			   c->in_msg);
	dpflow_pool_destroy(pool);
}

ParameterizedTestParameters(uri, check_rejects_as_open)
{
	return cr_make_param_array(struct uri_case, uri_cases,
				   DPFLOW_ARRAY_SIZE(uri_cases));
}

/* dpflow_port_open_check (dpflow validate) refuses every URI open refuses,
 * with open's field, code and message: the backends share their parser. */
ParameterizedTest(struct uri_case *c, uri, check_rejects_as_open)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_error err, cerr;
	struct dpflow_port *port = dpflow_port_open(pool, c->uri, &err);
	struct dpflow_port *ph = dpflow_port_open_check(pool, c->uri, &cerr);

	cr_assert_null(port, "'%s' opened", c->uri);
	cr_assert_null(ph, "'%s' passed the check (open: %s)", c->uri, err.msg);
	cr_assert_str_eq(cerr.msg, err.msg, "'%s'", c->uri);
	cr_assert_eq(cerr.code, err.code, "'%s'", c->uri);
	cr_assert_str_eq(cerr.field, err.field, "'%s'", c->uri);
	dpflow_pool_destroy(pool);
}

Test(uri, null_uri)
{
	struct dpflow_error err;

	cr_assert_null(dpflow_port_open(NULL, NULL, &err));
	cr_assert_str_eq(err.field, "uri");
	cr_assert_null(dpflow_port_open(NULL, "nosuch:x", NULL),
		       "a NULL error is allowed");
}

Test(uri, missing_file_carries_libpcap_message)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_error err;
	char uri[300];

	snprintf(uri, sizeof(uri), "pcap:rx=%s", tpath("absent.pcap"));
	cr_assert_null(dpflow_port_open(pool, uri, &err));
	cr_assert_str_eq(err.field, "rx");
	cr_assert_not_null(strstr(err.msg, "No such file or directory"), "%s",
			   err.msg);
	dpflow_pool_destroy(pool);
}

Test(uri, not_a_capture_carries_libpcap_message)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_error err;
	const char *file = tpath("junk.pcap");
	struct buf b = {.n = 0};
	char uri[300];

	put(&b, "this is not a capture file at all", 33);
	write_buf(file, &b);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	cr_assert_null(dpflow_port_open(pool, uri, &err));
	cr_assert_str_eq(err.field, "rx");
	cr_assert_not_null(strstr(err.msg, file), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "unknown file format"), "%s",
			   err.msg);
	dpflow_pool_destroy(pool);
}

Test(uri, unsupported_link_type)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_error err;
	const char *file = tpath("wifi.pcap");
	char uri[300];

	write_pcap(file, 105 /* IEEE 802.11 */, NULL, 0);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	cr_assert_null(dpflow_port_open(pool, uri, &err));
	cr_assert_str_eq(err.field, "rx");
	cr_assert_eq(err.code, ENOTSUP);
	cr_assert_not_null(strstr(err.msg, "105"), "%s", err.msg);
	dpflow_pool_destroy(pool);
}

Test(uri, rx_needs_a_pool)
{
	struct dpflow_error err;
	const char *file = tpath("p.pcap");
	char uri[300];

	write_pcap(file, 1, NULL, 0);
	snprintf(uri, sizeof(uri), "pcap:rx=%s", file);
	cr_assert_null(dpflow_port_open(NULL, uri, &err));
	cr_assert_str_eq(err.field, "pool");
}

Test(uri, tx_must_not_be_the_rx_file)
{
	struct dpflow_pool *pool = pool_new(8, 0);
	struct dpflow_error err;
	const char *file = tpath("same.pcap");
	char uri[600];

	write_pcap(file, 1, NULL, 0);
	snprintf(uri, sizeof(uri), "pcap:rx=%s,tx=%s", file, file);
	cr_assert_null(dpflow_port_open(pool, uri, &err));
	cr_assert_str_eq(err.field, "tx");
	dpflow_pool_destroy(pool);
}

Test(uri, failed_open_frees_its_id)
{
	struct dpflow_error err;
	struct dpflow_port *p;

	cr_assert_null(dpflow_port_open(NULL, "ring:r,size=3", &err));
	p = port_open_ok(NULL, "ring:r");
	cr_assert_eq(dpflow_port_id(p), 0);
	dpflow_port_close(p);
}

/* ---- ring ports ---- */

/* Allocate @n packets of the pool with lengths 60 + i and byte 0 = i. */
static void fill(struct dpflow_pool *pool, uint32_t *idx, unsigned n)
{
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, idx, n), 0);
	for (unsigned i = 0; i < n; i++) {
		dpflow_pool_meta(pool, idx[i])->data_len = (uint16_t)(60 + i);
		dpflow_pkt_data(pool, idx[i])[0] = (uint8_t)i;
	}
}

Test(ring, plain_rx_and_tx)
{
	struct dpflow_pool *pool = pool_new(32, 0);
	struct dpflow_port *other = port_open_ok(NULL, "ring:first");
	struct dpflow_port *p = port_open_ok(pool, "ring:r0,size=8");
	struct dpflow_ring *rxr = dpflow_port_ring_rx(p);
	struct dpflow_ring *txr = dpflow_port_ring_tx(p);
	uint32_t idx[16], got[16], out[16];
	struct dpflow_port_stats s;

	cr_assert_str_eq(dpflow_port_kind(p), "ring");
	cr_assert_eq(dpflow_port_id(p), 1);
	cr_assert_eq(dpflow_port_link_type(p), -1);
	cr_assert_not_null(rxr);
	cr_assert_not_null(txr);
	cr_assert_neq(rxr, txr);
	cr_assert_eq(dpflow_ring_capacity(rxr), 8);
	cr_assert_eq(dpflow_port_rx_burst(p, 0, got, 16), 0, "empty");

	fill(pool, idx, 6);
	dpflow_pool_meta(pool, idx[3])->rx_ts_ns = 777;
	cr_assert_eq(dpflow_ring_enqueue_bulk(rxr, idx, 6), 6);
	cr_assert_eq(dpflow_port_rx_burst(p, 0, got, 4), 4);
	cr_assert_eq(dpflow_port_rx_burst(p, 0, got + 4, 16), 2);
	cr_assert_arr_eq(got, idx, 6 * sizeof(uint32_t), "in order");
	for (unsigned i = 0; i < 6; i++) {
		const struct dpflow_pkt_meta *m =
		    dpflow_pool_meta(pool, got[i]);
		cr_assert_eq(m->port, 1);
		cr_assert_eq(m->queue, 0);
		cr_assert_neq(m->rx_ts_ns, 0, "stamped");
	}
	cr_assert_eq(dpflow_pool_meta(pool, got[3])->rx_ts_ns, 777, "kept");
	cr_assert_eq(dpflow_port_rx_done(p), false);

	/* tx: as many as the ring holds; the caller keeps the rest. */
	fill(pool, idx + 6, 10);
	cr_assert_eq(dpflow_port_tx_burst(p, 0, pool, got, 6), 6);
	cr_assert_eq(dpflow_port_tx_burst(p, 0, pool, idx + 6, 10), 2);
	cr_assert_eq(dpflow_ring_count(txr), 8);
	cr_assert_eq(dpflow_ring_count(rxr), 0, "no loop");
	cr_assert_eq(dpflow_ring_dequeue_burst(txr, out, 16), 8);
	cr_assert_arr_eq(out, got, 6 * sizeof(uint32_t));
	cr_assert_eq(out[6], idx[6]);
	cr_assert_eq(out[7], idx[7]);
	s = stats_of(p);
	cr_assert_eq(s.rx_pkts, 6);
	cr_assert_eq(s.rx_bytes, 60 * 6 + 15);
	cr_assert_eq(s.tx_pkts, 8);
	cr_assert_eq(s.tx_bytes, 60 * 6 + 15 + 60 + 61);
	cr_assert_eq(s.tx_errors, 0);

	dpflow_pool_free_bulk(pool, out, 8);
	dpflow_pool_free_bulk(pool, idx + 8, 8);
	cr_assert_eq(dpflow_pool_avail(pool), 32);
	dpflow_port_close(p);
	dpflow_port_close(other);
	dpflow_pool_destroy(pool);
}

Test(ring, loop_sends_back_to_rx)
{
	struct dpflow_pool *pool = pool_new(32, 0);
	struct dpflow_pool *pool2 = pool_new(4, 0);
	struct dpflow_port *p = port_open_ok(pool, "ring:lo,loop");
	uint32_t idx[8], got[8], x;

	cr_assert_eq(dpflow_port_ring_rx(p), dpflow_port_ring_tx(p));
	cr_assert_eq(dpflow_ring_capacity(dpflow_port_ring_rx(p)), 1024);
	fill(pool, idx, 8);
	cr_assert_eq(dpflow_port_tx_burst(p, 0, pool, idx, 8), 8);
	cr_assert_eq(dpflow_port_rx_burst(p, 0, got, 8), 8);
	cr_assert_arr_eq(got, idx, sizeof(idx));
	for (unsigned i = 0; i < 8; i++) {
		cr_assert_eq(dpflow_pool_meta(pool, got[i])->port,
			     dpflow_port_id(p));
		cr_assert_eq(dpflow_pkt_data(pool, got[i])[0], i);
	}
	/* A packet of another pool cannot loop into this port's pool. */
	cr_assert_eq(dpflow_pool_alloc_bulk(pool2, &x, 1), 0);
	cr_assert_eq(dpflow_port_tx_burst(p, 0, pool2, &x, 1), 0);
	cr_assert_eq(stats_of(p).tx_errors, 1);
	dpflow_pool_free_bulk(pool2, &x, 1);

	/* Packets left in the ring are freed at close. */
	cr_assert_eq(dpflow_port_tx_burst(p, 0, pool, got, 8), 8);
	cr_assert_eq(dpflow_pool_avail(pool), 24);
	dpflow_port_close(p);
	cr_assert_eq(dpflow_pool_avail(pool), 32);
	cr_assert_eq(dpflow_pool_check(pool), 0);
	dpflow_pool_destroy(pool2);
	dpflow_pool_destroy(pool);
}

Test(ring, no_pool_receives_nothing)
{
	struct dpflow_port *p = port_open_ok(NULL, "ring:np,size=2");
	uint32_t x = 0, got;

	cr_assert_eq(dpflow_ring_enqueue_bulk(dpflow_port_ring_rx(p), &x, 1),
		     1);
	cr_assert_eq(dpflow_port_rx_burst(p, 0, &got, 1), 0);
	dpflow_port_close(p);
}

/* ---- afpacket on the loopback interface --------------------------------- */

/* A frame sent on lo comes back in: the port receives what it sent. */
Test(afpacket, loopback_round_trip)
{
	struct dpflow_pool *pool;
	struct dpflow_port *port;
	struct dpflow_port_stats st;
	uint32_t idx[32], slot;
	uint8_t frame[80];
	bool found = false;

	if (geteuid() != 0)
		cr_skip_test("packet sockets need root (CAP_NET_RAW)");
	pool = pool_new(256, 0);
	port = port_open_ok(pool, "afpacket:lo,blocks=4,block_size=65536");
	cr_assert_str_eq(dpflow_port_kind(port), "afpacket");
	cr_assert_eq(dpflow_port_rx_queues(port), 1);
	/* an Ethernet frame of a private ethertype, with a marker */
	memset(frame, 0, sizeof(frame));
	frame[12] = 0x88;
	frame[13] = 0xb5;
	memcpy(frame + 14, "dpflow-afpacket-test", 20);
	frame[40] = (uint8_t)getpid();
	cr_assert_eq(dpflow_pool_alloc_bulk(pool, &slot, 1), 0);
	memcpy(dpflow_pkt_data(pool, slot), frame, sizeof(frame));
	dpflow_pool_meta(pool, slot)->data_len = sizeof(frame);
	cr_assert_eq(dpflow_port_tx_burst(port, 0, pool, &slot, 1), 1);
	for (int tries = 0; tries < 200 && !found; tries++) {
		uint16_t n = dpflow_port_rx_burst(port, 0, idx, 32);

		for (uint16_t i = 0; i < n; i++) {
			const struct dpflow_pkt_meta *m =
			    dpflow_pool_meta(pool, idx[i]);

			if (m->data_len == sizeof(frame) &&
			    !memcmp(dpflow_pkt_data(pool, idx[i]), frame,
				    sizeof(frame))) {
				found = true;
				cr_assert_gt(m->rx_ts_ns, 0);
				cr_assert_eq(m->port, dpflow_port_id(port));
			}
		}
		dpflow_pool_free_bulk(pool, idx, n);
		if (!n)
			usleep(5000);
	}
	cr_assert(found, "the frame sent on lo was not received");
	dpflow_port_stats_get(port, &st);
	cr_assert_geq(st.tx_pkts, 1);
	cr_assert_eq(st.tx_bytes, sizeof(frame));
	cr_assert_geq(st.rx_pkts, 1);
	dpflow_port_close(port);
	cr_assert_eq(dpflow_pool_avail(pool), 256, "every slot back");
	dpflow_pool_destroy(pool);
}
