/* test_report.c - report.html from a run directory's files: the chart blob
 * counts ddp's gradient bytes (carried by its step merges) beside the
 * contribution bytes of the other modes, and text from the files is escaped. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "harness/report.h"
#include "tmpdir.h"

static char dir[64];

static void put(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "open %s", path);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/cx-report-XXXXXX");
    cr_assert(mkdtemp(dir));
    put("journal.json", "{\"status\": \"completed\", \"experiment\": {\"title\": \"ddp <b>&</b>\","
                        " \"description\": \"d\"}, \"start\": \"s\", \"end\": \"e\", \"duration\": 3}");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

/* The run-data blob of the rendered document. */
static json_t *blob_of(cx_buf *b)
{
    const char *tag = "<script type=\"application/json\" id=\"run-data\">";
    const char *s = strstr(b->data, tag);
    cr_assert(s, "the document has the run-data blob");
    s += strlen(tag);
    const char *e = strstr(s, "</script>");
    cr_assert(e);
    json_error_t je;
    json_t *j = json_loadb(s, (size_t)(e - s), 0, &je);
    cr_assert(j, "blob is JSON: %s", je.text);
    return j;
}

/* Sum of the bytes-in/s column times each bucket's length (1 s here). */
static double bytes_in(json_t *blob)
{
    json_t *rates = json_object_get(json_object_get(blob, "series"), "rates"), *row;
    size_t i;
    double sum = 0;
    json_array_foreach(rates, i, row) sum += json_number_value(json_array_get(row, 2));
    return sum;
}

static double render_bytes(const char *events)
{
    put("events.jsonl", events);
    cx_buf b;
    cx_buf_init(&b, 64u << 20);
    char err[CX_ERRLEN];
    cr_assert_eq(report_html(dir, &b, err, sizeof err), 0, "%s", err);
    cr_expect(strstr(b.data, "ddp &lt;b&gt;&amp;&lt;/b&gt;") != NULL, "the title is escaped");
    json_t *blob = blob_of(&b);
    double sum = bytes_in(blob);
    json_decref(blob);
    cx_buf_cleanup(&b);
    return sum;
}

Test(report, ddp_step_merges_count_their_gradient_bytes, .init = setup, .fini = teardown)
{
    double got = render_bytes(
        "{\"kind\":\"training\",\"type\":\"merge\",\"t_mono_ms\":1000,\"fragment\":-1,\"version\":1,"
        "\"participants\":[{},{}],\"bytes\":4000}\n"
        "{\"kind\":\"training\",\"type\":\"merge\",\"t_mono_ms\":1500,\"fragment\":-1,\"version\":2,"
        "\"participants\":[{},{}],\"bytes\":4000}\n"
        "{\"kind\":\"training\",\"type\":\"merge\",\"t_mono_ms\":3000,\"fragment\":-1,\"version\":3,"
        "\"participants\":[{},{}],\"bytes\":4000}\n");
    cr_expect(got > 7000 && got < 13000, "about 12000 bytes over the run's buckets, got %.0f", got);
}

Test(report, decoupled_bytes_come_from_contributions, .init = setup, .fini = teardown)
{
    double got = render_bytes(
        "{\"kind\":\"training\",\"type\":\"contribution\",\"t_mono_ms\":1000,\"bytes\":500}\n"
        "{\"kind\":\"training\",\"type\":\"merge\",\"t_mono_ms\":1100,\"fragment\":0,\"version\":1,"
        "\"participants\":[{}]}\n"
        "{\"kind\":\"training\",\"type\":\"contribution\",\"t_mono_ms\":3000,\"bytes\":700}\n");
    cr_expect(got > 900 && got < 1300, "about 1200 bytes from contributions only, got %.0f", got);
}
