/* fuzz_syncer_join.c - libFuzzer target: the syncer's join and rebuild
 * handlers (POST /v1/join with its `holds` report, /v1/heartbeat,
 * /v1/leave, POST /v1/fragments/{p}/state; trainer/syncer/members.c and
 * rebuild.c) through its real HTTP API: the access gate, body
 * collection and the handlers run in the syncer's own threads, in this
 * process, so ASan and UBSan watch them. One request per input (layout:
 * fuzz_syncer_join.h), sent over TCP to 127.0.0.1 with libcurl.
 * Oracles beyond the sanitizers: every request gets an answer within 2 s,
 * never a 5xx other than 503 (the rebuild's "retry": no input makes a
 * handler fail inside; out of memory is the only 500 they give); after
 * every input one fragment GET (each fragment in turn) answers 200 or 503,
 * and a 200 is the whole fragment, carries its own CRC32C and holds only
 * finite values.
 * What it is not: a test of the syncer's verdicts (tests/integration/
 * test_trainer_rebuild.c checks what a rebuild must produce).
 *
 * The syncer is the real one (syncer_new: its MHD threads serve, its worker
 * runs the rebuild, its ticker the timeouts; syncer_run only sleeps, so it
 * is not called), with fixed credentials in a private temp dir, and it is
 * started again on an empty state dir every FSJ_EPOCH_MS: a rebuild opens
 * only on a fresh state dir (after one, the syncer has published versions
 * and refuses reports above them as claims), so each epoch is a fresh
 * start, maybe a rebuild, then a syncer with a record. An input's answer
 * thus depends on the inputs before it in its epoch: a crash that needs a
 * report or a staged upload first reproduces with the inputs that led to
 * it (run the corpus with -runs), not always alone. The temp dir is
 * removed at exit, not after a crash. Seeds: written by gen_seeds. */
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/log.h"
#include "fuzz_syncer_join.h"
#include "trainer/credential.h"
#include "trainer/protocol.h"
#include "trainer/seal.h"
#include "trainer/syncer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FSJ_EPOCH_MS 4000   /* a fresh syncer (empty state dir) this often */
#define FSJ_TIMEOUT_MS 2000 /* bound of one request: no answer in time fails */

/* The fixed credentials: the syncer loads them from creds/, the requests
 * send them. */
static const char *const principals[] = {"learner-0", "learner-1", "admin", "read"};
#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static struct {
    char dir[256];             /* the private temp dir */
    char creds[300];           /* dir/creds: the credentials the syncer accepts */
    char state[300];           /* dir/state-<epoch>: the current state dir */
    int epoch;                 /* syncers started */
    int64_t started_ms;        /* when the current one started (cx_mono_ms) */
    syncer *s;                 /* the current syncer */
    cx_http_client *c;         /* keep-alive client to it */
    int64_t inc[FSJ_LEARNERS]; /* each learner's incarnation, from the join answers */
    uint32_t digest;           /* the fragment table digest, from the join answers */
    seal_key key;              /* the syncer's seal key (from the fixed admin credential) */
    size_t len[FSJ_FRAGMENTS]; /* floats of each fragment */
} g;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_tree(const char *dir)
{
    if (access(dir, F_OK) == 0 && nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "fuzz_syncer_join: cannot remove %s\n", dir);
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_syncer_join: %s: %s\n", what, detail);
    abort();
}

static const char *auth_header(int k, char out[160]);
static void note_join(int id, const cx_http_result *r);

static void syncer_stop(void)
{
    cx_http_client_free(g.c);
    g.c = NULL;
    syncer_free(g.s);
    g.s = NULL;
    rm_tree(g.state);
}

