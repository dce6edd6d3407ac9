/*
 * The balancer's data path (l4lb.h): a software handler that classifies
 * a burst (to a VIP, a reply to a SNAT address, an ICMP error about a
 * flow), prefetches the burst's connection table lines, then for each
 * packet looks its flow up, picks a backend for a new flow by Maglev,
 * rewrites or encapsulates the packet and transmits it. Checksums, the
 * NAT rewrite and the outer headers are dpflow/pkt_edit.h's.
 */
#include <errno.h>
#include <string.h>

#include "dpflow/clock.h"
#include "dpflow/pkt_edit.h"
#include "dpflow/pool.h"

#include "l4lb/conn_impl.h"
#include "l4lb/lb_internal.h"

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

#define ETH_HLEN_     14u
#define IPV4_HLEN_    20u
#define IPV6_HLEN_    40u
#define UDP_HLEN_     8u
#define ETH_P_IPV4_   0x0800u
#define ETH_P_IPV6_   0x86ddu
#define IPPROTO_IPIP_ 4u
#define IPPROTO_IPV6_ 41u

#define IPPROTO_TCP_	6
#define IPPROTO_UDP_	17
#define IPPROTO_ICMP_	1
#define IPPROTO_ICMPV6_ 58

#define FWD_BURST_MAX 256
/* the longest outer headers less the Ethernet header they replace */
#define ENCAP_HLEN_MAX (IPV6_HLEN_ + UDP_HLEN_)

enum pkt_kind {
	K_DROP = 0,
	K_FWD,	      /* to a VIP */
	K_REPLY,      /* NAT: backend -> SNAT address */
	K_ICMP,	      /* an ICMP error about a flow to a VIP */
	K_ICMP_REPLY, /* NAT: an ICMP error to a SNAT address about a flow */
};

struct pkt_work {
	struct l4lb_conn_key key;
	uint64_t h;
	struct dpflow_pkt_meta *m;
	uint32_t idx;
	uint16_t svc;
	uint8_t kind;
	uint8_t drop;
	uint16_t emb_off; /* ICMP: the embedded IP header */
};

static const char *const drop_names[] = {
#define L4LB_DROP_NAME_(n, s) s,
    L4LB_FOREACH_DROP(L4LB_DROP_NAME_)
#undef L4LB_DROP_NAME_
};

const char *l4lb_drop_name(unsigned d)
{
	return d < L4LB_DROP__COUNT ? drop_names[d] : "unknown";
}

uint32_t lb_svc_hash(const uint8_t addr[16], uint8_t v6, uint8_t proto,
		     uint16_t port)
{
	uint64_t a = v6 ? l4lb_ld64_(addr) ^ l4lb_ld64_(addr + 8) * 31
			: l4lb_ld32_(addr);
	uint64_t x = (a ^ ((uint64_t)proto << 40 | (uint64_t)port << 48)) *
		     0x9e3779b97f4a7c15ull;

	return (uint32_t)(x >> 32);
}

static uint16_t svc_find(const struct lb_view *v, const uint8_t dst[16],
			 uint8_t v6, uint8_t proto, uint16_t port)
{
	uint32_t h = lb_svc_hash(dst, v6, proto, port);

	for (unsigned i = 0; i < SVC_HASH_SIZE; i++) {
		uint16_t s = v->svc_hash[(h + i) % SVC_HASH_SIZE];
		const struct l4lb_service_cfg *c;

		if (s == SVC_NONE)
			return SVC_NONE;
		c = &v->svc[s].cfg;
		if (c->vip.v6 == v6 && c->proto == proto && c->port == port &&
		    !memcmp(c->vip.b, dst, v6 ? 16 : 4))
			return s;
	}
	return SVC_NONE;
}

uint16_t lb_svc_lookup(const struct lb_view *v, const uint8_t dst[16],
		       uint8_t v6, uint8_t proto, uint16_t dport)
{
	uint16_t s = svc_find(v, dst, v6, proto, dport);

	return s != SVC_NONE ? s : svc_find(v, dst, v6, proto, 0);
}

uint16_t lb_snat_lookup(const struct lb_view *v, const uint8_t dst[16],
			uint8_t v6)
{
	uint32_t h = lb_svc_hash(dst, v6, 0, 0);

	for (unsigned i = 0; i < SVC_HASH_SIZE; i++) {
		uint16_t s = v->snat_hash[(h + i) % SVC_HASH_SIZE];
		const struct l4lb_addr *a;

		if (s == SVC_NONE)
			return SVC_NONE;
		a = &v->svc[s].cfg.snat;
		if (a->v6 == v6 && !memcmp(a->b, dst, v6 ? 16 : 4))
			return s;
	}
	return SVC_NONE;
}

