/* flags.c - one parser for a command's argv (flags.h). */
#include "common/flags.h"

#include <string.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/parse.h"

/* The row named by name[0..len-1], else a CX_FLAGS_OTHER row for a
 * --flag, or NULL. */
static const cx_flag *flag_find(const cx_flag *flags, const char *name, size_t len)
{
    const cx_flag *other = NULL;
    for (const cx_flag *f = flags; f->name; f++) {
        if (strncmp(f->name, name, len) == 0 && f->name[len] == '\0')
            return f;
        if (f->kind == CX_FLAG_FUNC && strcmp(f->name, CX_FLAGS_OTHER) == 0)
            other = f;
    }
    return len > 2 && strncmp(name, "--", 2) == 0 ? other : NULL;
}

/* A range bound as int64_t (a double at or past +-2^63 saturates). */
static int64_t flag_i64_bound(double d)
{
    return d >= 9223372036854775807.0 ? INT64_MAX : d <= -9223372036854775808.0 ? INT64_MIN : (int64_t)d;
}

/* Store v (the value of the flag called name) into f's destination; 0, or
 * CX_EINVAL with err naming both. */
static int flag_set(const cx_flag *f, const char *name, const char *v, char *err, size_t errlen)
{
    switch (f->kind) {
    case CX_FLAG_BOOL:
        *(int *)f->dst = 1;
        return 0;
    case CX_FLAG_STRING:
        if (!v[0])
            return cx_fail(err, errlen, CX_EINVAL, "%s: empty value", f->name);
        *(const char **)f->dst = v;
        return 0;
    case CX_FLAG_I64:
        return cx_parse_i64(v, f->name, flag_i64_bound(f->min), flag_i64_bound(f->max), (int64_t *)f->dst,
                            err, errlen);
    case CX_FLAG_DOUBLE:
        return cx_parse_double(v, f->name, f->min, f->max, (double *)f->dst, err, errlen);
    case CX_FLAG_ENUM:
        if (cx_enum_value(f->names, v, (int64_t *)f->dst) != CX_OK) {
            char list[256];
            return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not one of %s", f->name, v,
                           cx_enum_list(f->names, "|", list, sizeof list));
        }
        return 0;
    case CX_FLAG_HOSTPORT: {
        char host[256];
        int port;
        if (cx_parse_hostport(v, f->name, host, sizeof host, &port, err, errlen) < 0)
            return CX_EINVAL;
        *(const char **)f->dst = v;
        return 0;
    }
    case CX_FLAG_FUNC:
        return f->parse(name, v, f->dst, err, errlen) < 0 ? CX_EINVAL : 0;
    }
    return cx_fail(err, errlen, CX_EINVAL, "%s: unknown flag kind", f->name);
}

int cx_flags_parse(const char *prog, int argc, char **argv, const cx_flag *flags, const char *pos_name,
                   const char **pos, int max_pos, int *npos, void (*usage)(FILE *))
{
    char err[CX_ERRLEN];
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return CX_EXIT_OK;
        }
        if (a[0] != '-' || !a[1]) {
            if (*npos < max_pos) {
                pos[(*npos)++] = a;
                continue;
            }
            if (max_pos == 0)
                fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, a);
            else
                fprintf(stderr, "%s: %s%s only (got '%s' and '%s')\n", prog, max_pos == 1 ? "one " : "",
                        pos_name, pos[max_pos - 1], a);
            return CX_EXIT_USAGE;
        }
        /* "--name=value" is "--name value" */
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        int len = eq ? (int)(eq - a) : (int)strlen(a);
        const cx_flag *f = flag_find(flags, a, (size_t)len);
        if (!f) {
            fprintf(stderr, "%s: unknown flag '%.*s' (see --help)\n", prog, len, a);
            return CX_EXIT_USAGE;
        }
        const char *v = "";
        if (f->kind == CX_FLAG_BOOL && eq) {
            fprintf(stderr, "%s: %s takes no value (see --help)\n", prog, f->name);
            return CX_EXIT_USAGE;
        } else if (eq) {
            v = eq + 1;
        } else if (f->kind != CX_FLAG_BOOL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value (see --help)\n", prog, a);
                return CX_EXIT_USAGE;
            }
            v = argv[++i];
        }
        char name[128];
        snprintf(name, sizeof name, "%.*s", len, a);
        if (flag_set(f, name, v, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", prog, err);
            return CX_EXIT_USAGE;
        }
        if (f->given)
            *f->given = 1;
    }
    return CX_FLAGS_OK;
}
