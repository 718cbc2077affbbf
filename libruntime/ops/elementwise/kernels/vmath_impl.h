/* kernels/vmath_impl.h: the formulas of kernels/vmath.c, included once per instruction set
 * with VM_TARGET (a function attribute, or nothing) and VM(name) (a suffix) defined.
 *
 * Sixteen floats at a time, branch-free: both sides of every case are computed and picked
 * per lane. Where an argument must be exact beyond float (the exponent of GELU's tails), it
 * is computed in double and split into a float and its remainder. Constants come from
 * scripts/fit_vmath.py (least-squares fits in float64, relative error given there). */

#define VM_INLINE static inline __attribute__((always_inline)) VM_TARGET

VM_INLINE vm_f VM(load)(const float *p) {
    vm_f v;
    memcpy(&v, p, sizeof v);
    return v;
}

VM_INLINE void VM(store)(float *p, vm_f v) { memcpy(p, &v, sizeof v); }

/* Per lane: m ? a : b (m from a comparison: all ones or zero). */
VM_INLINE vm_f VM(pick)(vm_i m, vm_f a, vm_f b) {
    return (vm_f)((m & (vm_i)a) | (~m & (vm_i)b));
}

VM_INLINE vm_i VM(pick_i)(vm_i m, vm_i a, vm_i b) { return (m & a) | (~m & b); }

VM_INLINE vm_f VM(abs)(vm_f x) { return (vm_f)((vm_i)x & INT32_MAX); }

/* x with the sign of s. */
VM_INLINE vm_f VM(with_sign)(vm_f x, vm_f s) {
    return (vm_f)(((vm_i)x & INT32_MAX) | ((vm_i)s & INT32_MIN));
}

/* x clamped to [lo, hi]; NaN stays NaN (its comparisons are false). */
VM_INLINE vm_f VM(clamp)(vm_f x, float lo, float hi) {
    x = VM(pick)(x < lo, VM_SPLAT(lo), x);
    return VM(pick)(x > hi, VM_SPLAT(hi), x);
}

/* x * x - square exactly, for square = x * x rounded (Veltkamp halves of 12 bits; |x| well
 * below 2^100). */
VM_INLINE vm_f VM(square_error)(vm_f x, vm_f square) {
    vm_f c = x * 4097.0f, high = c - (c - x), low = x - high;
    return ((high * high - square) + 2.0f * high * low) + low * low;
}

/* a * b - p exactly, for p = a * b rounded (Dekker's product from Veltkamp halves; |a|, |b|
 * well below 2^100 so that the splits cannot overflow). */
VM_INLINE vm_f VM(product_error)(vm_f a, vm_f b, vm_f p) {
    vm_f ca = a * 4097.0f, cb = b * 4097.0f;
    vm_f ah = ca - (ca - a), bh = cb - (cb - b);
    vm_f al = a - ah, bl = b - bh;
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl;
}

/* v * 2^k, rounding once: 2^k as two normal factors, so results in the subnormal range round
 * only at the last multiply; |k| beyond what any float needs saturates to 0 or infinity. */
VM_INLINE vm_f VM(scale)(vm_f v, vm_i k) {
    vm_i k1 = k >> 1, k2 = k - k1;
    vm_i lowest = VM_SPLAT_I(-126), highest = VM_SPLAT_I(127);
    k1 = VM(pick_i)(k1 < -126, lowest, VM(pick_i)(k1 > 127, highest, k1));
    k2 = VM(pick_i)(k2 < -126, lowest, VM(pick_i)(k2 > 127, highest, k2));
    return v * (vm_f)((k1 + 127) << 23) * (vm_f)((k2 + 127) << 23);
}

/* exp(x + lo) = p * 2^k, p in [0.7, 1.42]: k = round(x / ln 2), then exp of the remainder by
 * its Taylor series to degree 7 (below 2^-27 relative on |r| <= ln 2 / 2). lo is a small
 * correction to x (the part of an exact argument that a float cannot hold). */
VM_INLINE vm_f VM(exp_parts)(vm_f x, vm_f lo, vm_i *k) {
    x = VM(clamp)(x, -200.0f, 100.0f);
    /* round to nearest; lo may be up to a few units (gelu's), so it counts here too */
    vm_f kf = ((x + lo) * 1.44269504088896341f + 0x1.8p23f) - 0x1.8p23f;
    /* ln 2 in two parts; the first has 9 significant bits, so kf * it is exact */
    vm_f r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f + lo;
    vm_f q = r * (1.0f / 5040) + (1.0f / 720);
    q = q * r + (1.0f / 120);
    q = q * r + (1.0f / 24);
    q = q * r + (1.0f / 6);
    q = q * r + 0.5f;
    *k = __builtin_convertvector(kf, vm_i);
    return 1.0f + (r + r * r * q);
}