/* State a packet of the client's direction moves its flow to. */
static uint8_t fwd_state(uint8_t proto, uint8_t flags, bool creating)
{
	if (proto != IPPROTO_TCP_)
		return creating ? L4LB_CONN_HALF_OPEN : L4LB_CONN_ESTABLISHED;
	if (flags & (TCP_FIN | TCP_RST))
		return L4LB_CONN_CLOSING;
	if ((flags & (TCP_SYN | TCP_ACK)) == TCP_SYN)
		return creating ? L4LB_CONN_HALF_OPEN : L4LB_CONN_FREE;
	return L4LB_CONN_ESTABLISHED;
}

/*
 * ICMP error @m/@f about a flow: find the embedded packet (an IPv4 or
 * IPv6 header and 4 bytes of TCP/UDP ports) and fill @w's key with the
 * flow's client-side key (the embedded packet went VIP -> client).
 */
static uint8_t icmp_classify(const struct lb_view *v, const uint8_t *f,
			     const struct dpflow_pkt_meta *m,
			     struct pkt_work *w)
{
	const struct dpflow_hdr *o = &m->outer;
	uint32_t len = m->data_len, off = o->l4_off + 8u, ihl;
	const uint8_t *e, *esrc, *edst;
	uint8_t type = (uint8_t)o->sport, proto, ev6;

	if (o->l4_type == DPFLOW_L4_ICMP ? (type != 3 && type != 11)
					 : (type < 1 || type > 3))
		return K_DROP;
	if (off + 1 > len)
		return K_DROP;
	e = f + off;
	ev6 = (e[0] >> 4) == 6;
	if ((e[0] >> 4) != (ev6 ? 6 : 4) ||
	    ev6 != (o->l3_type == DPFLOW_L3_IPV6))
		return K_DROP;
	ihl = ev6 ? IPV6_HLEN_ : (e[0] & 0xfu) * 4u;
	if (ihl < IPV4_HLEN_ || off + ihl + 4 > len)
		return K_DROP;
	proto = ev6 ? e[6] : e[9];
	if (proto != IPPROTO_TCP_ && proto != IPPROTO_UDP_)
		return K_DROP;
	esrc = ev6 ? e + 8 : e + 12;
	edst = ev6 ? e + 24 : e + 16;
	w->emb_off = (uint16_t)off;
	/* the quoted packet reversed: the key of the direction it answers */
	l4lb_conn_key_set(&w->key, edst, esrc, ev6,
			  dpflow_edit_rd16(e + ihl + 2),
			  dpflow_edit_rd16(e + ihl), proto);
	/* quoted VIP:vport -> client:cport: the client side's error, about
	 * the flow's forward key */
	w->svc = lb_svc_lookup(v, esrc, ev6, proto, dpflow_edit_rd16(e + ihl));
	if (w->svc != SVC_NONE &&
	    !memcmp(v->svc[w->svc].cfg.vip.b, o->dst, ev6 ? 16 : 4))
		return K_ICMP;
	/* quoted snat:port -> backend:bport, sent to the SNAT address:
	 * about the flow's reply key */
	if (!memcmp(esrc, o->dst, ev6 ? 16 : 4) &&
	    lb_snat_lookup(v, o->dst, ev6) != SVC_NONE)
		return K_ICMP_REPLY;
	return K_DROP;
}

/*
 * The last destination (address, protocol, port) a burst looked up and
 * what it found: the packets of a burst mostly go to one VIP (or, on the
 * backend port, to one SNAT address), and the lookup costs about ten
 * cycles a packet. The view does not change during a burst.
 */
struct dst_memo {
	uint8_t dst[16];
	uint16_t port;
	uint8_t proto;
	uint8_t v6; /* 0xff: empty */
	uint8_t kind;
	uint16_t svc;
};

static bool memo_hit(const struct dst_memo *mm, const uint8_t dst[16],
		     uint8_t v6, uint8_t proto, uint16_t port)
{
	return mm->v6 == v6 && mm->proto == proto && mm->port == port &&
	       (v6 ? !memcmp(mm->dst, dst, 16) : !memcmp(mm->dst, dst, 4));
}

static void classify(const struct lb_view *v, struct pkt_work *w,
		     struct dst_memo *mm)
{
	const struct dpflow_pkt_meta *m = w->m;
	const struct dpflow_hdr *o = &m->outer;
	uint8_t v6 = o->l3_type == DPFLOW_L3_IPV6;

