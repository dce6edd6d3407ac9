/*
 * The control socket: the file's mode, the dpflowctl binary run against it
 * (outputs and exit statuses) while this process serves, framing
 * (pipelined requests, a request cut by EOF, an oversized line), a client
 * that never reads its replies, a live socket not taken over, and a peer
 * refused by its uid.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dpflow/config.h"
#include "dpflow/ctl.h"
#include "dpflow/flow.h"

static const char *cfg_yaml =
    "ports:\n"
    "  - {name: in, uri: 'ring:in'}\n"
    "  - {name: web, uri: 'ring:web'}\n"
    "pipes:\n"
    "  - name: fw\n"
    "    type: basic\n"
    "    root: in\n"
    "    size: 64\n"
    "    match: [outer.l4.dport]\n"
    "    monitor: {counter: true}\n"
    "    fwd: per-entry\n"
    "    miss: drop\n"
    "    entries:\n"
    "      - {match: {outer.l4.dport: 22}, fwd: drop}\n";

static struct dpflow_ctx *ctx;
static struct dpflow_ctl *ctl;
static char dir[48], sock[96];

static void setup(void)
{
	struct dpflow_error err = {0};

	snprintf(dir, sizeof(dir), "/tmp/dpflow-ctl-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/run/ctl.sock", dir);
	ctx = dpflow_config_load_string(cfg_yaml, "test.yaml", NULL, &err);
	cr_assert_not_null(ctx, "%s", err.msg);
	ctl = dpflow_ctl_open(ctx, sock, NULL, &err);
	cr_assert_not_null(ctl, "%s", err.msg);
}

static void teardown(void)
{
	char cmd[160];

	dpflow_ctl_close(ctl);
	dpflow_ctx_destroy(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(ctl_socket, .init = setup, .fini = teardown);

struct run {
	int status;
	char out[65536];
	char err[8192];
};

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
}

/* Run dpflowctl with @args (NULL-terminated) while serving. */
static void run_ctl(struct run *r, const char *const *args)
{
	char out[128], err[128];
	const char *argv[32];
	unsigned n = 0;
	pid_t pid;
	int st;

	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	argv[n++] = DPFLOWCTL;
	argv[n++] = "-s";
	argv[n++] = sock;
	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(o, 1);
		dup2(e, 2);
		execv(DPFLOWCTL, (char *const *)argv);
		_exit(127);
	}
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid)
			break;
		cr_assert_geq(dpflow_ctl_serve(ctl, 10), 0);
	}
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	slurp(out, r->out, sizeof(r->out));
	slurp(err, r->err, sizeof(r->err));
}

#define RUN(r, ...)                                           \
	do {                                                  \
		const char *const a_[] = {__VA_ARGS__, NULL}; \
		run_ctl(r, a_);                               \
	} while (0)

Test(ctl_socket, socket_file_is_private)
{
	struct stat st;

	cr_assert_eq(stat(sock, &st), 0);
	cr_expect(S_ISSOCK(st.st_mode));
	cr_expect_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
	cr_expect_eq(st.st_uid, geteuid());
	cr_expect_geq(dpflow_ctl_fd(ctl), 0);
}