VM_INLINE vm_f VM(exp)(vm_f x) {
    vm_i k;
    vm_f p = VM(exp_parts)(x, VM_SPLAT(0.0f), &k);
    return VM(scale)(p, k);
}

/* log(x) = e ln 2 + log(m), m in [sqrt(1/2), sqrt(2)): with f = m - 1 and s = f / (2 + f),
 * log(m) = 2 atanh(s) = f - s (f - R), R = 2 s^2 / 3 + 2 s^4 / 5 + ... (s^2 <= 0.0295). */
VM_INLINE vm_f VM(log)(vm_f x) {
    vm_i tiny = x < 0x1p-126f; /* subnormal (or zero, negative): scaled up first */
    vm_f y = VM(pick)(tiny, x * 0x1p25f, x);
    vm_i bits = (vm_i)y;
    vm_i e = ((bits >> 23) & 0xff) - 127 - (tiny & 25);
    vm_f m = (vm_f)((bits & 0x007fffff) | 0x3f800000);
    vm_i big = m > 1.41421356f;
    m = VM(pick)(big, m * 0.5f, m);
    e = e - big; /* big is -1 where true */
    vm_f f = m - 1.0f;
    vm_f s = f / (2.0f + f), s2 = s * s;
    vm_f R = s2 * (2.0f / 3 + s2 * (2.0f / 5 + s2 * (2.0f / 7 + s2 * (2.0f / 9))));
    vm_f ef = __builtin_convertvector(e, vm_f);
    vm_f result = (ef * -2.12194440e-4f + (f - s * (f - R))) + ef * 0.693359375f;
    result = VM(pick)(x == 0.0f, VM_SPLAT(-INFINITY), result);
    result = VM(pick)(x < 0.0f, VM_SPLAT(NAN), result);
    result = VM(pick)(x == INFINITY, x, result);
    return VM(pick)(x != x, x, result);
}

/* tanh: an odd polynomial below 0.625, else 1 - 2 / (exp(2|x|) + 1) with x's sign. */
VM_INLINE vm_f VM(tanh)(vm_f x) {
    vm_f a = VM(abs)(x), x2 = x * x;
    vm_f p = x2 * -0.006155212811941049f + 0.0210456999512097f;
    p = p * x2 + -0.0538639210582937f;
    p = p * x2 + 0.13332890687169666f;
    p = p * x2 + -0.3333333140697086f;
    vm_f small = VM(with_sign)(x + x * x2 * p, x); /* -0 stays -0 */
    vm_f large = VM(with_sign)(1.0f - 2.0f / (VM(exp)(a + a) + 1.0f), x);
    return VM(pick)(a < 0.625f, small, large);
}

/* Sigmoid and SiLU from e = exp(-|x|) = p * 2^k: 1 / (1 + e) and x / (1 + e) for x >= 0;
 * e / (1 + e) and x e / (1 + e) below, scaled by 2^k last so tiny results keep their bits. */
VM_INLINE vm_f VM(sigmoid_or_silu)(vm_f x, bool silu) {
    vm_f a = VM(abs)(x);
    vm_i k;
    vm_f p = VM(exp_parts)(-a, VM_SPLAT(0.0f), &k);
    vm_f d = 1.0f + VM(scale)(p, k);
    vm_f top = silu ? x : VM_SPLAT(1.0f);
    vm_f result = VM(pick)(x >= 0.0f, top / d, VM(scale)(top * p / d, k));
    if (silu) { /* x e^x is -0 below -160; -inf * 0 is NaN, as x * sigmoid(x) gives */
        result = VM(pick)(x < -160.0f, -VM_SPLAT(0.0f), result);
        result = VM(pick)(x == -INFINITY, VM_SPLAT(NAN), result);
    }
    return result;
}

VM_INLINE vm_f VM(sigmoid)(vm_f x) { return VM(sigmoid_or_silu)(x, false); }

VM_INLINE vm_f VM(silu)(vm_f x) { return VM(sigmoid_or_silu)(x, true); }

/* The float nearest to the double v (clamped to [-200, 100], where exp saturates), and what
 * remains of v: an argument of exp_parts exact to double precision. */