	w->kind = K_DROP;
	if (o->l2_type != DPFLOW_L2_ETH ||
	    (o->l3_type != DPFLOW_L3_IPV4 && !v6)) {
		w->drop = L4LB_DROP_NOT_IP;
		return;
	}
	if (o->frag != DPFLOW_FRAG_NONE) {
		w->drop = L4LB_DROP_FRAGMENT;
		return;
	}
	if (o->l4_type == DPFLOW_L4_TCP || o->l4_type == DPFLOW_L4_UDP) {
		if (!memo_hit(mm, o->dst, v6, o->proto, o->dport)) {
			memcpy(mm->dst, o->dst, 16);
			mm->port = o->dport;
			mm->proto = o->proto;
			mm->v6 = v6;
			mm->svc =
			    lb_svc_lookup(v, o->dst, v6, o->proto, o->dport);
			mm->kind = mm->svc != SVC_NONE ? K_FWD
				   : lb_snat_lookup(v, o->dst, v6) != SVC_NONE
				       ? K_REPLY
				       : K_DROP;
		}
		w->svc = mm->svc;
		if (mm->kind == K_FWD) {
			w->kind = K_FWD;
			/* DSR: the outer headers go in front of the frame */
			if (v->svc[w->svc].cfg.mode != L4LB_MODE_NAT) {
				const uint8_t *f = dpflow_meta_data(w->m);

				__builtin_prefetch(f - 1, 1, 3);
				__builtin_prefetch(f - ENCAP_HLEN_MAX, 1, 3);
			}
		} else if (mm->kind == K_REPLY) {
			w->kind = K_REPLY;
		} else {
			w->drop = L4LB_DROP_NO_SERVICE;
			return;
		}
		l4lb_conn_key_set(&w->key, o->src, o->dst, v6, o->sport,
				  o->dport, o->proto);
	} else if (o->l4_type == DPFLOW_L4_ICMP ||
		   o->l4_type == DPFLOW_L4_ICMPV6) {
		w->kind = icmp_classify(v, dpflow_meta_data(w->m), m, w);
		if (w->kind == K_DROP) {
			w->drop = L4LB_DROP_ICMP_BAD;
			return;
		}
	} else {
		w->drop = L4LB_DROP_NO_SERVICE;
		return;
	}
	w->h = l4lb_conn_hash(&w->key);
}

/* ---- rewriting ----------------------------------------------------------
 */

static void eth_set(uint8_t *f, const uint8_t dst[6], const uint8_t src[6])
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
}

/*
 * Rewrite the addresses and ports of a TCP/UDP packet (IPv4 or IPv6 at
 * @l3, L4 at @l4): source to @src:@sport, destination to @dst:@dport,
 * with the IPv4 header checksum and the L4 checksum updated
 * (dpflow_nat_ipv4/6: one delta for both; a UDP packet without checksum
 * keeps none).
 */
static DPFLOW_ALWAYS_INLINE void nat_rewrite(uint8_t *l3, uint8_t *l4,
					     uint8_t v6, uint8_t proto,
					     const uint8_t *src, uint16_t sport,
					     const uint8_t *dst, uint16_t dport)
{
	if (v6)
		dpflow_nat_ipv6(l3, l4, proto, src, sport, dst, dport);
	else
		dpflow_nat_ipv4(l3, l4, proto, src, sport, dst, dport);
}

void lb_encap_template(struct lb_backend *b, const struct l4lb_service_cfg *s,
		       const uint8_t src_mac[6])
{
	uint8_t *f = b->hdr, *ip = f + ETH_HLEN_;
	bool gue = s->mode == L4LB_MODE_GUE, v6 = b->cfg.addr.v6;
	unsigned ip_hlen = v6 ? IPV6_HLEN_ : IPV4_HLEN_;

	memset(b->hdr, 0, sizeof(b->hdr));
	b->hdr_len = (uint8_t)(ETH_HLEN_ + ip_hlen + (gue ? UDP_HLEN_ : 0));
	b->hdr_sum = 0;
	eth_set(f, b->dst_mac, src_mac);
	dpflow_edit_wr16(f + 12, v6 ? ETH_P_IPV6_ : ETH_P_IPV4_);
	if (v6) {
		ip[0] = 0x60;
		ip[6] = gue ? IPPROTO_UDP_ : 0;
		ip[7] = 64;
		memcpy(ip + 8, s->encap_src.b, 16);
		memcpy(ip + 24, b->cfg.addr.b, 16);
	} else {
		ip[0] = 0x45;
		dpflow_edit_wr16(ip + 6, 0x4000); /* DF */
		ip[8] = 64;
		ip[9] = gue ? IPPROTO_UDP_ : 0;
		memcpy(ip + 12, s->encap_src.b, 4);
		memcpy(ip + 16, b->cfg.addr.b, 4);
		/* the header's sum without tos, length and protocol */
		b->hdr_sum = dpflow_encap_ipv4_sum(ip);
	}
	if (gue)
		dpflow_edit_wr16(ip + ip_hlen + 2, s->gue_port);
}

/* Full recompute of the ICMP(v6) checksum of the message at @l4. */
static void icmp_csum_set(uint8_t *l3, uint8_t *l4, uint8_t v6, unsigned len)
{
	if (v6)
		dpflow_l4_csum_set(
		    l4, len, IPPROTO_ICMPV6_,
		    dpflow_csum_pseudo(l3, 1, IPPROTO_ICMPV6_, len));
	else
		dpflow_l4_csum_set(l4, len, IPPROTO_ICMP_, 0);
}

