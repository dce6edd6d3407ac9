/*
 * Text forms of match-field values, as written in configs:
 *   MAC fields      aa:bb:cc:dd:ee:ff
 *   IPv4 fields     10.1.2.3  or  10.0.0.0/8
 *   IPv6 fields     fd00::1   or  fd00::/16
 *   other fields    42, 0x2a, 0x10/0xf0 (value/mask), 1000-2000 (range)
 * Values come out big-endian in the field's bytes. Any thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/field_value.h"

static void put_be(uint8_t *out, unsigned bytes, uint64_t v)
{
	for (unsigned i = 0; i < bytes; i++)
		out[bytes - 1 - i] = (uint8_t)(v >> (8 * i));
}

static void prefix_mask(uint8_t *m, unsigned bytes, unsigned len)
{
	memset(m, 0, bytes);
	for (unsigned b = 0; b < len; b++)
		m[b / 8] |= (uint8_t)(0x80u >> (b % 8));
}

/* -EINVAL: not a number; -ERANGE: a number above @max (or negative). */
static int parse_uint(const char *s, uint64_t max, uint64_t *v)
{
	const char *digits = *s == '-' ? s + 1 : s;
	char *end;

	if (!*digits)
		return -EINVAL;
	errno = 0;
	*v = strtoull(digits, &end, 0);
	if (*end || end == digits)
		return -EINVAL;
	if (errno || *v > max || (*s == '-' && *v))
		return -ERANGE;
	return 0;
}

/* @why for a number @text that parse_uint() refused with @rc. */
static int bad_number(int rc, const char *what, const char *text, uint64_t max,
		      char *why, size_t why_len)
{
	if (rc == -ERANGE)
		snprintf(why, why_len, "%s'%s' is out of range (max %llu)",
			 what, text, (unsigned long long)max);
	else
		snprintf(why, why_len, "%s'%s' is not a number", what, text);
	return -EINVAL;
}

int field_value_parse(unsigned field, const char *text, struct field_value *fv,
		      char *why, size_t why_len)
{
	unsigned bits = dpflow_field_bits(field);
	unsigned bytes = dpflow_field_bytes(field);
	uint64_t max = bits >= 64 ? UINT64_MAX : ((1ull << bits) - 1);
	char buf[128];
	char *slash, *dash;

	memset(fv, 0, sizeof(*fv));
	fv->prefix_len = -1;
	if (!bits || !text || strlen(text) >= sizeof(buf)) {
		snprintf(why, why_len, "bad value");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", text);
	memset(fv->mask, 0xff, bytes);
	slash = strchr(buf, '/');

	if (bits == 48) {
		unsigned m[6];
		char extra;

		if (slash || sscanf(buf, "%x:%x:%x:%x:%x:%x%c", &m[0], &m[1],
				    &m[2], &m[3], &m[4], &m[5], &extra) != 6) {
			snprintf(
			    why, why_len,
			    "'%s' is not a MAC address (aa:bb:cc:dd:ee:ff)",
			    text);
			return -EINVAL;
		}
		for (int i = 0; i < 6; i++) {
			if (m[i] > 0xff) {
				snprintf(why, why_len,
					 "'%s': byte out of range", text);
				return -EINVAL;
			}
			fv->value[i] = (uint8_t)m[i];
		}
		return 0;
	}
	if (dpflow_field_is_addr(field)) {
		int af = bits == 32 ? AF_INET : AF_INET6;
		uint64_t len = bits;

		if (slash) {
			*slash = '\0';
			if (parse_uint(slash + 1, bits, &len)) {
				snprintf(why, why_len,
					 "'%s': prefix length must be 0..%u",
					 text, bits);
				return -EINVAL;
			}
			fv->prefix_len = (int)len;
		}
		if (inet_pton(af, buf, fv->value) != 1) {
			snprintf(why, why_len, "'%s' is not an IPv%d address",
				 text, af == AF_INET ? 4 : 6);
			return -EINVAL;
		}
		prefix_mask(fv->mask, bytes, (unsigned)len);
		for (unsigned b = 0; b < bytes; b++)
			if (fv->value[b] & ~fv->mask[b]) {
				snprintf(why, why_len,
					 "'%s': address bits set beyond the "
					 "prefix length",
					 text);
				return -EINVAL;
			}
		return 0;
	}

	dash = strchr(buf, '-');
	if (dash && dash != buf) {
		uint64_t lo, hi;

		char what[160];
		int rc;

		*dash = '\0';
		snprintf(what, sizeof(what), "'%s': ", text);
		if ((rc = parse_uint(buf, max, &lo)))
			return bad_number(rc, what, buf, max, why, why_len);
		if ((rc = parse_uint(dash + 1, max, &hi)))
			return bad_number(rc, what, dash + 1, max, why,
					  why_len);
		if (lo > hi) {
			snprintf(why, why_len,
				 "'%s' is not a range LO-HI (%llu is above "
				 "%llu)",
				 text, (unsigned long long)lo,
				 (unsigned long long)hi);
			return -EINVAL;
		}
		fv->is_range = true;
		fv->lo = (uint32_t)lo;
		fv->hi = (uint32_t)hi;
		put_be(fv->value, bytes, lo);
		return 0;
	}
	{
		uint64_t v, m = max;
		char what[160];
		int rc;

		if (slash) {
			*slash = '\0';
			snprintf(what, sizeof(what), "'%s': mask ", text);
			if ((rc = parse_uint(slash + 1, max, &m)))
				return bad_number(rc, what, slash + 1, max, why,
						  why_len);
			fv->has_mask = true;
		}
		if (slash)
			snprintf(what, sizeof(what), "'%s': ", text);
		if ((rc = parse_uint(buf, max, &v)))
			return bad_number(rc, slash ? what : "", buf, max, why,
					  why_len);
		put_be(fv->value, bytes, v & m);
		put_be(fv->mask, bytes, m);
	}
	return 0;
}

bool dpflow_field_is_addr(unsigned f)
{
	return f == DPFLOW_FIELD_OUTER_IPV4_SRC ||
	       f == DPFLOW_FIELD_OUTER_IPV4_DST ||
	       f == DPFLOW_FIELD_INNER_IPV4_SRC ||
	       f == DPFLOW_FIELD_INNER_IPV4_DST ||
	       f == DPFLOW_FIELD_OUTER_IPV6_SRC ||
	       f == DPFLOW_FIELD_OUTER_IPV6_DST ||
	       f == DPFLOW_FIELD_INNER_IPV6_SRC ||
	       f == DPFLOW_FIELD_INNER_IPV6_DST;
}
