/* tmpdir.h - a unit test's scratch directory and the one file in it that
 * the module under test writes (an event log, a unit's output). Header-only
 * (static inline) so that only the tests that include it compile it. The
 * test removes what it made in its .fini. */
#ifndef CX_TESTS_TMPDIR_H
#define CX_TESTS_TMPDIR_H

#include <criterion/criterion.h>
#include <errno.h>
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

#endif
