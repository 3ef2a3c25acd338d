/* data.c - synthetic Markov corpus, text-file corpus, shards with cursors,
 * and the held-out eval set. See data.h for the contract.
 *
 * The synthetic chain. States are the last k symbols (A^k states). Every
 * state has `branching` distinct successor symbols with random probabilities
 * (Dirichlet(1): normalised -ln u). Two successors are forced so that the
 * entropy rate we compute is the one a sampled stream actually has:
 *   - the successor along a de Bruijn sequence B(A, k): the de Bruijn cycle
 *     passes through every state, so the chain is irreducible (a single
 *     stationary distribution, whatever state a stream starts in);
 *   - for state 0^k, the symbol 0 (a self-loop), so the chain is aperiodic
 *     (when branching >= 2; with branching 1 the entropy is 0 anyway).
 * The stationary distribution is found by lazy power iteration
 * (pi <- (pi + pi P) / 2, same fixed point, converges for periodic chains
 * too) until the L1 change is below 1e-12 (or 4e-16 per state when there are
 * so many states that rounding noise exceeds 1e-12).
 */
#include "numerics/data.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/hash.h"
#include "common/file.h"
#include "numerics/corpus.h"

#define DATA_MAX_STATES (1u << 20)       /* A^k cap for the synthetic chain */
#define DATA_FILE_MAX_BYTES (1ull << 30) /* 1 GiB: the file is held in memory */
#define DATA_PI_MAX_ITERS 200000         /* power-iteration cap */

/* Printable ASCII, most "text-like" first, so a small alphabet looks like
 * lowercase words. 95 symbols. */
static const char data_symbols[] =
    " etaoinshrdlcumwfgypbvkjxqz.,;:'!?-ETAOINSHRDLCUMWFGYPBVKJXQZ0123456789\"()[]{}<>/\\|@#$%^&*_+=~`";

struct data_source {
    int synthetic;        /* 1: Markov chain, 0: file */
    uint64_t fingerprint; /* data_source_fingerprint() */
    char describe[256];   /* data_source_describe() */
    /* synthetic */
    uint64_t seed;            /* corpus seed */
    int order;                /* k */
    int alphabet;             /* A */
    int branching;            /* successors per state */
    size_t states;            /* A^k */
    uint8_t sym_of_byte[256]; /* byte -> symbol index (0 for bytes outside the alphabet) */
    uint8_t *next;            /* [states, branching] successor symbol indices */
    double *cdf;              /* [states, branching] cumulative probabilities, last = 1 */
    double entropy;           /* nats per byte */
    /* file */
    char *path;       /* copy of the path */
    uint8_t *bytes;   /* [len] file contents */
    size_t len;       /* bytes */
    size_t train_len; /* first 90%: the shards' bytes */
};

struct data_shard {
    const data_source *src; /* borrowed */
    data_cursor cur;        /* the whole position */
    int C;                  /* context length */
    /* file */
    const uint8_t *slice; /* start of this shard's bytes */
    uint64_t windows;     /* windows in the slice: slice_len - C */
    uint64_t stride;      /* coprime to windows: visiting order */
};

/* ---- RNG: common/rng.h ---- */

/* Mix a seed with a tag and an index into a stream seed. */
static uint64_t data_stream_seed(uint64_t seed, uint64_t tag, uint64_t index)
{
    uint64_t x = seed ^ (tag * 0xD6E8FEB86659FD93ull);
    uint64_t a = cx_splitmix64(&x);
    x = a ^ (index * 0x9E3779B97F4A7C15ull);
    return cx_splitmix64(&x);
}

#define DATA_TAG_CHAIN 0x636861696eull /* "chain" */
#define DATA_TAG_SHARD 0x7368617264ull /* "shard" */
#define DATA_TAG_EVAL 0x6576616cull    /* "eval" */

/* ---- synthetic chain: construction ---- */

/* De Bruijn sequence B(A, k) by the FKM (Lyndon word) algorithm, iterative.
 * Writes A^k symbols to seq. */
