/*
 * Stable names of the layer and tunnel types of meta.h, as `dpflow
 * inspect`, `dpflow gen --manifest` and the counters print them. Any thread.
 */
#include "dpflow/meta.h"

static const char *const l3_names[] = {
    [DPFLOW_L3_IPV4] = "ipv4",
    [DPFLOW_L3_IPV6] = "ipv6",
    [DPFLOW_L3_OTHER] = "other",
};

static const char *const l4_names[] = {
    [DPFLOW_L4_TCP] = "tcp",   [DPFLOW_L4_UDP] = "udp",
    [DPFLOW_L4_ICMP] = "icmp", [DPFLOW_L4_ICMPV6] = "icmpv6",
    [DPFLOW_L4_SCTP] = "sctp", [DPFLOW_L4_OTHER] = "other",
};

static const char *const tun_names[] = {
    [DPFLOW_TUN_VXLAN] = "vxlan",
    [DPFLOW_TUN_GENEVE] = "geneve",
    [DPFLOW_TUN_GRE] = "gre",
    [DPFLOW_TUN_IPIP] = "ipip",
};

const char *dpflow_l3_name(unsigned type)
{
	return type < DPFLOW_ARRAY_SIZE(l3_names) ? l3_names[type] : NULL;
}

const char *dpflow_l4_name(unsigned type)
{
	return type < DPFLOW_ARRAY_SIZE(l4_names) ? l4_names[type] : NULL;
}

const char *dpflow_tun_name(unsigned type)
{
	return type < DPFLOW_ARRAY_SIZE(tun_names) ? tun_names[type] : NULL;
}
