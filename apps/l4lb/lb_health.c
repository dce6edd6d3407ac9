/*
 * Health checks of the balancer's backends (l4lb_ctl.h), from the control
 * thread: non-blocking sockets polled with a zero timeout at each tick.
 * A TCP check passes when the connection is accepted; an HTTP check sends
 * "GET PATH HTTP/1.0" and passes on a 2xx or 3xx status line. A check that
 * has no answer within timeout_ms fails. The checks use the host's own
 * network stack and routes (not the data plane's ports).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dpflow/log.h"

#include "l4lb/l4lb_ctl.h"
#include "l4lb/lb_internal.h"

enum { H_IDLE = 0, H_CONNECTING, H_READING };

struct lb_health {
	int fd;
	uint8_t phase;
	uint8_t fails, oks; /* in a row */
	uint64_t deadline, next_at;
	unsigned got;
	char buf[32];
};

static struct lb_health *health_of(struct l4lb *lb)
{
	if (!lb->health) {
		lb->health = calloc(L4LB_BACKENDS_MAX, sizeof(*lb->health));
		if (!lb->health)
			return NULL;
		for (unsigned b = 0; b < L4LB_BACKENDS_MAX; b++)
			lb->health[b].fd = -1;
	}
	return lb->health;
}

void lb_health_free(struct l4lb *lb)
{
	if (!lb->health)
		return;
	for (unsigned b = 0; b < L4LB_BACKENDS_MAX; b++)
		if (lb->health[b].fd >= 0)
			close(lb->health[b].fd);
	free(lb->health);
	lb->health = NULL;
}

void lb_health_reset(struct l4lb *lb, uint32_t id)
{
	struct lb_health *h;

	if (!lb->health || id >= L4LB_BACKENDS_MAX)
		return;
	h = &lb->health[id];
	if (h->fd >= 0)
		close(h->fd);
	memset(h, 0, sizeof(*h));
	h->fd = -1;
}

static void check_start(const struct lb_service *s, const struct lb_backend *b,
			struct lb_health *h, uint64_t now)
{
	struct sockaddr_storage ss;
	socklen_t len;
	uint16_t port = s->cfg.health.port ? s->cfg.health.port
			: b->cfg.port	   ? b->cfg.port
					   : s->cfg.port;

	memset(&ss, 0, sizeof(ss));
	if (b->cfg.addr.v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		memcpy(&a->sin6_addr, b->cfg.addr.b, 16);
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		memcpy(&a->sin_addr, b->cfg.addr.b, 4);
		len = sizeof(*a);
	}
	h->next_at = now + (uint64_t)s->cfg.health.interval_ms * 1000000u;
	h->deadline = now + (uint64_t)s->cfg.health.timeout_ms * 1000000u;
	h->got = 0;
	h->fd =
	    socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->fd < 0) {
		h->phase = H_IDLE;
		return;
	}
	h->phase = H_CONNECTING;
	if (connect(h->fd, (struct sockaddr *)&ss, len) &&
	    errno != EINPROGRESS) {
		close(h->fd);
		h->fd = -1;
		h->phase = H_IDLE;
		h->deadline = 0; /* failed at once */
	}
}

/* One event on a check in flight: -1 failed, 1 passed, 0 not yet. */
static int check_step(const struct lb_service *s, const struct lb_backend *b,
		      struct lb_health *h, short revents)
{
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (h->phase == H_CONNECTING) {
		char req[160];
		int n;

		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return 0;
		if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) ||
		    soerr)
			return -1;
		if (s->cfg.health.kind == L4LB_HEALTH_TCP)
			return 1;
		n = snprintf(req, sizeof(req),
			     "GET %s HTTP/1.0\r\nUser-Agent: dpflow-l4lb\r\n"
			     "Connection: close\r\n\r\n",
			     s->cfg.health.path);
		if (send(h->fd, req, (size_t)n, MSG_NOSIGNAL) != n)
			return -1;
		h->phase = H_READING;
		(void)b;
		return 0;
	}
	if (!(revents & (POLLIN | POLLERR | POLLHUP)))
		return 0;
	for (;;) {
		ssize_t r = recv(h->fd, h->buf + h->got,
				 sizeof(h->buf) - 1 - h->got, 0);

		if (r < 0)
			return errno == EAGAIN ? 0 : -1;
		if (r == 0)
			break;
		h->got += (unsigned)r;
		if (h->got >= 12 || h->got == sizeof(h->buf) - 1)
			break;
	}
	h->buf[h->got] = 0;
	/* "HTTP/1.x NNN" */
	if (h->got < 12)
		return revents & (POLLHUP | POLLERR) ? -1 : 0;
	if (strncmp(h->buf, "HTTP/1.", 7) || h->buf[8] != ' ')
		return -1;
	return h->buf[9] == '2' || h->buf[9] == '3' ? 1 : -1;
}

