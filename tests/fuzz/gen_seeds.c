/* gen_seeds.c - writes the generated seed corpora of the fuzz targets:
 * real payloads and delta chains made by the real encoder
 * (numerics/encoding.c, protocol.c) into DIR/payload/, the header sets a
 * learner sends (proto_hdr_format) into DIR/proto_headers/, and the fault
 * requests the harness would send for every action and chaos fault of the
 * experiments in EXPERIMENTS_DIR into DIR/fault_request/, the config a
 * syncer sends at join for every mode and model (config_to_json) into
 * DIR/config/, and coordinator event files (a good run, a torn tail, the
 * bad lines the tailer refuses) into DIR/events_file/, the requests of
 * learners joining, reporting what they hold and uploading it, as
 * fuzz_syncer_join reads them, into DIR/syncer_join/, and raw HTTP
 * requests for every route of fuzz_http_request into DIR/http_request/.
 * usage: gen_seeds DIR EXPERIMENTS_DIR   (directories made as needed) */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/exitcode.h"
#include "common/file.h"
#include "fuzz_payload.h"
#include "fuzz_syncer_join.h"
#include "trainer/config.h"
#include "numerics/encoding.h"
#include "trainer/protocol.h"

static int write_file(const char *dir, const char *sub, const char *name, const void *data, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "gen_seeds: cannot write %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* A deterministic vector with zeros, a ragged block and mixed magnitudes. */
static void fill(float *v, size_t n, unsigned salt)
{
    uint32_t x = 2463534242u ^ salt;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = (i % 17 == 0) ? 0.0f : ((float)(x % 20001) - 10000.0f) * 1e-4f * (float)(1 + i % 3);
    }
}

static int payloads(const char *dir)
{
    static const size_t ns[] = {1, 63, 64, 65, 200};
    int rc = 0;
    for (int k = 0; k < ENCODING_COUNT; k++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
            size_t n = ns[j], es = encoding_size((encoding_kind)k, n);
            float v[200];
            fill(v, n, (unsigned)(k * 100 + (int)j));
            /* one vector */
            uint8_t *b = malloc(FUZZ_PAYLOAD_HDR + 3 * (PROTO_DELTA_REC_HDR + es));
            if (!b)
                return -1;
            b[0] = (uint8_t)k;
            b[1] = 0;
            b[2] = (uint8_t)((n - 1) & 0xff);
            b[3] = (uint8_t)((n - 1) >> 8);
            encoding_encode((encoding_kind)k, v, n, b + FUZZ_PAYLOAD_HDR, es, NULL, 0);
            char name[64];
            snprintf(name, sizeof name, "%s-n%zu", encoding_name((encoding_kind)k), n);
            rc |= write_file(dir, "payload", name, b, FUZZ_PAYLOAD_HDR + es);
            /* a delta chain of three records, versions 7, 8, 9 */
            b[1] = 1;
            size_t off = FUZZ_PAYLOAD_HDR;
            for (int r = 0; r < 3; r++) {
                fill(v, n, (unsigned)(k * 100 + (int)j + 7 * r + 1));
                proto_delta_put_hdr(b + off, 7 + r, (uint32_t)es);
                encoding_encode((encoding_kind)k, v, n, b + off + PROTO_DELTA_REC_HDR, es, NULL, 0);
                off += PROTO_DELTA_REC_HDR + es;
            }
            snprintf(name, sizeof name, "chain-%s-n%zu", encoding_name((encoding_kind)k), n);
            rc |= write_file(dir, "payload", name, b, off);
            free(b);
        }
    return rc;
}

