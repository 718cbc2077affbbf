/* conv.c: 2-D convolution (cross-correlation, as in PyTorch and ONNX) with stride, padding
 * (symmetric or per side), dilation and groups.
 *
 * Direct algorithm: each output plane is accumulated one (input channel, kernel tap) at a time
 * over the range of output positions whose input tap lies inside the image, so padding costs
 * nothing and needs no scratch buffer. Work is split into bands of output rows. */
#include <inttypes.h>

#include <stdlib.h>
#include <string.h>

#include "core/multiversion.h"
#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* ---- kernel ----------------------------------------------------------------------------- */

/* Output rows per work item. */
#define CONV_BAND 16

typedef struct conv_job {
    const conv_dims *dims;
    const void *x, *w, *bias; /* bias may be NULL */
    void *out;
    int64_t bands;
} conv_job;

#define DEFINE_CONV_BANDS(sfx, T)                                                            \
    RT_MULTIVERSION static void conv_bands__##sfx(void *arg, size_t begin, size_t end)       \
    {                                                                                        \
        const conv_job *job = arg;                                                           \
        const conv_dims *d = job->dims;                                                      \
        const T *x = job->x, *w = job->w, *bias = job->bias;                                 \
        int64_t group_in = d->channels / d->groups, group_out = d->out_channels / d->groups; \
        int64_t plane_in = d->height * d->width, plane_out = d->out_h * d->out_w;            \
        int64_t taps = d->kernel_h * d->kernel_w;                                            \
        int64_t sh = d->stride[0], sw = d->stride[1];                                        \
        for (size_t item = begin; item < end; item++) {                                      \
            int64_t plane = (int64_t)item / job->bands; /* n * out_channels + o */           \
            int64_t band = (int64_t)item % job->bands;                                       \
            int64_t n = plane / d->out_channels, o = plane % d->out_channels;                \
            int64_t row0 = band * CONV_BAND;                                                 \
            int64_t row1 = row0 + CONV_BAND < d->out_h ? row0 + CONV_BAND : d->out_h;        \
            T *out = (T *)job->out + plane * plane_out;                                      \
            T b = bias ? bias[o] : (T)0;                                                     \
            for (int64_t i = row0 * d->out_w; i < row1 * d->out_w; i++)                      \
                out[i] = b;                                                                  \
            int64_t first_channel = o / group_out * group_in;                                \
            for (int64_t c = 0; c < group_in; c++) {                                         \
                const T *xp = x + (n * d->channels + first_channel + c) * plane_in;          \
                const T *wp = w + (o * group_in + c) * taps;                                 \
                for (int64_t kh = 0; kh < d->kernel_h; kh++) {                               \
                    int64_t off_h = kh * d->dilation[0] - d->pad[0];                         \
                    int64_t oh0, oh1;                                                        \
                    rt_conv__output_range(off_h, sh, d->height, d->out_h, &oh0, &oh1);                   \
                    if (oh0 < row0)                                                          \
                        oh0 = row0;                                                          \
                    if (oh1 > row1)                                                          \
                        oh1 = row1;                                                          \
                    for (int64_t kw = 0; kw < d->kernel_w; kw++) {                           \
                        int64_t off_w = kw * d->dilation[1] - d->pad[1];                     \
                        int64_t ow0, ow1;                                                    \
                        rt_conv__output_range(off_w, sw, d->width, d->out_w, &ow0, &ow1);                \
                        const T wv = wp[kh * d->kernel_w + kw];                              \
                        for (int64_t oh = oh0; oh < oh1; oh++) {                             \
                            const T *xr = xp + (oh * sh + off_h) * d->width;                 \
                            T *orow = out + oh * d->out_w;                                   \
                            if (sw == 1)                                                     \
                                for (int64_t ow = ow0; ow < ow1; ow++)                       \
                                    orow[ow] += wv * xr[ow + off_w];                         \
                            else                                                             \
                                for (int64_t ow = ow0; ow < ow1; ow++)                       \
                                    orow[ow] += wv * xr[ow * sw + off_w];                    \
                        }                                                                    \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_CONV_BANDS(f32, float)
DEFINE_CONV_BANDS(f64, double)

/* ---- float32 through the GEMM ----------------------------------------------------------- */

/* Per (batch, group): out[O/g, Ho*Wo] = w[O/g, C/g*kH*kW] @ columns[C/g*kH*kW, Ho*Wo] + bias,
 * where columns holds each output position's input patch (im2col). A 1x1 convolution with
 * stride 1 and no padding reads x itself as the columns. Groups with few inputs per output
 * (depthwise) stay on the direct kernel, where a GEMM would have a 1-row A. */
#define CONV_GEMM_MIN_DEPTH 16

static bool conv_uses_gemm(const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    return args->x->type == RT_F32 &&
           d->channels / d->groups * d->kernel_h * d->kernel_w >= CONV_GEMM_MIN_DEPTH;
}

static size_t conv_columns_bytes(const conv_dims *d) {
    if (rt_conv__is_pointwise(d))
        return 0;
    size_t bytes = (size_t)(d->channels / d->groups * d->kernel_h * d->kernel_w) *
                   (size_t)(d->out_h * d->out_w) * sizeof(float);
    return (bytes + 63) / 64 * 64;
}

typedef struct im2col_job {
    const conv_dims *d;
    const float *x; /* the group's first input channel of one image */
    float *columns;
} im2col_job;

/* Rows [begin, end) of the column matrix; row r is (channel, kh, kw) of the patch. */
static void im2col_rows(void *arg, size_t begin, size_t end) {
    const im2col_job *job = arg;
    const conv_dims *d = job->d;
    int64_t taps = d->kernel_h * d->kernel_w, plane = d->out_h * d->out_w;
    for (size_t r = begin; r < end; r++) {
        int64_t c = (int64_t)r / taps, kh = (int64_t)r % taps / d->kernel_w,
                kw = (int64_t)r % d->kernel_w;
        const float *xp = job->x + c * d->height * d->width;
        float *row = job->columns + (int64_t)r * plane;
        int64_t off_h = kh * d->dilation[0] - d->pad[0], off_w = kw * d->dilation[1] - d->pad[1];
        int64_t oh0, oh1, ow0, ow1;
        rt_conv__output_range(off_h, d->stride[0], d->height, d->out_h, &oh0, &oh1);
        rt_conv__output_range(off_w, d->stride[1], d->width, d->out_w, &ow0, &ow1);
        /* Each element is written once: zeros where the tap falls in the padding. */
        if (oh0 >= oh1 || ow0 >= ow1) {
            memset(row, 0, (size_t)plane * sizeof(float));
            continue;
        }
        memset(row, 0, (size_t)(oh0 * d->out_w) * sizeof(float));
        for (int64_t oh = oh0; oh < oh1; oh++) {
            const float *xr = xp + (oh * d->stride[0] + off_h) * d->width;
            float *out = row + oh * d->out_w;
            memset(out, 0, (size_t)ow0 * sizeof(float));
            if (d->stride[1] == 1)
                memcpy(out + ow0, xr + (ow0 + off_w), (size_t)(ow1 - ow0) * sizeof(float));
            else
                for (int64_t ow = ow0; ow < ow1; ow++)
                    out[ow] = xr[ow * d->stride[1] + off_w];
            memset(out + ow1, 0, (size_t)(d->out_w - ow1) * sizeof(float));
        }
        memset(row + oh1 * d->out_w, 0, (size_t)((d->out_h - oh1) * d->out_w) * sizeof(float));
    }
}

static void conv_f32_gemm(const rt_op_ctx *ctx, const rt_conv_args *args, float *out,
                          void *scratch, size_t scratch_bytes) {
    const conv_dims *d = &args->dims;
    int64_t group_in = d->channels / d->groups, group_out = d->out_channels / d->groups;
    int64_t depth = group_in * d->kernel_h * d->kernel_w, plane = d->out_h * d->out_w;
    size_t columns_bytes = conv_columns_bytes(d);
    float *columns = scratch;
    void *gemm_scratch = (char *)scratch + columns_bytes;
    int32_t threads = rt_op__slot_threads(ctx);
    const float *x = args->x->data, *w = args->w->data;
    const float *bias = args->bias ? args->bias->data : NULL;
    const float *packed_w = rt_conv__packed_weights(ctx);
    size_t packed_group = rt_gemm__f32_packed_a_floats(group_out, depth);
    for (int64_t n = 0; n < d->batch; n++) {
        for (int64_t g = 0; g < d->groups; g++) {
            const float *xg = x + (n * d->channels + g * group_in) * d->height * d->width;
            const float *b = xg;
            if (columns_bytes > 0) {
                im2col_job job = {d, xg, columns};
                rt_parallel__for(threads, (size_t)depth, rt_op__grain(plane), im2col_rows, &job);
                b = columns;
            }
            rt_gemm_f32_args gemm = {
                .m = group_out, .n = plane, .k = depth,
                .a = w + g * group_out * depth, .a_row_stride = depth, .a_col_stride = 1,
                .b = b, .b_row_stride = plane, .b_col_stride = 1,
                .c = out + (n * d->out_channels + g * group_out) * plane, .c_row_stride = plane,
                .row_bias = bias ? bias + g * group_out : NULL,
                .activation = args->act,
                .packed_a = packed_w ? packed_w + (size_t)g * packed_group : NULL,
            };
            rt_gemm__f32(&gemm, gemm_scratch, scratch_bytes - columns_bytes, threads);
        }
    }
}

/* ---- op --------------------------------------------------------------------------------- */

/* Channel counts of x, w and bias against groups, for the current sizes. */
static rt_status conv_check_channels(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    RT_RETURN_IF_ERROR(rt_op__check_conv_groups(ctx, args->x, args->w, d->groups));
    char tw[RT_OP_SHAPE_TEXT];
    if (args->bias && args->bias->sizes[0] != d->out_channels)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "bias has %" PRId64 " elements, but w %s has %" PRId64
                           " output channels",
                           args->bias->sizes[0], rt_op__shape_text(args->w->sizes, 4, tw),
                           d->out_channels);
    return RT_OK;
}

rt_status rt_conv__read_args(rt_op_ctx *ctx, rt_conv_args *args, bool fused, size_t out_index) {
    conv_dims *d = &args->dims;
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "w", &args->w));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &args->bias));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 3, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(rt_op__padding(ctx, 4, "padding", d->pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 5, "dilation", 1, d->dilation));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 6, "groups", &d->groups));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, out_index, "out", &args->out));
    args->act = (rt_activation){RT_ACT_NONE, 0.0f, 0.0f};
    if (fused) {
        RT_RETURN_IF_ERROR(rt_op__activation(ctx, 7, &args->act));
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, args->x, "x", RT_F32));
    }
    if (d->groups < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "groups must be >= 1, not %" PRId64, d->groups);
    RT_RETURN_IF_ERROR(rt_op__check_conv_tensors(ctx, args->x, args->w, args->bias, args->out));

    const int64_t *xs = args->x->sizes, *ws = args->w->sizes;
    d->batch = xs[0];
    d->channels = xs[1];
    d->height = xs[2];
    d->width = xs[3];
    d->out_channels = ws[0];
    d->kernel_h = ws[2];
    d->kernel_w = ws[3];
    RT_RETURN_IF_ERROR(conv_check_channels(ctx, args));
    RT_RETURN_IF_ERROR(rt_op__window_output(ctx, "height", d->height, d->pad[0], d->pad[2],
                                            d->kernel_h, d->stride[0], d->dilation[0], false,
                                            &d->out_h));
    return rt_op__window_output(ctx, "width", d->width, d->pad[1], d->pad[3], d->kernel_w,
                                d->stride[1], d->dilation[1], false, &d->out_w);
}

