/* resize.c: resize (ONNX Resize): nearest, linear and cubic interpolation over any
 * dimensions, with ONNX's coordinate transformations, nearest rounding modes, antialiasing
 * and exclude_outside.
 *
 * Interpolation is separable: every output coordinate of every dimension gets a few source taps
 * (indices and weights), computed here per run into scratch; an output element sums the products of
 * its dimensions' taps (in float64, kernels/interpolate.c). Nearest has one tap with weight 1, so
 * it is a plain gather that works on any dtype. The arithmetic follows onnx's reference
 * implementation (onnx/reference/ops/op_resize.py) operation by operation. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"
#include "ops/movement/resize.h"

enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC, MODE_COUNT };
enum {
    COORD_HALF_PIXEL,
    COORD_HALF_PIXEL_SYMMETRIC,
    COORD_PYTORCH_HALF_PIXEL,
    COORD_ALIGN_CORNERS,
    COORD_ASYMMETRIC,
    COORD_TF_CROP_AND_RESIZE,
    COORD_COUNT
};
enum { NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL,
       NEAREST_COUNT };

/* Antialiased downscaling widens the filter; its taps per dimension are capped here. */
#define MAX_TAPS 4096

typedef struct resize_args {
    rt_tensor_value *x, *out;
    rt_mv_ints sizes; /* a literal list, or a tensor read at run (sizes from other tensors') */
    rt_mv_doubles scales, roi; /* literal lists, or tensors read at run (ONNX graph inputs) */
    size_t num_sizes, num_scales, num_roi;
    /* scales and roi's values, read and checked once known (resize_read_values) */
    double given_scale[RT_MAX_RANK], roi_start[RT_MAX_RANK], roi_end[RT_MAX_RANK];
    int64_t mode, coord, nearest;
    double cubic_a, extrapolation;
    bool exclude_outside, antialias;
    bool read_at_run; /* sizes, scales or roi are tensors: out is planned at its bounds */
    double scale[RT_MAX_RANK]; /* per dimension, as the coordinate transform uses it */
    int64_t taps[RT_MAX_RANK];
    bool identity[RT_MAX_RANK];
} resize_args;

/* Taps per output coordinate for a filter of half-width `support` (1 linear, 2 cubic). */
static int64_t filter_taps(double support, double s) {
    double start = floor(-support / s) + 1;
    return (int64_t)(2 - 2 * start);
}

/* Output sizes, transform scales and taps per dimension, all checked. */
static rt_status resize_plan(rt_op_ctx *ctx, resize_args *a, int64_t *sizes) {
    const rt_tensor_value *x = a->x;
    rt_status code = rt_op__shape_code(ctx);
    for (int32_t d = 0; d < x->rank; d++) {
        int64_t in = x->sizes[d];
        double scale = a->num_scales ? a->given_scale[d] : 0;
        if (a->num_sizes) {
            int64_t given = rt_mv__ints_at(&a->sizes, (size_t)d);
            if (given < -1)
                return rt_op__fail(ctx, code, "sizes item %" PRId32 " is %" PRId64 "; sizes "
                                   "must be >= 0 (or -1: x's size)", d, given);
            sizes[d] = given == -1 ? in : given;
        } else {
            double product = scale * (double)in;
            if (!(product < 9.0e18))
                return rt_op__fail(ctx, code, "dimension %" PRId32 " scaled by %g overflows", d,
                                   scale);
            sizes[d] = (int64_t)product;
        }
        if (!a->num_scales)
            scale = in > 0 ? (double)sizes[d] / (double)in : 1.0;
        if (in == 0 && sizes[d] > 0)
            return rt_op__fail(ctx, code, "dimension %" PRId32 " of x is empty; it cannot be "
                               "resized to %" PRId64, d, sizes[d]);
        a->scale[d] = scale;
        bool unit = fabs(scale - 1.0) <= 1e-9 * fmax(1.0, fabs(scale));
        bool whole_roi = a->coord != COORD_TF_CROP_AND_RESIZE ||
                         (fabs(a->roi_start[d]) <= 1e-9 && fabs(a->roi_end[d] - 1.0) <= 1e-9);
        a->identity[d] = unit && sizes[d] == in && whole_roi;
        a->taps[d] = 1;
        if (a->mode != MODE_NEAREST && !a->identity[d]) {
            double s = a->antialias ? fmin(scale, 1.0) : 1.0;
            double support = a->mode == MODE_LINEAR ? 1.0 : 2.0;
            if (!(support / s < MAX_TAPS / 2))
                return rt_op__fail(ctx, code, "antialiasing dimension %" PRId32 " at scale %g "
                                   "needs more than %d taps", d, scale, MAX_TAPS);
            a->taps[d] = filter_taps(support, s);
        }
    }
    return RT_OK;
}