static void data_de_bruijn(int A, int k, uint8_t *seq)
{
    size_t n = 0;
    int a[8] = {0}; /* a[1..k] is the current prenecklace, k <= 4 */
    int len = 1;    /* its length */
    for (;;) {
        if (k % len == 0) /* a Lyndon word whose length divides k */
            for (int j = 1; j <= len; j++)
                seq[n++] = (uint8_t)a[j];
        for (int j = len + 1; j <= k; j++) /* extend periodically to length k */
            a[j] = a[j - len];
        int i = k;
        while (i >= 1 && a[i] == A - 1)
            i--;
        if (i == 0)
            break;
        a[i]++;
        len = i;
    }
}

static size_t data_pow(int a, int k)
{
    size_t r = 1;
    for (int i = 0; i < k; i++)
        r *= (size_t)a;
    return r;
}

/* The chain's stationary distribution into pi (S entries; pi2 is scratch of
 * the same size): lazy power iteration from uniform. 1 when it converged. */
static int chain_stationary(const data_source *s, double *pi, double *pi2)
{
    int A = s->alphabet, Br = s->branching;
    size_t S = s->states;
    for (size_t st = 0; st < S; st++)
        pi[st] = 1.0 / (double)S;
    double tol = 1e-12 > 4e-16 * (double)S ? 1e-12 : 4e-16 * (double)S;
    int converged = 0;
    for (int it = 0; it < DATA_PI_MAX_ITERS && !converged; it++) {
        for (size_t st = 0; st < S; st++)
            pi2[st] = 0.5 * pi[st];
        for (size_t st = 0; st < S; st++) {
            const uint8_t *nx = s->next + st * (size_t)Br;
            const double *cd = s->cdf + st * (size_t)Br;
            size_t base = (st * (size_t)A) % S; /* drop the oldest symbol */
            double prev = 0.0, half = 0.5 * pi[st];
            for (int b = 0; b < Br; b++) {
                pi2[base + nx[b]] += half * (cd[b] - prev);
                prev = cd[b];
            }
        }
        double diff = 0.0, tot = 0.0;
        for (size_t st = 0; st < S; st++) {
            diff += fabs(pi2[st] - pi[st]);
            tot += pi2[st];
        }
        for (size_t st = 0; st < S; st++)
            pi[st] = pi2[st] / tot; /* renormalise: no drift from rounding */
        converged = diff < tol;
    }
    return converged;
}

