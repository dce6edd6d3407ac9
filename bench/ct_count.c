/*
 * The instruction count of the tracker's two paths, which a loaded
 * machine cannot move (docs/PERFORMANCE.md, "Connection tracking"):
 * create N UDP connections with dpflow_ct_process_burst in bursts of 32
 * (pass 0), then, with a second argument of 1, send the same packets once
 * more (pass 1, all established). Not built by meson: build it against a
 * build directory's library and run it under callgrind, both passes and
 * pass 0 alone; the difference is the established pass:
 *
 *   gcc -O3 -std=gnu11 -Iinclude -Ilib -IBUILD/lib bench/ct_count.c \
 *       BUILD/lib/libdpflow.a -lm -lpthread -o /tmp/ct_count
 *   valgrind --tool=callgrind /tmp/ct_count 32768 0
 *   valgrind --tool=callgrind /tmp/ct_count 32768 1
 *
 * callgrind_annotate's per-function lines give the image's memset (from
 * dpflow_ct_create), to subtract from pass 0.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/ct.h"

int main(int argc, char **argv)
{
	uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 0;
	int passes = argc > 2 ? atoi(argv[2]) + 1 : 1;
	struct dpflow_ct_params p;
	struct dpflow_ct_result res[32];
	struct dpflow_ct_pkt *pk;
	struct dpflow_ct_image *ct;
	uint64_t made = 0;

	if (n < 32 || n % 32) {
		fprintf(stderr, "usage: ct_count N (a multiple of 32) [1]\n");
		return 2;
	}
	pk = calloc(n, sizeof(*pk));
	dpflow_ct_params_default(&p, n);
	p.seed = 1;
	ct = dpflow_ct_create(&p, NULL);
	if (!pk || !ct)
		return 1;
	for (uint32_t f = 0; f < n; f++) {
		uint32_t a = htonl(0x0a000000u + f),
			 b = htonl(0xc0a80000u + (f & 255));

		memcpy(pk[f].src, &a, 4);
		memcpy(pk[f].dst, &b, 4);
		pk[f].sport = (uint16_t)(1024 + (f >> 8) % 60000);
		pk[f].dport = 443;
		pk[f].proto = 17;
		pk[f].family = 4;
	}
	for (int pass = 0; pass < passes; pass++)
		for (uint32_t i = 0; i < n; i += 32) {
			dpflow_ct_process_burst(ct, pk + i, 32, 1000000000ull,
						NULL, res);
			for (int j = 0; j < 32; j++)
				made += res[j].flags == DPFLOW_CT_R_NEW;
		}
	printf("%lu connections made\n", (unsigned long)made);
	dpflow_ct_destroy(ct);
	free(pk);
	return made == n ? 0 : 1;
}