static int headers(const char *dir)
{
    struct {
        const char *name;
        unsigned need;
        proto_hdr h;
    } sets[] = {
        {"contribution", PROTO_NEED_CONTRIBUTION, {3, 2, 5, 41, 6144, 24, ENCODING_INT8, 0x1a2b3c4du, 7, 40}},
        {"contribution-f32", PROTO_NEED_CONTRIBUTION, {0, 1, 0, 0, 1, 1, ENCODING_F32, 0, -1, 1}},
        {"gradient", PROTO_NEED_GRADIENT, {1, 7, -1, -1, -1, -1, -1, 0xdeadbeefu, -1, -1}},
        {"fragment-get", 0, {2, 3, -1, -1, -1, -1, ENCODING_BF16, 0, -1, -1}},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        char lines[PROTO_MAX_LINES][PROTO_LINE], text[1024];
        const char *ptrs[PROTO_MAX_LINES + 1];
        proto_hdr_format(&sets[i].h, lines, ptrs);
        size_t used = 0;
        text[used++] = (char)(sets[i].need & 0xff); /* the need set, little-endian */
        text[used++] = (char)(sets[i].need >> 8);
        for (int l = 0; ptrs[l] && used < sizeof text; l++)
            used += (size_t)snprintf(text + used, sizeof text - used, "%s\n", ptrs[l]);
        rc |= write_file(dir, "proto_headers", sets[i].name, text, used);
    }
    return rc;
}

/* One POST /v1/faults body per method action and chaos fault of file. */
static int fault_requests(const char *dir, const char *expdir, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", expdir, file);
    json_t *doc = json_load_file(path, 0, NULL);
    if (!doc)
        return 0; /* not ours to judge: the validator test does */
    int rc = 0, k = 0;
    const char *lists[] = {"method", "chaos"};
    for (int l = 0; l < 2; l++) {
        json_t *arr = l == 0 ? json_object_get(doc, "method")
                             : json_object_get(json_object_get(doc, "chaos"), "faults");
        size_t i;
        json_t *a;
        json_array_foreach(arr, i, a)
        {
            json_t *type = json_object_get(a, l == 0 ? "fault" : "type");
            if (!json_is_string(type))
                continue;
            json_t *req = json_pack("{s:O,s:I}", "type", type, "duration_ms",
                                    json_is_integer(json_object_get(a, "duration_ms"))
                                        ? json_integer_value(json_object_get(a, "duration_ms"))
                                        : (json_int_t)10000);
            const char *opt[] = {"params", "toxicity", "seed", "target"};
            for (int o = 0; o < 4; o++)
                if (json_object_get(a, opt[o]))
                    json_object_set(req, opt[o], json_object_get(a, opt[o]));
            char *text = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS);
            char name[512];
            snprintf(name, sizeof name, "%.*s-%s%d", (int)(strlen(file) - 5), file, lists[l], k++);
            if (text)
                rc |= write_file(dir, "fault_request", name, text, strlen(text));
            free(text);
            json_decref(req);
        }
    }
    json_decref(doc);
    return rc;
}

/* The join answer's config of every mode and model. */
static int configs(const char *dir)
{
    int rc = 0;
    for (int64_t mode = CONFIG_MODE_DDP; mode <= CONFIG_MODE_DECOUPLED; mode++)
        for (int64_t model = CONFIG_MODEL_MLP; model <= CONFIG_MODEL_GPT; model++) {
            config c;
            config_defaults(&c);
            config_kind_defaults(&c, mode, model);
            json_t *j = config_to_json(&c);
            char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
            char name[64];
            snprintf(name, sizeof name, "%s-%s", config_mode_name(mode), config_model_name(model));
            rc |= text ? write_file(dir, "config", name, text, strlen(text)) : -1;
            free(text);
            json_decref(j);
        }
    return rc;
}

/* Event files as fuzz_events_file reads them: two bytes that place the
 * appends, then the file's bytes. */