/* conv2d(x, w, bias, stride, padding, dilation, groups, out) and conv2d_act, which adds
 * (activation, lo, hi) before out. */
rt_status rt_conv__setup(rt_op_ctx *ctx, rt_conv_args *args, bool fused) {
    size_t out_index = fused ? 10 : 7;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, out_index + 1));
    RT_RETURN_IF_ERROR(rt_conv__read_args(ctx, args, fused, out_index));
    const conv_dims *d = &args->dims;
    int64_t sizes[4] = {d->batch, d->out_channels, d->out_h, d->out_w};
    return rt_op__set_output_sizes(ctx, args->out, "out", 4, sizes);
}

/* ctx->state: this header, then the weights (64-byte aligned, as the kernels load them). */
typedef enum conv_state_kind {
    CONV_STATE_PACKED = 1,
    CONV_STATE_WINOGRAD = 2,
    CONV_STATE_PIXELS = 3, /* w^T packed as B, for conv_pixels.c */
    CONV_STATE_DIRECT = 4, /* tall panels, for conv_direct.c */
} conv_state_kind;
#define CONV_STATE_HEADER 64

static float *conv_alloc_state(rt_op_ctx *ctx, conv_state_kind kind, size_t floats) {
    if (floats == 0 || floats > (SIZE_MAX - CONV_STATE_HEADER) / sizeof(float))
        return NULL;
    char *state = rt_op__alloc_state(ctx, CONV_STATE_HEADER + floats * sizeof(float));
    if (state == NULL)
        return NULL;
    *(int32_t *)state = kind;
    return (float *)(state + CONV_STATE_HEADER);
}