static rt_status resize_check_params(rt_op_ctx *ctx, const resize_args *a) {
    int32_t rank = a->x->rank;
    if (a->mode < 0 || a->mode >= MODE_COUNT)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "mode %" PRId64 " must be 0 (nearest), 1 "
                           "(linear) or 2 (cubic)", a->mode);
    if (a->coord < 0 || a->coord >= COORD_COUNT)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "coordinate_mode %" PRId64 " must be in [0, 5]",
                           a->coord);
    if (a->nearest < 0 || a->nearest >= NEAREST_COUNT)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "nearest_mode %" PRId64 " must be in [0, 3]",
                           a->nearest);
    if (a->antialias && a->mode == MODE_NEAREST)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "antialias needs mode linear or cubic");
    if ((a->num_sizes != 0 && a->num_sizes != (size_t)rank) ||
        (a->num_scales != 0 && a->num_scales != (size_t)rank) ||
        (a->num_sizes == 0 && a->num_scales == 0))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "sizes (%zu items) and scales (%zu items) "
                           "need %" PRId32 " items each; at least one must be given",
                           a->num_sizes, a->num_scales, rank);
    if (a->coord == COORD_TF_CROP_AND_RESIZE ? a->num_roi != 2 * (size_t)rank : a->num_roi != 0)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "roi has %zu items; it needs %" PRId32
                           " (starts, then ends) with tf_crop_and_resize and none otherwise",
                           a->num_roi, 2 * rank);
    if (a->mode != MODE_NEAREST)
        return rt_op__check_type_in(ctx, a->x, "x", RT_TYPES_FLOAT,
                                    "float32 and float64 for linear and cubic modes");
    return rt_op__check_type_in(ctx, a->x, "x", RT_TYPES_ALL, "any dtype");
}

/* scales and roi's values once they can be read (their counts checked): literal ones at load,
 * tensors' at each run, where a bad value comes from the caller's inputs. */
static rt_status resize_read_values(rt_op_ctx *ctx, resize_args *a) {
    int32_t rank = a->x->rank;
    rt_status code = rt_op__shape_code(ctx);
    size_t num_scales = rt_mv__doubles_known(ctx, &a->scales) ? a->num_scales : 0;
    size_t num_roi = rt_mv__doubles_known(ctx, &a->roi) ? a->num_roi : 0;
    for (size_t i = 0; i < num_scales; i++) {
        double scale = rt_mv__doubles_at(&a->scales, i);
        if (!(scale > 0) || !isfinite(scale))
            return rt_op__fail(ctx, code, "scales item %zu is %g; scales must be finite and > 0",
                               i, scale);
        a->given_scale[i] = scale;
    }
    for (size_t i = 0; i < num_roi; i++) {
        double r = rt_mv__doubles_at(&a->roi, i);
        if (!isfinite(r))
            return rt_op__fail(ctx, code, "roi item %zu is %g; roi must be finite", i, r);
        if (i < (size_t)rank)
            a->roi_start[i] = r;
        else
            a->roi_end[i - (size_t)rank] = r;
    }
    return RT_OK;
}

/* resize(x, sizes: int list | tensor, scales: double list | tensor, roi: double list | tensor,
 *        mode: int, coordinate_mode: int, nearest_mode: int, cubic_a: double,
 *        exclude_outside: bool, antialias: bool, extrapolation_value: double, out) */