static int data_build_chain(data_source *s, char *err, size_t errlen)
{
    int A = s->alphabet, k = s->order, Br = s->branching;
    size_t S = s->states;
    cx_rng rng;
    cx_rng_seed(&rng, data_stream_seed(s->seed, DATA_TAG_CHAIN, 0));

    s->next = malloc(S * (size_t)Br);
    s->cdf = malloc(S * (size_t)Br * sizeof(double));
    uint8_t *db = malloc(S);
    double *pi = malloc(S * sizeof(double));
    double *pi2 = malloc(S * sizeof(double));
    int rc = CX_OK;
    if (!s->next || !s->cdf || !db || !pi || !pi2) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "data: out of memory for a %zu-state chain", S);
        goto out;
    }

    /* Forced successor of each state along the de Bruijn cycle: the word
     * starting at position i is followed by symbol seq[i + k]. */
    data_de_bruijn(A, k, db);
    uint8_t *forced = malloc(S);
    if (!forced) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
        goto out;
    }
    memset(forced, 0xFF, S); /* 0xFF is no symbol (A <= 95): marks "unset" */
    for (size_t i = 0; i < S; i++) {
        size_t st = 0;
        for (int j = 0; j < k; j++)
            st = st * (size_t)A + db[(i + (size_t)j) % S];
        assert(forced[st] == 0xFF); /* a de Bruijn cycle visits each state once */
        forced[st] = db[(i + (size_t)k) % S];
    }

    uint8_t perm[95];
    for (size_t st = 0; st < S; st++) {
        uint8_t *nx = s->next + st * (size_t)Br;
        int nb = 0;
        nx[nb++] = forced[st];
        if (st == 0 && Br >= 2 && forced[st] != 0)
            nx[nb++] = 0; /* self-loop on 0^k: aperiodic */
        /* the rest: distinct random symbols (partial Fisher-Yates) */
        for (int a = 0; a < A; a++)
            perm[a] = (uint8_t)a;
        int avail = A;
        while (nb < Br) {
            int j = (int)cx_rng_below(&rng, (uint64_t)avail);
            uint8_t c = perm[j];
            perm[j] = perm[--avail];
            int dup = 0;
            for (int q = 0; q < nb; q++)
                dup |= nx[q] == c;
            if (!dup)
                nx[nb++] = c;
        }
        double *cd = s->cdf + st * (size_t)Br, sum = 0.0;
        for (int b = 0; b < Br; b++) {
            cd[b] = -log(1.0 - cx_rng_uniform(&rng)); /* Exp(1) > 0 almost surely */
            if (cd[b] < 1e-3)
                cd[b] = 1e-3; /* keep every successor reachable in practice */
            sum += cd[b];
        }
        double acc = 0.0;
        for (int b = 0; b < Br; b++) {
            acc += cd[b] / sum;
            cd[b] = acc;
        }
        cd[Br - 1] = 1.0;
    }
    free(forced);

    int converged = chain_stationary(s, pi, pi2);
    if (!converged) {
        rc = cx_fail(err, errlen, CX_EINVAL,
                     "data: stationary distribution did not converge in %d iterations "
                     "(order=%d alphabet=%d branching=%d)",
                     DATA_PI_MAX_ITERS, k, A, Br);
        goto out;
    }
    double H = 0.0;
    for (size_t st = 0; st < S; st++) {
        const double *cd = s->cdf + st * (size_t)Br;
        double prev = 0.0, h = 0.0;
        for (int b = 0; b < Br; b++) {
            double p = cd[b] - prev;
            prev = cd[b];
            if (p > 0)
                h -= p * log(p);
        }
        H += pi[st] * h;
    }
    s->entropy = H;
out:
    free(db);
    free(pi);
    free(pi2);
    return rc;
}

/* ---- synthetic chain: sampling ---- */

/* State index of the last k bytes of hist (MODEL_MAX_CONTEXT bytes). */
static size_t data_state_of(const data_source *s, const uint8_t *hist)
{
    size_t st = 0;
    for (int j = MODEL_MAX_CONTEXT - s->order; j < MODEL_MAX_CONTEXT; j++)
        st = st * (size_t)s->alphabet + s->sym_of_byte[hist[j]];
    return st;
}

/* Draw the next byte of the stream in cur (advancing rng and history). */
static uint8_t data_chain_step(const data_source *s, data_cursor *cur)
{
    size_t st = data_state_of(s, cur->history);
    const uint8_t *nx = s->next + st * (size_t)s->branching;
    const double *cd = s->cdf + st * (size_t)s->branching;
    double u = cx_rng_uniform(&cur->rng);
    int b = 0;
    while (b < s->branching - 1 && u >= cd[b])
        b++;
    uint8_t byte = (uint8_t)data_symbols[nx[b]];
    memmove(cur->history, cur->history + 1, MODEL_MAX_CONTEXT - 1);
    cur->history[MODEL_MAX_CONTEXT - 1] = byte;
    cur->position++;
    return byte;
}

double data_transition_prob(const data_source *src, const uint8_t *ctx, int len, uint8_t next)
{
    if (!src->synthetic || len < src->order)
        return NAN;
    size_t st = 0;
    for (int j = len - src->order; j < len; j++)
        st = st * (size_t)src->alphabet + src->sym_of_byte[ctx[j]];
    const uint8_t *nx = src->next + st * (size_t)src->branching;
    const double *cd = src->cdf + st * (size_t)src->branching;
    double prev = 0.0;
    for (int b = 0; b < src->branching; b++) {
        if ((uint8_t)data_symbols[nx[b]] == next)
            return cd[b] - prev;
        prev = cd[b];
    }
    return 0.0;
}