static const float *conv_state_weights(const rt_op_ctx *ctx, conv_state_kind kind) {
    const char *state = ctx->state;
    if (state == NULL || *(const int32_t *)state != (int32_t)kind)
        return NULL;
    return (const float *)(state + CONV_STATE_HEADER);
}

const float *rt_conv__packed_weights(const rt_op_ctx *ctx) {
    return conv_state_weights(ctx, CONV_STATE_PACKED);
}

const float *rt_conv__direct_weights(const rt_op_ctx *ctx) {
    return conv_state_weights(ctx, CONV_STATE_DIRECT);
}

const float *rt_conv__winograd_weights_of(const rt_op_ctx *ctx) {
    return conv_state_weights(ctx, CONV_STATE_WINOGRAD);
}

/* Constant weights of a pointwise convolution on a small plane, packed for conv_pixels.c
 * (then the run takes that path at any sizes, as for Winograd). */
static bool conv_prepare_pixels(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    if (args->x->type != RT_F32 || !rt_conv__pixels_pay(d))
        return false;
    float *weights = conv_alloc_state(ctx, CONV_STATE_PIXELS, rt_conv__pixels_weights_floats(d));
    if (weights == NULL)
        return false;
    rt_conv__pixels_weights(d, args->w->data, weights);
    ctx->scratch_bytes = rt_conv__pixels_scratch_bytes(d);
    return true;
}