static rt_status resize_setup(rt_op_ctx *ctx, resize_args *a) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 12));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 11, "out", &a->out));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "sizes", false, &a->sizes));
    a->num_sizes = a->sizes.count;
    RT_RETURN_IF_ERROR(rt_mv__doubles(ctx, 2, "scales", a->out, &a->scales));
    a->num_scales = a->scales.count;
    RT_RETURN_IF_ERROR(rt_mv__doubles(ctx, 3, "roi", a->out, &a->roi));
    a->num_roi = a->roi.count;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 4, "mode", &a->mode));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 5, "coordinate_mode", &a->coord));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 6, "nearest_mode", &a->nearest));
    RT_RETURN_IF_ERROR(rt_op__double(ctx, 7, "cubic_a", &a->cubic_a));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 8, "exclude_outside", &a->exclude_outside));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 9, "antialias", &a->antialias));
    RT_RETURN_IF_ERROR(rt_op__double(ctx, 10, "extrapolation_value", &a->extrapolation));
    RT_RETURN_IF_ERROR(resize_check_params(ctx, a));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, a->x, "x", a->out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", a->x, "x"));
    if (a->sizes.tensor)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", a->sizes.tensor, "sizes"));
    RT_RETURN_IF_ERROR(resize_read_values(ctx, a));
    a->read_at_run = a->sizes.tensor || a->scales.tensor || a->roi.tensor;
    if (!rt_mv__ints_known(ctx, &a->sizes) || !rt_mv__doubles_known(ctx, &a->scales) ||
        !rt_mv__doubles_known(ctx, &a->roi)) {
        /* Sizes, scales or roi read at run: out is planned at its bounds, with each dimension's
         * taps (they depend on the mode alone without antialiasing; antialiased tables are
         * bounded by antialiased_entries) for the interpolation tables. */
        if (a->out->rank != a->x->rank)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "out has rank %" PRId32 ", x %" PRId32,
                               a->out->rank, a->x->rank);
        for (int32_t d = 0; d < a->x->rank; d++) {
            a->identity[d] = false;
            a->taps[d] = a->mode == MODE_NEAREST ? 1
                                                 : filter_taps(a->mode == MODE_LINEAR ? 1.0 : 2.0,
                                                               1.0);
        }
        return rt_mv__plan_at_bounds(ctx, a->out, "out");
    }
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(resize_plan(ctx, a, sizes));
    return rt_op__set_output_sizes(ctx, a->out, "out", a->x->rank, sizes);
}

/* Scratch per dimension: taps * out offsets (int64) and weights (double), plus one
 * extrapolation flag per output coordinate (as int64, keeping everything 8-byte aligned). */
static bool scratch_bytes(const resize_args *a, const int64_t *out_sizes, size_t *bytes) {
    int64_t total = 0;
    for (int32_t d = 0; d < a->x->rank; d++) {
        int64_t entries;
        if (!rt_op__mul(out_sizes[d], 2 * a->taps[d] + 1, &entries) ||
            !rt_op__add(total, entries, &total))
            return false;
    }
    if (!rt_op__mul(total, 8, &total) || (uint64_t)total > SIZE_MAX)
        return false;
    *bytes = (size_t)total;
    return true;
}

/* Table entries of one antialiased dimension whose scale is read at run. Its filter is
 * support / s wide at s = min(scale, 1), so taps <= 2 * support / s + 2. When s < 1, out <= s * in
 * (out = floor(scale * in), or scale = out / in), or out <= 2 * s * in where both are given and
 * out = round(scale * in) >= 1 (keep_aspect_ratio_policy); so out * (2 * taps + 1) stays below
 * 8 * support * max(in, out) + 5 * out whatever the scale. The + 1 absorbs rounding; run
 * refuses sizes and scales that disagree beyond that. */
static bool antialiased_entries(const resize_args *a, int32_t d, int64_t *entries) {
    int64_t in = a->x->bounds[d], out = a->out->bounds[d];
    int64_t support = a->mode == MODE_LINEAR ? 1 : 2, widest, rest;
    if (!rt_op__mul(out, 2 * MAX_TAPS + 1, &widest))
        widest = INT64_MAX;
    if (!rt_op__mul(8 * support, (in > out ? in : out) + 1, entries) ||
        !rt_op__mul(5, out, &rest) || !rt_op__add(*entries, rest, entries))
        *entries = INT64_MAX;
    if (widest < *entries)
        *entries = widest;
    return *entries < INT64_MAX;
}

rt_status rt_ops__resize_prepare(rt_op_ctx *ctx) {
    resize_args a;
    RT_RETURN_IF_ERROR(resize_setup(ctx, &a));
    bool fits = scratch_bytes(&a, a.out->bounds, &ctx->scratch_bytes);
    if (fits && a.antialias && a.read_at_run) {
        int64_t total = 0, entries;
        for (int32_t d = 0; d < a.x->rank && fits; d++)
            fits = antialiased_entries(&a, d, &entries) && rt_op__add(total, entries, &total);
        fits = fits && rt_op__mul(total, 8, &total) && (uint64_t)total <= SIZE_MAX;
        ctx->scratch_bytes = fits ? (size_t)total : 0;
    }
    if (!fits)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "the interpolation tables overflow");
    return RT_OK;
}

/* Source coordinate of output coordinate o of dimension d (ONNX's transforms); sets
 * *outside for tf_crop_and_resize positions beyond the input. */
