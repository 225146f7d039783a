/*
 * The benchmark's natsc peer: the C client library libnats (nats/nats.h)
 * doing each workload the way its API suggests.
 *
 *   natsc_bench version
 *   natsc_bench COMMAND URL N SIZE ARG...
 *
 * One COMMAND per workload (see COMMANDS below); jsbench/natsc.py passes the
 * subjects, windows and names so that they stay those of the other clients.
 * Every payload is SIZE bytes of 'x'. The timed part starts after connecting
 * and setting up, as in the Python children, and the program prints one JSON
 * line: rate (messages per second), p50/p99 (seconds, round-trip rows only,
 * else null), rss_start/rss_peak (bytes: the peak resident set once
 * connected and at the end of the workload) and cpu (seconds of process CPU
 * time, every thread, from the start through the timed part: connecting
 * included, as the Python children count theirs). Any status other than
 * NATS_OK ends the program with a message on stderr and exit status 1.
 *
 * The receive command talks to jsbench/natsc.py over stdio: it prints
 * "ready" once subscribed and starts its clock when it reads a line.
 */

#include <nats/nats.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct Bench
{
    const char      *url;
    int             n;
    int             size;
    char            **args;         /* the command's own arguments */
    char            *payload;
    natsConnection  *nc;
    double          cpu0;           /* CPU time at the program's start */
    long long       rss_start;
    double          t0;
    double          *lat;           /* one per message on round-trip rows, else NULL */

} Bench;

/* -- errors ---------------------------------------------------------------- */

static void
die(const char *what, const char *why)
{
    fprintf(stderr, "natsc_bench: %s: %s\n", what, why);
    exit(1);
}

static void
fail(const char *what, natsStatus s, jsErrCode jerr)
{
    fprintf(stderr, "natsc_bench: %s: %s", what, natsStatus_GetText(s));
    if (jerr != 0)
        fprintf(stderr, " (JetStream error code %d)", (int) jerr);
    fputc('\n', stderr);
    nats_PrintLastErrorStack(stderr);
    exit(1);
}

