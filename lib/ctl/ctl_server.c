/*
 * The control socket (ctl.h): a Unix stream socket, mode 0600, owner
 * checked with SO_PEERCRED; one JSON request per line in, one reply per
 * line out. Everything is non-blocking and bounded: each connection has
 * its own input and output buffers, a request line may be at most
 * DPFLOW_CTL_REQUEST_MAX bytes (longer: an error reply, then the
 * connection is closed), a connection whose replies are not read is not
 * read from either, and one dpflow_ctl_serve() call reads at most
 * READ_BUDGET bytes a connection. Control thread only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl/ctl_internal.h"

#define LISTEN_TAG  UINT32_MAX
#define READ_CHUNK  (64u << 10)
#define READ_BUDGET (4u << 20)
/* replies pending on a connection before its requests wait: also what
 * bounds one serve call's work for a client that pipelines requests and
 * reads no replies (1 MiB took 0.5 s under ASan on a loaded 2-core VM) */
#define OUT_HIGH   (256u << 10)
#define EVENTS_MAX (DPFLOW_CTL_CONNS_MAX + 1)

struct ctl_conn {
	int fd;
	char *in; /* received, not yet handled */
	size_t in_len, in_cap;
	size_t scanned; /* bytes of @in known to hold no newline */
	char *out;	/* replies not yet sent */
	size_t out_len, out_off, out_cap;
	bool eof;     /* the client has shut down its side */
	bool closing; /* close once @out is sent */
};

static void conn_free(struct dpflow_ctl *ctl, unsigned i)
{
	struct ctl_conn *c = ctl->conns[i];

	if (!c)
		return;
	epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
	ctl->conns[i] = NULL;
}