VM_INLINE vm_f VM(split)(vm_d v, vm_f *lo) {
    vm_l low = v < -200.0;
    v = (vm_d)((low & (vm_l)((vm_d){0} - 200.0)) | (~low & (vm_l)v));
    vm_f hi = __builtin_convertvector(v, vm_f);
    *lo = __builtin_convertvector(v - __builtin_convertvector(hi, vm_d), vm_f);
    return hi;
}

/* erf(z) / z = Q(z^2) for |z| < 1. */
VM_INLINE vm_f VM(erf_small)(vm_f z) {
    vm_f z2 = z * z;
    vm_f q = z2 * 7.933485981779004e-05f + -0.0008034843975356811f;
    q = q * z2 + 0.005191218026156742f;
    q = q * z2 + -0.02685539922782876f;
    q = q * z2 + 0.11283625717990209f;
    q = q * z2 + -0.3761262987668227f;
    q = q * z2 + 1.1283791665927296f;
    return z * q;
}

/* erfc(z) for z >= 0.45 (z may be NaN or infinite) = t exp(-z^2 + R(t)), t = 1 / (1 + z / 2),
 * formed in double from z and z^2 given in double (the tails are exp of it, and R's float
 * rounding alone would cost 2 ulp). Returned as t p and k: erfc = scale(t p, k). */
VM_INLINE vm_f VM(erfc_parts)(vm_d z, vm_d z_squared, vm_i *k) {
    vm_d t = 1.0 / (1.0 + 0.5 * z);
    vm_d r = (vm_d){0} + VM_ERFC_R[0];
    for (int i = 1; i < VM_ERFC_TERMS; i++)
        r = r * t + VM_ERFC_R[i];
    vm_f lo;
    vm_f hi = VM(split)(r - z_squared, &lo);
    return __builtin_convertvector(t, vm_f) * VM(exp_parts)(hi, lo, k);
}

VM_INLINE vm_f VM(erf)(vm_f x) {
    vm_f a = VM(abs)(x);
    vm_d ad = __builtin_convertvector(a, vm_d);
    vm_i k;
    vm_f tp = VM(erfc_parts)(ad, ad * ad, &k);
    vm_f large = VM(with_sign)(1.0f - VM(scale)(tp, k), x);
    return VM(pick)(a < 1.0f, VM(erf_small)(x), large);
}

/* erfc(|x| / sqrt 2) = t p 2^k for the GELU, in float (the activation of every BERT-style
 * feed-forward: double, as erfc_parts, cost 14 to 28% of whole models): -x^2 / 2 exactly as two
 * floats (a Veltkamp split of x), t and R(t) rounded, 5.5 ulp at worst. x beyond +-20 is
 * clamped (erfc is 0 there). */
VM_INLINE vm_f VM(gelu_erfc_parts)(vm_f x, vm_i *k) {
    x = VM(clamp)(x, -20.0f, 20.0f);
    vm_f t = 1.0f / (1.0f + VM(abs)(x) * 0.35355339059327376f);
    vm_f r = VM_SPLAT((float)VM_ERFC_R[0]);
    for (int i = 1; i < VM_ERFC_TERMS; i++)
        r = r * t + (float)VM_ERFC_R[i];
    vm_f square = x * x;
    return t * VM(exp_parts)(-0.5f * square, r - 0.5f * VM(square_error)(x, square), k);
}

/* GELU, x Phi(x) = x erfc(-x / sqrt 2) / 2: the erf polynomial for |z| < 0.5; above it
 * x - x erfc(z) / 2, below it x erfc(|z|) / 2 from erfc's parts (accurate far into the tail,
 * where 1 + erf(z) would cancel). */
VM_INLINE vm_f VM(gelu)(vm_f x) {
    vm_f z = x * 0.70710678118654752f, a = VM(abs)(z);
    vm_i k;
    vm_f tp = VM(gelu_erfc_parts)(x, &k);
    vm_f half_x = 0.5f * x;
    vm_f tail = VM(pick)(x >= 0.0f, x - half_x * VM(scale)(tp, k), VM(scale)(half_x * tp, k));
    vm_f result = VM(pick)(a < 0.5f, half_x + half_x * VM(erf_small)(z), tail);
    result = VM(pick)((x == INFINITY) | (x == 0.0f), x, result); /* -0 stays -0 */
    result = VM(pick)(x < -20.0f, -VM_SPLAT(0.0f), result);     /* x Phi(x) underflows */
    return VM(pick)(x == -INFINITY, VM_SPLAT(NAN), result); /* -inf * 0, as unfused */
}

