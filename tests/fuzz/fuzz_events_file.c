/* fuzz_events_file.c - libFuzzer target: the harness's tailer of a
 * coordinator's JSON-lines event file (harness/events_file.h), which reads
 * whatever a foreign process wrote. Input: the file's bytes, written in up
 * to three appends at offsets taken from the first two bytes, with an
 * evf_poll after each (so torn tails and lines split across polls are
 * exercised). Oracles: every event handed back is an object with integer
 * seq, integer t_mono_ms and string type, its seq the previous one's + 1;
 * an error names the file (the events before the bad line are handed back
 * and checked the same); once an error is returned, every later call
 * returns an error again (sticky) and hands back nothing. The file lives
 * in a private directory made once per process. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/err.h"
#include "harness/events_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static void check_events(json_t *got, int64_t *last)
{
    size_t i;
    json_t *e;
    json_array_foreach(got, i, e)
    {
        json_t *seq = json_object_get(e, "seq");
        if (!json_is_object(e) || !json_is_integer(seq) ||
            !json_is_integer(json_object_get(e, "t_mono_ms")) || !json_is_string(json_object_get(e, "type")))
            abort();
        if (*last > 0 && json_integer_value(seq) != *last + 1)
            abort();
        *last = json_integer_value(seq);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        char dir[] = "/tmp/fuzz-evf-XXXXXX";
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/events.jsonl", dir);
    }
    if (size < 2)
        return 0;
    size_t cut[4] = {0, data[0] * (size - 2) / 255, data[1] * (size - 2) / 255, size - 2};
    if (cut[1] > cut[2]) {
        size_t t = cut[1];
        cut[1] = cut[2];
        cut[2] = t;
    }
    data += 2;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    evf *t = evf_new(path, 4096);
    if (!t)
        abort();
    int64_t last = 0;
    int failed = 0;
    char err[CX_ERRLEN];
    for (int k = 0; k < 3; k++) {
        size_t n = cut[k + 1] - cut[k];
        if (n > 0 && write(fd, data + cut[k], n) != (ssize_t)n)
            abort();
        json_t *got = json_array();
        err[0] = '\0';
        int rc = evf_poll(t, got, err, sizeof err);
        if (rc < 0) {
            if (!strstr(err, path) || (failed && json_array_size(got) != 0))
                abort(); /* the error names the file; after it, nothing more is handed back */
            check_events(got, &last);
            failed = 1;
        } else {
            if (failed || (size_t)rc != json_array_size(got))
                abort(); /* sticky: no success after an error */
            check_events(got, &last);
        }
        json_decref(got);
    }
    if (!failed && evf_last_seq(t) != last)
        abort();
    evf_free(t);
    close(fd);
    return 0;
}