/* A new syncer on an empty state dir, and a client to it. */
static void syncer_start(void)
{
    char err[CX_ERRLEN], path[400], url[96];
    syncer_opts o = {.listen = "127.0.0.1:0",
                     .state_dir = g.state,
                     .credentials_dir = g.creds,
                     .on_lost_state = SYNCER_LOST_REBUILD};
    fsj_config(&o.cfg);
    if (config_validate(&o.cfg, err, sizeof err) != 0)
        die("config", err);
    snprintf(g.state, sizeof g.state, "%s/state-%d", g.dir, g.epoch++);
    g.s = syncer_new(&o, err, sizeof err);
    if (!g.s)
        die("syncer_new", err);
    /* listen.addr is written before syncer_new returns */
    char *addr = NULL;
    size_t alen = 0;
    snprintf(path, sizeof path, "%s/listen.addr", g.state);
    if (cx_file_read(path, 64, &addr, &alen, err, sizeof err) != 0)
        die("listen.addr", err);
    snprintf(url, sizeof url, "http://%.*s", (int)alen, addr);
    free(addr);
    cx_http_opts ho = {.connect_timeout_ms = FSJ_TIMEOUT_MS, .timeout_ms = FSJ_TIMEOUT_MS};
    g.c = cx_http_client_new(url, &ho);
    if (!g.c)
        die("client", url);
    memset(g.inc, 0, sizeof g.inc);
    /* both learners join without a report, so that heartbeats, leaves and
     * uploads naming the current incarnation reach the handlers' checks
     * from the first input of an epoch; a join with a report may still
     * open a rebuild */
    for (int i = 0; i < FSJ_LEARNERS; i++) {
        char auth[160], body[64];
        const char *hdrs[] = {auth_header(i == 0 ? FSJ_CRED_LEARNER0 : FSJ_CRED_LEARNER1, auth), NULL};
        int n = snprintf(body, sizeof body, "{\"learner\":%d,\"incarnation\":0}", i);
        cx_http_result r;
        cx_http_result_init(&r);
        if (cx_http_do(g.c, "POST", "/v1/join", hdrs, body, (size_t)n, "application/json", FSJ_TIMEOUT_MS, &r,
                       err, sizeof err) != 0 ||
            r.status != 200)
            die("first join", r.body.data ? r.body.data : err);
        note_join(i, &r);
        cx_http_result_cleanup(&r);
    }
    g.started_ms = cx_mono_ms();
}

