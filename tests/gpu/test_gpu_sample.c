/*
 * The GPU security pipeline sample (examples/gpu_ids), end to end: writes
 * a pcap of TCP flows (IPv4, IPv6, VLAN-tagged), some carrying signatures
 * at the start, the end or the middle of a payload, others near misses,
 * plus non-TCP noise that carries signatures too (UDP, a TCP later
 * fragment, TCP in VXLAN, a truncated TCP packet) and no-signature noise
 * (ICMP, ARP); runs dpflow-gpu-ids on it in three configurations; and
 * checks OUT.pcap and the printed counters against what this file
 * computes on its own (its own memmem, its own header reading):
 *  - exactly the TCP packets to forward are there, byte for byte, once;
 *  - no non-TCP packet is there;
 *  - exactly one alert per flagged flow (its 5-tuple and a rule id that
 *    flagged one of its packets), none for clean flows; with
 *    --max-alerts 3, exactly 3, and the rest counted as lost (ERROR items).
 * Exits 77 when the sample says there is no GPU. The files stay in a
 * directory under /tmp when a check fails (its name is printed).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include "dpflow/gen.h"
#include "dpflow/meta.h"

#include "gpu_sample_path.h" /* GPU_IDS_EXE, the sample's path */

#define N_FLOWS	       160
#define PKTS_PER_FLOW  16 /* the last 4 go from the server to the client */
#define N_NOISE	       600
#define N_PKTS	       (N_FLOWS * PKTS_PER_FLOW + N_NOISE)
#define FRAME_MAX      1600
#define ALERT_PORT     5555
#define ALERT_LEN      98
#define RULES_MAX      4
#define MAX_ALERTS_CFG 3 /* configuration C */

static int g_failed;

#define CHECK(cond, ...)                                              \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, \
				__LINE__, #cond);                     \
			fprintf(stderr, __VA_ARGS__);                 \
			fprintf(stderr, "\n");                        \
			g_failed++;                                   \
		}                                                     \
	} while (0)

/* ---- the traffic ------------------------------------------------------- */

enum kind { K_TCP, K_NOISE };

struct flow_key {
	uint8_t ipver;
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
};

struct pkt {
	uint8_t frame[FRAME_MAX];
	uint32_t len;
	uint32_t pay_off, pay_len; /* where this file put the payload */
	enum kind kind;
	const char *what; /* noise: which kind */
	struct flow_key key;
	uint32_t id; /* TCP: the sequence number, = index in g_pkts */
};

static struct pkt *g_pkts;
static unsigned g_n;

static const char *const SIG_PASSWD = "/etc/passwd";
static const char *const SIG_CMD = "cmd.exe";
static const char *const SIG_SQL = "SELECT * FROM";

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(g_rng >> 33);
}

/* Lower-case letters and spaces: no rule can occur by chance. */
static void fill_text(uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = rnd() % 27;

		p[i] = r == 26 ? ' ' : (uint8_t)('a' + r);
	}
}

static void put_at(struct pkt *p, uint32_t at, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);

	if (at + n <= p->pay_len)
		memcpy(p->frame + p->pay_off + at, s, n);
}

static void set_ip(uint8_t *a, bool v6, uint32_t host)
{
	memset(a, 0, 16);
	if (v6) {
		a[0] = 0xfd;
		a[12] = (uint8_t)(host >> 24);
		a[13] = (uint8_t)(host >> 16);
		a[14] = (uint8_t)(host >> 8);
		a[15] = (uint8_t)host;
	} else {
		a[0] = (uint8_t)(host >> 24);
		a[1] = (uint8_t)(host >> 16);
		a[2] = (uint8_t)(host >> 8);
		a[3] = (uint8_t)host;
	}
}

/* Build @spec into a new packet whose last @pay bytes are its payload. */
static struct pkt *add(const struct dpflow_gen_spec *spec, uint32_t pay,
		       enum kind kind, const char *what)
{
	struct pkt *p = &g_pkts[g_n];

	memset(p, 0, sizeof(*p));
	p->len = dpflow_gen_build(spec, p->frame, FRAME_MAX);
	if (p->len == 0 || p->len < pay) {
		fprintf(stderr, "FAIL: dpflow_gen_build refused packet %u\n",
			g_n);
		exit(1);
	}
	p->pay_off = p->len - pay;
	p->pay_len = pay;
	p->kind = kind;
	p->what = what;
	p->id = g_n++;
	fill_text(p->frame + p->pay_off, pay);
	return p;
}

