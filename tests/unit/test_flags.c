/* test_flags.c - common/flags: one argv parser for every command. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"

static int usage_calls;
static void usage(FILE *f)
{
    (void)f;
    usage_calls++;
}

static const char *const colours[] = {"red", "green", NULL};

typedef struct opts {
    int dry, seed_given;
    const char *out, *addr;
    int64_t seed, colour;
    double limit;
    const char *tags[2]; /* --tag, repeatable */
    int ntags;
} opts;

/* --tag: a CX_FLAG_FUNC flag that collects up to two values, none "bad". */
static int add_tag(const char *name, const char *value, void *dst, char *err, size_t errlen)
{
    opts *o = dst;
    if (strcmp(value, "bad") == 0 || o->ntags == 2)
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' refused", name, value);
    o->tags[o->ntags++] = value;
    return 0;
}

/* What the parser wrote to the redirected stderr so far, NUL-terminated. */
static void read_stderr(char *buf, size_t len)
{
    fflush(stderr);
    size_t n = fread(buf, 1, len - 1, cr_get_redirected_stderr());
    buf[n] = 0;
}

/* Parse the NULL-terminated args (argv[0] = "prog") into *o. */
static int parse(opts *o, const char **pos, int max_pos, int *npos, const char *const *args)
{
    char *argv[16] = {"prog"};
    int argc = 1;
    while (args[argc - 1] && argc < 16) {
        argv[argc] = (char *)args[argc - 1];
        argc++;
    }
    const cx_flag flags[] = {
        {.name = "--dry-run", .kind = CX_FLAG_BOOL, .dst = &o->dry},
        {.name = "--out", .kind = CX_FLAG_STRING, .dst = &o->out},
        {.name = "--seed",
         .kind = CX_FLAG_I64,
         .dst = &o->seed,
         .given = &o->seed_given,
         .min = 0,
         .max = (double)INT64_MAX},
        {.name = "--limit", .kind = CX_FLAG_DOUBLE, .dst = &o->limit, .min = 1, .max = 10},
        {.name = "--colour", .kind = CX_FLAG_ENUM, .dst = &o->colour, .names = colours},
        {.name = "--listen", .kind = CX_FLAG_HOSTPORT, .dst = &o->addr},
        {.name = "--tag", .kind = CX_FLAG_FUNC, .dst = o, .parse = add_tag},
        {0}};
    return cx_flags_parse("prog", argc, argv, flags, "FILE", pos, max_pos, npos, usage);
}

Test(flags, every_kind_and_positionals, .init = cr_redirect_stderr)
{
    opts o = {.colour = -1};
    const char *pos[2] = {NULL, NULL};
    int npos = -1;
    const char *args[] = {"a.json",  "--dry-run", "--out",    "dir",   "--seed",   "9223372036854775807",
                          "--limit", "2.5",       "--colour", "green", "--listen", "127.0.0.1:0",
                          "b.json",  NULL};
    cr_assert_eq(parse(&o, pos, 2, &npos, args), CX_FLAGS_OK);
    cr_assert_eq(o.dry, 1);
    cr_assert_str_eq(o.out, "dir");
    cr_assert_eq(o.seed, INT64_MAX, "the upper bound saturates, no float overflow");
    cr_assert_eq(o.seed_given, 1);
    cr_assert_float_eq(o.limit, 2.5, 1e-12);
    cr_assert_eq(o.colour, 1);
    cr_assert_str_eq(o.addr, "127.0.0.1:0");
    cr_assert_eq(npos, 2);
    cr_assert_str_eq(pos[0], "a.json");
    cr_assert_str_eq(pos[1], "b.json");
}

/* A command line that must fail, and what stderr must then say (or NULL). */
typedef struct bad_case {
    const char *args[4];
    const char *needle;
} bad_case;

/* Each case exits 64; every needle is in what stderr got. */
static void expect_usage_errors(const bad_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        opts o = {0};
        const char *pos[1];
        int npos;
        cr_assert_eq(parse(&o, pos, 1, &npos, cases[i].args), CX_EXIT_USAGE, "case %zu", i);
    }
    char buf[4096];
    read_stderr(buf, sizeof buf);
    for (size_t i = 0; i < n; i++)
        if (cases[i].needle)
            cr_assert(strstr(buf, cases[i].needle), "%s", buf);
}

Test(flags, errors_exit_64_naming_flag_and_value, .init = cr_redirect_stderr)
{
    const bad_case bad[] = {
        {{"--bogus", NULL}, "prog: unknown flag '--bogus'"},
        {{"--out", NULL}, "prog: --out needs a value"},
        {{"--out", "", NULL}, "prog: --out: empty value"},
        {{"--seed", "-1", NULL}, "--seed: -1 is out of range"},
        {{"--seed", "x", NULL}, NULL},
        {{"--limit", "11", NULL}, NULL},
        {{"--colour", "blue", NULL}, "--colour: 'blue' is not one of red|green"},
        {{"--listen", "nohost", NULL}, "--listen: 'nohost'"},
        {{"a", "b", NULL}, "prog: one FILE only (got 'a' and 'b')"},
    };
    expect_usage_errors(bad, sizeof bad / sizeof bad[0]);
}