/* A fresh synthetic stream: history filled by running the chain from a
 * random state for MODEL_MAX_CONTEXT steps (so every C sees real bytes). */
static void data_chain_stream_init(const data_source *s, data_cursor *cur, uint64_t stream_seed)
{
    cx_rng_seed(&cur->rng, stream_seed);
    for (int j = 0; j < MODEL_MAX_CONTEXT; j++)
        cur->history[j] = (uint8_t)data_symbols[cx_rng_below(&cur->rng, (uint64_t)s->alphabet)];
    for (int j = 0; j < MODEL_MAX_CONTEXT; j++)
        (void)data_chain_step(s, cur);
    cur->position = 0;
}

/* ---- sources ---- */

void data_config_default(data_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->seed = 1;
    cfg->order = 2;
    cfg->alphabet = 32;
    cfg->branching = 6;
}

static int data_new_synthetic(data_source *s, const data_config *cfg, char *err, size_t errlen)
{
    data_config d;
    data_config_default(&d);
    s->synthetic = 1;
    s->seed = cfg->seed;
    s->order = cfg->order ? cfg->order : d.order;
    s->alphabet = cfg->alphabet ? cfg->alphabet : d.alphabet;
    s->branching = cfg->branching ? cfg->branching : d.branching;
    if (s->order < 1 || s->order > 4)
        return cx_fail(err, errlen, CX_EINVAL, "data: order=%d out of range 1..4", s->order);
    if (s->alphabet < 2 || s->alphabet > 95)
        return cx_fail(err, errlen, CX_EINVAL, "data: alphabet=%d out of range 2..95", s->alphabet);
    if (s->branching < 1 || s->branching > s->alphabet)
        return cx_fail(err, errlen, CX_EINVAL, "data: branching=%d out of range 1..%d", s->branching,
                       s->alphabet);
    double states = pow((double)s->alphabet, s->order);
    if (states > DATA_MAX_STATES)
        return cx_fail(err, errlen, CX_EINVAL, "data: alphabet^order = %.0f states, more than the %u allowed",
                       states, DATA_MAX_STATES);
    s->states = data_pow(s->alphabet, s->order);
    for (int a = 0; a < s->alphabet; a++)
        s->sym_of_byte[(uint8_t)data_symbols[a]] = (uint8_t)a;
    int rc = data_build_chain(s, err, errlen);
    if (rc != CX_OK)
        return rc;
    uint64_t fp = CX_FNV1A64_INIT;
    const char tag[] = "synthetic-markov-v1";
    fp = cx_fnv1a64(fp, tag, sizeof(tag));
    int64_t params[4] = {(int64_t)s->seed, s->order, s->alphabet, s->branching};
    s->fingerprint = cx_fnv1a64(fp, params, sizeof(params));
    snprintf(s->describe, sizeof(s->describe),
             "synthetic(seed=%llu order=%d alphabet=%d branching=%d floor=%.4f nats)",
             (unsigned long long)s->seed, s->order, s->alphabet, s->branching, s->entropy);
    return CX_OK;
}

