// Times one system-call pattern and prints the median nanoseconds per op.
//
//   hotpath open   N FILE   open+read+close of FILE
//   hotpath stat   N FILE   stat of FILE
//   hotpath create N DIR    create+close+unlink of a file in DIR
//   hotpath touch  N FILE   utimensat of FILE, its times only (as tar x
//                           and make set them)
//   hotpath connect N       TCP connect to a listener on 127.0.0.1:0 that
//                           this process starts itself (+ accept, close both)
//   hotpath spawn  N CMD [ARG...]   fork+exec+wait of CMD (job start latency)
//   hotpath spawnas N USER CMD [ARG...]   the same, the child dropping to
//                           USER first (its groups, uid, HOME), as a runner
//                           starts an unsandboxed job itself
//
// The ops are timed in batches so the clock read (a real syscall in some
// guests) stays small next to the op; the median over batches resists the
// noise of a shared machine. Output: one integer, ns per op.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char* what) {
    perror(what);
    exit(1);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void* a, const void* b) {
    long long x = *(const long long*)a, y = *(const long long*)b;
    return (x > y) - (x < y);
}

static const char* g_arg;    // FILE or DIR
static char** g_argv;        // spawn: the command
static const char* g_user;   // spawnas: whom the child becomes
static int g_listener = -1;  // connect: our own listener
static struct sockaddr_in g_addr;

static void op_open(void) {
    char buf[64];
    int fd = open(g_arg, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open");
    if (read(fd, buf, sizeof buf) < 0) die("read");
    close(fd);
}

static void op_stat(void) {
    struct stat st;
    if (stat(g_arg, &st) != 0) die("stat");
}

static void op_create(void) {
    static char path[4096];
    if (!path[0]) snprintf(path, sizeof path, "%s/hotpath.%d", g_arg, getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) die("create");
    close(fd);
    if (unlink(path) != 0) die("unlink");
}

static void op_touch(void) {
    if (utimensat(AT_FDCWD, g_arg, NULL, 0) != 0) die("utimensat");
}

static void op_connect(void) {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0) die("socket");
    // Reset on close instead of TIME_WAIT, so thousands of iterations don't
    // run out of ephemeral ports.
    struct linger lg = {1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    if (connect(c, (struct sockaddr*)&g_addr, sizeof g_addr) != 0) die("connect");
    int s = accept4(g_listener, NULL, NULL, SOCK_CLOEXEC);
    if (s < 0) die("accept");
    close(c);
    close(s);
}

static void op_spawn(void) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        if (g_user) {
            struct passwd* pw = getpwnam(g_user);
            if (!pw || initgroups(pw->pw_name, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0 ||
                setenv("HOME", pw->pw_dir, 1) != 0)
                _exit(126);
        }
        execvp(g_argv[0], g_argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0) die("waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "hotpath: %s failed (status %#x)\n", g_argv[0], st);
        exit(1);
    }
}

static void start_listener(void) {
    g_listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (g_listener < 0) die("socket");
    g_addr.sin_family = AF_INET;
    g_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof g_addr;
    if (bind(g_listener, (struct sockaddr*)&g_addr, len) != 0) die("bind");
    if (listen(g_listener, 64) != 0) die("listen");
    if (getsockname(g_listener, (struct sockaddr*)&g_addr, &len) != 0) die("getsockname");
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: hotpath open|stat|create|touch|connect|spawn|spawnas N [FILE|DIR|[USER] CMD...]\n");
        return 2;
    }
    const char* op = argv[1];
    int n = atoi(argv[2]);
    if (n < 1) n = 1;
    g_arg = argc > 3 ? argv[3] : NULL;
    void (*fn)(void);
    int batch = 16;
    if (!strcmp(op, "open"))
        fn = op_open;
    else if (!strcmp(op, "stat"))
        fn = op_stat;
    else if (!strcmp(op, "create"))
        fn = op_create;
    else if (!strcmp(op, "touch"))
        fn = op_touch;
    else if (!strcmp(op, "connect"))
        fn = op_connect, start_listener();
    else if (!strcmp(op, "spawn"))
        fn = op_spawn, g_argv = argv + 3, batch = 1;  // ms each: no need to batch
    else if (!strcmp(op, "spawnas") && argc > 4)
        fn = op_spawn, g_user = argv[3], g_argv = argv + 4, batch = 1;
    else {
        fprintf(stderr, "hotpath: unknown op %s\n", op);
        return 2;
    }
    if (strcmp(op, "connect") && !g_arg) {
        fprintf(stderr, "hotpath: %s needs an argument\n", op);
        return 2;
    }

    // Warm caches (dentries, the listener's accept path) before timing.
    for (int i = 0; i < batch * 4 && i < n; i++) fn();

    int batches = (n + batch - 1) / batch;
    long long* t = malloc(sizeof *t * batches);
    if (!t) die("malloc");
    for (int b = 0; b < batches; b++) {
        long long t0 = now_ns();
        for (int i = 0; i < batch; i++) fn();
        t[b] = (now_ns() - t0) / batch;
    }
    qsort(t, batches, sizeof *t, cmp_ll);
    printf("%lld\n", t[batches / 2]);
    return 0;
}