static const uint16_t pay_lens[16] = {0,   1,	10,   11,   12,	  40, 100, 333,
				      512, 900, 1200, 1400, 1448, 64, 200, 7};

/*
 * One packet of TCP flow @f, number @j. Flow classes by f % 10: 1
 * /etc/passwd, 4 cmd.exe, 7 both (in different packets), 8 SELECT * FROM
 * (a rule only in configuration B); f % 20 == 9: one packet holds cmd.exe
 * and, after it, /etc/passwd (the lower rule id wins). Signatures sit in
 * packets 1 (at the payload's start), 5 (at its very end) and 9 (anywhere);
 * packets 0, 3, 7, 11 and 15 carry near misses.
 */
static void add_tcp(unsigned f, unsigned j)
{
	struct dpflow_gen_spec s;
	struct dpflow_gen_l3 *l3 = &s.outer;
	bool v6 = f % 4 == 3, reply = j >= PKTS_PER_FLOW - 4;
	uint32_t client = (v6 ? 0x10000u : 0x0a010000u) + f;
	uint32_t server = v6 ? 0x20001u : 0x0a020001u;
	static const uint16_t ports[4] = {80, 443, 445, 8080};
	uint32_t pay = pay_lens[(f * 7 + j) % 16];
	const char *sig = NULL;
	struct pkt *p;

	memset(&s, 0, sizeof(s));
	s.outer.ipv6_ext[0] = s.inner.ipv6_ext[0] = 0xff; /* none */
	s.has_eth = true;
	memcpy(s.src_mac, "\x02\x00\x00\x00\x01\x01", 6);
	memcpy(s.dst_mac, "\x02\x00\x00\x00\x01\x02", 6);
	if (f % 8 == 5) {
		s.n_vlan = 1;
		s.vlan[0] = 100;
	}
	l3->l3_type = v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	l3->l4_type = DPFLOW_L4_TCP;
	set_ip(reply ? l3->dst : l3->src, v6, client);
	set_ip(reply ? l3->src : l3->dst, v6, server);
	l3->sport = reply ? ports[f % 4] : (uint16_t)(20000 + f);
	l3->dport = reply ? (uint16_t)(20000 + f) : ports[f % 4];
	l3->ttl = 64;
	l3->tcp_flags = 0x18;
	l3->tcp_seq = g_n;

	if (!reply && j % 4 == 1) {
		switch (f % 10) {
		case 1:
			sig = SIG_PASSWD;
			break;
		case 4:
			sig = SIG_CMD;
			break;
		case 7:
			sig = j == 1 ? SIG_PASSWD : SIG_CMD;
			break;
		case 8:
			sig = SIG_SQL;
			break;
		}
	}
	if ((sig || f % 20 == 9) && pay < 40)
		pay = 200;
	l3->payload_len = (uint16_t)pay;
	p = add(&s, pay, K_TCP, "tcp");
	p->key.ipver = v6 ? 6 : 4;
	memcpy(p->key.src, l3->src, 16);
	memcpy(p->key.dst, l3->dst, 16);
	p->key.sport = l3->sport;
	p->key.dport = l3->dport;
	if (sig) {
		uint32_t n = (uint32_t)strlen(sig);
		/* at the start, at the very end, or anywhere between */
		uint32_t at = j == 1 ? 0 : j == 5 ? pay - n : rnd() % (pay - n);

		put_at(p, at, sig);
	}
	if (!reply && f % 20 == 9 && j == 4) {
		put_at(p, 5, SIG_CMD);
		put_at(p, 100, SIG_PASSWD);
	}
	if ((j == 0 || j % 4 == 3) && pay >= 40) {
		put_at(p, 0, "/etc/passw_");
		put_at(p, 12, "cmd.ex_");
		put_at(p, 20, "CMD.EXE /ETC/PASSWD");
		put_at(p, pay - 6, "cmd.ex"); /* cut by the payload's end */
	}
}