/* Constant weights packed once, for every call: in tall panels where the planned sizes take
 * the direct path (one group), else each group's [O/g, C/g*kH*kW] matrix as the GEMM's A. */
static void conv_pack_weights(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    int64_t group_out = d->out_channels / d->groups;
    int64_t depth = d->channels / d->groups * d->kernel_h * d->kernel_w;
    if (rt_conv__direct_fits(d, NULL)) {
        rt_gemm_f32_args w = {.m = d->out_channels, .k = depth, .a = args->w->data,
                              .a_row_stride = depth, .a_col_stride = 1};
        float *tall = conv_alloc_state(ctx, CONV_STATE_DIRECT,
                                       rt_gemm__f32_tall_a_floats(w.m, depth));
        if (tall != NULL)
            rt_gemm__f32_pack_a_tall(&w, tall);
        return;
    }
    size_t per_group = rt_gemm__f32_packed_a_floats(group_out, depth);
    float *packed = conv_alloc_state(ctx, CONV_STATE_PACKED, per_group * (size_t)d->groups);
    if (packed == NULL)
        return;
    for (int64_t g = 0; g < d->groups; g++) {
        rt_gemm_f32_args gemm = {
            .m = group_out, .k = depth,
            .a = (const float *)args->w->data + g * group_out * depth,
            .a_row_stride = depth, .a_col_stride = 1,
        };
        rt_gemm__f32_pack_a(&gemm, packed + (size_t)g * per_group);
    }
}