#define CHECK(call) \
    do { natsStatus s_ = (call); if (s_ != NATS_OK) fail(#call, s_, 0); } while (0)
#define JSCHECK(call, jerr) \
    do { natsStatus s_ = (call); if (s_ != NATS_OK) fail(#call, s_, (jerr)); } while (0)

static void *
xmalloc(size_t size)
{
    void *p = malloc(size > 0 ? size : 1);

    if (p == NULL)
        die("malloc", "out of memory");
    return p;
}

static int
parse_int(const char *s, const char *what, int min)
{
    char    *end = NULL;
    long    v    = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < min || v > 1000000000L)
        die(what, "not a count in range");
    return (int) v;
}

/* -- clocks and memory ------------------------------------------------------ */

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static double
cpu_now(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec)
        + (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/*
 * The peak resident set of this process image, in bytes: VmHWM of
 * /proc/self/status. getrusage's ru_maxrss is only the fallback: Linux
 * carries it over across fork and exec, so a program started by a large
 * parent would report at least the parent's peak.
 */
static long long
peak_rss(void)
{
    FILE            *f = fopen("/proc/self/status", "r");
    char            line[256];
    long long       kib = -1;
    struct rusage   ru;

    if (f != NULL)
    {
        while (kib < 0 && fgets(line, sizeof(line), f) != NULL)
        {
            if (strncmp(line, "VmHWM:", 6) == 0)
                kib = atoll(line + 6);
        }
        fclose(f);
    }
    if (kib >= 0)
        return kib * 1024;
    getrusage(RUSAGE_SELF, &ru);
    return (long long) ru.ru_maxrss * 1024;
}

/* Connected and set up: the starting RSS, then the clock. */
static void
start(Bench *b)
{
    b->rss_start = peak_rss();
    b->t0 = now();
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}

/* The timed part is over: print the result line. */
static void
finish(Bench *b)
{
    double      dt  = now() - b->t0;
    double      cpu = cpu_now() - b->cpu0;
    long long   rss = peak_rss();

    printf("{\"rate\": %.17g, ", b->n / dt);
    if (b->lat != NULL && b->n > 0)
    {
        /* nearest rank, as jsbench.result.percentiles */
        qsort(b->lat, (size_t) b->n, sizeof(double), cmp_double);
        int p99 = (b->n * 99) / 100;
        printf("\"p50\": %.17g, \"p99\": %.17g, ", b->lat[b->n / 2],
               b->lat[p99 < b->n ? p99 : b->n - 1]);
    }
    else
        printf("\"p50\": null, \"p99\": null, ");
    printf("\"rss_start\": %lld, \"rss_peak\": %lld, \"cpu\": %.17g}\n",
           b->rss_start, rss, cpu);
    fflush(stdout);
}

/* -- core ------------------------------------------------------------------- */

/* publish SUBJECT: N messages, then flush. */
static void
run_publish(Bench *b)
{
    const char *subject = b->args[0];

    CHECK(natsConnection_Flush(b->nc));
    start(b);
    for (int i = 0; i < b->n; i++)
        CHECK(natsConnection_Publish(b->nc, subject, b->payload, b->size));
    CHECK(natsConnection_FlushTimeout(b->nc, 60000));
    finish(b);
}

/* What a receiver shares with its callback. */
typedef struct Receiver
{
    Bench           *b;
    const char      *credit;
    int             step;
    atomic_int      count;
    pthread_mutex_t mu;
    pthread_cond_t  done;

} Receiver;

/* The credit protocol of the external publisher: one credit message every `window/2`. */
static void
credit(Receiver *r, int i)
{
    if (i % r->step == 0)
        CHECK(natsConnection_Publish(r->b->nc, r->credit, NULL, 0));
}

static void
on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    Receiver    *r = closure;
    int         i;

    (void) nc;
    (void) sub;
    natsMsg_Destroy(msg);
    i = atomic_fetch_add(&r->count, 1) + 1;
    credit(r, i);
    if (i == r->b->n)
    {
        pthread_mutex_lock(&r->mu);
        pthread_cond_signal(&r->done);
        pthread_mutex_unlock(&r->mu);
    }
}

static void
wait_callbacks(Receiver *r)
{
    struct timespec deadline;
    int             rc = 0;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 120;
    pthread_mutex_lock(&r->mu);
    while (atomic_load(&r->count) < r->b->n && rc == 0)
        rc = pthread_cond_timedwait(&r->done, &r->mu, &deadline);
    pthread_mutex_unlock(&r->mu);
    if (atomic_load(&r->count) < r->b->n)
        die("callback subscription", "not all messages arrived within 120 s");
}

static void
read_messages(Receiver *r, natsSubscription *sub)
{
    natsMsg *msg = NULL;

    for (int i = 1; i <= r->b->n; i++)
    {
        CHECK(natsSubscription_NextMsg(&msg, sub, 30000));
        natsMsg_Destroy(msg);
        credit(r, i);
    }
}

/*
 * receive SUBJECT CREDIT_SUBJECT MODE WINDOW: N messages from the external
 * publisher, by natsSubscription_NextMsg (MODE next_msg) or a callback
 * (MODE callback), a credit on CREDIT_SUBJECT every WINDOW/2 of them.
 */
static void
run_receive(Bench *b)
{
    Receiver            r = {.b = b, .credit = b->args[1]};
    int                 window = parse_int(b->args[3], "WINDOW", 1);
    int                 callback = strcmp(b->args[2], "callback") == 0;
    natsSubscription    *sub = NULL;
    char                line[16];

    if (!callback && strcmp(b->args[2], "next_msg") != 0)
        die("MODE", "expected next_msg or callback");
    r.step = window / 2 > 0 ? window / 2 : 1;
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.done, NULL);
    if (callback)
        CHECK(natsConnection_Subscribe(&sub, b->nc, b->args[0], on_msg, &r));
    else
        CHECK(natsConnection_SubscribeSync(&sub, b->nc, b->args[0]));
    CHECK(natsSubscription_SetPendingLimits(sub, window * 2, 1 << 30));
    CHECK(natsConnection_Flush(b->nc));
    printf("ready\n");
    fflush(stdout);
    if (fgets(line, sizeof(line), stdin) == NULL)
        die("receive", "no go line on stdin");
    start(b);
    if (callback)
        wait_callbacks(&r);
    else
        read_messages(&r, sub);
    finish(b);
    natsSubscription_Destroy(sub);
}

/* N round trips one after another, each timed, after one warm-up. */
static void
time_round_trips(Bench *b, void (*once)(Bench *, void *), void *ctx)
{
    double t;

    once(b, ctx);
    b->lat = xmalloc(sizeof(double) * (size_t) b->n);
    start(b);
    for (int i = 0; i < b->n; i++)
    {
        t = now();
        once(b, ctx);
        b->lat[i] = now() - t;
    }
    finish(b);
}

static void
request_once(Bench *b, void *ctx)
{
    natsMsg *reply = NULL;

    (void) ctx;
    CHECK(natsConnection_Request(&reply, b->nc, b->args[0], b->payload, b->size, 5000));
    natsMsg_Destroy(reply);
}

/* request SUBJECT: N sequential natsConnection_Request calls. */
static void
run_request(Bench *b)
{
    time_round_trips(b, request_once, NULL);
}

/* -- JetStream -------------------------------------------------------------- */

static jsCtx *
jetstream(Bench *b, jsOptions *opts)
{
    jsCtx *js = NULL;

    CHECK(natsConnection_JetStream(&js, b->nc, opts));
    return js;
}

/* One js_Publish to SUBJECT (the command's first argument), its PubAck awaited. */
static void
publish_sync(Bench *b, void *js)
{
    jsPubAck    *pa = NULL;
    jsErrCode   jerr = 0;

    JSCHECK(js_Publish(&pa, js, b->args[0], b->payload, b->size, NULL, &jerr), jerr);
    jsPubAck_Destroy(pa);
}

/* js-publish SUBJECT: N js_Publish calls, each waiting for its PubAck. */
static void
run_js_publish(Bench *b)
{
    jsCtx *js = jetstream(b, NULL);

    time_round_trips(b, publish_sync, js);
    jsCtx_Destroy(js);
}

static atomic_int pub_errors;

static void
on_pub_error(jsCtx *js, jsPubAckErr *pae, void *closure)
{
    (void) js;
    (void) closure;
    if (atomic_fetch_add(&pub_errors, 1) == 0)
        fprintf(stderr, "natsc_bench: js_PublishAsync: %s (JetStream error code %d)\n",
                pae->ErrText != NULL ? pae->ErrText : natsStatus_GetText(pae->Err),
                (int) pae->ErrCode);
}

/*
 * js-publish-async SUBJECT WINDOW: N js_PublishAsync calls, at most WINDOW
 * unacknowledged, then js_PublishAsyncComplete (after one js_Publish warm-up).
 */
static void
run_js_publish_async(Bench *b)
{
    jsOptions       o;
    jsPubOptions    po;
    jsCtx           *js;

    CHECK(jsOptions_Init(&o));
    o.PublishAsync.MaxPending = parse_int(b->args[1], "WINDOW", 1);
    o.PublishAsync.StallWait = 60000;
    o.PublishAsync.ErrHandler = on_pub_error;
    js = jetstream(b, &o);
    publish_sync(b, js);
    CHECK(jsPubOptions_Init(&po));
    po.MaxWait = 120000;
    start(b);
    for (int i = 0; i < b->n; i++)
        CHECK(js_PublishAsync(js, b->args[0], b->payload, b->size, NULL));
    CHECK(js_PublishAsyncComplete(js, &po));
    finish(b);
    if (atomic_load(&pub_errors) != 0)
        die("js_PublishAsync", "some messages were not acknowledged");
    jsCtx_Destroy(js);
}

/*
 * js-fetch FILTER DURABLE BATCH MAX_ACK_PENDING: a pull subscription
 * (js_PullSubscribe, a new durable), then natsSubscription_Fetch of up to
 * BATCH at a time and natsMsg_Ack of each, until N; then flush the acks.
 */
static void
run_js_fetch(Bench *b)
{
    jsCtx               *js = jetstream(b, NULL);
    jsSubOptions        so;
    natsSubscription    *sub = NULL;
    natsMsgList         list;
    jsErrCode           jerr = 0;
    int                 batch = parse_int(b->args[2], "BATCH", 1);
    int                 got = 0;

    CHECK(jsSubOptions_Init(&so));
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.MaxAckPending = parse_int(b->args[3], "MAX_ACK_PENDING", 1);
    JSCHECK(js_PullSubscribe(&sub, js, b->args[0], b->args[1], NULL, &so, &jerr), jerr);
    start(b);
    while (got < b->n)
    {
        int want = b->n - got < batch ? b->n - got : batch;

        JSCHECK(natsSubscription_Fetch(&list, sub, want, 5000, &jerr), jerr);
        for (int i = 0; i < list.Count; i++)
            CHECK(natsMsg_Ack(list.Msgs[i], NULL));
        got += list.Count;
        natsMsgList_Destroy(&list);
    }
    CHECK(natsConnection_FlushTimeout(b->nc, 30000));
    finish(b);
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(js);
}

/* -- main ------------------------------------------------------------------- */

typedef struct Command
{
    const char  *name;
    const char  *args;      /* the usage of its own arguments */
    int         nargs;
    void        (*run)(Bench *);

} Command;

static const Command COMMANDS[] = {
    {"publish", "SUBJECT", 1, run_publish},
    {"receive", "SUBJECT CREDIT_SUBJECT next_msg|callback WINDOW", 4, run_receive},
    {"request", "SUBJECT", 1, run_request},
    {"js-publish", "SUBJECT", 1, run_js_publish},
    {"js-publish-async", "SUBJECT WINDOW", 2, run_js_publish_async},
    {"js-fetch", "FILTER DURABLE BATCH MAX_ACK_PENDING", 4, run_js_fetch},
};

static int
usage(void)
{
    fprintf(stderr, "usage: natsc_bench version\n");
    for (size_t i = 0; i < sizeof(COMMANDS) / sizeof(COMMANDS[0]); i++)
        fprintf(stderr, "       natsc_bench %s URL N SIZE %s\n", COMMANDS[i].name, COMMANDS[i].args);
    return 2;
}

static const Command *
find_command(const char *name)
{
    for (size_t i = 0; i < sizeof(COMMANDS) / sizeof(COMMANDS[0]); i++)
    {
        if (strcmp(COMMANDS[i].name, name) == 0)
            return &COMMANDS[i];
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    Bench           b = {0};
    const Command   *cmd;

    b.cpu0 = cpu_now();
    if (!nats_CheckCompatibility())
        die("libnats", "the library does not match the headers this was built with");
    if (argc == 2 && strcmp(argv[1], "version") == 0)
    {
        printf("%s\n", nats_GetVersion());
        return 0;
    }
    cmd = argc >= 2 ? find_command(argv[1]) : NULL;
    if (cmd == NULL || argc != 5 + cmd->nargs)
        return usage();
    b.url = argv[2];
    b.n = parse_int(argv[3], "N", 1);
    b.size = parse_int(argv[4], "SIZE", 0);
    b.args = argv + 5;
    b.payload = xmalloc((size_t) b.size);
    memset(b.payload, 'x', (size_t) b.size);
    CHECK(natsConnection_ConnectTo(&b.nc, b.url));
    cmd->run(&b);
    natsConnection_Destroy(b.nc);
    free(b.lat);
    free(b.payload);
    nats_Close();
    return 0;
}
