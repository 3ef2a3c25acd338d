/* validate_main.c - `chaosloco validate EXPERIMENT.json...`: load and check
 * experiment files, print every problem with its JSON path. Only parses
 * options and wires experiment/schedule together. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/log.h"
#include "common/parse.h"
#include "harness/experiment.h"
#include "harness/hypothesis.h"
#include "harness/schedule.h"
#include "injectors/injector.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: chaosloco validate [--variant base|ci|both] [--schedule] [--seed N] EXPERIMENT.json...\n"
            "       chaosloco validate --list-faults | --list-hypotheses\n\n"
            "Check experiment files strictly: every error is printed with its JSON path\n"
            "(\"$.method[1].targets.ids[0]: expected a learner id in 0..3, got 7\").\n\n"
            "  --variant V        which variant to check: base (the file as written), ci (with its\n"
            "                     \"ci\" merge patch applied), both (default: base, and ci when the\n"
            "                     file has a \"ci\" block)\n"
            "  --schedule         print each valid variant's resolved fault timeline on stdout, one\n"
            "                     JSON object per line {file, variant, seed, chaos_drawn,\n"
            "                     skipped_floor, skipped_busy, entries}; the ok lines then go\n"
            "                     to stderr\n"
            "  --seed N           run seed for --schedule (default: the file's \"seed\"), 0..2^63-1\n"
            "  --list-faults      print the fault types this build accepts and where they come from\n"
            "  --list-hypotheses  print every built-in hypothesis with its params\n"
            "  --help             this text\n\n"
            "exit: 0 all valid, 1 some file invalid, 64 usage error\n");
}

/* From injector_table: each kind's summary, params and traits. */
static void list_faults(void)
{
    printf("fault types (injector_table):\n");
    for (const injector *const *k = injector_table; *k; k++) {
        const injector *inj = *k;
        printf("  %s\n    %s\n", inj->type, inj->summary ? inj->summary : "");
        for (const inj_param *p = inj->params; p && p->name; p++) {
            char text[512];
            inj_param_text(p, text, sizeof text);
            printf("    params.%s: %s; %s\n", p->name, text, p->help ? p->help : "");
        }
        if (!inj->params || !inj->params->name)
            printf("    params: none\n");
        printf("    traits:");
        int any = 0;
        for (unsigned bit = 1; bit; bit <<= 1)
            if ((inj->traits & bit) && injector_trait_name(bit)) {
                printf(" %s", injector_trait_name(bit));
                any = 1;
            }
        printf("%s%s\n", any ? "" : " none", inj->sweep ? "; swept after an agent crash" : "");
    }
}

static void list_hypotheses(void)
{
    for (const hypothesis *const *h = hyp_table; *h; h++) {
        char params[512];
        param_line((*h)->params, params, sizeof params);
        printf("%s\n  passes when: %s\n  params: %s\n", (*h)->name, (*h)->summary, params);
        if ((*h)->rules)
            printf("  rules: %s\n", (*h)->rules);
    }
}