static int data_new_file(data_source *s, const data_config *cfg, char *err, size_t errlen)
{
    char cerr[CX_ERRLEN] = "";
    char *data = NULL;
    size_t len = 0;
    s->synthetic = 0;
    s->entropy = NAN;
    s->path = strdup(cfg->path);
    if (!s->path)
        return cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
    int rc = cx_file_read(cfg->path, DATA_FILE_MAX_BYTES, &data, &len, cerr, sizeof(cerr));
    if (rc != CX_OK)
        return cx_fail(err, errlen, rc == CX_ETOOBIG ? CX_EINVAL : CX_EIO,
                       "data: cannot read --data file '%s': %s", cfg->path, cerr[0] ? cerr : cx_strerror(rc));
    s->bytes = (uint8_t *)data;
    s->len = len;
    if (len < DATA_FILE_MIN_BYTES)
        return cx_fail(err, errlen, CX_EINVAL,
                       "data: --data file '%s' has %zu bytes, fewer than the %d needed", cfg->path, len,
                       DATA_FILE_MIN_BYTES);
    s->train_len = len / 10 * 9 + (len % 10) * 9 / 10;
    uint64_t fp = CX_FNV1A64_INIT;
    const char tag[] = "file-v1";
    fp = cx_fnv1a64(fp, tag, sizeof(tag));
    fp = cx_fnv1a64(fp, &len, sizeof(len));
    s->fingerprint = cx_fnv1a64(fp, s->bytes, len);
    snprintf(s->describe, sizeof(s->describe), "file(path=%.180s bytes=%zu)", cfg->path, len);
    return CX_OK;
}

/* ---- the named corpora (corpus.h: fortunes, pydoc) ---- */

/* A corpus read from a Debian package, split by whole entries (corpus.c). */
static int data_new_corpus(data_source *s, const corpus_kind *kind, const data_config *cfg, char *err,
                           size_t errlen)
{
    corpus_text t;
    s->synthetic = 0;
    s->entropy = NAN;
    s->path = strdup(kind->name);
    if (!s->path)
        return cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
    int rc = corpus_load(kind, cfg->seed, &t, err, errlen);
    if (rc != CX_OK)
        return rc;
    s->bytes = t.bytes;
    s->len = t.len;
    s->train_len = t.train_len;
    s->fingerprint = t.fingerprint;
    snprintf(s->describe, sizeof(s->describe), "%s", t.describe);
    return CX_OK;
}

data_source *data_source_new(const data_config *cfg, char *err, size_t errlen)
{
    data_config d;
    if (!cfg) {
        data_config_default(&d);
        cfg = &d;
    }
    data_source *s = calloc(1, sizeof(*s));
    if (!s) {
        cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
        return NULL;
    }
    int rc;
    if (!cfg->path || strcmp(cfg->path, "synthetic") == 0)
        rc = data_new_synthetic(s, cfg, err, errlen);
    else if (corpus_find(cfg->path))
        rc = data_new_corpus(s, corpus_find(cfg->path), cfg, err, errlen);
    else
        rc = data_new_file(s, cfg, err, errlen);
    if (rc != CX_OK) {
        data_source_free(s);
        return NULL;
    }
    return s;
}

void data_source_free(data_source *src)
{
    if (!src)
        return;
    free(src->next);
    free(src->cdf);
    free(src->path);
    free(src->bytes);
    free(src);
}

int data_source_is_synthetic(const data_source *src)
{
    return src->synthetic;
}
double data_entropy_rate(const data_source *src)
{
    return src->synthetic ? src->entropy : NAN;
}
void data_order_entropies(const data_source *src, double *h0_bits, double *h1_bits)
{
    if (src->synthetic) {
        *h0_bits = *h1_bits = NAN;
        return;
    }
    static const size_t V = 256;
    double *c1 = calloc(V * V, sizeof(double)), c0[256] = {0};
    if (!c1) {
        *h0_bits = *h1_bits = NAN;
        return;
    }
    for (size_t i = 0; i < src->len; i++) {
        c0[src->bytes[i]] += 1;
        if (i)
            c1[src->bytes[i - 1] * V + src->bytes[i]] += 1;
    }
    double h0 = 0, h1 = 0, n = (double)src->len, n1 = n - 1;
    double prev[256] = {0};
    for (size_t a = 0; a < V; a++)
        for (size_t b = 0; b < V; b++)
            prev[a] += c1[a * V + b];
    for (size_t a = 0; a < V; a++) {
        if (c0[a] > 0)
            h0 -= c0[a] / n * log2(c0[a] / n);
        for (size_t b = 0; b < V; b++) {
            double c = c1[a * V + b];
            if (c > 0)
                h1 -= c / n1 * log2(c / prev[a]);
        }
    }
    free(c1);
    *h0_bits = h0;
    *h1_bits = h1;
}

