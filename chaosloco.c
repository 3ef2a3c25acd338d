/* chaosloco.c - the one executable: dispatches `chaosloco SUBCOMMAND ...` to
 * the subcommand's *_main() (git style). Nothing else lives here. */
#include <stdio.h>
#include <string.h>

typedef int (*subcommand_fn)(int argc, char **argv);

/* Each folder's *_main.c defines these; argv[0] is the subcommand name. */
/* ---- subcommand declarations (one line per subcommand) ---- */

static const struct subcommand {
    const char *name;
    subcommand_fn fn;
    const char *summary;
} subcommands[] = {
    /* ---- subcommand table (one line per subcommand) ---- */
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: chaosloco SUBCOMMAND [--help] [ARGS...]\n\n"
               "Decoupled DiLoCo training and the chaos toolkit around it.\n\nsubcommands:\n");
    for (const struct subcommand *s = subcommands; s->name; s++)
        fprintf(f, "  %-10s %s\n", s->name, s->summary);
    fprintf(f, "\n  chaosloco SUBCOMMAND --help   describes every flag of one subcommand\n"
               "  chaosloco --version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 64;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("chaosloco %s\n", CHAOSLOCO_VERSION);
        return 0;
    }
    for (const struct subcommand *s = subcommands; s->name; s++)
        if (strcmp(argv[1], s->name) == 0)
            return s->fn(argc - 1, argv + 1);
    fprintf(stderr, "chaosloco: unknown subcommand '%s' (see chaosloco --help)\n", argv[1]);
    return 64;
}