static void log_flip(const struct lb_service *s, const struct lb_backend *b,
		     bool up)
{
	char a[LB_ENDPOINT_LEN];

	lb_endpoint_str(&b->cfg.addr, b->cfg.port, a);
	DPFLOW_LOG_INFO("l4lb", "service %s: backend %s %s", s->cfg.name, a,
			up ? "up" : "down");
}

/* Count a result; true when the backend's state flips. */
static bool account(const struct lb_service *s, struct lb_health *h, bool ok,
		    bool up)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	h->phase = H_IDLE;
	if (ok) {
		h->fails = 0;
		if (h->oks < 255)
			h->oks++;
		return !up && h->oks >= s->cfg.health.rise;
	}
	h->oks = 0;
	if (h->fails < 255)
		h->fails++;
	return up && h->fails >= s->cfg.health.fall;
}

/* Count check result @ok of backend @b; take it down or up when that
 * flips its state. True when it did (a commit is due). */
static bool report(struct l4lb *lb, const struct lb_service *s,
		   const struct lb_backend *be, uint32_t b, bool ok)
{
	if (!account(s, &lb->health[b], ok, be->up))
		return false;
	log_flip(s, be, ok);
	l4lb_backend_set_up(lb, b, ok, NULL);
	return true;
}

void l4lb_health_tick(struct l4lb *lb, uint64_t now)
{
	const struct lb_view *v = lb->view;
	struct lb_health *hs = health_of(lb);
	struct pollfd pfd[L4LB_BACKENDS_MAX];
	uint32_t who[L4LB_BACKENDS_MAX];
	unsigned n = 0;
	bool changed = false;

	if (!hs)
		return;
	for (uint32_t b = 0; b < L4LB_BACKENDS_MAX; b++) {
		const struct lb_backend *be = &v->be[b];
		const struct lb_service *s = &v->svc[be->service];
		struct lb_health *h = &hs[b];

		if (!be->used || !s->used ||
		    s->cfg.health.kind == L4LB_HEALTH_NONE) {
			lb_health_reset(lb, b);
			continue;
		}
		if (h->phase == H_IDLE && now >= h->next_at) {
			check_start(s, be, h, now);
			if (h->phase == H_IDLE) { /* could not even start */
				changed |= report(lb, s, be, b, false);
				continue;
			}
		}
		if (h->phase == H_IDLE)
			continue;
		if (now >= h->deadline) {
			changed |= report(lb, s, be, b, false);
			continue;
		}
		pfd[n].fd = h->fd;
		pfd[n].events = h->phase == H_CONNECTING ? POLLOUT : POLLIN;
		pfd[n].revents = 0;
		who[n++] = b;
	}
	if (n && poll(pfd, n, 0) > 0) {
		for (unsigned i = 0; i < n; i++) {
			uint32_t b = who[i];
			const struct lb_backend *be = &v->be[b];
			const struct lb_service *s = &v->svc[be->service];
			int r;

			if (!pfd[i].revents)
				continue;
			r = check_step(s, be, &hs[b], pfd[i].revents);
			if (r)
				changed |= report(lb, s, be, b, r > 0);
		}
	}
	if (changed) {
		struct dpflow_error err = {0};

		if (l4lb_commit(lb, &err))
			DPFLOW_LOG_WARN("l4lb", "health change not applied: %s",
					err.msg);
	}
}