static int event_files(const char *dir)
{
    static const struct {
        const char *name, *text;
    } files[] = {
        {"good", "\x40\x80{\"seq\":1,\"t_mono_ms\":10,\"type\":\"start\"}\n"
                 "{\"seq\":2,\"t_mono_ms\":20,\"type\":\"merge\",\"fragment\":0,\"version\":1}\n"
                 "{\"seq\":3,\"t_mono_ms\":30,\"type\":\"join\",\"learner\":1}\n"},
        {"torn-tail", "\x10\xf0{\"seq\":1,\"t_mono_ms\":10,\"type\":\"start\"}\n{\"seq\":2,\"t_mo"},
        {"seq-gap",
         "\x01\xff{\"seq\":4,\"t_mono_ms\":1,\"type\":\"a\"}\n{\"seq\":6,\"t_mono_ms\":2,\"type\":\"b\"}\n"},
        {"empty-line", "\x20\x20{\"seq\":1,\"t_mono_ms\":1,\"type\":\"a\"}\n\n"},
        {"not-json", "\x01\x01[1,2\n"},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        rc |= write_file(dir, "events_file", files[i].name, files[i].text, strlen(files[i].text));
    return rc;
}

/* Requests as fuzz_syncer_join reads them (fuzz_syncer_join.h): joins of
 * learner 0 and 1 without and with a `holds` report (untrained; a
 * plausible one at version 3, sealed (FSJ_SEAL), which opens a rebuild on
 * the fresh syncer; an unsealed claim far above anything the syncer
 * publishes, which it must refuse), a heartbeat, a leave, and the state upload of every
 * fragment at version 3 that the plausible report announced. */
static int syncer_joins(const char *dir)
{
    size_t len[FSJ_FRAGMENTS];
    char err[256], crc[FSJ_FRAGMENTS][9];
    if (fsj_fragment_lengths(len, err, sizeof err) != 0) {
        fprintf(stderr, "gen_seeds: %s\n", err);
        return -1;
    }
    float *vals[FSJ_FRAGMENTS] = {NULL};
    int rc = 0;
    for (int p = 0; p < FSJ_FRAGMENTS; p++) {
        vals[p] = malloc(len[p] * sizeof(float));
        if (!vals[p]) {
            rc = -1;
            goto out;
        }
        fill(vals[p], len[p], 500u + (unsigned)p);
        proto_crc_format(proto_f32_crc(vals[p], len[p]), crc[p]);
    }
    char holds[3][256];
    snprintf(holds[0], sizeof holds[0], "{\"versions\":[0,0,0],\"crc32c\":[\"%s\",\"%s\",\"%s\"]}", crc[0],
             crc[1], crc[2]);
    snprintf(holds[1], sizeof holds[1],
             "{\"versions\":[3,3,3],\"crc32c\":[\"%s\",\"%s\",\"%s\"],\"published\":[4,3,3],"
             "\"seal\":[\"" FSJ_SEAL "\",\"" FSJ_SEAL "\",\"" FSJ_SEAL "\"]}",
             crc[0], crc[1], crc[2]);
    snprintf(holds[2], sizeof holds[2],
             "{\"versions\":[1000000,3,-1],\"crc32c\":[\"%s\",\"%s\",\"%s\"],\"published\":[2000000,3,0]}",
             crc[0], crc[1], crc[2]);
    struct {
        const char *name;
        uint8_t route, cred;
        const char *text, *holds; /* holds: appended as the last field, or NULL */
    } js[] = {
        {"join-first", FSJ_ROUTE_JOIN, FSJ_CRED_LEARNER0, "{\"learner\":0,\"incarnation\":0", NULL},
        {"join-learner1", FSJ_ROUTE_JOIN, FSJ_CRED_LEARNER1,
         "{\"learner\":1,\"incarnation\":0,\"step\":40,\"tokens\":640", NULL},
        {"join-holds-untrained", FSJ_ROUTE_JOIN, FSJ_CRED_LEARNER0,
         "{\"learner\":0,\"incarnation\":" FSJ_INC ",\"step\":0", holds[0]},
        {"join-holds-plausible", FSJ_ROUTE_JOIN, FSJ_CRED_LEARNER0,
         "{\"learner\":0,\"incarnation\":" FSJ_INC ",\"step\":48,\"tokens\":768", holds[1]},
        {"join-holds-claim", FSJ_ROUTE_JOIN, FSJ_CRED_LEARNER1,
         "{\"learner\":1,\"incarnation\":" FSJ_INC ",\"step\":48", holds[2]},
        {"heartbeat", FSJ_ROUTE_HEARTBEAT, FSJ_CRED_LEARNER0,
         "{\"learner\":0,\"incarnation\":" FSJ_INC
         ",\"step\":5,\"train_loss\":2.5,\"tokens\":80,\"step_ms\":12.5,\"t_real_ms\":1765000000000,"
         "\"cursor\":3,\"batch\":16,\"steps_total\":600,\"pull_ms\":1.5",
         NULL},
        {"leave", FSJ_ROUTE_LEAVE, FSJ_CRED_LEARNER1,
         "{\"learner\":1,\"incarnation\":" FSJ_INC ",\"step\":7,\"tokens\":112,\"unsent\":[0,1,2]", NULL},
    };
    for (size_t i = 0; i < sizeof js / sizeof js[0]; i++) {
        char text[1024];
        int n = snprintf(text, sizeof text, "%c%c%s%s%s}", (char)js[i].route, (char)js[i].cred, js[i].text,
                         js[i].holds ? ",\"holds\":" : "", js[i].holds ? js[i].holds : "");
        rc |= write_file(dir, "syncer_join", js[i].name, text, (size_t)n);
    }
    for (int p = 0; p < FSJ_FRAGMENTS; p++) {
        uint8_t *b = calloc(1, FSJ_STATE_HDR + len[p] * 4);
        if (!b) {
            rc = -1;
            break;
        }
        b[0] = FSJ_ROUTE_STATE;
        b[1] = (uint8_t)(FSJ_CRED_LEARNER0 | p << 3);
        b[2] = 0; /* the headers as the learner sends them */
        b[5] = 3; /* version 3, as reported */
        proto_f32_encode(vals[p], len[p], b + FSJ_STATE_HDR);
        char name[32];
        snprintf(name, sizeof name, "state-fragment%d", p);
        rc |= write_file(dir, "syncer_join", name, b, FSJ_STATE_HDR + len[p] * 4);
        free(b);
    }
out:
    for (int p = 0; p < FSJ_FRAGMENTS; p++)
        free(vals[p]);
    return rc;
}

/* Raw requests as fuzz_http_request sends them, one per route of its table
 * and each way in: auth or none, a JSON body by length and chunked,
 * %-escapes, a pipelined pair, a body over the 4 KiB cap and a length that
 * never arrives, the gate's refusals. */
#define HR_HOST "Host: 127.0.0.1\r\n"
#define HR_JSON "Content-Type: application/json\r\n"
static int http_requests(const char *dir)
{
    static const struct {
        const char *name, *text;
    } reqs[] = {
        {"item-part", "GET /v1/items/a%20b/parts/x%C3%A9 HTTP/1.1\r\n" HR_HOST "\r\n"},
        {"item-part-slash", "GET /v1/items/a%2Fb/parts/c HTTP/1.1\r\n" HR_HOST "\r\n"},
        {"search", "GET /v1/search?q=caf%C3%A9+au+lait&limit=5&q2=%zz HTTP/1.1\r\n" HR_HOST
                   "X-Trace: t-1\r\nUser-Agent: fuzz/1\r\n\r\n"},
        {"search-bad-limit", "GET /v1/search?limit=-3 HTTP/1.0\r\n\r\n"},
        {"things-json", "POST /v1/things HTTP/1.1\r\n" HR_HOST HR_JSON
                        "Content-Length: 25\r\n\r\n{\"a\":1,\"b\":[true,null]}\n\n"},
        {"things-dup-key",
         "POST /v1/things HTTP/1.1\r\n" HR_HOST HR_JSON "Content-Length: 13\r\n\r\n{\"a\":1,\"a\":2}"},
        {"things-chunked", "POST /v1/things HTTP/1.1\r\n" HR_HOST HR_JSON
                           "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"k\":\r\n4\r\n\"v\"}\r\n0\r\n\r\n"},
        {"things-length-never-comes",
         "POST /v1/things HTTP/1.1\r\n" HR_HOST HR_JSON "Content-Length: 100000\r\n\r\n{\"a\":"},
        {"things-no-type", "POST /v1/things HTTP/1.1\r\n" HR_HOST "Content-Length: 2\r\n\r\n{}"},
        {"secret-bearer",
         "GET /v1/secret HTTP/1.1\r\n" HR_HOST "Authorization: Bearer fuzz-token-0123\r\n\r\n"},
        {"secret-wrong",
         "GET /v1/secret HTTP/1.1\r\n" HR_HOST "Authorization: Bearer fuzz-token-012\r\n\r\n"},
        {"basic",
         "GET /v1/basic HTTP/1.1\r\n" HR_HOST "Authorization: Basic dXNlcjpmdXp6LXRva2VuLTAxMjM=\r\n\r\n"},
        {"basic-wrong", "GET /v1/basic HTTP/1.1\r\n" HR_HOST "Authorization: basic dXNlcjp3cm9uZw==\r\n\r\n"},
        {"events", "GET /v1/events HTTP/1.1\r\n" HR_HOST "Accept: text/event-stream\r\n\r\n"},
        {"halt", "POST /v1/halt HTTP/1.1\r\n" HR_HOST "Content-Length: 0\r\n\r\n"},
        {"any-put", "PUT /v1/any/x HTTP/1.1\r\n" HR_HOST HR_JSON "Content-Length: 7\r\n\r\n{\"x\":1}"},
        {"pipelined", "GET /v1/search?q=1 HTTP/1.1\r\n" HR_HOST "\r\n"
                      "POST /v1/things HTTP/1.1\r\n" HR_HOST HR_JSON "Content-Length: 8\r\n\r\n{\"n\":2}\n"},
        {"gate-deny", "GET /v1/search HTTP/1.1\r\n" HR_HOST "X-Deny: 1\r\n\r\n"},
        {"gate-host", "GET /v1/search HTTP/1.1\r\nHost: evil.example:80\r\n\r\n"},
        {"wrong-method", "DELETE /v1/things HTTP/1.1\r\n" HR_HOST "\r\n"},
        {"nul-in-path", "GET /v1/items/a%00b/parts/c HTTP/1.1\r\n" HR_HOST "\r\n"},
        {"expect-continue", "POST /v1/things HTTP/1.1\r\n" HR_HOST HR_JSON
                            "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n{}"},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++)
        rc |= write_file(dir, "http_request", reqs[i].name, reqs[i].text, strlen(reqs[i].text));
    /* a body over the cap, sent whole: 413 */
    static const char head[] = "POST /v1/things HTTP/1.1\r\n" HR_HOST HR_JSON "Content-Length: 5000\r\n\r\n";
    char big[sizeof head - 1 + 5000];
    memcpy(big, head, sizeof head - 1);
    memset(big + sizeof head - 1, ' ', 5000);
    big[sizeof head - 1] = '{';
    big[sizeof big - 1] = '}';
    rc |= write_file(dir, "http_request", "things-over-cap", big, sizeof big);
    return rc;
}

static int experiments(const char *dir, const char *expdir)
{
    DIR *d = opendir(expdir);
    if (!d) {
        fprintf(stderr, "gen_seeds: cannot read %s\n", expdir);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0)
            rc |= fault_requests(dir, expdir, e->d_name);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_seeds DIR EXPERIMENTS_DIR\n");
        return CX_EXIT_USAGE;
    }
    char sub[1024], err[256];
    const char *subs[] = {"payload",     "proto_headers", "fault_request", "config",
                          "events_file", "syncer_join",   "http_request"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        snprintf(sub, sizeof sub, "%s/%s", argv[1], subs[i]);
        if (cx_mkdir_p(sub, err, sizeof err) != 0) {
            fprintf(stderr, "gen_seeds: %s\n", err);
            return CX_EXIT_FAILURE;
        }
    }
    return payloads(argv[1]) == 0 && headers(argv[1]) == 0 && experiments(argv[1], argv[2]) == 0 &&
                   configs(argv[1]) == 0 && event_files(argv[1]) == 0 && syncer_joins(argv[1]) == 0 &&
                   http_requests(argv[1]) == 0
               ? 0
               : 1;
}