Test(flags, help_and_no_positionals, .init = cr_redirect_stderr)
{
    opts o = {0};
    int npos = -1;
    usage_calls = 0;
    const char *help[] = {"--out", "x", "-h", "--bogus", NULL};
    cr_assert_eq(parse(&o, NULL, 0, &npos, help), CX_EXIT_OK, "--help stops the walk with exit 0");
    cr_assert_eq(usage_calls, 1);
    const char *extra[] = {"file", NULL};
    cr_assert_eq(parse(&o, NULL, 0, &npos, extra), CX_EXIT_USAGE, "no positionals allowed");
    const char *none[] = {NULL};
    cr_assert_eq(parse(&o, NULL, 0, &npos, none), CX_FLAGS_OK);
    cr_assert_eq(npos, 0);
}

Test(flags, func_flag_sees_every_value, .init = cr_redirect_stderr)
{
    opts o = {0};
    int npos = -1;
    const char *two[] = {"--tag", "a", "--out", "x", "--tag", "b", NULL};
    cr_assert_eq(parse(&o, NULL, 0, &npos, two), CX_FLAGS_OK);
    cr_assert_eq(o.ntags, 2, "both values reach the function, the first is not overwritten");
    cr_assert_str_eq(o.tags[0], "a");
    cr_assert_str_eq(o.tags[1], "b");
    opts r = {0};
    const char *bad[] = {"--tag", "bad", NULL};
    cr_assert_eq(parse(&r, NULL, 0, &npos, bad), CX_EXIT_USAGE, "the function's refusal is a usage error");
    cr_assert_eq(r.ntags, 0);
    char buf[4096];
    read_stderr(buf, sizeof buf);
    cr_assert(strstr(buf, "prog: --tag: 'bad' refused"), "%s", buf);
}

Test(flags, name_equals_value, .init = cr_redirect_stderr)
{
    opts o = {0};
    int npos = -1;
    const char *args[] = {"--out=dir", "--seed=5", "--listen=127.0.0.1:80", "--tag=a=b", NULL};
    cr_assert_eq(parse(&o, NULL, 0, &npos, args), CX_FLAGS_OK);
    cr_assert_str_eq(o.out, "dir");
    cr_assert_eq(o.seed, 5);
    cr_assert_eq(o.seed_given, 1);
    cr_assert_str_eq(o.addr, "127.0.0.1:80");
    cr_assert_str_eq(o.tags[0], "a=b", "the value is all after the first '='");
    const bad_case bad[] = {
        {{"--dry-run=1", NULL}, "prog: --dry-run takes no value"},
        {{"--bogus=1", NULL}, "prog: unknown flag '--bogus'"},
        {{"--out=", NULL}, "prog: --out: empty value"},
        {{"--seed=x", NULL}, "prog: --seed: 'x'"},
    };
    expect_usage_errors(bad, sizeof bad / sizeof bad[0]);
}

typedef struct others {
    const char *names[3], *values[3];
    int n;
} others;

/* A CX_FLAGS_OTHER row: takes --known-* flags, refuses the rest. */
static int take_other(const char *name, const char *value, void *dst, char *err, size_t errlen)
{
    others *o = dst;
    if (strncmp(name, "--known-", 8) != 0 || o->n == 3)
        return cx_fail(err, errlen, CX_EINVAL, "unknown option '%s'", name);
    o->names[o->n] = strdup(name);
    o->values[o->n++] = value;
    return 0;
}

Test(flags, other_row_takes_every_unnamed_flag_with_its_name, .init = cr_redirect_stderr)
{
    int dry = 0;
    others o = {0};
    const cx_flag flags[] = {{.name = "--dry-run", .kind = CX_FLAG_BOOL, .dst = &dry},
                             {.name = CX_FLAGS_OTHER, .kind = CX_FLAG_FUNC, .dst = &o, .parse = take_other},
                             {0}};
    char *ok[] = {"prog", "--known-a", "1", "--dry-run", "--known-b=2", NULL};
    int npos = -1;
    cr_assert_eq(cx_flags_parse("prog", 5, ok, flags, NULL, NULL, 0, &npos, usage), CX_FLAGS_OK);
    cr_assert_eq(dry, 1, "a named row still wins");
    cr_assert_eq(o.n, 2);
    cr_assert_str_eq(o.names[0], "--known-a", "the function gets the flag's own name");
    cr_assert_str_eq(o.values[0], "1");
    cr_assert_str_eq(o.names[1], "--known-b", "without its =value");
    cr_assert_str_eq(o.values[1], "2");
    char *refused[] = {"prog", "--other", "x", NULL};
    cr_assert_eq(cx_flags_parse("prog", 3, refused, flags, NULL, NULL, 0, &npos, usage), CX_EXIT_USAGE);
    char *single_dash[] = {"prog", "-x", "1", NULL};
    cr_assert_eq(cx_flags_parse("prog", 3, single_dash, flags, NULL, NULL, 0, &npos, usage), CX_EXIT_USAGE,
                 "only --flags reach the row");
    char *no_value[] = {"prog", "--known-c", NULL};
    cr_assert_eq(cx_flags_parse("prog", 2, no_value, flags, NULL, NULL, 0, &npos, usage), CX_EXIT_USAGE);
    char buf[4096];
    read_stderr(buf, sizeof buf);
    cr_assert(strstr(buf, "prog: unknown option '--other'"), "%s", buf);
    cr_assert(strstr(buf, "prog: unknown flag '-x'"), "%s", buf);
    cr_assert(strstr(buf, "prog: --known-c needs a value"), "%s", buf);
    for (int i = 0; i < o.n; i++)
        free((char *)o.names[i]);
}
