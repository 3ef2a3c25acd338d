/* ddp.h - the syncer's ddp component: the per-step gradient barrier of
 * the ddp and ddp-elastic modes.
 *
 * Owns: s->ddp (struct syncer_ddp): the step being collected and its sum,
 * the mean of the last completed step as sent, its seal, and the automatic
 * deadline's samples.
 * Operations: a gradient joins its step (its route), the barrier or
 * deadline completes a step (ddp_check, the ticker's), the deadline, and
 * GET /v1/optimizer.
 * Lock: s->mu held, except the route handlers, which take it.
 */
#ifndef TRN_SYNCER_DDP_H
#define TRN_SYNCER_DDP_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/protocol.h"
#include "trainer/seal.h"
#include "trainer/syncer/api.h"

#define BARRIER_WAIT_MS 5000     /* a ddp handler answers 503 "retry" after this */
#define DDP_COMPUTE_SAMPLES 32   /* auto deadline: recent compute times kept */
#define DDP_AUTO_MIN_SAMPLES 4   /* ... taken before they decide */
#define DDP_AUTO_INITIAL_MS 1000 /* ... deadline until then */
#define DDP_AUTO_FLOOR_MS 20     /* ... never below */

/* The ddp barrier's state; ddp.c is its only writer. */
typedef struct syncer_ddp {
    int64_t step;                            /* step being collected */
    float *sum;                              /* [n] sum of gradients of step (ddp modes; NULL else) */
    int count;                               /* gradients in sum */
    int64_t first_ms;                        /* mono ms of the first gradient of step */
    int64_t done_ms;                         /* mono ms the last step completed (0: none yet) */
    int64_t compute_ms[DDP_COMPUTE_SAMPLES]; /* ring: completion -> next first gradient */
    int64_t ncompute;                        /* samples taken (ring index = count % size) */
    float *mean;                             /* [n] mean gradient of step mean_step */
    int64_t mean_step;                       /* step whose mean is in mean (-1 none) */
    unsigned char *mean_wire;                /* [4n] mean as sent */
    uint32_t mean_crc;                       /* CRC32C of mean_wire */
    char seal[SEAL_HEX + 1];                 /* seal of the state after mean_step ("" none) */
    int64_t seal_version;                    /* the version it seals */
} syncer_ddp;

/* Set up s->ddp at start-up (after s->n is known): no mean yet; in ddp
 * modes the step buffers. 0, or -1 with err. */
int ddp_init(syncer *s, char *err, size_t errlen);
/* Free what ddp_init allocated. */
void ddp_cleanup(syncer *s);
/* Collect step `step` next, from nothing: the sum, its count and times and
 * the last mean are dropped (a restore, a rebuild) (mu held, or before
 * serving). */
void ddp_restart_at(syncer *s, int64_t step);
/* The ddp-elastic deadline of a step after its first gradient, ms: the
 * configured one, or the automatic one from recent compute times (mu held). */
int64_t ddp_deadline_ms(const syncer *s);
/* Complete the step being collected if its barrier or deadline says so (mu
 * held; the ticker calls it every tick in ddp modes). */
void ddp_check(syncer *s, int64_t now);
/* What became of one gradient of a step (ddp_gradient, ddp_outcome). */
typedef enum ddp_gradient_verdict {
    DDP_GRAD_ADDED,  /* in the sum of the step being collected (once: a retry adds nothing); the step
                        has not completed yet (ddp_outcome) */
    DDP_GRAD_MEAN,   /* its step completed with it: the answer is the mean (s->ddp.mean_wire) */
    DDP_GRAD_BEHIND, /* its step closed without it (409, the learner resyncs) */
    DDP_GRAD_AHEAD,  /* its step is ahead of the one being collected (409, the learner resyncs) */
} ddp_gradient_verdict;

/* Gradient g [n] of step t from the learner of slot (members_check passed,
 * g bounded by the caller: factor the scale applied, 1 none, l2_in the norm
 * before it). Adds g to the step being collected, then completes the step
 * if its barrier says so (ddp_check); a retry of a completed step gets
 * DDP_GRAD_MEAN, a step other than the open one BEHIND or AHEAD, nothing
 * added (mu held). */
ddp_gradient_verdict ddp_gradient(syncer *s, int slot, const proto_hdr *h, int64_t t, const float *g,
                                  double factor, double l2_in);
/* Once the handler stopped waiting for step t: DDP_GRAD_MEAN when it
 * completed with the gradient of the slot's incarnation inc, BEHIND when it
 * closed without it, ADDED while it is still open (mu held). */
ddp_gradient_verdict ddp_outcome(const syncer *s, int slot, int64_t t, int64_t inc);
/* POST /v1/steps/{t}/gradients: one learner's gradient of step t; answers
 * the mean once the step completes. */
SYNCER_HANDLER(ddp_route_gradient);
/* GET /v1/optimizer: params | AdamW m | v, one snapshot. */
SYNCER_HANDLER(ddp_route_optimizer);

#endif