uint64_t data_source_fingerprint(const data_source *src)
{
    return src->fingerprint;
}
const char *data_source_describe(const data_source *src)
{
    return src->describe;
}

/* ---- shards ---- */

static uint64_t data_gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A stride near n * 0.618 that is coprime to n: consecutive examples land far
 * apart, and q -> q * stride mod n visits every window once per epoch. */
static uint64_t data_pick_stride(uint64_t n)
{
    if (n <= 2)
        return 1;
    uint64_t s = (uint64_t)((double)n * 0.6180339887498949);
    if (s < 1)
        s = 1;
    while (data_gcd(s, n) != 1)
        s++;
    return s % n ? s : 1;
}

data_shard *data_shard_new(const data_source *src, int index, int count, int C, char *err, size_t errlen)
{
    if (count < 1 || count > 65536 || index < 0 || index >= count) {
        cx_fail(err, errlen, CX_EINVAL, "data: shard %d of %d is not a valid shard", index, count);
        return NULL;
    }
    if (C < 1 || C > MODEL_MAX_CONTEXT) {
        cx_fail(err, errlen, CX_EINVAL, "data: context %d out of range 1..%d", C, MODEL_MAX_CONTEXT);
        return NULL;
    }
    data_shard *sh = calloc(1, sizeof(*sh));
    if (!sh) {
        cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
        return NULL;
    }
    sh->src = src;
    sh->C = C;
    data_cursor *cur = &sh->cur;
    cur->magic = DATA_CURSOR_MAGIC;
    cur->version = DATA_CURSOR_VERSION;
    cur->fingerprint = src->fingerprint;
    cur->shard = (uint32_t)index;
    cur->shards = (uint32_t)count;
    cur->context = (uint32_t)C;
    if (src->synthetic) {
        data_chain_stream_init(src, cur, data_stream_seed(src->seed, DATA_TAG_SHARD, (uint64_t)index));
        return sh;
    }
    size_t lo = (size_t)((unsigned __int128)src->train_len * (unsigned)index / (unsigned)count);
    size_t hi = (size_t)((unsigned __int128)src->train_len * (unsigned)(index + 1) / (unsigned)count);
    size_t slice_len = hi - lo;
    if (slice_len < (size_t)C + DATA_MIN_WINDOWS) {
        cx_fail(err, errlen, CX_EINVAL,
                "data: --data file '%s' is too small for %d shards: shard %d has %zu bytes, "
                "fewer than context %d + %d",
                src->path, count, index, slice_len, C, DATA_MIN_WINDOWS);
        free(sh);
        return NULL;
    }
    sh->slice = src->bytes + lo;
    sh->windows = slice_len - (size_t)C;
    sh->stride = data_pick_stride(sh->windows);
    return sh;
}

void data_shard_free(data_shard *sh)
{
    free(sh);
}

void data_shard_next_batch(data_shard *sh, int B, uint8_t *inputs, uint8_t *targets)
{
    const data_source *s = sh->src;
    data_cursor *cur = &sh->cur;
    int C = sh->C;
    for (int b = 0; b < B; b++) {
        uint8_t *in = inputs + (size_t)b * C;
        if (s->synthetic) {
            memcpy(in, cur->history + MODEL_MAX_CONTEXT - C, (size_t)C);
            targets[b] = data_chain_step(s, cur);
        } else {
            uint64_t w = (uint64_t)(((unsigned __int128)cur->position * sh->stride) % sh->windows);
            memcpy(in, sh->slice + w, (size_t)C);
            targets[b] = sh->slice[w + (uint64_t)C];
            if (++cur->position == sh->windows) {
                cur->position = 0;
                cur->epoch++;
            }
        }
        cur->tokens++;
    }
}

void data_shard_get_cursor(const data_shard *sh, data_cursor *out)
{
    *out = sh->cur;
}