static void fsj_exit(void)
{
    syncer_stop();
    rm_tree(g.dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    cx_log_init("fuzz", CX_LOG_ERROR);
    char err[CX_ERRLEN], path[400], cred[CRED_MAX];
    snprintf(g.dir, sizeof g.dir, "/tmp/fuzz_syncer_join.XXXXXX");
    if (!mkdtemp(g.dir))
        die("mkdtemp", g.dir);
    snprintf(g.creds, sizeof g.creds, "%s/creds", g.dir);
    if (mkdir(g.creds, 0700) != 0)
        die("mkdir", g.creds);
    for (size_t i = 0; i < sizeof principals / sizeof principals[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.cred", g.creds, principals[i]);
        snprintf(cred, sizeof cred, "%s.%s", principals[i], SECRET);
        if (cred_write_file(path, cred, err, sizeof err) != 0)
            die("credential", err);
    }
    if (fsj_fragment_lengths(g.len, err, sizeof err) != 0)
        die("fragments", err);
    snprintf(cred, sizeof cred, "admin.%s", SECRET);
    if (seal_key_derive(&g.key, cred, err, sizeof err) != 0)
        die("seal key", err);
    syncer_start();
    atexit(fsj_exit);
    return 0;
}

/* The Authorization header of credential choice k (FSJ_CRED_*), or NULL. */
static const char *auth_header(int k, char out[160])
{
    switch (k) {
    case FSJ_CRED_LEARNER0:
    case FSJ_CRED_LEARNER0B:
    case FSJ_CRED_LEARNER1:
    case FSJ_CRED_ADMIN:
    case FSJ_CRED_READ:
        snprintf(out, 160, "Authorization: Bearer %s.%s",
                 principals[k == FSJ_CRED_LEARNER0B ? FSJ_CRED_LEARNER0 : k], SECRET);
        return out;
    case FSJ_CRED_BADHEX:
        snprintf(out, 160, "Authorization: Bearer learner-0.%.63s0", SECRET);
        return out;
    case FSJ_CRED_BASIC:
        snprintf(out, 160, "Authorization: Basic bGVhcm5lci0wOng=");
        return out;
    default:
        return NULL;
    }
}

/* body with every FSJ_INC replaced by inc, into b (its cap leaves room
 * for 20 digits per FSJ_INC). */
static void expand_inc(const uint8_t *body, size_t n, int64_t inc, cx_buf *b)
{
    size_t k = strlen(FSJ_INC), from = 0;
    for (size_t i = 0; i + k <= n;) {
        if (memcmp(body + i, FSJ_INC, k) != 0) {
            i++;
            continue;
        }
        cx_buf_append(b, body + from, i - from);
        cx_buf_printf(b, "%lld", (long long)inc);
        i += k;
        from = i;
    }
    cx_buf_append(b, body + from, n - from);
}

/* Keep the incarnation a join gave learner id (200: "incarnation", 503 of
 * a rebuild: "rebuild.incarnation"). */
static void note_join(int id, const cx_http_result *r)
{
    json_t *j = json_loads(r->body.data ? r->body.data : "", 0, NULL);
    json_t *v = json_object_get(j, "incarnation");
    if (!v)
        v = json_object_get(json_object_get(j, "rebuild"), "incarnation");
    if (json_is_integer(v))
        g.inc[id] = json_integer_value(v);
    json_t *d = json_object_get(j, "table_digest");
    if (json_is_integer(d))
        g.digest = (uint32_t)json_integer_value(d);
    json_decref(j);
}

/* A join body whose holds.seal[p] entries that are FSJ_SEAL get the
 * syncer's seal on (p, holds.versions[p], holds.crc32c[p]) (b rewritten);
 * a body that is not such JSON stays as it is. */
static void expand_seals(cx_buf *b)
{
    if (!b->data || !memmem(b->data, b->len, FSJ_SEAL, strlen(FSJ_SEAL)))
        return;
    json_t *j = json_loadb(b->data, b->len, 0, NULL);
    json_t *h = json_object_get(j, "holds"), *sl = json_object_get(h, "seal");
    json_t *vs = json_object_get(h, "versions"), *cs = json_object_get(h, "crc32c");
    for (size_t p = 0; p < json_array_size(sl); p++) {
        uint32_t crc;
        char seal[SEAL_HEX + 1];
        const char *t = json_string_value(json_array_get(sl, p));
        const char *c = json_string_value(json_array_get(cs, p));
        json_t *v = json_array_get(vs, p);
        if (!t || strcmp(t, FSJ_SEAL) != 0 || !c || proto_crc_parse(c, &crc) != 0 || !json_is_integer(v) ||
            seal_make(&g.key, g.digest, (int)p, json_integer_value(v), crc, seal) != 0)
            continue;
        json_array_set_new(sl, p, json_string(seal));
    }
    char *text = json_is_object(j) ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text) {
        b->len = 0;
        cx_buf_append(b, text, strlen(text));
        free(text);
    }
    json_decref(j);
}

/* The oracle after an input: a fragment GET (fragment p) answers 200 or
 * 503 (a rebuild is running); a 200 is the whole fragment, its CRC32C
 * header matches the bytes and every value is finite. */
static void check_fragment(int p)
{
    char auth[160], path[64], err[CX_ERRLEN], crc_text[16];
    const char *hdrs[] = {auth_header(FSJ_CRED_LEARNER0, auth), NULL};
    cx_http_result r;
    cx_http_result_init(&r);
    snprintf(path, sizeof path, "/v1/fragments/%d", p);
    if (cx_http_do(g.c, "GET", path, hdrs, NULL, 0, NULL, FSJ_TIMEOUT_MS, &r, err, sizeof err) != 0)
        die("GET fragment: no answer", err);
    if (r.status == 200) {
        uint32_t crc;
        if (r.body.len != g.len[p] * 4)
            die("GET fragment", "a 200 is not the fragment's length");
        if (cx_http_result_header(&r, PROTO_H_FRAGMENT_CRC32C, crc_text, sizeof crc_text) != 0 ||
            proto_crc_parse(crc_text, &crc) != 0 || crc != cx_crc32c(0, r.body.data, r.body.len))
            die("GET fragment", "its CRC32C header is not the CRC32C of its bytes");
        for (size_t i = 0; i < g.len[p]; i++) {
            float v;
            proto_f32_decode(r.body.data + 4 * i, 1, &v);
            if (!isfinite(v))
                die("GET fragment", "the global model holds a non-finite value");
        }
    } else if (r.status != 503) {
        fprintf(stderr, "fuzz_syncer_join: GET %s answered %d: %s\n", path, r.status,
                r.body.data ? r.body.data : "");
        abort();
    }
    cx_http_result_cleanup(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    if (cx_mono_ms() - g.started_ms >= FSJ_EPOCH_MS) {
        syncer_stop();
        syncer_start();
    }
    int route = data[0] % FSJ_ROUTES, cred = data[1] & 7;
    int p = ((data[1] >> 3) & 7) % (FSJ_FRAGMENTS + 1);
    int id = cred == FSJ_CRED_LEARNER1 ? 1 : 0;
    char auth[160], h[6][64], path[64], err[CX_ERRLEN];
    const char *hdrs[10];
    int nh = 0;
    const char *a = auth_header(cred, auth);
    if (a)
        hdrs[nh++] = a;
    int odd = data[1] >> 6;
    if (odd == 2) {
        snprintf(h[0], sizeof h[0], "%s: %d", PROTO_H_LEARNER, 1 - id);
        hdrs[nh++] = h[0];
    }
    const char *ctype = route == FSJ_ROUTE_STATE ? "application/octet-stream" : "application/json";
    if (odd == 3)
        ctype = "text/plain";
    cx_buf body;
    cx_buf_init(&body, 6 * size + 64);
    if (route == FSJ_ROUTE_STATE) {
        if (size < FSJ_STATE_HDR) {
            cx_buf_cleanup(&body);
            return 0;
        }
        const uint8_t *b = data + FSJ_STATE_HDR;
        size_t blen = size - FSJ_STATE_HDR;
        unsigned fl = data[2] & 0x80 ? data[2] & 0x1fu : 0;
        uint32_t crc = !(fl & FSJ_F_LIT_CRC) ? cx_crc32c(0, b, blen)
                                             : (uint32_t)data[7] | (uint32_t)data[8] << 8 |
                                                   (uint32_t)data[9] << 16 | (uint32_t)data[10] << 24;
        snprintf(h[1], sizeof h[1], "%s: %d", PROTO_H_LEARNER, id);
        snprintf(h[2], sizeof h[2], "%s: %lld", PROTO_H_INCARNATION,
                 fl & FSJ_F_LIT_INC ? (long long)data[3] : (long long)g.inc[id]);
        snprintf(h[3], sizeof h[3], "%s: %d", PROTO_H_FRAGMENT, fl & FSJ_F_LIT_FRAG ? data[4] : p);
        snprintf(h[4], sizeof h[4], "%s: %u", PROTO_H_VERSION, (unsigned)(data[5] | data[6] << 8));
        snprintf(h[5], sizeof h[5], "%s: %08x", PROTO_H_CRC32C, crc);
        if (odd != 2) /* the learner header is h[0] then */
            hdrs[nh++] = h[1];
        hdrs[nh++] = h[2];
        hdrs[nh++] = h[3];
        if (!(fl & FSJ_F_NO_VER))
            hdrs[nh++] = h[4];
        if (!(fl & FSJ_F_NO_CRC))
            hdrs[nh++] = h[5];
        cx_buf_append(&body, b, blen);
        snprintf(path, sizeof path, "/v1/fragments/%d/state", p);
    } else {
        static const char *const paths[] = {"/v1/join", "/v1/heartbeat", "/v1/leave"};
        expand_inc(data + 2, size - 2, g.inc[id], &body);
        if (route == FSJ_ROUTE_JOIN)
            expand_seals(&body);
        snprintf(path, sizeof path, "%s", paths[route]);
    }
    hdrs[nh] = NULL;
    cx_http_result r;
    cx_http_result_init(&r);
    if (cx_http_do(g.c, "POST", path, hdrs, body.data ? body.data : "", body.len, ctype, FSJ_TIMEOUT_MS, &r,
                   err, sizeof err) != 0)
        die("no answer", err);
    if (r.status >= 500 && r.status != 503) {
        fprintf(stderr, "fuzz_syncer_join: POST %s answered %d: %s\n", path, r.status,
                r.body.data ? r.body.data : "");
        abort();
    }
    if (route == FSJ_ROUTE_JOIN && (r.status == 200 || r.status == 503) &&
        (cred == FSJ_CRED_LEARNER0 || cred == FSJ_CRED_LEARNER0B || cred == FSJ_CRED_LEARNER1))
        note_join(id, &r);
    cx_http_result_cleanup(&r);
    cx_buf_cleanup(&body);
    /* one fragment per input, in turn: the model changes only when a
     * rebuild is applied (in the worker thread, between inputs anyway),
     * and a GET of every fragment after every input cost a third of the
     * executions per second (~390/s instead of ~550/s) */
    static unsigned turn;
    check_fragment((int)(turn++ % FSJ_FRAGMENTS));
    return 0;
}