/* Watch for input, or for room to write while replies are pending. */
static void conn_watch(struct dpflow_ctl *ctl, unsigned i)
{
	struct ctl_conn *c = ctl->conns[i];
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = c->out_len > c->out_off ? EPOLLOUT : EPOLLIN;
	ev.data.u32 = i;
	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Queue reply @text and a newline. Takes @text (may be NULL: out of
 * memory, the connection is closed). */
static void conn_reply(struct ctl_conn *c, char *text)
{
	size_t n = text ? strlen(text) : 0;
	size_t need = c->out_len - c->out_off + n + 1;
	char *out;

	if (!text) {
		c->closing = true;
		return;
	}
	if (c->out_off) { /* move what is left to the front */
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	if (need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;

		while (cap < need)
			cap *= 2;
		out = realloc(c->out, cap);
		if (!out) {
			free(text);
			c->closing = true;
			return;
		}
		c->out = out;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, text, n);
	c->out[c->out_len + n] = '\n';
	c->out_len += n + 1;
	free(text);
}

/* An error reply that does not go through the handler. */
static char *error_text(const char *msg)
{
	json_t *o = json_pack("{s:b,s:s}", "ok", 0, "error", msg);
	char *text =
	    o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	return text;
}

/* Send what we can; false when the connection is to be closed. */
static bool conn_flush(struct ctl_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w =
		    send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (w <= 0)
			return false;
		c->out_off += (size_t)w;
	}
	c->out_off = c->out_len = 0;
	return !c->closing;
}

/*
 * Handle the complete lines of @c's input (and the last one, unterminated,
 * after EOF) while fewer than OUT_HIGH reply bytes are pending; returns
 * how many.
 */
static int conn_handle(struct dpflow_ctl *ctl, struct ctl_conn *c)
{
	size_t start = 0;
	int n = 0;

	while (!c->closing && c->out_len - c->out_off < OUT_HIGH) {
		char *nl =
		    memchr(c->in + c->scanned, '\n', c->in_len - c->scanned);
		size_t len;

		if (!nl) {
			c->scanned = c->in_len;
			if (!c->eof || c->in_len == start)
				break;
			/* the last request may lack its newline */
			nl = c->in + c->in_len;
		}
		len = (size_t)(nl - (c->in + start));
		if (len + 1 > DPFLOW_CTL_REQUEST_MAX) {
			conn_reply(c, error_text("request too large"));
			c->closing = true;
			break;
		}
		if (len > 0 && !(len == 1 && c->in[start] == '\r')) {
			conn_reply(c,
				   dpflow_ctl_handle(ctl, c->in + start, len));
			n++;
		}
		start = (size_t)(nl - c->in) + (nl < c->in + c->in_len);
		c->scanned = start;
		if (start >= c->in_len)
			break;
	}
	if (start) {
		memmove(c->in, c->in + start, c->in_len - start);
		c->in_len -= start;
		c->scanned -= start < c->scanned ? start : c->scanned;
	}
	/* a line too long to be a request: say so and hang up */
	if (!c->closing && c->in_len >= DPFLOW_CTL_REQUEST_MAX) {
		conn_reply(c, error_text("request too large"));
		c->closing = true;
	}
	if (c->eof && !c->in_len)
		c->closing = true;
	return n;
}

/* Read what @c has sent (up to READ_BUDGET) and answer it. Returns the
 * requests answered; *@alive false when the connection is to be closed. */
static int conn_read(struct dpflow_ctl *ctl, struct ctl_conn *c, bool *alive)
{
	size_t budget = READ_BUDGET;
	int n;

	while (budget && !c->closing && !c->eof) {
		ssize_t r;

		if (c->in_cap - c->in_len < READ_CHUNK) {
			size_t cap = c->in_cap ? c->in_cap * 2 : READ_CHUNK * 2;
			char *in;

			if (cap > DPFLOW_CTL_REQUEST_MAX + READ_CHUNK)
				cap = DPFLOW_CTL_REQUEST_MAX + READ_CHUNK;
			if (cap <= c->in_cap)
				break; /* full: conn_handle refuses it */
			in = realloc(c->in, cap);
			if (!in) {
				*alive = false;
				return 0;
			}
			c->in = in;
			c->in_cap = cap;
		}
		r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len,
			 MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (r <= 0) {
			c->eof = true;
			break;
		}
		c->in_len += (size_t)r;
		budget -= (size_t)r < budget ? (size_t)r : budget;
	}
	n = conn_handle(ctl, c);
	*alive = conn_flush(c);
	return n;
}

/* Refuse a client with an error line (best effort) and hang up. */
static void refuse(int fd, const char *msg)
{
	char *text = error_text(msg);

	if (text) {
		size_t n = strlen(text);

		if (send(fd, text, n, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
			send(fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	free(text);
	close(fd);
}

static void accept_all(struct dpflow_ctl *ctl)
{
	for (;;) {
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		struct epoll_event ev;
		unsigned i;
		int fd =
		    accept4(ctl->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) ||
		    (cred.uid != 0 && cred.uid != geteuid())) {
			refuse(fd, "permission denied: only root or the "
				   "socket's owner may use it");
			continue;
		}
		for (i = 0; i < DPFLOW_CTL_CONNS_MAX && ctl->conns[i]; i++)
			;
		if (i == DPFLOW_CTL_CONNS_MAX) {
			refuse(fd, "too many connections");
			continue;
		}
		ctl->conns[i] = calloc(1, sizeof(*ctl->conns[i]));
		if (!ctl->conns[i]) {
			close(fd);
			continue;
		}
		ctl->conns[i]->fd = fd;
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		ev.data.u32 = i;
		if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			free(ctl->conns[i]);
			ctl->conns[i] = NULL;
		}
	}
}

int dpflow_ctl_serve(struct dpflow_ctl *ctl, int timeout_ms)
{
	struct epoll_event ev[EVENTS_MAX];
	int n, answered = 0;

	if (!ctl || ctl->epfd < 0)
		return -ENOTCONN;
	n = epoll_wait(ctl->epfd, ev, EVENTS_MAX, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int k = 0; k < n; k++) {
		uint32_t i = ev[k].data.u32;
		struct ctl_conn *c;
		bool alive = true;

		if (i == LISTEN_TAG) {
			accept_all(ctl);
			continue;
		}
		c = i < DPFLOW_CTL_CONNS_MAX ? ctl->conns[i] : NULL;
		if (!c)
			continue;
		if (c->out_off < c->out_len) {
			/* replies pending: send them, then take up the
			 * requests already read */
			alive = conn_flush(c);
			if (alive && c->out_off >= c->out_len) {
				answered += conn_handle(ctl, c);
				alive = conn_flush(c);
			}
		} else {
			answered += conn_read(ctl, c, &alive);
		}
		if (!alive)
			conn_free(ctl, i);
		else
			conn_watch(ctl, i);
	}
	return answered;
}

int dpflow_ctl_fd(const struct dpflow_ctl *ctl)
{
	return ctl ? ctl->epfd : -1;
}

/*
 * Make @path's missing parent directories, each with mode 0700 (those that
 * exist are left as they are), as mkdir -p would.
 */
static int make_dir(const char *path, struct dpflow_error *err)
{
	char *dir = strdup(path), *slash;
	struct stat st;
	int rc = 0;

	if (!dir)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	slash = strrchr(dir, '/');
	if (slash && slash != dir)
		*slash = '\0';
	/* "a/b/c": "a", then "a/b", then "a/b/c" */
	for (char *p = dir + 1; slash && slash != dir && !rc; p++) {
		bool end = !*p;

		if (*p != '/' && !end)
			continue;
		*p = '\0';
		if (stat(dir, &st) && mkdir(dir, 0700) && errno != EEXIST)
			rc = dpflow_error_set(err, errno, "path",
					      "cannot make directory %s: %s",
					      dir, strerror(errno));
		else if (stat(dir, &st) || !S_ISDIR(st.st_mode))
			rc = dpflow_error_set(err, ENOTDIR, "path",
					      "%s is not a directory", dir);
		if (end)
			break;
		*p = '/';
	}
	free(dir);
	return rc;
}

/*
 * Is @path free for the socket? Nothing there, or a stale socket (nobody
 * answers a connect), removed when @remove. A live socket or another file
 * is refused.
 */
static int clear_path(const char *path, const struct sockaddr_un *sa,
		      bool remove, struct dpflow_error *err)
{
	struct stat st;
	int fd, live;

	if (lstat(path, &st))
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return dpflow_error_set(err, EEXIST, "path",
					"%s exists and is not a socket", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dpflow_error_set(err, errno, "path", "socket: %s",
					strerror(errno));
	live = !connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (live)
		return dpflow_error_set(err, EADDRINUSE, "path",
					"%s: another server listens there (a "
					"running dpflow?)",
					path);
	if (remove && unlink(path) && errno != ENOENT)
		return dpflow_error_set(err, errno, "path", "%s: %s", path,
					strerror(errno));
	return 0;
}

/* @path as a socket address, with room for the temporary name's suffix. */
static int sock_addr(const char *path, struct sockaddr_un *sa,
		     struct dpflow_error *err)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (!*path || strlen(path) + 12 >= sizeof(sa->sun_path))
		return dpflow_error_set(err, ENAMETOOLONG, "path",
					"control socket path '%s' is empty or "
					"longer than %zu characters",
					path, sizeof(sa->sun_path) - 13);
	memcpy(sa->sun_path, path, strlen(path) + 1);
	return 0;
}

int dpflow_ctl_check_path(const char *path, struct dpflow_error *err)
{
	struct sockaddr_un sa;
	int rc;

	if (!path)
		return dpflow_error_set(err, EINVAL, "path", "no path given");
	if ((rc = sock_addr(path, &sa, err)) || (rc = make_dir(path, err)))
		return rc;
	return clear_path(path, &sa, false, err);
}

/*
 * Bind @path with mode 0600 from the start: bind a temporary name in the
 * same directory, chmod it, then rename it into place, so that no one
 * ever sees the socket with the umask's mode.
 */
static int listen_on(struct dpflow_ctl *ctl, const char *path,
		     struct dpflow_error *err)
{
	struct sockaddr_un sa, tmp;
	struct epoll_event ev;
	struct stat st;
	int rc;

	if ((rc = sock_addr(path, &sa, err)))
		return rc;
	tmp = sa;
	snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s.%u", path,
		 (unsigned)getpid() % 100000000u);
	if ((rc = make_dir(path, err)) ||
	    (rc = clear_path(path, &sa, true, err)))
		return rc;
	ctl->lfd =
	    socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctl->lfd < 0)
		return dpflow_error_set(err, errno, "path", "socket: %s",
					strerror(errno));
	unlink(tmp.sun_path);
	if (bind(ctl->lfd, (struct sockaddr *)&tmp, sizeof(tmp)))
		return dpflow_error_set(err, errno, "path", "bind %s: %s",
					tmp.sun_path, strerror(errno));
	if (chmod(tmp.sun_path, 0600) || listen(ctl->lfd, 16) ||
	    rename(tmp.sun_path, path) || stat(path, &st)) {
		rc = dpflow_error_set(err, errno, "path", "%s: %s", path,
				      strerror(errno));
		unlink(tmp.sun_path);
		return rc;
	}
	ctl->dev = st.st_dev;
	ctl->ino = st.st_ino;
	ctl->path = strdup(path);
	ctl->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!ctl->path || ctl->epfd < 0)
		return dpflow_error_set(err, ENOMEM, NULL, "out of memory");
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u32 = LISTEN_TAG;
	if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->lfd, &ev))
		return dpflow_error_set(err, errno, NULL, "epoll: %s",
					strerror(errno));
	return 0;
}