/* Non-TCP packet @k, most carrying a signature the sample must not see. */
static void add_noise(unsigned k)
{
	struct dpflow_gen_spec s;
	struct dpflow_gen_l3 *l3 = &s.outer;
	uint32_t pay = 60 + rnd() % 400;
	bool v6 = k % 2;
	struct pkt *p;

	memset(&s, 0, sizeof(s));
	s.outer.ipv6_ext[0] = s.inner.ipv6_ext[0] = 0xff; /* none */
	s.has_eth = true;
	memcpy(s.src_mac, "\x02\x00\x00\x00\x02\x01", 6);
	memcpy(s.dst_mac, "\x02\x00\x00\x00\x02\x02", 6);
	l3->l3_type = v6 ? DPFLOW_L3_IPV6 : DPFLOW_L3_IPV4;
	set_ip(l3->src, v6, 0x0a030000u + k);
	set_ip(l3->dst, v6, 0x0a040001u);
	l3->ttl = 64;
	l3->payload_len = (uint16_t)pay;
	switch (k % 7) {
	case 0: /* UDP */
		l3->l4_type = DPFLOW_L4_UDP;
		l3->sport = 40000;
		l3->dport = 53;
		p = add(&s, pay, K_NOISE, "udp");
		put_at(p, 9, SIG_PASSWD);
		break;
	case 1: /* ICMP echo */
		l3->l3_type = DPFLOW_L3_IPV4;
		memset(l3->src + 4, 0, 12);
		memset(l3->dst + 4, 0, 12);
		set_ip(l3->src, false, 0x0a030000u + k);
		set_ip(l3->dst, false, 0x0a040001u);
		l3->l4_type = DPFLOW_L4_ICMP;
		l3->sport = 8;
		p = add(&s, pay, K_NOISE, "icmp");
		break;
	case 2: /* TCP in VXLAN: the outer header is UDP */
		s.tun_type = DPFLOW_TUN_VXLAN;
		s.tun_id = 42;
		l3->sport = 33333;
		s.inner = *l3;
		s.inner.l3_type = DPFLOW_L3_IPV4;
		set_ip(s.inner.src, false, 0x0a050001u);
		set_ip(s.inner.dst, false, 0x0a050002u);
		s.inner.l4_type = DPFLOW_L4_TCP;
		s.inner.sport = 1234;
		s.inner.dport = 80;
		l3->payload_len = 0;
		p = add(&s, pay, K_NOISE, "vxlan-tcp");
		put_at(p, 3, SIG_CMD);
		break;
	case 3: /* a later fragment of a TCP datagram: no TCP header */
		l3->l4_type = DPFLOW_L4_TCP;
		l3->frag = DPFLOW_FRAG_LATER;
		l3->frag_off = 100;
		l3->ip_id = k;
		p = add(&s, pay, K_NOISE, "tcp-later-fragment");
		put_at(p, 0, SIG_PASSWD);
		break;
	case 4: { /* TCP whose IPv4 total length runs past the frame */
		l3->l3_type = DPFLOW_L3_IPV4;
		set_ip(l3->src, false, 0x0a030000u + k);
		set_ip(l3->dst, false, 0x0a040001u);
		l3->l4_type = DPFLOW_L4_TCP;
		l3->sport = 1025;
		l3->dport = 80;
		p = add(&s, pay, K_NOISE, "tcp-truncated");
		put_at(p, 0, SIG_CMD);
		p->len -= 20; /* the IP header still says the full length */
		p->pay_len -= 20;
		break;
	}
	case 5: { /* ARP: not IP at all */
		struct pkt *q = &g_pkts[g_n];

		memset(q, 0, sizeof(*q));
		memset(q->frame, 0xff, 6);
		memcpy(q->frame + 6, s.src_mac, 6);
		q->frame[12] = 0x08;
		q->frame[13] = 0x06;
		fill_text(q->frame + 14, 46);
		memcpy(q->frame + 20, SIG_PASSWD, strlen(SIG_PASSWD));
		q->len = 60;
		q->kind = K_NOISE;
		q->what = "arp";
		q->id = g_n++;
		break;
	}
	default: /* UDP with the alert's own port: must not pass as one */
		l3->l4_type = DPFLOW_L4_UDP;
		l3->sport = ALERT_PORT;
		l3->dport = ALERT_PORT;
		p = add(&s, pay, K_NOISE, "udp-5555");
		memcpy(p->frame + p->pay_off, "DPFA", 4);
		put_at(p, 30, SIG_CMD);
		break;
	}
}