/* The tanh GELU, x (1 + tanh(u)) / 2 with u = sqrt(2 / pi) (x + 0.044715 x^3), is
 * x sigmoid(2u). 2u = x (K1 + K3 x^2) is formed as a float and its error (compensated
 * products and sum, the constants in two parts), since exp magnifies any error in it by |2u|
 * in the tail; x beyond +-20 is clamped there (the result is x or -0). */
VM_INLINE vm_f VM(gelu_tanh)(vm_f x) {
    const float K1 = 1.5957691216057308f, K1_LO = (float)(1.5957691216057308 - (double)K1);
    const float K3 = 0.071354816272817f, K3_LO = (float)(0.071354816272817 - (double)K3);
    vm_f c = VM(clamp)(x, -20.0f, 20.0f);
    vm_f q = c * c, q_lo = VM(square_error)(c, q);                     /* c^2, exactly */
    vm_f p = K3 * q, p_lo = VM(product_error)(VM_SPLAT(K3), q, p) + K3 * q_lo + K3_LO * q;
    vm_f s = K1 + p, t = s - K1;                                        /* K1 + K3 c^2 */
    vm_f s_lo = ((K1 - (s - t)) + (p - t)) + p_lo + K1_LO;
    vm_f v = s * c, v_lo = VM(product_error)(s, c, v) + s_lo * c;        /* 2u */
    vm_i k;
    vm_f neg = VM(pick)(v > 0.0f, -v, v), neg_lo = VM(pick)(v > 0.0f, -v_lo, v_lo);
    vm_f e = VM(exp_parts)(neg, neg_lo, &k);
    vm_f d = 1.0f + VM(scale)(e, k);
    vm_f result = VM(pick)(x >= 0.0f, x / d, VM(scale)(x * e / d, k));
    result = VM(pick)(x < -20.0f, -VM_SPLAT(0.0f), result);
    return VM(pick)(x == -INFINITY, VM_SPLAT(NAN), result);
}

/* softplus(x) = max(x, 0) + log1p(exp(-|x|)); log1p(y) = log(u) - ((u - 1) - y) / u with
 * u = 1 + y, which keeps the bits of y that u rounds away. */
VM_INLINE vm_f VM(softplus)(vm_f x) {
    vm_f y = VM(exp)(-VM(abs)(x));
    vm_f u = 1.0f + y;
    vm_f log1p = VM(log)(u) - ((u - 1.0f) - y) / u;
    return VM(pick)(x > 0.0f, x, VM_SPLAT(0.0f)) + log1p;
}

/* The array loops: full vectors, then the tail through a padded copy. */
#define VM_ARRAY(fn)                                                          \
    VM_TARGET static void VM(fn##_array)(float *out, const float *x, size_t n) { \
        size_t i = 0;                                                         \
        for (; i + VM_LANES <= n; i += VM_LANES)                              \
            VM(store)(out + i, VM(fn)(VM(load)(x + i)));                      \
        if (i < n) {                                                          \
            float buf[VM_LANES] = {0};                                        \
            memcpy(buf, x + i, (n - i) * sizeof *buf);                        \
            VM(store)(buf, VM(fn)(VM(load)(buf)));                            \
            memcpy(out + i, buf, (n - i) * sizeof *buf);                      \
        }                                                                     \
    }
VM_ARRAY(exp)
VM_ARRAY(log)
VM_ARRAY(tanh)
VM_ARRAY(erf)
VM_ARRAY(sigmoid)
VM_ARRAY(silu)
VM_ARRAY(gelu)
VM_ARRAY(gelu_tanh)
VM_ARRAY(softplus)
#undef VM_ARRAY

static const rt_vmath_kernel VM(kernels)[RT_VMATH_FN_COUNT] = {
    [RT_VMATH_EXP] = VM(exp_array),         [RT_VMATH_LOG] = VM(log_array),
    [RT_VMATH_TANH] = VM(tanh_array),       [RT_VMATH_ERF] = VM(erf_array),
    [RT_VMATH_SIGMOID] = VM(sigmoid_array), [RT_VMATH_SILU] = VM(silu_array),
    [RT_VMATH_GELU] = VM(gelu_array),       [RT_VMATH_GELU_TANH] = VM(gelu_tanh_array),
    [RT_VMATH_SOFTPLUS] = VM(softplus_array),
};

#undef VM_INLINE