static double source_coordinate(const resize_args *a, int32_t d, int64_t o, bool *outside) {
    double in = (double)a->x->sizes[d], scale = a->scale[d], y = (double)o;
    double width = scale * in; /* the unrounded output size */
    double x;
    *outside = false;
    switch (a->coord) {
    case COORD_ALIGN_CORNERS: return width == 1 ? 0.0 : y * (in - 1) / (width - 1);
    case COORD_ASYMMETRIC: return y / scale;
    case COORD_TF_CROP_AND_RESIZE: {
        double start = a->roi_start[d], end = a->roi_end[d];
        x = width == 1 ? (end - start) * (in - 1) / 2 : y * (end - start) * (in - 1) / (width - 1);
        x = x + start * (in - 1);
        *outside = x < 0 || x > in - 1;
        return x;
    }
    case COORD_PYTORCH_HALF_PIXEL: return width == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case COORD_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)a->out->sizes[d] / width;
        double offset = in / 2 * (1 - adjustment);
        return offset + (y + 0.5) / scale - 0.5;
    }
    default: return (y + 0.5) / scale - 0.5;
    }
}

static double cubic_kernel(double x, double A) {
    x = fabs(x);
    if (x <= 1)
        return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2)
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0.0;
}

/* Taps of output coordinate o: source indices (clamped, times `stride`) and weights. */
static void coordinate_taps(const resize_args *a, int32_t d, int64_t o, int64_t stride,
                            int64_t *offsets, double *weights, int64_t *outside_flag) {
    int64_t in = a->x->sizes[d], n = a->taps[d];
    bool outside;
    double x = source_coordinate(a, d, o, &outside);
    *outside_flag = outside;
    /* Far outside the input every tap clamps to an edge: bound x so floor() fits int64. */
    double far = (double)in + 2.0 * MAX_TAPS;
    x = x != x ? 0.0 : x < -far ? -far : x > far ? far : x;
    /* ratio in (0, 1]: an exact integer coordinate x counts as base x - 1 with ratio 1 */
    double fl = floor(x);
    int64_t base = (int64_t)fl;
    double ratio = x - fl;
    if (x == fl) {
        base -= 1;
        ratio = 1.0;
    }
    if (a->mode == MODE_NEAREST) {
        bool up = ratio == 1.0 || a->nearest == NEAREST_CEIL ||
                  (a->nearest == NEAREST_ROUND_PREFER_FLOOR && ratio > 0.5) ||
                  (a->nearest == NEAREST_ROUND_PREFER_CEIL && ratio >= 0.5);
        int64_t i = base + (up ? 1 : 0);
        offsets[0] = (i < 0 ? 0 : i >= in ? in - 1 : i) * stride;
        weights[0] = 1.0;
        return;
    }
    double s = a->antialias ? fmin(a->scale[d], 1.0) : 1.0;
    int64_t start = 1 - n / 2;
    double sum = 0;
    for (int64_t k = 0; k < n; k++) {
        double t = ((double)(start + k) - ratio) * s;
        double w = a->mode == MODE_LINEAR ? fmax(0.0, fmin(1.0, 1 - fabs(t)))
                                          : cubic_kernel(t, a->cubic_a);
        int64_t i = base + start + k;
        if (a->exclude_outside && (i < 0 || i >= in))
            w = 0;
        weights[k] = w;
        sum += w;
        offsets[k] = (i < 0 ? 0 : i >= in ? in - 1 : i) * stride;
    }
    if (a->antialias || a->exclude_outside) {
        sum = sum == 0 ? 1 : sum;
        for (int64_t k = 0; k < n; k++)
            weights[k] /= sum;
    }
}

/* extrapolation_value in the dtype of x, for the nearest gather's fill. */
static void fill_value(rt_type type, double v, uint64_t *bits) {
    union {
        float f;
        double d;
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
    } u = {.u64 = 0};
    bool finite = isfinite(v);
    switch (type) {
    case RT_F32: u.f = (float)v; break;
    case RT_F64: u.d = v; break;
    case RT_I8: u.i8 = finite && v > -129 && v < 128 ? (int8_t)v : 0; break;
    case RT_I16: u.i16 = finite && v > -32769 && v < 32768 ? (int16_t)v : 0; break;
    case RT_I32: u.i32 = finite && fabs(v) < 2147483648.0 ? (int32_t)v : 0; break;
    case RT_I64: u.i64 = finite && fabs(v) < 9.2e18 ? (int64_t)v : 0; break;
    case RT_U8: case RT_BOOL: u.u8 = finite && v >= 0 && v < 256 ? (uint8_t)v : 0; break;
    case RT_U16: u.u16 = finite && v >= 0 && v < 65536 ? (uint16_t)v : 0; break;
    case RT_U32: u.u32 = finite && v >= 0 && v < 4294967296.0 ? (uint32_t)v : 0; break;
    case RT_U64: u.u64 = finite && v >= 0 && v < 1.8e19 ? (uint64_t)v : 0; break;
    default: break; /* float16 and bfloat16 fill with 0 */
    }
    *bits = u.u64;
}

