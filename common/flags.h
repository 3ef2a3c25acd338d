/* flags.h - one parser for a command's argv.
 *
 * A command lists its flags in a table (ending at a NULL name) and gets:
 * `--help`/`-h` (prints its usage to stdout), flags without a value
 * (booleans), flags with a value, given as `--name value` or
 * `--name=value` (a string, an integer or a number in a range, a name from
 * an enum table, HOST:PORT, or anything a function of the command's checks
 * and stores) and positionals. Every error goes to
 * stderr as "PROG: ..." naming the flag and the value, and is
 * CX_EXIT_USAGE (64); a flag given twice keeps its last value (a
 * CX_FLAG_FUNC flag: its function sees every value, so it may collect
 * them). A CX_FLAG_FUNC row named CX_FLAGS_OTHER takes every --flag the
 * table does not name, with a value; its function gets that flag's name
 * and refuses what it does not know (the trainer's config flags, which
 * the learner and syncer hand on to trainer/config).
 *
 *   int dry = 0; const char *out = NULL; double tl = 600;
 *   const cx_flag flags[] = {
 *       {.name = "--dry-run", .kind = CX_FLAG_BOOL, .dst = &dry},
 *       {.name = "--out", .kind = CX_FLAG_STRING, .dst = &out},
 *       {.name = "--time-limit", .kind = CX_FLAG_DOUBLE, .dst = &tl, .min = 1, .max = 86400},
 *       {0}};
 *   const char *pos[1];
 *   int npos = 0, rc = cx_flags_parse("chaosloco run", argc, argv, flags, "EXPERIMENT", pos, 1, &npos, usage);
 *   if (rc != CX_FLAGS_OK)
 *       return rc;    (CX_EXIT_OK after --help, CX_EXIT_USAGE on an error)
 */
#ifndef CX_FLAGS_H
#define CX_FLAGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum cx_flag_kind {
    CX_FLAG_BOOL,     /* int *: set to 1; takes no value */
    CX_FLAG_STRING,   /* const char **: the value, which must not be empty */
    CX_FLAG_I64,      /* int64_t *: an integer in [min, max] */
    CX_FLAG_DOUBLE,   /* double *: a finite number in [min, max] */
    CX_FLAG_ENUM,     /* int64_t *: the index of the value in names (common/parse.h's enum tables) */
    CX_FLAG_HOSTPORT, /* const char **: the value, checked as HOST:PORT (port 0..65535) */
    CX_FLAG_FUNC,     /* any: parse(name, value, dst, ...) checks and stores the value */
} cx_flag_kind;

typedef struct cx_flag {
    const char *name; /* "--out"; NULL ends the table */
    cx_flag_kind kind;
    void *dst;                /* where the value goes (type per kind) */
    int *given;               /* optional: set to 1 when the flag is on the command line */
    double min, max;          /* CX_FLAG_I64, CX_FLAG_DOUBLE */
    const char *const *names; /* CX_FLAG_ENUM */
    /* CX_FLAG_FUNC: called once per occurrence; 0, or a cx_err with err
     * naming the flag and the value */
    int (*parse)(const char *name, const char *value, void *dst, char *err, size_t errlen);
} cx_flag;

#define CX_FLAGS_OK (-1)     /* parsed: go on */
#define CX_FLAGS_OTHER "--*" /* the name of a row for every other --flag */

/* Walk argv[1..argc-1] once. Positionals (arguments not starting with '-',
 * and "-" itself) go to pos[0..max_pos-1], their count to *npos; one more
 * than max_pos is an error naming pos_name ("one EXPERIMENT only"). Returns
 * CX_FLAGS_OK, CX_EXIT_OK after --help (usage(stdout) printed) or
 * CX_EXIT_USAGE (message printed). */
int cx_flags_parse(const char *prog, int argc, char **argv, const cx_flag *flags, const char *pos_name,
                   const char **pos, int max_pos, int *npos, void (*usage)(FILE *));

#endif
