/*
 * Helper of live_txtime.py: send COUNT frames through a port opened from
 * URI (afpacket:IF,txtime=1), each with meta->tx_time_ns DELAY_NS after
 * now (0: no send time), then report on stdout:
 *
 *   sent MONO_NS          CLOCK_MONOTONIC just before the transmit call
 *   tx_pkts N tx_errors N the port's counters, SETTLE_MS later
 *
 * Frames: Ethernet broadcast, ethertype 0x88b5 (local experimental),
 * payload "dpflow-txtime-NNNN", 60 bytes. Exit 0; 1 when the port does not
 * open (its error on stderr) or does not take every frame within a second;
 * 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dpflow/dpflow.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct dpflow_pool_params pp = {.name = "txtime-send", .n_slots = 256};
	struct dpflow_error err = {0};
	struct dpflow_port_stats st;
	struct timespec ts;
	struct dpflow_pool *pool;
	struct dpflow_port *port;
	uint32_t idx[64];
	unsigned count, settle_ms, done = 0;
	uint64_t delay, when, t0;

	if (argc != 5) {
		fprintf(stderr, "usage: live_txtime_send URI COUNT DELAY_NS "
				"SETTLE_MS\n");
		return 2;
	}
	count = (unsigned)strtoul(argv[2], NULL, 0);
	delay = strtoull(argv[3], NULL, 0);
	settle_ms = (unsigned)strtoul(argv[4], NULL, 0);
	if (!count || count > 64)
		return 2;
	dpflow_clock_init();
	pool = dpflow_pool_create(&pp, &err);
	if (!pool) {
		fprintf(stderr, "pool: %s\n", err.msg);
		return 1;
	}
	port = dpflow_port_open(pool, argv[1], &err);
	if (!port) {
		fprintf(stderr, "open: %s (field %s)\n", err.msg,
			err.field ? err.field : "-");
		dpflow_pool_destroy(pool);
		return 1;
	}
	if (dpflow_pool_alloc_bulk(pool, idx, count))
		return 1;
	when = delay ? dpflow_clock_ns() + delay : 0;
	for (unsigned i = 0; i < count; i++) {
		struct dpflow_pkt_meta *m = dpflow_pool_meta(pool, idx[i]);
		uint8_t *f = dpflow_pkt_data(pool, idx[i]);

		memset(f, 0, 60);
		memset(f, 0xff, 6);
		memcpy(f + 6, "\x02\x00\x00\x00\x00\x01", 6);
		f[12] = 0x88;
		f[13] = 0xb5;
		snprintf((char *)f + 14, 32, "dpflow-txtime-%04u", i);
		m->data_len = 60;
		m->tx_time_ns = when;
	}
	printf("sent %llu\n", (unsigned long long)mono_ns());
	t0 = mono_ns();
	while (done < count && mono_ns() - t0 < 1000000000ull)
		done += dpflow_port_tx_burst(port, 0, pool, idx + done,
					     (uint16_t)(count - done));
	if (done < count) {
		fprintf(stderr, "the port took %u of %u frames\n", done, count);
		return 1;
	}
	ts.tv_sec = (time_t)(settle_ms / 1000);
	ts.tv_nsec = (long)(settle_ms % 1000) * 1000000;
	nanosleep(&ts, NULL);
	memset(&st, 0, sizeof(st));
	dpflow_port_stats_get(port, &st);
	printf("tx_pkts %llu tx_errors %llu\n", (unsigned long long)st.tx_pkts,
	       (unsigned long long)st.tx_errors);
	dpflow_port_close(port);
	dpflow_pool_destroy(pool);
	return 0;
}
