/*
 * The connection to a dpflow control socket: one JSON request per line,
 * one reply per line, with a timeout on every wait.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dpflowctl.h"

static int sock = -1;
static int timeout_ms = 30000;
static const char *sock_path;
static char *buf;
static size_t buf_len, buf_cap;

void client_init(const char *path, double timeout_s)
{
	sock_path = path;
	timeout_ms = timeout_s > 0 ? (int)(timeout_s * 1000) : -1;
}

static void connect_now(void)
{
	const char *path = sock_path;
	struct sockaddr_un sa;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "dpflowctl: socket path '%s' is too long\n",
			path);
		exit(EXIT_USAGE);
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr,
			"dpflowctl: cannot connect to %s: %s (is dpflow run "
			"--control running? -s SOCKET picks another socket)\n",
			path, strerror(errno));
		exit(EXIT_FAIL);
	}
}

static bool wait_fd(short events)
{
	struct pollfd p = {.fd = sock, .events = events};
	int n;

	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		fprintf(stderr, "dpflowctl: %s: no reply within %d ms\n",
			sock_path, timeout_ms);
	else if (n < 0)
		fprintf(stderr, "dpflowctl: poll: %s\n", strerror(errno));
	return n > 0;
}

static bool send_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(sock, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN && wait_fd(POLLOUT))
			continue;
		if (w <= 0) {
			fprintf(stderr, "dpflowctl: %s: %s\n", sock_path,
				w < 0 ? strerror(errno) : "connection closed");
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* The next reply line (NUL-terminated in buf), its length or -1. */
static long read_line(void)
{
	char *nl;

	for (;;) {
		ssize_t r;

		nl = buf ? memchr(buf, '\n', buf_len) : NULL;
		if (nl)
			break;
		if (buf_cap - buf_len < 65536) {
			size_t cap = buf_cap ? buf_cap * 2 : 1 << 17;
			char *b = realloc(buf, cap);

			if (!b) {
				fprintf(stderr, "dpflowctl: out of memory\n");
				return -1;
			}
			buf = b;
			buf_cap = cap;
		}
		if (!wait_fd(POLLIN))
			return -1;
		r = recv(sock, buf + buf_len, buf_cap - buf_len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr,
				"dpflowctl: %s: the server closed the "
				"connection%s%s\n",
				sock_path, r < 0 ? ": " : "",
				r < 0 ? strerror(errno) : "");
			return -1;
		}
		buf_len += (size_t)r;
	}
	*nl = '\0';
	return nl - buf;
}

json_t *client_call_raw(json_t *req)
{
	char *text = json_dumps(req, JSON_COMPACT);
	json_error_t je;
	json_t *reply;
	long n;
	bool ok;

	json_decref(req);
	if (sock < 0)
		connect_now();
	if (!text) {
		fprintf(stderr, "dpflowctl: out of memory\n");
		return NULL;
	}
	ok = send_all(text, strlen(text)) && send_all("\n", 1);
	free(text);
	if (!ok || (n = read_line()) < 0)
		return NULL;
	reply = json_loads(buf, 0, &je);
	memmove(buf, buf + n + 1, buf_len - (size_t)n - 1);
	buf_len -= (size_t)n + 1;
	if (!reply || !json_is_object(reply)) {
		fprintf(stderr, "dpflowctl: the server's reply is not a JSON "
				"object\n");
		json_decref(reply);
		return NULL;
	}
	return reply;
}

json_t *client_call(json_t *req)
{
	json_t *reply = client_call_raw(req);
	const char *field;

	if (!reply || json_is_true(json_object_get(reply, "ok")))
		return reply;
	field = json_string_value(json_object_get(reply, "field"));
	fprintf(stderr, "dpflowctl: %s%s%s%s\n",
		json_string_value(json_object_get(reply, "error"))
		    ? json_string_value(json_object_get(reply, "error"))
		    : "request failed",
		field ? " (field " : "", field ? field : "", field ? ")" : "");
	json_decref(reply);
	return NULL;
}