int data_shard_set_cursor(data_shard *sh, const data_cursor *cur, char *err, size_t errlen)
{
    if (cur->magic != DATA_CURSOR_MAGIC || cur->version != DATA_CURSOR_VERSION)
        return cx_fail(err, errlen, CX_ECORRUPT, "data: cursor has bad magic/version (%08x/%u)", cur->magic,
                       cur->version);
    if (cur->fingerprint != sh->cur.fingerprint)
        return cx_fail(err, errlen, CX_EINVAL,
                       "data: cursor belongs to other data (fingerprint %016llx, "
                       "expected %016llx)",
                       (unsigned long long)cur->fingerprint, (unsigned long long)sh->cur.fingerprint);
    if (cur->shard != sh->cur.shard || cur->shards != sh->cur.shards)
        return cx_fail(err, errlen, CX_EINVAL, "data: cursor is for shard %u of %u, this is shard %u of %u",
                       cur->shard, cur->shards, sh->cur.shard, sh->cur.shards);
    if (cur->context != sh->cur.context)
        return cx_fail(err, errlen, CX_EINVAL, "data: cursor is for context %u, this shard uses %u",
                       cur->context, sh->cur.context);
    if (!sh->src->synthetic && cur->position >= sh->windows)
        return cx_fail(err, errlen, CX_ECORRUPT, "data: cursor position %llu beyond %llu windows",
                       (unsigned long long)cur->position, (unsigned long long)sh->windows);
    if (sh->src->synthetic && !(cur->rng.s[0] | cur->rng.s[1] | cur->rng.s[2] | cur->rng.s[3]))
        return cx_fail(err, errlen, CX_ECORRUPT, "data: cursor has an all-zero RNG state");
    sh->cur = *cur;
    return CX_OK;
}

uint64_t data_shard_epoch_tokens(const data_shard *sh)
{
    return sh->src->synthetic ? UINT64_MAX : sh->windows;
}

/* ---- eval set ---- */

int data_source_split(const data_source *src, const uint8_t **train, size_t *train_len, const uint8_t **held,
                      size_t *held_len)
{
    if (src->synthetic)
        return CX_EINVAL;
    *train = src->bytes;
    *train_len = src->train_len;
    *held = src->bytes + src->train_len;
    *held_len = src->len - src->train_len;
    return 0;
}

size_t data_eval_capacity(const data_source *src, int C)
{
    if (src->synthetic)
        return SIZE_MAX;
    size_t eval_len = src->len - src->train_len;
    if (C < 1 || eval_len <= (size_t)C)
        return 0;
    return eval_len - (size_t)C;
}

int data_eval_examples(const data_source *src, int C, size_t n, uint8_t *inputs, uint8_t *targets, char *err,
                       size_t errlen)
{
    if (C < 1 || C > MODEL_MAX_CONTEXT)
        return cx_fail(err, errlen, CX_EINVAL, "data: context %d out of range 1..%d", C, MODEL_MAX_CONTEXT);
    size_t cap = data_eval_capacity(src, C);
    if (n == 0 || n > cap)
        return cx_fail(err, errlen, CX_EINVAL, "data: eval set of %zu examples, but 1..%zu are available", n,
                       cap);
    if (src->synthetic) {
        data_cursor cur;
        memset(&cur, 0, sizeof(cur));
        data_chain_stream_init(src, &cur, data_stream_seed(src->seed, DATA_TAG_EVAL, 0));
        for (size_t i = 0; i < n; i++) {
            memcpy(inputs + i * (size_t)C, cur.history + MODEL_MAX_CONTEXT - C, (size_t)C);
            targets[i] = data_chain_step(src, &cur);
        }
        return CX_OK;
    }
    const uint8_t *ev = src->bytes + src->train_len;
    for (size_t i = 0; i < n; i++) {
        size_t w = (size_t)((unsigned __int128)i * cap / n);
        memcpy(inputs + i * (size_t)C, ev + w, (size_t)C);
        targets[i] = ev[w + (size_t)C];
    }
    return CX_OK;
}
