/* test_optim.c - AdamW and outer Nesterov against hand-computed steps, the
 * lr schedule's endpoints and shape, gradient clipping.
 *
 * Tolerances: single-precision updates vs double-precision hand
 * computations: 1e-6 absolute on O(1) values.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "numerics/optim.h"

Test(optim, adamw_first_steps_match_hand_computation)
{
    char err[CX_ERRLEN];
    adamw *o = adamw_new(3, NULL, err, sizeof(err));
    cr_assert_not_null(o, "%s", err);
    cr_assert_eq(adamw_set_decay(o, 0, 2, 1, err, sizeof(err)), 0); /* elements 0,1 decayed, 2 not */
    float p[3] = {1.0f, -2.0f, 0.5f};
    const float g1[3] = {0.2f, -0.1f, 3.0f}, g2[3] = {-0.4f, 0.3f, 1.0f};
    const float lr = 0.01f;

    /* Step 1: m = 0.1 g, v = 0.05 g^2; mhat = g, vhat = g^2, so the Adam
     * part is g / (|g| + 1e-8) = sign(g) (to 1e-7); decay adds 0.1 p. */
    adamw_step(o, p, g1, lr);
    cr_assert_float_eq(p[0], 1.0 - 0.01 * (1.0 + 0.1 * 1.0), 1e-6);    /* 0.989 */
    cr_assert_float_eq(p[1], -2.0 - 0.01 * (-1.0 + 0.1 * -2.0), 1e-6); /* -1.988 */
    cr_assert_float_eq(p[2], 0.5 - 0.01 * 1.0, 1e-6);                  /* 0.49: no decay */
    cr_assert_eq(adamw_steps(o), 1);
    cr_assert_float_eq(adamw_m(o)[0], 0.1 * 0.2, 1e-7);
    cr_assert_float_eq(adamw_v(o)[2], 0.05 * 9.0, 1e-6);

    /* Step 2 by the formulas in double. */
    double pe[3] = {0.989, -1.988, 0.49};
    for (int i = 0; i < 3; i++) {
        double m = 0.9 * (0.1 * g1[i]) + 0.1 * g2[i];
        double v = 0.95 * (0.05 * g1[i] * g1[i]) + 0.05 * g2[i] * g2[i];
        double mh = m / (1 - 0.81), vh = v / (1 - 0.9025);
        double upd = mh / (sqrt(vh) + 1e-8) + (i < 2 ? 0.1 * pe[i] : 0.0);
        pe[i] -= lr * upd;
    }
    adamw_step(o, p, g2, lr);
    for (int i = 0; i < 3; i++)
        cr_assert_float_eq(p[i], pe[i], 1e-6, "element %d: %.8f vs %.8f", i, p[i], pe[i]);
    cr_assert_eq(adamw_steps(o), 2);

    adamw_free(o);
}

Test(optim, adamw_state_can_be_saved_and_restored)
{
    char err[CX_ERRLEN];
    adamw *a = adamw_new(4, NULL, err, sizeof(err)), *b = adamw_new(4, NULL, err, sizeof(err));
    float pa[4] = {1, 2, 3, 4}, pb[4];
    const float g[4] = {0.1f, -0.2f, 0.3f, -0.4f};
    for (int s = 0; s < 5; s++)
        adamw_step(a, pa, g, 1e-2f);
    /* copy the state into b, continue both: identical */
    memcpy(adamw_m(b), adamw_m(a), 4 * sizeof(float));
    memcpy(adamw_v(b), adamw_v(a), 4 * sizeof(float));
    adamw_set_steps(b, adamw_steps(a));
    memcpy(pb, pa, sizeof(pa));
    adamw_step(a, pa, g, 1e-2f);
    adamw_step(b, pb, g, 1e-2f);
    cr_assert(memcmp(pa, pb, sizeof(pa)) == 0);
    cr_assert_eq(adamw_size(a), 4);
    /* reset_range zeroes moments of a range only */
    cr_assert_eq(adamw_reset_range(a, 1, 2, err, sizeof(err)), 0);
    cr_assert(adamw_m(a)[0] != 0 && adamw_m(a)[1] == 0 && adamw_m(a)[2] == 0 && adamw_m(a)[3] != 0);
    cr_assert(adamw_v(a)[1] == 0 && adamw_v(a)[3] != 0);
    cr_assert_eq(adamw_reset_range(a, 3, 2, err, sizeof(err)), CX_EINVAL);
    cr_assert_eq(adamw_set_decay(a, 5, 1, 1, err, sizeof(err)), CX_EINVAL);
    adamw_free(a);
    adamw_free(b);
    adamw_free(NULL);
}

Test(optim, adamw_rejects_bad_config)
{
    char err[CX_ERRLEN] = "";
    adamw_config c;
    adamw_config_default(&c);
    cr_assert_float_eq(c.beta1, 0.9f, 0);
    cr_assert_float_eq(c.beta2, 0.95f, 0);
    cr_assert_float_eq(c.weight_decay, 0.1f, 0);
    c.beta2 = 1.0f;
    cr_assert_null(adamw_new(10, &c, err, sizeof(err)));
    cr_assert(strstr(err, "betas") != NULL, "%s", err);
    cr_assert_null(adamw_new(0, NULL, err, sizeof(err)));
}