/*
 * A packet to a VIP too big to encapsulate, or in NAT mode to send
 * (@overhead bytes of outer headers, 0 in NAT mode, would take it over
 * the backend MTU): tell the client, as a router would,
 * with an ICMP "fragmentation needed" (IPv4 with DF) or "packet too big"
 * (IPv6) from the VIP, quoting the packet, so that its path MTU drops by
 * the overhead. IPv4 without DF: nothing (the packet is dropped and
 * counted all the same).
 */
static void too_big(struct l4lb *lb, struct dpflow_pool *pool,
		    const struct pkt_work *w, unsigned overhead)
{
	struct dpflow_pkt_meta *m = w->m;
	const uint8_t *f = dpflow_meta_data(m);
	const uint8_t *ip = f + m->outer.l3_off;
	uint8_t v6 = m->outer.l3_type == DPFLOW_L3_IPV6;
	unsigned mtu = lb->cfg.backend_mtu - overhead, ihl, quote, len;
	unsigned ip_len =
	    m->outer.l3_len ? m->outer.l3_len : m->data_len - m->outer.l3_off;
	uint8_t *o, *oip, *icmp;
	uint32_t idx;

	if (!v6 && !(dpflow_edit_rd16(ip + 6) & 0x4000))
		return; /* IPv4 without DF */
	if (m->outer.l4_type == DPFLOW_L4_ICMP ||
	    m->outer.l4_type == DPFLOW_L4_ICMPV6)
		return; /* no error about an error (RFC 1122 3.2.2) */
	ihl = v6 ? IPV6_HLEN_ : (ip[0] & 0xfu) * 4u;
	/* IPv4: the header and 8 bytes (RFC 792); IPv6: as much as fits
	 * in the minimum MTU (RFC 4443) */
	quote = v6 ? 1280u - IPV6_HLEN_ - 8u : ihl + 8u;
	if (quote > ip_len)
		quote = ip_len;
	len = ETH_HLEN_ + (v6 ? IPV6_HLEN_ : IPV4_HLEN_) + 8u + quote;
	if (dpflow_pool_alloc_bulk(pool, &idx, 1))
		return;
	if (len > pool->data_room) {
		dpflow_pool_free_bulk(pool, &idx, 1);
		return;
	}
	dpflow_pool_meta(pool, idx)->data_len = (uint16_t)len;
	o = dpflow_pkt_data(pool, idx);
	memset(o, 0, len - quote);
	eth_set(o, lb->cfg.client_gw_mac, lb->cfg.client_mac);
	dpflow_edit_wr16(o + 12, v6 ? ETH_P_IPV6_ : ETH_P_IPV4_);
	oip = o + ETH_HLEN_;
	if (v6) {
		oip[0] = 0x60;
		dpflow_edit_wr16(oip + 4, (uint16_t)(8u + quote));
		oip[6] = IPPROTO_ICMPV6_;
		oip[7] = 64;
		memcpy(oip + 8, ip + 24, 16); /* from the VIP */
		memcpy(oip + 24, ip + 8, 16); /* to the client */
		icmp = oip + IPV6_HLEN_;
		icmp[0] = 2; /* packet too big */
		dpflow_edit_wr16(icmp + 4, (uint16_t)(mtu >> 16));
		dpflow_edit_wr16(icmp + 6, (uint16_t)mtu);
	} else {
		oip[0] = 0x45;
		dpflow_edit_wr16(oip + 2, (uint16_t)(IPV4_HLEN_ + 8u + quote));
		oip[8] = 64;
		oip[9] = IPPROTO_ICMP_;
		memcpy(oip + 12, ip + 16, 4);
		memcpy(oip + 16, ip + 12, 4);
		dpflow_ipv4_csum_set(oip, IPV4_HLEN_);
		icmp = oip + IPV4_HLEN_;
		icmp[0] = 3; /* destination unreachable */
		icmp[1] = 4; /* fragmentation needed */
		dpflow_edit_wr16(icmp + 6, (uint16_t)mtu);
	}
	memcpy(icmp + 8, ip, quote);
	icmp_csum_set(oip, icmp, v6, 8u + quote);
	dpflow_ctx_port_send(lb->ctx, lb->cfg.client_port, &idx, 1);
}

/*
 * NAT: the packet is translated in place, so backend_mtu bounds its IP
 * length as it came. Over it, as in encap(): dropped (frame_too_big) and
 * the client told, with the MTU itself (no overhead).
 */
static DPFLOW_ALWAYS_INLINE bool
nat_fits(struct l4lb *lb, struct dpflow_pool *pool, struct pkt_work *w)
{
	const struct dpflow_pkt_meta *m = w->m;
	unsigned ip_len = m->data_len - m->outer.l3_off;

	if (m->outer.l3_len && m->outer.l3_len < ip_len)
		ip_len = m->outer.l3_len; /* no Ethernet padding */
	if (!lb->cfg.backend_mtu || ip_len <= lb->cfg.backend_mtu)
		return true;
	w->drop = L4LB_DROP_TOO_BIG;
	too_big(lb, pool, w, 0);
	return false;
}