Test(ctl_socket, dpflowctl_commands)
{
	static struct run r;
	char file[128];
	FILE *f;
	json_t *j;

	RUN(&r, "ports");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "in") && strstr(r.out, "ring") &&
		      strstr(r.out, "fw"),
		  "%s", r.out);

	RUN(&r, "pipes");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "fw (basic, root of port in) 1/64 entries"),
		  "%s", r.out);

	RUN(&r, "entries", "add", "fw",
	    "{match: {outer.l4.dport: 80}, fwd: {port: web}}",
	    "{\"match\": {\"outer.l4.dport\": 81}, \"fwd\": \"drop\"}");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "added 2 entries to pipe fw"), "%s", r.out);
	cr_expect_eq(dpflow_pipe_entry_count(dpflow_pipe_find(ctx, "fw")), 3);

	RUN(&r, "entries", "list", "fw");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "match outer.l4.dport=80  fwd port web  pkts 0 "
				"bytes 0"),
		  "%s", r.out);

	RUN(&r, "entries", "list", "fw", "--json");
	cr_expect_eq(r.status, 0, "%s", r.err);
	j = json_loads(r.out, 0, NULL);
	cr_expect_eq(json_array_size(json_object_get(j, "entries")), 3, "%s",
		     r.out);
	json_decref(j);

	snprintf(file, sizeof(file), "%s/entries.yaml", dir);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fputs("# three entries\n"
	      "- match: {outer.l4.dport: 1000}\n"
	      "  fwd: drop\n"
	      "- {match: {outer.l4.dport: 1001}, fwd: {port: web}}\n"
	      "- {match: {outer.l4.dport: 1002}, fwd: drop}\n",
	      f);
	fclose(f);
	RUN(&r, "entries", "add", "fw", "--file", file);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "added 3 entries"), "%s", r.out);
	cr_expect_eq(dpflow_pipe_entry_count(dpflow_pipe_find(ctx, "fw")), 6);
	RUN(&r, "entries", "add", "fw", "--file", file);
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "entries[0]") &&
		      strstr(r.err, "an entry with this match exists"),
		  "%s", r.err);
	RUN(&r, "entries", "rm", "fw", "--file", file);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "removed 3 entries from pipe fw"), "%s", r.out);
	RUN(&r, "entries", "rm", "fw", "{match: {outer.l4.dport: 81}}");
	cr_expect_eq(r.status, 0, "%s", r.err);
	RUN(&r, "entries", "rm", "fw", "--slot", "63");
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "slot 63 of pipe 'fw' is free"), "%s", r.err);
	cr_expect_eq(dpflow_pipe_entry_count(dpflow_pipe_find(ctx, "fw")), 2);

	RUN(&r, "entries", "add", "nosuch", "{match: {outer.l4.dport: 1}}");
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "no pipe named 'nosuch' (field pipe)"), "%s",
		  r.err);
	RUN(&r, "entries", "add", "fw", "{match: [");
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "ENTRY 1:"), "%s", r.err);

	RUN(&r, "counters");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "PIPE") && strstr(r.out, "DROP REASON"), "%s",
		  r.out);
	RUN(&r, "counters", "--json");
	cr_expect_eq(r.status, 0, "%s", r.err);
	j = json_loads(r.out, 0, NULL);
	cr_expect(json_is_true(json_object_get(j, "ok")), "%s", r.out);
	cr_expect_eq(json_array_size(json_object_get(j, "pipes")), 1);
	json_decref(j);
	RUN(&r, "workers");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "no workers"), "%s", r.out);

	RUN(&r, "dump");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "pipe fw (basic, 2/64 entries)"), "%s", r.out);
	RUN(&r, "dump", "--dot");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "digraph dpflow {") &&
		      strstr(r.out, "\"pipe:fw\" -> \"port:web\""),
		  "%s", r.out);

	RUN(&r, "top", "--count", "2", "--interval", "0.05");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "LOOKUPS/S") && strstr(r.out, "RX_PPS"), "%s",
		  r.out);
	cr_expect_null(strstr(r.out, "\033["), "no escapes off a terminal");
	RUN(&r, "top", "--once");
	cr_expect_eq(r.status, 0, "%s", r.err);
}

Test(ctl_socket, dpflowctl_usage_and_connection_errors)
{
	static struct run r;
	char none[128];

	RUN(&r, "entries");
	cr_expect_eq(r.status, 2);
	RUN(&r, "frobnicate");
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "unknown command 'frobnicate'"), "%s", r.err);
	RUN(&r, "top", "--count", "0");
	cr_expect_eq(r.status, 2);
	RUN(&r, "dump", "--svg");
	cr_expect_eq(r.status, 2);
	RUN(&r, "top", "--help");
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, "usage: dpflowctl top"), "%s", r.out);
	RUN(&r, "entries", "add", "--help");
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, "all or nothing"), "%s", r.out);

	snprintf(none, sizeof(none), "%s/none.sock", dir);
	RUN(&r, "-s", none, "ports");
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "cannot connect to"), "%s", r.err);
}

/* ---- raw clients in a thread while the test thread serves --------------- */

struct client {
	const char *data;
	size_t len;
	bool shut; /* shut down writing after sending */
	char reply[8192];
	size_t got;
	volatile int done;
};

static int connect_sock(void)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *client_main(void *arg)
{
	struct client *c = (struct client *)arg;
	int fd = connect_sock();
	size_t off = 0;

	while (fd >= 0 && off < c->len) {
		ssize_t w = send(fd, c->data + off, c->len - off, MSG_NOSIGNAL);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
	if (fd >= 0 && c->shut)
		shutdown(fd, SHUT_WR);
	while (fd >= 0 && c->got < sizeof(c->reply) - 1) {
		ssize_t n = recv(fd, c->reply + c->got,
				 sizeof(c->reply) - 1 - c->got, 0);

		if (n <= 0)
			break;
		c->got += (size_t)n;
	}
	c->reply[c->got] = '\0';
	if (fd >= 0)
		close(fd);
	c->done = 1;
	return NULL;
}

static void serve_client(struct client *c)
{
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, client_main, c), 0);
	while (!c->done)
		cr_assert_geq(dpflow_ctl_serve(ctl, 10), 0);
	pthread_join(t, NULL);
}

Test(ctl_socket, pipelined_requests_and_eof)
{
	static const char req[] = "{\"cmd\":\"ports\",\"id\":1}\n"
				  "\n"
				  "{\"cmd\":\"nope\",\"id\":2}\r\n"
				  "{\"cmd\":\"pipes\",\"id\":3}";
	struct client c = {.data = req, .len = sizeof(req) - 1, .shut = true};
	char *l2, *l3;

	serve_client(&c);
	l2 = strchr(c.reply, '\n');
	cr_assert_not_null(l2, "%s", c.reply);
	l3 = strchr(l2 + 1, '\n');
	cr_assert_not_null(l3, "%s", c.reply);
	cr_expect_eq(strncmp(c.reply, "{\"ok\":true,\"id\":1,", 18), 0, "%s",
		     c.reply);
	cr_expect_eq(strncmp(l2 + 1, "{\"ok\":false,\"id\":2,", 19), 0, "%s",
		     l2 + 1);
	cr_expect_eq(strncmp(l3 + 1, "{\"ok\":true,\"id\":3,", 18), 0,
		     "the request cut by EOF is answered too: %s", l3 + 1);
}

