/*
 * DPDK peers of the benchmarks, compiled when libdpdk is present
 * (DPFLOW_HAVE_DPDK). EAL runs with --no-huge --no-pci --no-shconf on
 * lcore 0, once per process.
 */
#ifndef DPFLOW_BENCH_DPDK_H
#define DPFLOW_BENCH_DPDK_H

#include <stdint.h>

int bench_dpdk_init(void);

/*
 * rte_net_get_ptype() over @n frames, trials of @seconds; the best rate in
 * *@best_mpps. Returns 0, or -1 if DPDK could not be set up.
 */
int bench_dpdk_parse(const uint8_t *const *frames, const uint16_t *lens,
		     uint32_t n, double seconds, unsigned trials,
		     double *best_mpps);

/* One IPv4 5-tuple rule of `dpflow bench acl-10k` (host byte order). */
struct bench_acl_rule {
	uint32_t src, dst; /* prefixes */
	uint8_t src_len, dst_len;
	uint8_t proto, proto_mask; /* mask 0xff or 0 (any) */
	uint16_t sport_lo, sport_hi, dport_lo, dport_hi;
	uint32_t rank;	/* 0 is the best; unique */
	uint32_t value; /* what a match returns */
};

/*
 * rte_acl (5 fields, 1 category) over @n_rules rules for @n_keys keys of 5
 * words (proto, src, dst, sport, dport; host order), which it copies into
 * its own input format. Sets *@build_s to the time rte_acl_add_rules and
 * rte_acl_build took. Returns NULL if DPDK could not be set up.
 */
struct bench_dpdk_acl;
struct bench_dpdk_acl *bench_dpdk_acl_create(const struct bench_acl_rule *rules,
					     uint32_t n_rules,
					     const uint32_t *keys,
					     uint32_t n_keys, double *build_s);
void bench_dpdk_acl_destroy(struct bench_dpdk_acl *a);
/* Classify methods this CPU runs ("default" first); their count. */
unsigned bench_dpdk_acl_methods(const struct bench_dpdk_acl *a,
				const char **names, unsigned max);
/* Use method @m (an index into the names above). Returns 0 or -1. */
int bench_dpdk_acl_set_method(struct bench_dpdk_acl *a, unsigned m);
/* rte_acl_classify() on keys [@first, @first + @n), @n <= 256. */
void bench_dpdk_acl_classify(struct bench_dpdk_acl *a, uint32_t first,
			     uint32_t n, uint32_t *userdata);
/* Each key's answer: the value of its rule, or UINT32_MAX. */
void bench_dpdk_acl_answers(struct bench_dpdk_acl *a, uint32_t *results);

/*
 * rte_hash (rte_hash_crc, EXT_TABLE off, room for @entries or @n keys,
 * whichever is more) filled with the @n
 * keys of @key_len bytes at @keys, key i with data i, @trials times into a
 * new table; the fastest fill in *@insert_s and the keys it refused in
 * *@failed. Returns NULL if DPDK could not be set up.
 */
struct bench_dpdk_exact;
struct bench_dpdk_exact *
bench_dpdk_exact_create(const uint8_t *keys, uint32_t n, uint32_t entries,
			uint32_t key_len, unsigned trials, double *insert_s,
			uint32_t *failed);
/* 0 if every key finds its own index, else -1. */
int bench_dpdk_exact_check(struct bench_dpdk_exact *e, const uint8_t *keys,
			   uint32_t n);
/*
 * rte_hash_lookup_bulk_data() on the keys of @stream (@n_stream keys,
 * contiguous), @burst (<= 64) at a time, wrapping, for @seconds. Returns
 * the TSC ticks taken; *@lookups, *@hits, and a data sum added to *@sink.
 */
uint64_t bench_dpdk_exact_run(struct bench_dpdk_exact *e, const uint8_t *stream,
			      uint32_t n_stream, uint32_t burst, double seconds,
			      uint64_t *lookups, uint64_t *hits,
			      uint64_t *sink);
void bench_dpdk_exact_destroy(struct bench_dpdk_exact *e);

/*
 * rte_lpm (DIR-24-8) and rte_lpm6 peers of `dpflow bench lpm-512k`
 * (bench_lpm_dpdk.c). _create builds a table from @n prefixes (IPv4:
 * host-order words, lengths 1..32; IPv6: 16 bytes each, network order),
 * next hops @value (< 2^24 for rte_lpm, < 2^21 for rte_lpm6) and @tbl8s
 * second-level groups, and reports the time the adds took in *@build_s;
 * @thp: advise transparent huge pages on DPDK's memory first. NULL if DPDK
 * could not be set up or an add failed. _lookup runs the bulk lookup over
 * @n keys in bursts of @burst, raw results in @out.
 */