static int write_pcap(const char *path, const unsigned *order)
{
	pcap_t *dead = pcap_open_dead(DLT_EN10MB, 65535);
	pcap_dumper_t *d = dead ? pcap_dump_open(dead, path) : NULL;

	if (!d) {
		fprintf(stderr, "FAIL: cannot write %s: %s\n", path,
			dead ? pcap_geterr(dead) : "pcap_open_dead");
		if (dead)
			pcap_close(dead);
		return -1;
	}
	for (unsigned i = 0; i < g_n; i++) {
		const struct pkt *p = &g_pkts[order[i]];
		struct pcap_pkthdr h;

		memset(&h, 0, sizeof(h));
		h.ts.tv_sec = 1700000000 + i / 1000000;
		h.ts.tv_usec = i % 1000000;
		h.caplen = h.len = p->len;
		pcap_dump((u_char *)d, &h, p->frame);
	}
	pcap_dump_close(d);
	pcap_close(dead);
	return 0;
}

/* ---- what the sample must do, computed here ---------------------------- */

struct config {
	const char *name;
	const char *args; /* shell words */
	const char *rules[RULES_MAX];
	bool monitor;
	unsigned max_alerts; /* 0: no limit reached */
};

struct flagged_flow {
	struct flow_key key;
	uint32_t rules; /* bit per rule id seen flagging one of its packets */
	unsigned alerts;
};

struct expect {
	int *rule;	/* per packet: lowest rule id found, or -1 */
	bool *forward;	/* per packet */
	unsigned *seen; /* per packet, in OUT */
	struct flagged_flow flows[N_FLOWS * 2];
	unsigned n_flows;
	uint64_t tcp, noise, flagged, forwarded;
	bool alert_no[N_FLOWS * 2];
};

static bool find(const uint8_t *p, uint32_t n, const char *s)
{
	uint32_t m = (uint32_t)strlen(s);

	for (uint32_t i = 0; i + m <= n; i++)
		if (memcmp(p + i, s, m) == 0)
			return true;
	return false;
}

static bool key_equal(const struct flow_key *a, const struct flow_key *b)
{
	return a->ipver == b->ipver && a->sport == b->sport &&
	       a->dport == b->dport && memcmp(a->src, b->src, 16) == 0 &&
	       memcmp(a->dst, b->dst, 16) == 0;
}

static struct flagged_flow *flow_of(struct expect *e, const struct flow_key *k)
{
	for (unsigned i = 0; i < e->n_flows; i++)
		if (key_equal(&e->flows[i].key, k))
			return &e->flows[i];
	return NULL;
}

static void compute(const struct config *c, struct expect *e)
{
	memset(e->flows, 0, sizeof(e->flows));
	memset(e->alert_no, 0, sizeof(e->alert_no));
	e->n_flows = 0;
	e->tcp = e->noise = e->flagged = e->forwarded = 0;
	for (unsigned i = 0; i < g_n; i++) {
		const struct pkt *p = &g_pkts[i];
		struct flagged_flow *f;

		e->rule[i] = -1;
		e->seen[i] = 0;
		e->forward[i] = false;
		if (p->kind != K_TCP) {
			e->noise++;
			continue;
		}
		e->tcp++;
		for (int r = 0; r < RULES_MAX && c->rules[r]; r++) {
			if (find(p->frame + p->pay_off, p->pay_len,
				 c->rules[r])) {
				e->rule[i] = r;
				break;
			}
		}
		e->forward[i] = e->rule[i] < 0 || c->monitor;
		e->forwarded += e->forward[i];
		if (e->rule[i] < 0)
			continue;
		e->flagged++;
		f = flow_of(e, &p->key);
		if (!f) {
			f = &e->flows[e->n_flows++];
			f->key = p->key;
		}
		f->rules |= 1u << e->rule[i];
	}
}

/* ---- reading the sample's output ---------------------------------------- */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)rd16(p) << 16 | rd16(p + 2);
}

