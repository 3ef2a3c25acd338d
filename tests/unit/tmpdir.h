/* tmpdir.h - a unit test's scratch directory and the one file in it that
 * the module under test writes (an event log, a unit's output). Header-only
 * (static inline) so that only the tests that include it compile it. The
 * test removes what it made in its .fini. */
#ifndef CX_TESTS_TMPDIR_H
#define CX_TESTS_TMPDIR_H

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new directory from the mkdtemp template tmpl (ending in XXXXXX) into
 * dir, and path = dir/name. */
static inline void tmpdir_with_file(char *dir, size_t dlen, const char *tmpl, char *path, size_t plen,
                                    const char *name)
{
    snprintf(dir, dlen, "%s", tmpl);
    cr_assert_not_null(mkdtemp(dir), "mkdtemp %s: %s", tmpl, strerror(errno));
    snprintf(path, plen, "%s/%s", dir, name);
}

static inline int tmpdir_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Remove dir and everything below it (symlinks themselves, never what
 * they point at); asserts it is gone. */
static inline void tmpdir_remove(const char *dir)
{
    cr_assert_eq(nftw(dir, tmpdir_remove_one, 16, FTW_DEPTH | FTW_PHYS), 0, "remove %s: %s", dir,
                 strerror(errno));
}

#endif