/* Check one variant of one file; 0 valid, 1 invalid. */
static int check(const char *path, unsigned flags, int want_schedule, int has_seed, uint64_t seed)
{
    jv_diag *d = jv_diag_new();
    if (!d) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 1;
    }
    experiment *e = NULL;
    char err[CX_ERRLEN];
    int rc = exp_load(path, flags, &e, d, err, sizeof(err));
    const char *variant = (flags & EXP_CI) ? " (ci variant)" : "";
    if (rc < 0) {
        /* The first JV_DIAG_KEEP messages, then how many more there were. */
        for (size_t i = 0; i < jv_diag_kept(d); i++) {
            const char *m = jv_diag_get(d, i);
            /* Syntax errors already start with "FILE:LINE:COL". */
            if (strncmp(m, path, strlen(path)) == 0)
                fprintf(stderr, "%s\n", m);
            else
                fprintf(stderr, "%s: %s\n", path, m);
        }
        size_t more = jv_diag_count(d) - jv_diag_kept(d);
        if (more)
            fprintf(stderr, "%s: ... and %zu more error%s\n", path, more, more == 1 ? "" : "s");
        if (jv_diag_count(d) == 0)
            fprintf(stderr, "%s: %s\n", path, err);
        fprintf(stderr, "%s%s: INVALID, %zu error%s\n", path, variant, jv_diag_count(d),
                jv_diag_count(d) == 1 ? "" : "s");
        jv_diag_free(d);
        return 1;
    }
    jv_diag_free(d);
    /* With --schedule stdout carries only the JSON timelines. */
    fprintf(
        want_schedule ? stderr : stdout,
        "%s%s: ok: \"%s\", %d learner%s, mode %s, %d action%s, %s%d steady-state + %d verify hypotheses\n",
        path, variant, e->title, e->learners, e->learners == 1 ? "" : "s", e->mode, e->nmethod,
        e->nmethod == 1 ? "" : "s", e->chaos.enabled ? "Poisson chaos, " : "", e->nsteady, e->nverify);
    int bad = 0;
    if (want_schedule) {
        schedule *s = NULL;
        if (sched_build(e, has_seed ? seed : e->seed, &s, err, sizeof(err)) < 0) {
            fprintf(stderr, "%s%s: schedule: %s\n", path, variant, err);
            bad = 1;
        } else {
            json_t *j = sched_json(s);
            if (j) {
                json_object_set_new(j, "file", json_string(path));
                json_object_set_new(j, "variant", json_string((flags & EXP_CI) ? "ci" : "base"));
            }
            char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            if (text)
                printf("%s\n", text);
            free(text);
            json_decref(j);
            sched_free(s);
        }
    }
    exp_free(e);
    return bad;
}

/* 1 when the file has a "ci" object at its top (a syntax error is left to
 * check(), which reports it). */
static int has_ci(const char *path)
{
    json_t *doc = json_load_file(path, 0, NULL);
    int r = json_is_object(json_object_get(doc, "ci"));
    json_decref(doc);
    return r;
}

int validate_main(int argc, char **argv)
{
    const char *variant = "both";
    int want_schedule = 0, has_seed = 0, first_file = 0;
    uint64_t seed = 0;
    char err[CX_ERRLEN];
    cx_log_init("validate", CX_LOG_WARN);
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return CX_EXIT_OK;
        } else if (strcmp(a, "--list-faults") == 0) {
            list_faults();
            return CX_EXIT_OK;
        } else if (strcmp(a, "--list-hypotheses") == 0) {
            list_hypotheses();
            return CX_EXIT_OK;
        } else if (strcmp(a, "--schedule") == 0) {
            want_schedule = 1;
        } else if (strcmp(a, "--variant") == 0 || strcmp(a, "--seed") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "chaosloco validate: %s needs a value (see --help)\n", a);
                return CX_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--variant") == 0) {
                if (strcmp(v, "base") != 0 && strcmp(v, "ci") != 0 && strcmp(v, "both") != 0) {
                    fprintf(stderr, "chaosloco validate: --variant: expected base|ci|both, got '%s'\n", v);
                    return CX_EXIT_USAGE;
                }
                variant = v;
            } else {
                int64_t s;
                if (cx_parse_i64(v, "--seed", 0, INT64_MAX, &s, err, sizeof(err)) < 0) {
                    fprintf(stderr, "chaosloco validate: %s\n", err);
                    return CX_EXIT_USAGE;
                }
                seed = (uint64_t)s;
                has_seed = 1;
            }
        } else {
            fprintf(stderr, "chaosloco validate: unknown flag '%s' (see --help)\n", a);
            return CX_EXIT_USAGE;
        }
    }
    first_file = i;
    char seedtxt[32] = "file";
    if (has_seed)
        snprintf(seedtxt, sizeof(seedtxt), "%" PRIu64, seed);
    cx_debug("validate files=%d variant=%s schedule=%d seed=%s fault_types=%s", argc - first_file, variant,
             want_schedule, seedtxt, "injector_table");
    if (first_file >= argc) {
        fprintf(stderr, "chaosloco validate: no EXPERIMENT.json given (see --help)\n");
        return CX_EXIT_USAGE;
    }
    int bad = 0;
    for (i = first_file; i < argc; i++) {
        const char *path = argv[i];
        if (strcmp(variant, "ci") != 0)
            bad |= check(path, 0, want_schedule, has_seed, seed);
        if (strcmp(variant, "ci") == 0 || (strcmp(variant, "both") == 0 && has_ci(path)))
            bad |= check(path, EXP_CI, want_schedule, has_seed, seed);
    }
    return bad ? CX_EXIT_FAILURE : CX_EXIT_OK;
}