/* RT_CONV_WINOGRAD=0 in the environment turns the Winograd path off (read at each load): for
 * results that round as the direct convolution's do. */
static bool winograd_allowed(void) {
    const char *setting = getenv("RT_CONV_WINOGRAD");
    return setting == NULL || strcmp(setting, "0") != 0;
}

/* Constant weights transformed for Winograd, when it pays for the planned sizes (then the
 * run takes it at any sizes: the state says which layout the weights are in). */
static bool conv_prepare_winograd(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    if (!winograd_allowed() || !rt_conv__winograd_pays(d))
        return false;
    size_t scratch = rt_conv__winograd_scratch_bytes(d, rt_threadpool__hardware_threads());
    if (scratch == 0)
        return false;
    size_t floats = rt_conv__winograd_weights_floats(d);
    float *weights = conv_alloc_state(ctx, CONV_STATE_WINOGRAD, floats);
    if (weights == NULL)
        return false;
    if (!rt_conv__winograd_weights(d, args->w->data, weights)) {
        /* memory ran out: the other paths, without it */
        rt_op__free_state(ctx, CONV_STATE_HEADER + floats * sizeof(float));
        return false;
    }
    ctx->scratch_bytes = scratch;
    return true;
}

void rt_conv__prepare(rt_op_ctx *ctx, const rt_conv_args *args) {
    if (args->x->type == RT_F32 && rt_conv__depthwise_fits(&args->dims)) {
        ctx->scratch_bytes = rt_conv__depthwise_scratch_bytes(
            &args->dims, rt_threadpool__hardware_threads());
        return;
    }
    if (!conv_uses_gemm(args))
        return;
    if (rt_op__is_constant(args->w) &&
        (conv_prepare_winograd(ctx, args) || conv_prepare_pixels(ctx, args)))
        return;
    const conv_dims *d = &args->dims;
    ctx->scratch_bytes = conv_columns_bytes(d) +
                         rt_gemm__f32_scratch_bytes(d->out_channels / d->groups,
                                                    d->out_h * d->out_w,
                                                    d->channels / d->groups * d->kernel_h *
                                                       d->kernel_w,
                                                   rt_threadpool__hardware_threads());
    size_t direct = rt_conv__direct_scratch_bytes(d, NULL, rt_threadpool__hardware_threads());
    if (rt_conv__direct_fits(d, NULL) && direct > ctx->scratch_bytes)
        ctx->scratch_bytes = direct;
    if (rt_op__is_constant(args->w))
        conv_pack_weights(ctx, args);
}

static rt_status conv_prepare(rt_op_ctx *ctx, bool fused) {
    rt_conv_args args;
    RT_RETURN_IF_ERROR(rt_conv__setup(ctx, &args, fused));
    rt_conv__prepare(ctx, &args);
    return RT_OK;
}

typedef struct activation_job {
    const rt_activation *act;
    float *out;
} activation_job;

static void activation_range(void *arg, size_t begin, size_t end) {
    const activation_job *job = arg;
    rt_activation__apply(job->act, job->out + begin, (int64_t)(end - begin));
}