/* DSR: IP-in-IP or GUE toward backend @b, from its header template. */
static DPFLOW_ALWAYS_INLINE bool
encap(struct l4lb *lb, const struct lb_service *s, const struct lb_backend *b,
      struct dpflow_pool *pool, struct pkt_work *w)
{
	struct dpflow_pkt_meta *m = w->m;
	uint8_t in_v6 = m->outer.l3_type == DPFLOW_L3_IPV6;
	uint8_t out_v6 = b->cfg.addr.v6;
	bool gue = s->cfg.mode == L4LB_MODE_GUE;
	unsigned ip_hlen = out_v6 ? IPV6_HLEN_ : IPV4_HLEN_;
	unsigned hlen = b->hdr_len;
	uint8_t tos = m->outer.tos, proto;
	uint8_t *f, *ip, *udp;
	unsigned l3 = m->outer.l3_off, ip_len = m->data_len - l3, plen, why;

	if (m->outer.l3_len && m->outer.l3_len < ip_len)
		ip_len = m->outer.l3_len; /* no Ethernet padding inside */
	/* the IP packet stays in place, the frame start moves back */
	why = dpflow_encap_room(m, l3, ip_len, hlen, lb->cfg.backend_mtu);
	if (why) {
		if (why == DPFLOW_DROP_EDIT_NO_HEADROOM) {
			w->drop = L4LB_DROP_NO_HEADROOM;
		} else {
			w->drop = L4LB_DROP_TOO_BIG;
			if (lb->cfg.backend_mtu)
				too_big(lb, pool, w, hlen - ETH_HLEN_);
		}
		return false;
	}
	f = dpflow_meta_data(m);
	dpflow_encap_copy(f, b->hdr, hlen);
	ip = f + ETH_HLEN_;
	plen = m->data_len - ETH_HLEN_ - ip_hlen; /* after the outer IP */
	proto = gue ? IPPROTO_UDP_ : in_v6 ? IPPROTO_IPV6_ : IPPROTO_IPIP_;
	if (out_v6)
		dpflow_encap_ipv6_hdr(ip, tos, (uint32_t)w->h & 0xfffffu,
				      (uint16_t)plen, proto);
	else
		dpflow_encap_ipv4_hdr(ip, b->hdr_sum, tos,
				      (uint16_t)(plen + IPV4_HLEN_), proto);
	if (!gue)
		return true;
	udp = ip + ip_hlen;
	/* source port from the flow hash: entropy for the backend's RSS */
	dpflow_encap_udp_hdr(
	    udp, (uint16_t)(0x8000u | ((uint32_t)(w->h >> 17) & 0x7fffu)),
	    (uint16_t)plen);
	if (out_v6) /* IPv6 UDP needs its checksum (RFC 8200 8.1) */
		dpflow_encap_udp_csum(ip, 1, udp, plen);
	return true;
}

/* ---- flows ----------------------------------------------------------------
 */

static bool backend_ok(const struct lb_view *v, const struct l4lb_conn *c,
		       uint16_t svc)
{
	return c->backend < L4LB_BACKENDS_MAX &&
	       v->be[c->backend].live == LB_LIVE(svc, c->backend_gen);
}

static uint32_t maglev_pick(const struct lb_service *s, uint64_t h)
{
	if (!s->maglev)
		return LB_BACKEND_NONE;
	return s->maglev[(uint32_t)(h >> 32) % s->m];
}

/*
 * NAT: bind a SNAT port for forward entry @fid (@c): insert the reverse
 * key backend:bport -> snat:port, trying ports from the flow hash on.
 */
static bool snat_bind(struct l4lb *lb, const struct lb_service *s,
		      const struct lb_backend *b, struct pkt_work *w,
		      uint32_t fid, uint32_t now_ms, uint8_t state,
		      uint16_t *port_out)
{
	const uint32_t range = 65536u - L4LB_SNAT_PORT_LO;
	uint32_t start = (uint32_t)(w->h >> 8) % range;
	uint16_t bport = b->cfg.port ? b->cfg.port : w->key.dport;
	struct l4lb_conn rc;

	memset(&rc, 0, sizeof(rc));
	rc.reverse = 1;
	rc.service = w->svc;
	for (unsigned i = 0; i < 16; i++) {
		uint16_t p = (uint16_t)(L4LB_SNAT_PORT_LO +
					(start + i * 40503u) % range);
		uint64_t rh;
		uint32_t rid;

		l4lb_conn_key_set(&rc.key, b->cfg.addr.b, s->cfg.snat.b,
				  b->cfg.addr.v6, bport, p, w->key.proto);
		rh = l4lb_conn_hash(&rc.key);
		/* never in @fid's way: when that is all the buckets
		 * offer, the next port's buckets may offer another */
		rid = l4lb_conn_insert_reply(lb->conns, &rc, rh, now_ms, state,
					     fid);
		if (rid == L4LB_CONN_NONE)
			continue;
		l4lb_conn_link(lb->conns, fid, rid);
		*port_out = p;
		return true;
	}
	return false;
}