struct bench_dpdk_lpm4;
struct bench_dpdk_lpm6;
struct bench_dpdk_lpm4 *bench_dpdk_lpm4_create(const uint32_t *addr,
					       const uint8_t *len,
					       const uint32_t *value,
					       uint32_t n, uint32_t tbl8s,
					       int thp, double *build_s);
void bench_dpdk_lpm4_lookup(const struct bench_dpdk_lpm4 *h,
			    const uint32_t *keys, uint32_t n, uint32_t burst,
			    uint32_t *out);
/* A raw rte_lpm result as a value, or UINT32_MAX for a miss. */
uint32_t bench_dpdk_lpm4_value(uint32_t raw);
void bench_dpdk_lpm4_destroy(struct bench_dpdk_lpm4 *h);
struct bench_dpdk_lpm6 *bench_dpdk_lpm6_create(const uint8_t *addr,
					       const uint8_t *len,
					       const uint32_t *value,
					       uint32_t n, uint32_t tbl8s,
					       int thp, double *build_s);
/* Raw results: a next hop, or -1 for a miss. */
void bench_dpdk_lpm6_lookup(const struct bench_dpdk_lpm6 *h,
			    const uint8_t *keys, uint32_t n, uint32_t burst,
			    int32_t *out);
void bench_dpdk_lpm6_destroy(struct bench_dpdk_lpm6 *h);

/*
 * The rte_hash peer of `dpflow bench ct` (bench_ct_dpdk.c): a table of
 * @n entries filled with the @n canonical keys of @key_len bytes at @keys
 * (key i, data i), @trials times into a new table; the fastest fill in
 * *@insert_s. NULL if DPDK could not be set up or a key was refused.
 * _run: rte_hash_lookup_bulk_data() on @stream (@n_stream keys), @burst
 * (<= 64) at a time, wrapping, for @seconds; returns the TSC ticks taken,
 * with *@lookups and *@hits.
 */
struct bench_dpdk_ct;
struct bench_dpdk_ct *bench_dpdk_ct_create(const uint8_t *keys, uint32_t n,
					   uint32_t key_len, unsigned trials,
					   double *insert_s);
uint64_t bench_dpdk_ct_run(struct bench_dpdk_ct *c, const uint8_t *stream,
			   uint32_t n_stream, uint32_t burst, double seconds,
			   uint64_t *lookups, uint64_t *hits);
void bench_dpdk_ct_destroy(struct bench_dpdk_ct *c);

/*
 * Pipe-level peers (`--variant pipe`): the same frames as dpflow's packets,
 * copied into mbufs (bench_parse_dpdk.c); NULL if DPDK could not be set
 * up. Each _pipe function makes one pass over all the packets in bursts
 * of @burst (<= 64): rte_net_get_ptype(), the IPv4 5-tuple read at the
 * offsets it returns, the table's bulk lookup, and (exact) a packet and
 * byte counter per entry. It returns the packets handled and adds the hits
 * to *@hits. bench_dpdk_pkts_parse() does the parse and the read alone.
 */
struct bench_dpdk_pkts;
struct bench_dpdk_pkts *bench_dpdk_pkts_create(const uint8_t *const *frames,
					       const uint16_t *lens,
					       uint32_t n);
void bench_dpdk_pkts_destroy(struct bench_dpdk_pkts *p);
uint64_t bench_dpdk_pkts_parse(struct bench_dpdk_pkts *p, uint32_t burst,
			       uint64_t *sink);
uint64_t bench_dpdk_exact_pipe(struct bench_dpdk_exact *e,
			       struct bench_dpdk_pkts *p, uint32_t burst,
			       uint64_t *hits);
/* Packets counted by the exact peer's per-entry counters so far. */
uint64_t bench_dpdk_exact_counted(const struct bench_dpdk_exact *e);
uint64_t bench_dpdk_acl_pipe(struct bench_dpdk_acl *a,
			     struct bench_dpdk_pkts *p, uint32_t burst,
			     uint64_t *hits);
uint64_t bench_dpdk_lpm4_pipe(const struct bench_dpdk_lpm4 *h,
			      struct bench_dpdk_pkts *p, uint32_t burst,
			      uint64_t *hits);

#endif /* DPFLOW_BENCH_DPDK_H */
