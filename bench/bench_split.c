/* bench_split.c - write a corpus's training and held-out bytes exactly as
 * the trainer splits them (data_source_split), for reference lines that
 * compress the held-out part given the training part (bench/curve.sh).
 *
 *   bench_split [--data fortunes|pydoc|FILE] [--seed N] --out DIR
 *
 * Writes DIR/train.bin and DIR/held_out.bin and prints one line: the
 * source's description (entries, bytes, held-out repeats left out), its
 * fingerprint and its order-0/order-1 entropies in bits/byte
 * (order1_bits=..., bench/curve.sh draws it). The seed is the run's --seed:
 * it shuffles a corpus's entries (fortunes, pydoc documents) before the
 * split.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/file.h"
#include "common/parse.h"
#include "numerics/data.h"

int main(int argc, char **argv)
{
    const char *data = "fortunes", *out = NULL;
    int64_t seed = 1;
    char err[CX_ERRLEN], path[4096];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            data = argv[++i];
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            if (cx_parse_i64(argv[++i], "--seed", 0, 4294967295LL, &seed, err, sizeof err) != 0) {
                fprintf(stderr, "bench_split: %s\n", err);
                return CX_EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_split [--data fortunes|pydoc|FILE] [--seed N] --out DIR\n");
            return CX_EXIT_USAGE;
        }
    }
    if (!out) {
        fprintf(stderr, "bench_split: --out DIR is required\n");
        return CX_EXIT_USAGE;
    }
    data_config dc;
    data_config_default(&dc);
    dc.path = data;
    dc.seed = (uint64_t)seed;
    data_source *src = data_source_new(&dc, err, sizeof err);
    if (!src) {
        fprintf(stderr, "bench_split: %s\n", err);
        return CX_EXIT_FAILURE;
    }
    const uint8_t *tr, *ho;
    size_t trn, hon;
    int rc = CX_EXIT_OK;
    if (data_source_split(src, &tr, &trn, &ho, &hon) != 0) {
        fprintf(stderr, "bench_split: the synthetic corpus has no bytes to split\n");
        rc = CX_EXIT_USAGE;
    } else {
        snprintf(path, sizeof path, "%s/train.bin", out);
        if (cx_file_write_atomic(path, tr, trn, err, sizeof err) == 0) {
            snprintf(path, sizeof path, "%s/held_out.bin", out);
            if (cx_file_write_atomic(path, ho, hon, err, sizeof err) != 0)
                rc = CX_EXIT_FAILURE;
        } else {
            rc = CX_EXIT_FAILURE;
        }
        if (rc != CX_EXIT_OK)
            fprintf(stderr, "bench_split: %s\n", err);
        else {
            double h0, h1;
            data_order_entropies(src, &h0, &h1);
            printf("%s fingerprint=%016llx order0_bits=%.3f order1_bits=%.3f\n", data_source_describe(src),
                   (unsigned long long)data_source_fingerprint(src), h0, h1);
        }
    }
    data_source_free(src);
    return rc;
}
