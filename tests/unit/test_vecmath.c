/* test_vecmath.c - vecmath_expf against libm's expf.
 *
 * Tolerance: vecmath.h promises a relative error <= 2e-7 on [-87, 88]
 * (Cephes' polynomial is good to ~1 ulp = 1.19e-7 relative, plus the
 * rounding of r); the grid is dense (every 2^-10, ~180k points) and
 * includes the reduction's seams at odd multiples of ln2 / 2.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "numerics/vecmath.h"

/* Through an array, as the kernels use it: the loop is the one the
 * vectoriser transforms in a Release build (-O3). */
static void expf_array(float *y, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = vecmath_expf(x[i]);
}

Test(vecmath, expf_relative_error_over_the_range)
{
    enum { N = 1024 };
    float x[N], y[N];
    double worst = 0.0, worst_at = 0.0;
    float start = -87.0f;
    while (start <= 88.0f) {
        int n = 0;
        for (; n < N && start + (float)n / 1024.0f <= 88.0f; n++)
            x[n] = start + (float)n / 1024.0f;
        expf_array(y, x, n);
        for (int i = 0; i < n; i++) {
            double want = expf(x[i]), rel = fabs((double)y[i] - want) / want;
            if (rel > worst) {
                worst = rel;
                worst_at = x[i];
            }
        }
        start += (float)N / 1024.0f;
    }
    cr_assert(worst <= 2e-7, "max relative error %.3g at x = %.6g (bound 2e-7)", worst, worst_at);
    /* and within 2 ulps of the seams of the range reduction, x = (k + 1/2) ln 2 */
    for (int k = -125; k < 127; k++) {
        float v = ((float)k + 0.5f) * 0.69314718f;
        v = nextafterf(nextafterf(v, -INFINITY), -INFINITY);
        for (int d = 0; d < 5; d++, v = nextafterf(v, INFINITY)) {
            double want = expf(v), got = vecmath_expf(v);
            cr_assert(fabs(got - want) / want <= 2e-7, "seam k=%d x=%.9g: %.9g vs %.9g", k, (double)v, got,
                      want);
        }
    }
}

Test(vecmath, expf_special_values)
{
    cr_assert_eq(vecmath_expf(0.0f), 1.0f);
    cr_assert_eq(vecmath_expf(-INFINITY), 0.0f);
    cr_assert_eq(vecmath_expf(-100.0f), 0.0f);
    cr_assert(isnan(vecmath_expf(NAN)));
    cr_assert(isfinite(vecmath_expf(INFINITY)) && vecmath_expf(INFINITY) > 1e38f, "saturates at exp(88)");
    cr_assert(isfinite(vecmath_expf(1000.0f)) && vecmath_expf(1000.0f) > 1e38f);
    /* monotone over the steps the softmax sees most (x <= 0, near 0) */
    float prev = vecmath_expf(-20.0f);
    for (float x = -20.0f + 1e-3f; x <= 0.0f; x += 1e-3f) {
        float y = vecmath_expf(x);
        cr_assert(y >= prev, "not monotone at %.6g", (double)x);
        prev = y;
    }
}