/* Is @f an alert? Then check it against @e and count it. */
static bool check_alert(const uint8_t *f, uint32_t len, struct expect *e,
			unsigned *alerts)
{
	const uint8_t *ip = f + 14, *udp = ip + 20, *pay = udp + 8;
	struct flow_key k;
	struct flagged_flow *ff;
	uint32_t sum = 0, no;

	if (len < 14 + 20 + 8 + 4 || rd16(f + 12) != 0x0800 || ip[0] != 0x45 ||
	    ip[9] != 17 || rd16(udp + 2) != ALERT_PORT ||
	    memcmp(ip + 16, "\xc0\x00\x02\x02", 4) != 0)
		return false;
	(*alerts)++;
	CHECK(len == ALERT_LEN, "alert of %u bytes", len);
	if (len != ALERT_LEN)
		return true;
	for (unsigned i = 0; i < 20; i += 2)
		sum += rd16(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	CHECK(sum == 0xffff, "alert IPv4 checksum wrong (sum %#x)", sum);
	CHECK(rd16(ip + 2) == ALERT_LEN - 14, "alert IP length %u",
	      rd16(ip + 2));
	CHECK(memcmp(ip + 12, "\xc0\x00\x02\x01", 4) == 0,
	      "alert source %u.%u.%u.%u", ip[12], ip[13], ip[14], ip[15]);
	CHECK(rd16(udp) == ALERT_PORT && rd16(udp + 4) == ALERT_LEN - 34,
	      "alert UDP ports %u->%u length %u", rd16(udp), rd16(udp + 2),
	      rd16(udp + 4));
	CHECK(memcmp(pay, "DPFA", 4) == 0 && pay[4] == 1 && pay[7] == 6,
	      "alert header %02x%02x%02x%02x v%u proto %u", pay[0], pay[1],
	      pay[2], pay[3], pay[4], pay[7]);
	memset(&k, 0, sizeof(k));
	k.ipver = pay[6];
	k.sport = rd16(pay + 8);
	k.dport = rd16(pay + 10);
	memcpy(k.src, pay + 16, 16);
	memcpy(k.dst, pay + 32, 16);
	no = rd32(pay + 12);
	ff = flow_of(e, &k);
	CHECK(ff, "alert for a flow that was not flagged: v%u port %u->%u",
	      k.ipver, k.sport, k.dport);
	if (!ff)
		return true;
	ff->alerts++;
	CHECK(ff->alerts == 1, "second alert for flow port %u->%u", k.sport,
	      k.dport);
	CHECK(pay[5] < 32 && (ff->rules & (1u << pay[5])),
	      "alert for flow port %u->%u names rule %u (rules seen: %#x)",
	      k.sport, k.dport, pay[5], ff->rules);
	CHECK(no < N_FLOWS * 2 && !e->alert_no[no], "alert number %u", no);
	if (no < N_FLOWS * 2)
		e->alert_no[no] = true;
	return true;
}

/* Our own header walk: Ethernet, one optional 802.1Q tag, IPv4 (no
   options) or IPv6 (no extension headers), TCP. The TCP sequence number,
   or -1 when the frame is not such a packet. */
static int64_t tcp_seq_of(const uint8_t *f, uint32_t len)
{
	uint32_t o = 14;
	uint16_t et;

	if (len < 14)
		return -1;
	et = rd16(f + 12);
	if (et == 0x8100) {
		if (len < 18)
			return -1;
		et = rd16(f + 16);
		o = 18;
	}
	if (et == 0x0800 && len >= o + 20 && f[o + 9] == 6)
		o += (uint32_t)(f[o] & 15) * 4;
	else if (et == 0x86dd && len >= o + 40 && f[o + 6] == 6)
		o += 40;
	else
		return -1;
	if (len < o + 20)
		return -1;
	return rd32(f + o + 4);
}

static void read_output(const char *path, struct expect *e, unsigned *fwd,
			unsigned *alerts)
{
	char ebuf[PCAP_ERRBUF_SIZE];
	pcap_t *pc = pcap_open_offline(path, ebuf);
	struct pcap_pkthdr *h;
	const u_char *f;
	unsigned bad = 0;

	*fwd = *alerts = 0;
	CHECK(pc, "cannot read %s: %s", path, ebuf);
	if (!pc)
		return;
	while (pcap_next_ex(pc, &h, &f) == 1) {
		int64_t seq;

		if (check_alert(f, h->caplen, e, alerts))
			continue;
		seq = tcp_seq_of(f, h->caplen);
		if (seq < 0 || seq >= g_n || g_pkts[seq].kind != K_TCP ||
		    g_pkts[seq].len != h->caplen ||
		    memcmp(g_pkts[seq].frame, f, h->caplen) != 0) {
			if (bad++ < 5)
				fprintf(stderr,
					"FAIL: OUT has a frame that is no "
					"input TCP packet: %u bytes, "
					"ethertype %04x, seq %lld\n",
					h->caplen,
					h->caplen >= 14 ? rd16(f + 12) : 0,
					(long long)seq);
			g_failed++;
			continue;
		}
		(*fwd)++;
		e->seen[seq]++;
		CHECK(e->forward[seq], "packet %lld (rule %d) was forwarded",
		      (long long)seq, e->rule[seq]);
		CHECK(e->seen[seq] == 1, "packet %lld forwarded %u times",
		      (long long)seq, e->seen[seq]);
	}
	pcap_close(pc);
}

/* ---- running it -------------------------------------------------------- */

struct counters {
	long long rx, tcp, non_tcp, flagged, alerts, alerts_lost, forwarded,
	    error_items, lost, stuck_items;
	bool found;
};

static long long field(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(line, pat);
	return p ? atoll(p + strlen(pat)) : -1;
}

/* Run the sample; its output is echoed. Returns its exit status. */
static int run_sample(const char *exe, const struct config *c, const char *in,
		      const char *out, struct counters *k)
{
	char cmd[8192], line[4096];
	FILE *p;
	int st;

	memset(k, 0, sizeof(*k));
	snprintf(cmd, sizeof(cmd), "'%s' %s '%s' '%s' 2>&1", exe, c->args, in,
		 out);
	printf("   $ %s\n", cmd);
	fflush(stdout);
	p = popen(cmd, "r");
	if (!p) {
		fprintf(stderr, "FAIL: popen: %s\n", strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), p)) {
		printf("   | %s", line);
		if (strncmp(line, "counters:", 9) == 0) {
			k->found = true;
			k->rx = field(line, "rx");
			k->tcp = field(line, "tcp");
			k->non_tcp = field(line, "non_tcp");
			k->flagged = field(line, "flagged");
			k->alerts = field(line, "alerts");
			k->alerts_lost = field(line, "alerts_lost");
			k->forwarded = field(line, "forwarded");
			k->error_items = field(line, "error_items");
			k->lost = field(line, "lost");
			k->stuck_items = field(line, "stuck_items");
		}
	}
	st = pclose(p);
	fflush(stdout);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Returns 77 when the sample found no GPU, else 0. */
static int run_config(const char *exe, const char *dir, const char *in,
		      const struct config *c, struct expect *e)
{
	char out[512];
	struct counters k;
	unsigned fwd, alerts, missing = 0, want_alerts, no_alert = 0;
	int failed_before = g_failed, rc;

	compute(c, e);
	want_alerts = c->max_alerts && c->max_alerts < e->n_flows
			  ? c->max_alerts
			  : e->n_flows;
	printf("== %s: %u packets: %llu TCP (%llu flagged in %u flows, %llu "
	       "to forward), %llu other\n",
	       c->name, g_n, (unsigned long long)e->tcp,
	       (unsigned long long)e->flagged, e->n_flows,
	       (unsigned long long)e->forwarded, (unsigned long long)e->noise);
	snprintf(out, sizeof(out), "%s/out-%c.pcap", dir, c->name[0]);
	rc = run_sample(exe, c, in, out, &k);
	if (rc == 77)
		return 77;
	CHECK(rc == 0, "dpflow-gpu-ids exited with %d", rc);
	if (rc != 0)
		return 0;

	read_output(out, e, &fwd, &alerts);
	for (unsigned i = 0; i < g_n; i++) {
		if (e->forward[i] && e->seen[i] == 0 && missing++ < 5)
			fprintf(stderr,
				"FAIL: packet %u (flow port %u->%u, %u "
				"payload bytes) was not forwarded\n",
				i, g_pkts[i].key.sport, g_pkts[i].key.dport,
				g_pkts[i].pay_len);
	}
	CHECK(missing == 0, "%u packets to forward are missing", missing);
	for (unsigned i = 0; i < e->n_flows; i++) {
		const struct flagged_flow *f = &e->flows[i];

		if (f->alerts)
			continue;
		if (!c->max_alerts && no_alert < 5)
			fprintf(stderr,
				"FAIL: no alert for flagged flow v%u port "
				"%u->%u (rules %#x)\n",
				f->key.ipver, f->key.sport, f->key.dport,
				f->rules);
		no_alert++;
	}
	CHECK(alerts == want_alerts, "%u alerts, %u expected", alerts,
	      want_alerts);
	CHECK(no_alert == e->n_flows - want_alerts,
	      "%u flagged flows without an alert, %u expected", no_alert,
	      e->n_flows - want_alerts);
	CHECK(fwd == e->forwarded, "%u packets forwarded, %llu expected", fwd,
	      (unsigned long long)e->forwarded);

	CHECK(k.found, "no counters line");
	if (k.found) {
		long long lost_alerts = e->n_flows - want_alerts;

		CHECK(k.rx == g_n, "rx=%lld", k.rx);
		CHECK(k.tcp == (long long)e->tcp, "tcp=%lld", k.tcp);
		CHECK(k.non_tcp == (long long)e->noise, "non_tcp=%lld",
		      k.non_tcp);
		CHECK(k.flagged == (long long)e->flagged, "flagged=%lld",
		      k.flagged);
		CHECK(k.alerts == want_alerts, "alerts=%lld", k.alerts);
		CHECK(k.alerts_lost == lost_alerts, "alerts_lost=%lld",
		      k.alerts_lost);
		CHECK(k.forwarded == (long long)e->forwarded, "forwarded=%lld",
		      k.forwarded);
		CHECK(lost_alerts ? k.error_items > 0 : k.error_items == 0,
		      "error_items=%lld", k.error_items);
		CHECK(k.lost == 0 && k.stuck_items == 0,
		      "lost=%lld stuck_items=%lld", k.lost, k.stuck_items);
	}
	printf("   %s: %u forwarded, %u alerts: %s\n", c->name, fwd, alerts,
	       g_failed == failed_before ? "ok" : "FAILED");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct config cfgs[] = {
	    {"A: defaults (drop flagged packets)",
	     "",
	     {"/etc/passwd", "cmd.exe", NULL, NULL},
	     false,
	     0},
	    {"B: --monitor, 4 blocks of 2 items, batches of 64, 3 rules",
	     "--monitor --blocks 4 --items 2 --batch 64 "
	     "--rule '\\x2fetc\\x2fpasswd' --rule cmd.exe "
	     "--rule 'SELECT * FROM'",
	     {"/etc/passwd", "cmd.exe", "SELECT * FROM", NULL},
	     true,
	     0},
	    {"C: --max-alerts 3 (alerts lost: ERROR items)",
	     "--max-alerts 3 --blocks 1 --items 3",
	     {"/etc/passwd", "cmd.exe", NULL, NULL},
	     false,
	     MAX_ALERTS_CFG},
	};
	const char *exe = argc > 1 ? argv[1] : GPU_IDS_EXE;
	char dir[] = "/tmp/dpflow-gpu-sample-XXXXXX", in[512];
	unsigned order[N_PKTS];
	struct expect e;
	int rc = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	g_pkts = calloc(N_PKTS, sizeof(*g_pkts));
	e.rule = calloc(N_PKTS, sizeof(int));
	e.forward = calloc(N_PKTS, sizeof(bool));
	e.seen = calloc(N_PKTS, sizeof(unsigned));
	if (!g_pkts || !e.rule || !e.forward || !e.seen || !mkdtemp(dir)) {
		fprintf(stderr, "FAIL: out of memory or no /tmp\n");
		return 1;
	}
	for (unsigned f = 0; f < N_FLOWS; f++)
		for (unsigned j = 0; j < PKTS_PER_FLOW; j++)
			add_tcp(f, j);
	for (unsigned k = 0; k < N_NOISE; k++)
		add_noise(k);
	/* interleave everything (a fixed shuffle) */
	for (unsigned i = 0; i < g_n; i++)
		order[i] = i;
	for (unsigned i = g_n - 1; i > 0; i--) {
		unsigned j = rnd() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	snprintf(in, sizeof(in), "%s/in.pcap", dir);
	if (write_pcap(in, order) < 0)
		return 1;
	printf("sample: %s\ninput: %s (%u packets)\n", exe, in, g_n);

	for (unsigned i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		if (run_config(exe, dir, in, &cfgs[i], &e) == 77) {
			printf("skipped: the sample found no GPU\n");
			rc = 77;
			break;
		}
	}
	if (rc != 77) {
		printf("test_gpu_sample: %s (%d failed checks)\n",
		       g_failed ? "FAILED" : "passed", g_failed);
		rc = g_failed ? 1 : 0;
	}
	if (rc == 1) {
		printf("files kept in %s\n", dir);
	} else {
		char path[600];

		for (unsigned i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
			snprintf(path, sizeof(path), "%s/out-%c.pcap", dir,
				 cfgs[i].name[0]);
			unlink(path);
		}
		unlink(in);
		rmdir(dir);
	}
	free(g_pkts);
	free(e.rule);
	free(e.forward);
	free(e.seen);
	return rc;
}