struct fwd_out {
	uint32_t client[FWD_BURST_MAX];
	uint32_t backend[FWD_BURST_MAX];
	uint32_t drop[FWD_BURST_MAX];
	uint16_t n_client, n_backend, n_drop;
};

static void count_add(struct l4lb_counter *c, uint32_t bytes, bool atomic)
{
	if (atomic) {
		__atomic_fetch_add(&c->pkts, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->bytes, bytes, __ATOMIC_RELAXED);
	} else {
		c->pkts++;
		c->bytes += bytes;
	}
}

static void inc(uint64_t *c, bool atomic)
{
	if (atomic)
		__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
	else
		(*c)++;
}

/* A packet to a VIP: find or make its flow, rewrite or encapsulate. */
static void do_fwd(struct l4lb *lb, const struct lb_view *v,
		   struct dpflow_pool *pool, struct pkt_work *w,
		   struct lb_shard *sh, bool at, uint32_t now_ms)
{
	struct dpflow_pkt_meta *m = w->m;
	const struct lb_service *s = &v->svc[w->svc];
	uint8_t flags = m->outer.tcp_flags;
	uint8_t st_hit = fwd_state(w->key.proto, flags, false);
	struct l4lb_conn c;
	uint32_t id, be;
	uint16_t snat_port = 0;
	const struct lb_backend *b;
	bool nat = s->cfg.mode == L4LB_MODE_NAT;

	id = l4lb_conn_lookup_inline(lb->conns, &w->key, w->h, now_ms, st_hit,
				     &c);
	if (id != L4LB_CONN_NONE && !backend_ok(v, &c, w->svc)) {
		l4lb_conn_free(lb->conns, id);
		inc(&sh->svc[w->svc].rescheduled, at);
		id = L4LB_CONN_NONE;
	}
	if (id != L4LB_CONN_NONE) {
		be = c.backend;
		snat_port = c.snat_port;
		/* the flow is now established: its reply key too, so that
		 * half-open flows (a SYN flood) cannot replace it, and with
		 * it the flow (twins are freed together) */
		if (c.state != L4LB_CONN_ESTABLISHED &&
		    st_hit == L4LB_CONN_ESTABLISHED && nat &&
		    c.peer != L4LB_CONN_NONE)
			l4lb_conn_touch(lb->conns, c.peer, now_ms,
					L4LB_CONN_ESTABLISHED);
	} else {
		uint8_t st = fwd_state(w->key.proto, flags, true);

		be = maglev_pick(s, w->h);
		if (be == LB_BACKEND_NONE) {
			w->drop = L4LB_DROP_NO_BACKEND;
			return;
		}
		memset(&c, 0, sizeof(c));
		c.key = w->key;
		c.backend = be;
		c.backend_gen = v->be[be].gen;
		c.service = w->svc;
		id = l4lb_conn_insert(lb->conns, &c, w->h, now_ms, st);
		inc(&sh->svc[w->svc].new_flows, at);
		inc(&sh->be_new[be], at);
		if (id == L4LB_CONN_NONE) {
			if (nat) {
				w->drop = L4LB_DROP_CONN_FULL;
				return;
			}
			inc(&sh->svc[w->svc].untracked, at);
		} else if (nat) {
			if (!snat_bind(lb, s, &v->be[be], w, id, now_ms, st,
				       &snat_port)) {
				l4lb_conn_free(lb->conns, id);
				w->drop = L4LB_DROP_SNAT_EXHAUSTED;
				return;
			}
			l4lb_conn_set_backend(lb->conns, id, be, snat_port);
		}
	}
	b = &v->be[be];
	if (nat) {
		uint8_t *f = dpflow_meta_data(m);

		if (!nat_fits(lb, pool, w))
			return;
		nat_rewrite(f + m->outer.l3_off, f + m->outer.l4_off, w->key.v6,
			    w->key.proto, s->cfg.snat.b, snat_port,
			    b->cfg.addr.b,
			    b->cfg.port ? b->cfg.port : w->key.dport);
		eth_set(f, b->dst_mac, lb->cfg.backend_mac);
	} else if (!encap(lb, s, b, pool, w)) {
		return;
	}
	count_add(&sh->svc[w->svc].fwd, m->data_len, at);
	count_add(&sh->be_fwd[be], m->data_len, at);
	w->kind = K_FWD;
	w->drop = 0xff; /* sent */
}

