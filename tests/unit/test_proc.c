/* test_proc.c - cx_run: a bounded child whose output becomes the error. */
#include <criterion/criterion.h>
#include <string.h>

#include "common/err.h"
#include "common/proc.h"

TestSuite(proc, .timeout = 30);

Test(proc, run_returns_0_and_the_output_of_a_clean_exit)
{
    const char *argv[] = {"/bin/sh", "-c", "echo hello; echo there >&2", NULL};
    char out[64], err[CX_ERRLEN] = "";
    cr_assert_eq(cx_run(argv, NULL, 5000, out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(out, "hello\nthere\n");
}

Test(proc, run_names_the_command_and_its_output_on_failure)
{
    const char *argv[] = {"/bin/sh", "-c", "echo no such device >&2; exit 2", NULL};
    char err[CX_ERRLEN] = "";
    cr_assert_eq(cx_run(argv, "sh", 5000, NULL, 0, err, sizeof err), CX_ESYS);
    cr_assert_str_eq(err, "sh -c echo no such device >&2; exit 2: no such device");
}

Test(proc, run_kills_a_child_past_its_bound)
{
    const char *argv[] = {"/bin/sleep", "20", NULL};
    char err[CX_ERRLEN] = "";
    cr_assert_eq(cx_run(argv, "sleep", 100, NULL, 0, err, sizeof err), CX_ETIMEDOUT);
    cr_assert_str_eq(err, "sleep 20: no answer within 100 ms");
}
