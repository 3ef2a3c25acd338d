/* run_flags.h - the flags `chaosloco run` and `chaosloco compare` share, as
 * rows of a cx_flag table (common/flags.h).
 *
 * Both commands take --ci, --out DIR, --seed N (0..2^63-1) and
 * --time-limit S (1..86400) with the same meaning and range; the rows live
 * here once so that the two tables cannot drift apart. What it is not:
 * their --help text (each command says what the flag means for it).
 *
 * OPTS points to a struct with the fields ci, out_dir, has_seed and
 * time_limit_s (run_opts, compare_opts); the seed goes to the int64_t
 * *SEED, which the caller copies to the struct's uint64_t seed:
 *
 *   int64_t seed = 0;
 *   const cx_flag flags[] = {RUN_SHARED_FLAGS(&o, &seed),
 *                            {.name = "--junit", .kind = CX_FLAG_STRING, .dst = &o.junit},
 *                            {0}};
 *   ... cx_flags_parse(...) ...
 *   o.seed = (uint64_t)seed;
 */
#ifndef HARNESS_RUN_FLAGS_H
#define HARNESS_RUN_FLAGS_H

#include <stdint.h>

#include "common/flags.h"

/* one row a line, as in the tables that use it */
/* clang-format off */
#define RUN_SHARED_FLAGS(opts, seed)                                                                 \
    {.name = "--ci", .kind = CX_FLAG_BOOL, .dst = &(opts)->ci},                                      \
    {.name = "--out", .kind = CX_FLAG_STRING, .dst = &(opts)->out_dir},                              \
    {.name = "--seed", .kind = CX_FLAG_I64, .dst = (seed), .given = &(opts)->has_seed,               \
     .min = 0, .max = (double)INT64_MAX},                                                            \
    {.name = "--time-limit", .kind = CX_FLAG_DOUBLE, .dst = &(opts)->time_limit_s,                   \
     .min = 1, .max = 86400}
/* clang-format on */

#endif
