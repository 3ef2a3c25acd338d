/* test_learner_link.c - the learner's link decodes the reason of a refusal
 * from the syncer's answer body into proto_reason, by the "reason" field
 * only: a reason's name elsewhere in the text (the error message) is not a
 * reason, and a body it cannot read names none (PROTO_R_COUNT).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "trainer/learner/link.h"
#include "trainer/protocol.h"

static proto_reason reason_of(const char *body)
{
    return learner_link_reason(body, body ? strlen(body) : 0);
}

/* The syncer's rejection answer (trainer/syncer/members.c, members_reject()) as it is sent. */
Test(learner_link, decodes_the_syncers_stale_incarnation_rejection)
{
    cr_assert_eq(reason_of("{\"error\": \"stale_incarnation: learner 3 incarnation 2\", \"status\": 409, "
                           "\"reason\": \"stale_incarnation\", \"version\": 7}"),
                 PROTO_R_STALE_INCARNATION);
    cr_assert_eq(reason_of("{\"error\": \"base version 9 is newer than the syncer's 7\", \"status\": 409, "
                           "\"reason\": \"stale_version\", \"version\": 7}"),
                 PROTO_R_STALE_VERSION);
}

Test(learner_link, every_reason_name_decodes_to_its_enum)
{
    for (int r = PROTO_R_CHECKSUM; r < PROTO_R_COUNT; r++) {
        char body[256];
        snprintf(body, sizeof body, "{\"error\": \"x\", \"status\": 400, \"reason\": \"%s\"}",
                 proto_reason_name((proto_reason)r));
        cr_assert_eq(reason_of(body), (proto_reason)r, "%s", body);
    }
}

/* The reason is never matched as text: a body that names one only in its
 * message, or as another field's value, names none. */
Test(learner_link, a_reason_in_the_message_text_is_not_a_reason)
{
    cr_assert_eq(reason_of("{\"error\": \"stale_incarnation: learner 3 incarnation 2\", \"status\": 409}"),
                 PROTO_R_COUNT);
    cr_assert_eq(
        reason_of("{\"error\": \"stale_incarnation\", \"status\": 409, \"why\": \"stale_incarnation\"}"),
        PROTO_R_COUNT);
    /* the ddp barrier's "step closed without you" answer (trainer/syncer/ddp.c) */
    cr_assert_eq(reason_of("{\"error\": \"step closed without this learner; resync\", \"status\": 409, "
                           "\"step\": 12, \"requested\": 11}"),
                 PROTO_R_COUNT);
}

Test(learner_link, an_unreadable_body_names_no_reason)
{
    cr_assert_eq(reason_of(NULL), PROTO_R_COUNT);
    cr_assert_eq(reason_of(""), PROTO_R_COUNT);
    cr_assert_eq(reason_of("stale_incarnation"), PROTO_R_COUNT);
    cr_assert_eq(reason_of("{\"reason\": \"no_such_reason\"}"), PROTO_R_COUNT);
    cr_assert_eq(reason_of("{\"reason\": 5}"), PROTO_R_COUNT);
    cr_assert_eq(reason_of("[\"stale_incarnation\"]"), PROTO_R_COUNT);
}

/* An HTTP body is bytes with a length, not a C string: the decoder reads
 * len bytes and no further. */
Test(learner_link, reads_only_len_bytes_of_the_body)
{
    const char *body = "{\"reason\": \"halted\"}{\"reason\": \"auth\"}";
    size_t first = strlen("{\"reason\": \"halted\"}");
    cr_assert_eq(learner_link_reason(body, first), PROTO_R_HALTED);
    cr_assert_eq(learner_link_reason(body, first - 1), PROTO_R_COUNT, "a cut body is not JSON");
}

Test(learner_link, proto_reason_value_is_the_inverse_of_proto_reason_name)
{
    for (int r = PROTO_OK; r < PROTO_R_COUNT; r++) {
        proto_reason got = PROTO_R_COUNT;
        cr_assert_eq(proto_reason_value(proto_reason_name((proto_reason)r), &got), 0);
        cr_assert_eq(got, (proto_reason)r);
    }
    proto_reason untouched = PROTO_R_MERGE;
    cr_assert_neq(proto_reason_value("Stale_Incarnation", &untouched), 0);
    cr_assert_neq(proto_reason_value(NULL, &untouched), 0);
    cr_assert_eq(untouched, PROTO_R_MERGE);
}