Test(ctl_socket, oversized_line_is_refused)
{
	size_t n = DPFLOW_CTL_REQUEST_MAX + 4096;
	char *big = malloc(n);
	struct client c = {.data = big, .len = n};

	cr_assert_not_null(big);
	memset(big, 'x', n);
	serve_client(&c);
	cr_expect(strstr(c.reply, "{\"ok\":false,\"error\":\"request too "
				  "large\"}\n"),
		  "%s", c.reply);
	free(big);
	/* the server goes on */
	{
		static const char req[] = "{\"cmd\":\"ports\"}\n";
		struct client d = {
		    .data = req, .len = sizeof(req) - 1, .shut = true};

		serve_client(&d);
		cr_expect_eq(strncmp(d.reply, "{\"ok\":true", 10), 0, "%s",
			     d.reply);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(ctl_socket, a_client_that_never_reads_stalls_nothing)
{
	static const char one[] = "{\"cmd\":\"pipes\"}\n";
	const size_t reqs_n = 200000;
	size_t n = reqs_n * (sizeof(one) - 1);
	char *reqs = malloc(n);
	int fd = connect_sock(), fl;
	size_t sent = 0;
	double worst = 0;

	cr_assert_not_null(reqs);
	cr_assert_geq(fd, 0);
	for (size_t i = 0; i < reqs_n; i++)
		memcpy(reqs + i * (sizeof(one) - 1), one, sizeof(one) - 1);
	fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	/* write requests, never read the replies; every serve call must
	 * return promptly */
	for (int round = 0; round < 200; round++) {
		double t;
		ssize_t w = send(fd, reqs + sent, n - sent, MSG_NOSIGNAL);

		if (w > 0)
			sent += (size_t)w;
		t = now_s();
		cr_assert_geq(dpflow_ctl_serve(ctl, 0), 0);
		t = now_s() - t;
		worst = t > worst ? t : worst;
	}
	cr_expect_lt(worst, 0.5, "a serve call took %.3f s", worst);
	cr_expect_lt(sent, n, "the server stopped reading: backpressure");
	/* another client is still served */
	{
		static const char req[] = "{\"cmd\":\"ports\"}\n";
		struct client d = {
		    .data = req, .len = sizeof(req) - 1, .shut = true};

		serve_client(&d);
		cr_expect_eq(strncmp(d.reply, "{\"ok\":true", 10), 0, "%s",
			     d.reply);
	}
	close(fd);
	free(reqs);
}

Test(ctl_socket, a_live_socket_is_not_taken_over)
{
	struct dpflow_error err = {0};
	struct dpflow_ctl *other = dpflow_ctl_open(ctx, sock, NULL, &err);
	struct stat st;

	cr_expect_null(other);
	cr_expect_eq(err.code, EADDRINUSE, "%s", err.msg);
	cr_expect(strstr(err.msg, "another server listens"), "%s", err.msg);
	cr_expect_eq(stat(sock, &st), 0, "the live socket stays");
	/* closing removes the file; a stale file is replaced */
	dpflow_ctl_close(ctl);
	cr_expect_neq(stat(sock, &st), 0);
	ctl = dpflow_ctl_open(ctx, sock, NULL, &err);
	cr_assert_not_null(ctl, "%s", err.msg);
}

Test(ctl_socket, other_users_are_refused)
{
	pid_t pid;
	int st;

	if (geteuid() != 0)
		cr_skip_test("needs root to act as another user");
	/* let anyone reach the socket: the uid check still holds */
	cr_assert_eq(chmod(dir, 0755), 0);
	{
		char run[128];

		snprintf(run, sizeof(run), "%s/run", dir);
		cr_assert_eq(chmod(run, 0755), 0);
	}
	cr_assert_eq(chmod(sock, 0666), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char buf[512];
		ssize_t n = 0, k;
		int fd;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		fd = connect_sock();
		if (fd < 0)
			_exit(4);
		/* the server may have hung up already: read its reply
		 * whether or not this goes out */
		(void)!send(fd, "{\"cmd\":\"ports\"}\n", 16, MSG_NOSIGNAL);
		while ((k = recv(fd, buf + n, sizeof(buf) - 1 - (size_t)n, 0)) >
		       0)
			n += k;
		buf[n] = '\0';
		_exit(strstr(buf, "permission denied") &&
			      !strstr(buf, "\"ok\":true")
			  ? 0
			  : 6);
	}
	while (waitpid(pid, &st, WNOHANG) != pid)
		cr_assert_geq(dpflow_ctl_serve(ctl, 10), 0);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d",
		  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}