/* The tables at `next` (scratch_bytes for out's current sizes) for the current sizes. */
static void build_tables(const resize_args *a, int64_t *next, rt_resize_job *job) {
    const rt_tensor_value *x = a->x, *out = a->out;
    int64_t strides[RT_MAX_RANK];
    rt_tensor__dense_strides(strides, x->rank, x->sizes, NULL);
    job->x = x;
    job->out = out;
    job->taps = a->taps;
    job->extrapolation = a->extrapolation;
    job->num_active = 0;
    for (int32_t d = 0; d < x->rank; d++) {
        int64_t n = a->taps[d], size = out->sizes[d];
        job->offsets[d] = next;
        job->weights[d] = (double *)(void *)(next + size * n);
        job->outside[d] = next + 2 * size * n;
        next += size * (2 * n + 1);
        for (int64_t o = 0; o < size; o++) {
            if (a->identity[d]) {
                job->offsets[d][o] = o * strides[d];
                job->weights[d][o] = 1.0;
                job->outside[d][o] = 0;
            } else {
                coordinate_taps(a, d, o, strides[d], job->offsets[d] + o * n,
                                job->weights[d] + o * n, &job->outside[d][o]);
            }
        }
        if (n > 1)
            job->active[job->num_active++] = d;
    }
}

rt_status rt_ops__resize_tables(rt_op_ctx *ctx, rt_resize_tables *t) {
    resize_args a;
    memset(t, 0, sizeof *t);
    RT_RETURN_IF_ERROR(resize_setup(ctx, &a));
    size_t need;
    if (!scratch_bytes(&a, a.out->sizes, &need))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "the interpolation tables overflow");
    t->rank = a.x->rank;
    t->nearest = a.mode == MODE_NEAREST;
    t->extrapolation = a.extrapolation;
    fill_value(a.x->type, a.extrapolation, &t->fill);
    if (rt_tensor__numel(a.out) == 0)
        return RT_OK;
    t->table = malloc(need > 0 ? need : 8);
    if (t->table == NULL)
        return rt_error__oom("resize tables");
    t->table_bytes = need;
    rt_resize_job job;
    build_tables(&a, t->table, &job);
    for (int32_t d = 0; d < t->rank; d++) {
        t->taps[d] = a.taps[d];
        t->offsets_at[d] = job.offsets[d] - t->table;
        t->weights_at[d] = (int64_t *)(void *)job.weights[d] - t->table;
        t->outside_at[d] = job.outside[d] - t->table;
    }
    return RT_OK;
}

rt_status rt_ops__resize_run(rt_op_ctx *ctx) {
    resize_args a;
    RT_RETURN_IF_ERROR(resize_setup(ctx, &a));
    const rt_tensor_value *x = a.x, *out = a.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    size_t need;
    bool fits = scratch_bytes(&a, out->sizes, &need) && need <= ctx->scratch_bytes;
    if (!fits && a.antialias && a.read_at_run)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "sizes and scales disagree: "
                           "antialiasing at these scales needs wider filters than the sizes "
                           "allow (sizes must be about scales * x's sizes)");
    if (!fits || !ctx->scratch)
        return rt_op__fail(ctx, RT_INTERNAL, "the scratch planned at load is too small");
    rt_resize_job job;
    build_tables(&a, ctx->scratch, &job);
    if (a.mode == MODE_NEAREST) {
        /* One tap each: a gather through the offsets, -1 marking extrapolated positions. */
        for (int32_t d = 0; d < x->rank; d++)
            for (int64_t o = 0; o < out->sizes[d]; o++)
                if (job.outside[d][o])
                    job.offsets[d][o] = -1;
        uint64_t fill;
        fill_value(x->type, a.extrapolation, &fill);
        rt_mv__map_copy(ctx, out->data, x->data, out->rank, out->sizes, job.offsets, &fill,
                        out->elem_size);
        return RT_OK;
    }
    rt_resize__interpolate(&job, rt_op__threads(ctx));
    return RT_OK;
}