Test(optim, lr_schedule_endpoints_and_shape)
{
    const float mx = 1e-3f, mn = 1e-4f;
    cr_assert_float_eq(optim_lr_at(0, 10, 100, mx, mn), mx / 10, 1e-9);
    cr_assert_float_eq(optim_lr_at(4, 10, 100, mx, mn), mx * 5 / 10, 1e-9);
    cr_assert_float_eq(optim_lr_at(9, 10, 100, mx, mn), mx, 1e-9);
    cr_assert_float_eq(optim_lr_at(10, 10, 100, mx, mn), mx, 1e-9);
    cr_assert_float_eq(optim_lr_at(55, 10, 100, mx, mn), (mx + mn) / 2, 1e-9); /* cosine midpoint */
    cr_assert_float_eq(optim_lr_at(100, 10, 100, mx, mn), mn, 1e-9);
    cr_assert_float_eq(optim_lr_at(1000, 10, 100, mx, mn), mn, 1e-9);
    cr_assert_float_eq(optim_lr_at(0, 0, 100, mx, mn), mx, 1e-9); /* no warmup */
    cr_assert_float_eq(optim_lr_at(-5, 10, 100, mx, mn), mx / 10, 1e-9);
    float prev = optim_lr_at(10, 10, 100, mx, mn);
    for (int s = 11; s <= 100; s++) {
        float lr = optim_lr_at(s, 10, 100, mx, mn);
        cr_assert(lr <= prev && lr >= mn, "step %d: %g after %g", s, lr, prev);
        prev = lr;
    }
    /* warmup == total: straight to lr_min after warmup, no division by 0 */
    cr_assert_float_eq(optim_lr_at(10, 10, 10, mx, mn), mn, 1e-9);
}

Test(optim, clip_grad_norm)
{
    float g[2] = {3.0f, 4.0f};
    cr_assert_float_eq(optim_clip_grad_norm(g, 2, 0.0), 5.0, 1e-12); /* 0 = no clipping */
    cr_assert(g[0] == 3.0f && g[1] == 4.0f);
    cr_assert_float_eq(optim_clip_grad_norm(g, 2, 10.0), 5.0, 1e-12);
    cr_assert(g[0] == 3.0f);
    cr_assert_float_eq(optim_clip_grad_norm(g, 2, 1.0), 5.0, 1e-12);
    cr_assert_float_eq(g[0], 0.6f, 1e-7);
    cr_assert_float_eq(g[1], 0.8f, 1e-7);
    float bad[2] = {NAN, 1.0f};
    cr_assert(isnan(optim_clip_grad_norm(bad, 2, 1.0)));
    cr_assert(bad[1] == 1.0f, "non-finite norm: no scaling");
}

Test(optim, nesterov_matches_hand_computation)
{
    /* theta 1, buf 0, delta 0.5, lr 0.7, mu 0.9:
     *   step 1: buf = 0.5;            theta = 1 - 0.7 (0.5 + 0.45)     = 0.335
     *   step 2: buf = 0.45 + 0.5 = 0.95; theta = 0.335 - 0.7 (0.5 + 0.855) = -0.6135
     * element 2: delta -1 then 0: buf -1, theta 2 - 0.7 (-1 - 0.9) = 3.33;
     *   buf -0.9, theta 3.33 - 0.7 (0 - 0.81) = 3.897 */
    float theta[2] = {1.0f, 2.0f}, buf[2] = {0, 0};
    const float d1[2] = {0.5f, -1.0f}, d2[2] = {0.5f, 0.0f};
    nesterov_step(theta, buf, d1, 2, NESTEROV_DEFAULT_LR, NESTEROV_DEFAULT_MOMENTUM);
    cr_assert_float_eq(theta[0], 0.335f, 1e-6);
    cr_assert_float_eq(buf[0], 0.5f, 1e-7);
    cr_assert_float_eq(theta[1], 3.33f, 1e-6);
    nesterov_step(theta, buf, d2, 2, NESTEROV_DEFAULT_LR, NESTEROV_DEFAULT_MOMENTUM);
    cr_assert_float_eq(theta[0], -0.6135f, 1e-6);
    cr_assert_float_eq(buf[0], 0.95f, 1e-6);
    cr_assert_float_eq(theta[1], 3.897f, 1e-5);
    cr_assert_float_eq(buf[1], -0.9f, 1e-6);
    /* lr 1, mu 0: plain averaging, theta <- theta - delta */
    float t[1] = {5.0f}, b[1] = {0}, d[1] = {2.0f};
    nesterov_step(t, b, d, 1, 1.0f, 0.0f);
    cr_assert_float_eq(t[0], 3.0f, 0);
}
