/* kernels/attention_impl.h: one tile of attention with the online softmax, for element type
 * ATTN_T (included by kernels/attention.c once per type, which defines ATTN(name) and the
 * hooks below).
 *
 *   ATTN(scores)(slot, rows, n, k_block):  slot->s[r][j] = slot->q[r] . k_block[j]
 *   ATTN(values)(slot, rows, n, v_block):  slot->t[r][:] = sum_j slot->s[r][j] v_block[j][:]
 *   ATTN(exp_row)(x, n), ATTN(tanh_row)(x, n): in place
 *   ATTN(row_max)(x, n), ATTN(row_sum)(x, n): the largest (-inf when empty; NaN never wins)
 *                                             and the sum of x[0..n)
 *
 * slot->s holds a block's rows n apart (n keys each), so one exp call covers the block.
 *
 * A tile is every q head of one kv head's group, each with queries [i0, i1): row r is head
 * g = r / nq, query i0 + r % nq. Its state per row is the output so far (unnormalised), the
 * largest score seen and the sum of exp(score - largest). */

typedef struct ATTN(slot) {
    ATTN_T *q;     /* [rows, head_dim]: q's rows times the scale */
    ATTN_T *s;     /* [rows, n]: a block's scores, then its probabilities */
    ATTN_T *t;     /* [rows, v_dim]: this block's contribution */
    ATTN_T *kt;    /* [head_dim, n]: a key block transposed (float32's small products) */
    ATTN_T *o;     /* [rows, v_dim]: the output so far */
    ATTN_T *top, *sum, *alpha;
    int64_t *limit; /* keys each row may see */
    void *gemm;     /* float32: the GEMM's packing scratch */
    size_t gemm_bytes;
    int64_t head_dim, v_dim;
} ATTN(slot);

static const ATTN_T *ATTN(row)(const void *base, const rt_attn_view *st, int64_t b, int64_t h,
                               int64_t s) {
    return (const ATTN_T *)base + b * st->b + h * st->h + s * st->s;
}

/* Scores of keys [j0, j0 + n) for row r, after softcap and mask; keys past the row's limit
 * get -inf. Returns the largest. */
static ATTN_T ATTN(finish_scores)(const rt_attn_job *job, ATTN(slot) *sl, int64_t r,
                                  int64_t b, int64_t h, int64_t query, int64_t j0, int64_t n) {
    ATTN_T *row = sl->s + r * n;
    int64_t seen = sl->limit[r] - j0;
    seen = seen < 0 ? 0 : seen > n ? n : seen;
    if (job->softcap > 0 && seen > 0) {
        ATTN_T inv = (ATTN_T)(1.0 / job->softcap), cap = (ATTN_T)job->softcap;
        for (int64_t j = 0; j < seen; j++)
            row[j] *= inv;
        ATTN(tanh_row)(row, (size_t)seen);
        for (int64_t j = 0; j < seen; j++)
            row[j] *= cap;
    }
    if (job->mask) {
        const int64_t *ms = job->mask_strides;
        int64_t at = b * ms[0] + h * ms[1] + query * ms[2] + j0 * ms[3];
        if (job->mask_is_bool) {
            const uint8_t *m = (const uint8_t *)job->mask + at;
            for (int64_t j = 0; j < seen; j++)
                row[j] = m[j * ms[3]] ? row[j] : -(ATTN_T)INFINITY;
        } else {
            const ATTN_T *m = (const ATTN_T *)job->mask + at;
            for (int64_t j = 0; j < seen; j++)
                row[j] += m[j * ms[3]];
        }
    }
    for (int64_t j = seen; j < n; j++)
        row[j] = -(ATTN_T)INFINITY;
    return ATTN(row_max)(row, seen);
}

/* The block's probabilities relative to each row's new largest score (every row's scores
 * shifted first, then one exp over the block), the rows' sums, and the factor alpha that
 * rescales what each row had. */
static void ATTN(softmax_block)(ATTN(slot) *sl, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        ATTN_T *row = sl->s + r * n, now = sl->top[r];
        if (now == -(ATTN_T)INFINITY) /* nothing seen yet: every probability is 0 */
            continue;                 /* (the row is all -inf already) */
        for (int64_t j = 0; j < n; j++)
            row[j] -= now;
    }
    ATTN(exp_row)(sl->s, (size_t)(rows * n));
    for (int64_t r = 0; r < rows; r++) {
        const ATTN_T *row = sl->s + r * n;
        ATTN_T old = sl->alpha[r], now = sl->top[r], block_sum = ATTN(row_sum)(row, n);
        ATTN_T alpha = now == -(ATTN_T)INFINITY ? 1
                       : old == -(ATTN_T)INFINITY ? 0 : (ATTN_T)exp((double)(old - now));
        sl->alpha[r] = alpha;
        sl->sum[r] = sl->sum[r] * alpha + block_sum;
    }
}

