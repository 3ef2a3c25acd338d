/* test_syncer.c - the syncer's route table against its access table. The
 * syncer's behaviour is tested with real processes in tests/integration/. */
#include <criterion/criterion.h>
#include <string.h>

#include "trainer/syncer.h"

Test(syncer, every_syncer_route_has_an_access_rule)
{
    size_t n = syncer_route_count();
    cr_assert_gt(n, 5, "the route table is walked");
    int learner = 0, admin = 0, read = 0;
    for (size_t i = 0; i < n; i++) {
        const char *method = NULL, *pattern = NULL;
        const char *who = syncer_route_access(i, &method, &pattern);
        cr_assert_not_null(who, "route %s %s has no access rule (it would be refused)", method, pattern);
        learner += strcmp(who, "learner") == 0;
        admin += strcmp(who, "admin") == 0;
        read += strcmp(who, "read") == 0;
        /* a read that changes nothing is a GET; everything else needs a principal */
        if (strcmp(who, "read") == 0)
            cr_assert_str_eq(method, "GET", "%s %s is open to readers but is not a GET", method, pattern);
        if (strcmp(method, "POST") == 0 && strcmp(pattern, "/v1/end") == 0)
            cr_assert_str_eq(who, "admin", "ending the run is the admin's");
        if (strstr(pattern, "contributions") || strstr(pattern, "gradients") ||
            strcmp(pattern, "/v1/join") == 0)
            cr_assert_str_eq(who, "learner", "%s %s", method, pattern);
    }
    cr_assert(learner > 0 && admin > 0 && read > 0);
    const char *m, *p;
    cr_assert_null(syncer_route_access(n, &m, &p), "past the end");
}
