/* noop.c - the `noop` toxic: every chunk passes unchanged (Toxiproxy's
 * noop, useful to test a client's toxic calls). */
#include "injectors/proxy/toxic.h"

const toxic_kind toxic_noop = {
    .name = "noop", /* no attributes: attrs stays zero, attrs[0].key NULL ends the list */
};