/* NAT reply backend -> SNAT: translate back to VIP -> client. */
static void do_reply(struct l4lb *lb, const struct lb_view *v,
		     struct pkt_work *w, struct lb_shard *sh, bool at,
		     uint32_t now_ms)
{
	struct dpflow_pkt_meta *m = w->m;
	struct l4lb_conn r, fc;
	uint8_t *f = dpflow_meta_data(m);
	uint8_t st = L4LB_CONN_FREE, fst;
	uint32_t id;

	if (w->key.proto == IPPROTO_TCP_ &&
	    (m->outer.tcp_flags & (TCP_FIN | TCP_RST)))
		st = L4LB_CONN_CLOSING;
	id = l4lb_conn_lookup(lb->conns, &w->key, w->h, now_ms, L4LB_CONN_FREE,
			      &r);
	if (id == L4LB_CONN_NONE || !r.reverse || r.peer == L4LB_CONN_NONE) {
		w->drop = L4LB_DROP_REPLY_NO_CONN;
		return;
	}
	fst = l4lb_conn_touch(lb->conns, r.peer, now_ms, st);
	if (fst == L4LB_CONN_FREE) {
		l4lb_conn_free(lb->conns, id);
		w->drop = L4LB_DROP_REPLY_NO_CONN;
		return;
	}
	l4lb_conn_touch(lb->conns, id, now_ms, fst);
	l4lb_conn_read(lb->conns, r.peer, &fc);
	nat_rewrite(f + m->outer.l3_off, f + m->outer.l4_off, w->key.v6,
		    w->key.proto, fc.key.dst, fc.key.dport, fc.key.src,
		    fc.key.sport);
	eth_set(f, lb->cfg.client_gw_mac, lb->cfg.client_mac);
	if (fc.service < L4LB_SERVICES_MAX)
		count_add(&sh->svc[fc.service].reply, m->data_len, at);
	(void)v;
	w->kind = K_REPLY;
	w->drop = 0xff;
}

/*
 * Translate the ICMP error @w (NAT): outer destination to @to; the quoted
 * packet to @src:@sport -> @dst:@dport; the quoted and outer IPv4 header
 * checksums and the ICMP checksum recomputed.
 */
static void icmp_translate(const struct pkt_work *w, const uint8_t *to,
			   const uint8_t *src, uint16_t sport,
			   const uint8_t *dst, uint16_t dport)
{
	struct dpflow_pkt_meta *m = w->m;
	uint8_t *f = dpflow_meta_data(m);
	uint8_t *l3 = f + m->outer.l3_off, *l4 = f + m->outer.l4_off;
	uint8_t *e = f + w->emb_off;
	uint8_t v6 = w->key.v6;
	unsigned alen = v6 ? 16 : 4;
	unsigned ihl = v6 ? IPV6_HLEN_ : (e[0] & 0xfu) * 4u;

	memcpy(l3 + (v6 ? 24 : 16), to, alen);
	memcpy(e + (v6 ? 8 : 12), src, alen);
	memcpy(e + (v6 ? 24 : 16), dst, alen);
	dpflow_edit_wr16(e + ihl, sport);
	dpflow_edit_wr16(e + ihl + 2, dport);
	if (!v6) {
		dpflow_ipv4_csum_set(e, ihl);
		dpflow_ipv4_csum_set(l3, (l3[0] & 0xfu) * 4u);
	}
	icmp_csum_set(l3, l4, v6,
		      m->outer.l3_off + m->outer.l3_len - m->outer.l4_off);
}

/* An ICMP error about a flow: to the flow's backend. */
static void do_icmp(struct l4lb *lb, const struct lb_view *v,
		    struct dpflow_pool *pool, struct pkt_work *w,
		    struct lb_shard *sh, bool at, uint32_t now_ms)
{
	struct dpflow_pkt_meta *m = w->m;
	const struct lb_service *s = &v->svc[w->svc];
	struct l4lb_conn c;
	const struct lb_backend *b;
	uint32_t id;

	id = l4lb_conn_lookup(lb->conns, &w->key, w->h, now_ms, L4LB_CONN_FREE,
			      &c);
	if (id == L4LB_CONN_NONE || !backend_ok(v, &c, w->svc)) {
		w->drop = L4LB_DROP_ICMP_NO_CONN;
		return;
	}
	b = &v->be[c.backend];
	if (s->cfg.mode == L4LB_MODE_NAT) {
		if (!nat_fits(lb, pool, w))
			return;
		/* outer: -> backend; quoted: backend:bport -> snat:port */
		icmp_translate(w, b->cfg.addr.b, b->cfg.addr.b,
			       b->cfg.port ? b->cfg.port : w->key.dport,
			       s->cfg.snat.b, c.snat_port);
		eth_set(dpflow_meta_data(m), b->dst_mac, lb->cfg.backend_mac);
	} else if (!encap(lb, s, b, pool, w)) {
		return;
	}
	count_add(&sh->svc[w->svc].icmp, m->data_len, at);
	w->kind = K_ICMP;
	w->drop = 0xff;
}

