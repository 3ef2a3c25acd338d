/* diloco.c - the learner's diloco mode (diloco.h): local AdamW steps, and
 * every H steps (and at the last step) Δ_p for every fragment, then a wait
 * for every merged fragment, which is adopted (θ_p = Θ_base_p = merged).
 * Main thread only.
 */
#include <stdlib.h>

#include "common/err.h"
#include "common/log.h"
#include "numerics/optim.h"
#include "trainer/learner/contrib.h"
#include "trainer/learner/diloco.h"
#include "trainer/learner/link.h"
#include "trainer/learner/rebase.h"

/* ---- diloco: the exchange ---- */

/* Send every fragment's Δ_p (a refused payload is rebuilt, up to three
 * tries), then wait for each merged value and adopt it. A rejoin ends the
 * exchange: the pull after it adopts the current values. 0, or a negative
 * cx_err with err. */
static int diloco_sync(learner *L, char *err, size_t errlen)
{
    for (int p = 0; p < L->P; p++) {
        frag_msg m = {p,      L->rb.base_version[p], L->rb.frag_tokens[p], L->rb.frag_steps[p], NULL, 0, 0,
                      L->step};
        int64_t merges_into;
        int status = 400;
        /* a refused (400) payload is rebuilt and sent again: the barrier
         * waits for every learner, so a lost contribution would stall it */
        for (int attempt = 0; attempt < 3 && status == 400; attempt++) {
            m.buf = learner_contrib_make(L, p, &m.len, &m.crc);
            if (!m.buf)
                return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            status = learner_contrib_post(L, L->http, &m, &merges_into);
            free(m.buf);
        }
        if (status == 202)
            learner_contrib_commit(L, p);
        if (status == 0)
            return cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                           L->o->syncer_url, L->o->give_up_s);
        if (learner_rejoin_asked(L)) {
            int rc = learner_link_join(L, L->http, 0, NULL, err, errlen);
            return rc ? rc : learner_link_pull_all(L);
        }
    }
    /* wait for every merged fragment (the barrier) */
    for (int p = 0; p < L->P && !*L->stop; p++) {
        int64_t v;
        int rc;
        while ((rc = learner_link_pull_one(L, L->http, p, L->rb.base_version[p], POLL_WAIT_MS, L->scratch,
                                           &v)) != 1) {
            if (rc == CX_EUNAVAIL)
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                               L->o->syncer_url, L->o->give_up_s);
            if (*L->stop)
                return 0;
            if (learner_rejoin_asked(L)) {
                int rc2 = learner_link_join(L, L->http, 0, NULL, err, errlen);
                return rc2 ? rc2 : learner_link_pull_all(L);
            }
        }
        learner_rebase_adopt(L, p, L->scratch, v);
    }
    return 0;
}

/* ---- diloco: the loop ---- */

int learner_diloco_loop(learner *L, char *err, size_t errlen)
{
    while (learner_keep_training(L)) {
        learner_local_step(L);
        if (!learner_params_finite(L)) {
            cx_warn("own parameters are not finite; discarding them and pulling the global ones");
            adamw_reset_range(L->opt, 0, L->n, NULL, 0);
            if (learner_link_pull_all(L) != 0)
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable");
            continue;
        }
        /* the last step (budget spent or the run ended) sends what it has */
        if (L->step % L->cfg.H == 0 || !learner_keep_training(L)) {
            if (*L->stop)
                break;
            int rc = diloco_sync(L, err, errlen);
            if (rc)
                return rc;
        }
    }
    return 0;
}