void rt_conv__compute(const rt_op_ctx *ctx, const rt_conv_args *args, void *out,
                      void *scratch, size_t scratch_bytes) {
    const conv_dims *d = &args->dims;
    const void *bias = args->bias ? args->bias->data : NULL;
    /* The same choice, in the same order, as rt_conv__prepare made (it sized the scratch). */
    if (args->x->type == RT_F32 && rt_conv__depthwise_fits(d)) {
        rt_conv__depthwise_f32(d, args->x->data, args->w->data, bias, &args->act, out, scratch,
                               rt_op__slot_threads(ctx));
        return;
    }
    if (conv_uses_gemm(args)) {
        const float *winograd = rt_conv__winograd_weights_of(ctx);
        const float *direct = rt_conv__direct_weights(ctx);
        const float *pixels = conv_state_weights(ctx, CONV_STATE_PIXELS);
        if (winograd != NULL)
            rt_conv__winograd_f32(d, args->x->data, winograd, args->w->data, bias, &args->act,
                                  out, scratch, rt_op__slot_threads(ctx));
        else if (pixels != NULL)
            rt_conv__pixels_f32(d, args->x->data, pixels, bias, &args->act, out, scratch,
                                rt_op__threads(ctx));
        /* Weights packed at load (constant, and memory allowed it) take the direct path. */
        else if (direct != NULL && rt_conv__direct_fits(d, NULL))
            rt_conv__direct_f32(d, args->x->data, direct, bias, &args->act, NULL, out,
                                scratch, rt_op__slot_threads(ctx));
        else
            conv_f32_gemm(ctx, args, out, scratch, scratch_bytes);
        return;
    }
    conv_job job = {
        .dims = d,
        .x = args->x->data,
        .w = args->w->data,
        .bias = bias,
        .out = out,
        .bands = (d->out_h + CONV_BAND - 1) / CONV_BAND,
    };
    /* Bounded by the output's element count. */
    int64_t items = d->batch * d->out_channels * job.bands;
    int64_t band_rows = d->out_h < CONV_BAND ? d->out_h : CONV_BAND;
    int64_t work = rt_op__mul_sat(rt_op__mul_sat(band_rows, d->out_w),
                                  rt_op__mul_sat(d->channels / d->groups,
                                                 rt_op__mul_sat(d->kernel_h, d->kernel_w)));
    rt_range_fn kernel = args->x->type == RT_F32 ? conv_bands__f32 : conv_bands__f64;
    rt_parallel__for(rt_op__threads(ctx), (size_t)items, rt_op__grain(work), kernel, &job);
    if (args->act.kind != RT_ACT_NONE) {
        /* The direct kernel (depthwise) accumulates in place; activate in a second pass. */
        activation_job act = {&args->act, out};
        int64_t numel = rt_op__mul_sat(rt_op__mul_sat(d->batch, d->out_channels),
                                       rt_op__mul_sat(d->out_h, d->out_w));
        rt_parallel__for(rt_op__threads(ctx), (size_t)numel, rt_op__grain(4), activation_range,
                         &act);
    }
}

static rt_status conv_run(rt_op_ctx *ctx, bool fused) {
    rt_conv_args args;
    RT_RETURN_IF_ERROR(rt_conv__setup(ctx, &args, fused));
    if (rt_tensor__numel(args.out) > 0)
        rt_conv__compute(ctx, &args, args.out->data, ctx->scratch, ctx->scratch_bytes);
    return RT_OK;
}

rt_status rt_ops__conv2d_prepare(rt_op_ctx *ctx) { return conv_prepare(ctx, false); }

rt_status rt_ops__conv2d_run(rt_op_ctx *ctx) { return conv_run(ctx, false); }

rt_status rt_ops__conv2d_act_prepare(rt_op_ctx *ctx) { return conv_prepare(ctx, true); }

rt_status rt_ops__conv2d_act_run(rt_op_ctx *ctx) { return conv_run(ctx, true); }