/*
 * NAT: an ICMP error sent to a SNAT address about a packet the balancer
 * sent a backend (snat:port -> backend:bport): to the flow's client, as
 * an error about the client's own packet (client:cport -> VIP:vport).
 */
static void do_icmp_reply(struct l4lb *lb, struct pkt_work *w,
			  struct lb_shard *sh, bool at, uint32_t now_ms)
{
	struct dpflow_pkt_meta *m = w->m;
	struct l4lb_conn r, fc;
	uint32_t id;

	id = l4lb_conn_lookup(lb->conns, &w->key, w->h, now_ms, L4LB_CONN_FREE,
			      &r);
	if (id == L4LB_CONN_NONE || !r.reverse || r.peer == L4LB_CONN_NONE ||
	    l4lb_conn_touch(lb->conns, r.peer, now_ms, L4LB_CONN_FREE) ==
		L4LB_CONN_FREE) {
		w->drop = L4LB_DROP_ICMP_NO_CONN;
		return;
	}
	l4lb_conn_read(lb->conns, r.peer, &fc);
	/* outer: -> client; quoted: client:cport -> VIP:vport */
	icmp_translate(w, fc.key.src, fc.key.src, fc.key.sport, fc.key.dst,
		       fc.key.dport);
	eth_set(dpflow_meta_data(m), lb->cfg.client_gw_mac, lb->cfg.client_mac);
	if (fc.service < L4LB_SERVICES_MAX)
		count_add(&sh->svc[fc.service].icmp, m->data_len, at);
	w->kind = K_REPLY; /* leaves by the client port */
	w->drop = 0xff;
}

void l4lb_handle(void *arg, struct dpflow_pool *pool, const uint32_t *idx,
		 uint16_t n)
{
	struct l4lb *lb = arg;
	const struct lb_view *v = __atomic_load_n(&lb->view, __ATOMIC_ACQUIRE);
	unsigned shard = dpflow_ctx_thread_shard(lb->ctx);
	struct lb_shard *sh = &lb->shards[shard];
	bool at = shard == DPFLOW_THREAD_SHARDS - 1;
	/* the TSC clock: CLOCK_MONOTONIC_RAW is a system call on some VMs */
	uint32_t now_ms = (uint32_t)(dpflow_clock_ns() / 1000000u);
	struct pkt_work w[FWD_BURST_MAX];
	struct dst_memo memo = {.v6 = 0xff};
	struct fwd_out out;

	while (n > FWD_BURST_MAX) {
		l4lb_handle(arg, pool, idx, FWD_BURST_MAX);
		idx += FWD_BURST_MAX;
		n -= FWD_BURST_MAX;
	}
	out.n_client = out.n_backend = out.n_drop = 0;
	for (unsigned i = 0; i < n; i++) {
		w[i].idx = idx[i];
		w[i].m = dpflow_pool_meta(pool, idx[i]);
		w[i].drop = 0;
		classify(v, &w[i], &memo);
	}
	/* the bucket lines, then the entry lines, each in a loop of its
	 * own: a prefetch that misses the TLB holds up retirement until its
	 * page walk ends, and in a short loop many walks are under way at
	 * once (interleaved with classification, only a few were: 15-20%
	 * slower at 1M flows) */
	for (unsigned i = 0; i < n; i++)
		if (w[i].kind != K_DROP)
			l4lb_conn_prefetch_inline(lb->conns, w[i].h,
						  w[i].key.v6);
	for (unsigned i = 0; i < n; i++)
		if (w[i].kind != K_DROP)
			l4lb_conn_prefetch_entry_inline(lb->conns, w[i].h,
							w[i].key.v6);
	for (unsigned i = 0; i < n; i++) {
		switch (w[i].kind) {
		case K_FWD:
			do_fwd(lb, v, pool, &w[i], sh, at, now_ms);
			break;
		case K_REPLY:
			do_reply(lb, v, &w[i], sh, at, now_ms);
			break;
		case K_ICMP:
			do_icmp(lb, v, pool, &w[i], sh, at, now_ms);
			break;
		case K_ICMP_REPLY:
			do_icmp_reply(lb, &w[i], sh, at, now_ms);
			break;
		default:
			break;
		}
		if (w[i].drop != 0xff) {
			inc(&sh->drops[w[i].drop], at);
			out.drop[out.n_drop++] = w[i].idx;
		} else if (w[i].kind == K_REPLY) {
			out.client[out.n_client++] = w[i].idx;
		} else {
			out.backend[out.n_backend++] = w[i].idx;
		}
	}
	if (out.n_backend)
		dpflow_ctx_port_send(lb->ctx, lb->cfg.backend_port, out.backend,
				     out.n_backend);
	if (out.n_client)
		dpflow_ctx_port_send(lb->ctx, lb->cfg.client_port, out.client,
				     out.n_client);
	if (out.n_drop)
		dpflow_pool_free_bulk(pool, out.drop, out.n_drop);
}