static void ATTN(tile)(const rt_attn_job *job, ATTN(slot) *sl, int64_t b, int64_t kvh,
                       int64_t i0, int64_t i1) {
    int64_t group = job->q_heads / job->kv_heads, nq = i1 - i0, rows = group * nq;
    int64_t d = job->head_dim, dv = job->v_dim, keys = 0;
    ATTN_T scale = (ATTN_T)job->scale;
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = kvh * group + r / nq, query = i0 + r % nq;
        const ATTN_T *q = ATTN(row)(job->q, &job->qs, b, h, query);
        for (int64_t c = 0; c < d; c++)
            sl->q[r * d + c] = q[c] * scale;
        for (int64_t c = 0; c < dv; c++)
            sl->o[r * dv + c] = 0;
        sl->top[r] = -(ATTN_T)INFINITY;
        sl->sum[r] = 0;
        sl->limit[r] = rt_attn__key_limit(job, b, query);
        keys = sl->limit[r] > keys ? sl->limit[r] : keys;
    }
    for (int64_t j0 = 0; j0 < keys; j0 += RT_ATTN_KEY_BLOCK) {
        int64_t n = keys - j0 < RT_ATTN_KEY_BLOCK ? keys - j0 : RT_ATTN_KEY_BLOCK;
        ATTN(scores)(sl, rows, n, ATTN(row)(job->k, &job->ks, b, kvh, j0), job->ks.s);
        for (int64_t r = 0; r < rows; r++) {
            int64_t h = kvh * group + r / nq, query = i0 + r % nq;
            ATTN_T top = ATTN(finish_scores)(job, sl, r, b, h, query, j0, n);
            sl->alpha[r] = sl->top[r]; /* the old largest, until softmax_block */
            sl->top[r] = top > sl->top[r] ? top : sl->top[r];
        }
        ATTN(softmax_block)(sl, rows, n);
        ATTN(values)(sl, rows, n, ATTN(row)(job->v, &job->vs, b, kvh, j0), job->vs.s);
        for (int64_t r = 0; r < rows; r++) {
            ATTN_T alpha = sl->alpha[r], *o = sl->o + r * dv;
            const ATTN_T *t = sl->t + r * dv;
            for (int64_t c = 0; c < dv; c++)
                o[c] = o[c] * alpha + t[c];
        }
    }
    for (int64_t r = 0; r < rows; r++) { /* a row that saw no key gives zeros */
        int64_t h = kvh * group + r / nq, query = i0 + r % nq;
        ATTN_T *out = (ATTN_T *)job->out + b * job->os.b + h * job->os.h + query * job->os.s;
        ATTN_T inv = sl->sum[r] > 0 ? 1 / sl->sum[r] : 0;
        for (int64_t c = 0; c < dv; c++)
            out[c] = sl->o[r * dv + c] * inv;
    }
}

/* Lays the slot's arrays out from base (each 64-byte aligned) for `rows` rows; returns the
 * bytes they take. base NULL: only counts. */
static size_t ATTN(carve)(ATTN(slot) *sl, char *base, int64_t rows, int64_t d, int64_t dv) {
    size_t at = 0;
#define ATTN_TAKE(field, type, count)                                   \
    sl->field = (type *)(base ? base + at : NULL);                      \
    at += ((size_t)(count) * sizeof(type) + 63) / 64 * 64;
    ATTN_TAKE(q, ATTN_T, rows * d)
    ATTN_TAKE(s, ATTN_T, rows * RT_ATTN_KEY_BLOCK)
    ATTN_TAKE(t, ATTN_T, rows * dv)
    ATTN_TAKE(kt, ATTN_T, d * RT_ATTN_KEY_BLOCK)
    ATTN_TAKE(o, ATTN_T, rows * dv)
    ATTN_TAKE(top, ATTN_T, rows)
    ATTN_TAKE(sum, ATTN_T, rows)
    ATTN_TAKE(alpha, ATTN_T, rows)
    ATTN_TAKE(limit, int64_t, rows)
#undef ATTN_TAKE
    sl->head_dim = d;
    sl->v_dim = dv;
    return at;
}

static void ATTN(run)(void *ctx, int32_t slot, rt_run *run) {
    const rt_attn_job *job = ctx;
    ATTN(slot) sl;
    char *base = (char *)job->scratch + (size_t)slot * job->slot_bytes;
    size_t used = ATTN(carve)(&sl, base, job->slot_rows, job->head_dim, job->v_dim);
    sl.gemm = base + used;
    sl.gemm_bytes = job->slot_bytes - used;
    int64_t tiles = (job->q_len + job->tile_queries - 1) / job->tile_queries;
    size_t item;
    while (rt_run__next(run, &item)) {
        int64_t t = (int64_t)item % tiles, bh = (int64_t)item / tiles;
        int64_t i0 = t * job->tile_queries, i1 = i0 + job->tile_queries;
        ATTN(tile)(job, &sl, bh / job->kv_heads, bh % job->kv_heads, i0,
                   i1 < job->q_len ? i1 : job->q_len);
    }
}