struct dpflow_ctl *dpflow_ctl_open(struct dpflow_ctx *ctx, const char *path,
				   const struct dpflow_ctl_hooks *hooks,
				   struct dpflow_error *err)
{
	struct dpflow_ctl *ctl;

	if (!ctx) {
		dpflow_error_set(err, EINVAL, "ctx", "no context");
		return NULL;
	}
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl) {
		dpflow_error_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	ctl->ctx = ctx;
	ctl->lfd = ctl->epfd = -1;
	if (hooks)
		ctl->hooks = *hooks;
	ctl->q = dpflow_queue_create(ctx, err);
	if (!ctl->q || (path && listen_on(ctl, path, err))) {
		dpflow_ctl_close(ctl);
		return NULL;
	}
	return ctl;
}

void dpflow_ctl_close(struct dpflow_ctl *ctl)
{
	struct stat st;

	if (!ctl)
		return;
	for (unsigned i = 0; i < DPFLOW_CTL_CONNS_MAX; i++)
		conn_free(ctl, i);
	if (ctl->lfd >= 0)
		close(ctl->lfd);
	if (ctl->epfd >= 0)
		close(ctl->epfd);
	/* remove the socket file if it is still ours */
	if (ctl->path && !lstat(ctl->path, &st) && st.st_dev == ctl->dev &&
	    st.st_ino == ctl->ino)
		unlink(ctl->path);
	free(ctl->path);
	dpflow_queue_destroy(ctl->q);
	free(ctl);
}
