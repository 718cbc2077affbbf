/* params.h: the parameter blocks passed by value to the CUDA kernels. Included by the C host
 * code and by the .cu files, so both sides agree on every field's offset; only fixed-width
 * integers, doubles, floats and pointers appear. */
#ifndef RT_CUDA_PARAMS_H
#define RT_CUDA_PARAMS_H

#include <stdint.h>

#define RT_CUDA_RANK 16 /* RT_MAX_RANK */

/* Element types, numbered as rt_type in tensor.h. */
enum {
    RT_CUDA_F32 = 0, RT_CUDA_F64, RT_CUDA_F16, RT_CUDA_BF16, RT_CUDA_I8, RT_CUDA_I16,
    RT_CUDA_I32, RT_CUDA_I64, RT_CUDA_U8, RT_CUDA_U16, RT_CUDA_U32, RT_CUDA_U64, RT_CUDA_BOOL
};

/* Unary kinds; the formulas are those of ops/elementwise/kernels/unary.c. */
enum {
    RT_CUDA_ABS = 0, RT_CUDA_NEG, RT_CUDA_EXP, RT_CUDA_LOG, RT_CUDA_SQRT, RT_CUDA_RECIPROCAL,
    RT_CUDA_FLOOR, RT_CUDA_CEIL, RT_CUDA_ROUND, RT_CUDA_SIGN, RT_CUDA_SIN, RT_CUDA_COS,
    RT_CUDA_TAN, RT_CUDA_TANH, RT_CUDA_ERF, RT_CUDA_SIGMOID, RT_CUDA_HARD_SIGMOID,
    RT_CUDA_LEAKY_RELU, RT_CUDA_ELU, RT_CUDA_SELU, RT_CUDA_GELU, RT_CUDA_GELU_TANH,
    RT_CUDA_SOFTPLUS, RT_CUDA_SOFTSIGN, RT_CUDA_HARD_SWISH, RT_CUDA_MISH, RT_CUDA_CLIP,
    RT_CUDA_ISNAN, RT_CUDA_ISINF, RT_CUDA_RELU, RT_CUDA_SILU
};

/* Binary kinds. LESS, LESS_EQUAL and EQUAL write bool (one byte); POW, PRELU (a < 0 ?
 * a * b : a) and the MODs (floored, or truncated as fmod) are for floats, AND, OR, XOR and
 * NOT (of a; b unused) for bool, the SHIFTs for the integer types (kernels shift_*). */
enum {
    RT_CUDA_ADD = 0, RT_CUDA_SUB, RT_CUDA_MUL, RT_CUDA_DIV, RT_CUDA_LESS, RT_CUDA_EQUAL,
    RT_CUDA_LESS_EQUAL, RT_CUDA_MIN, RT_CUDA_MAX, RT_CUDA_POW, RT_CUDA_PRELU, RT_CUDA_AND,
    RT_CUDA_OR, RT_CUDA_XOR, RT_CUDA_MOD_FLOOR, RT_CUDA_MOD_TRUNC, RT_CUDA_NOT,
    RT_CUDA_SHIFT_LEFT, RT_CUDA_SHIFT_RIGHT,
    RT_CUDA_POW_MIXED /* host side only: pow with an exponent of another dtype (pow_mixed_*) */
};

/* Fused activations, numbered as rt_fused_activation in ops/fused_activation.h. */
enum {
    RT_CUDA_ACT_NONE = 0, RT_CUDA_ACT_RELU, RT_CUDA_ACT_CLIP, RT_CUDA_ACT_SIGMOID,
    RT_CUDA_ACT_GELU, RT_CUDA_ACT_HARDSWISH, RT_CUDA_ACT_SILU, RT_CUDA_ACT_GELU_TANH
};

/* Reductions, with the rules of ops/reduce/kernels/reduce.c. */
enum {
    RT_CUDA_RSUM = 0, RT_CUDA_RMEAN, RT_CUDA_RPROD, RT_CUDA_RMAX, RT_CUDA_RMIN, RT_CUDA_RL1,
    RT_CUDA_RL2, RT_CUDA_RLOG_SUM, RT_CUDA_RLOG_SUM_EXP, RT_CUDA_RSUM_SQUARE
};

typedef struct rt_cuda_unary_params {
    int64_t n;
    int32_t kind;
    int32_t detect_positive, detect_negative; /* isinf */
    int32_t reserved;
    double alpha, beta; /* hard_sigmoid, leaky_relu, elu, selu (beta = gamma) */
    double lo, hi;      /* clip */
    const void *x;
    void *out;
} rt_cuda_unary_params;

/* abs, neg, sign, relu and clip of an integer x (kernels unary_int_i8 ... _u64), the rules of
 * ops/elementwise/kernels/unary.c: abs and neg wrap (the most negative value maps to itself),
 * unsigned abs is x and sign x != 0. clip's bounds are in x's dtype, held in lo / hi as int64
 * (signed types) or as the bits of a uint64 (unsigned). */
typedef struct rt_cuda_unary_int_params {
    int64_t n;
    int32_t kind; /* RT_CUDA_ABS, _NEG, _SIGN, _RELU or _CLIP */
    int32_t reserved;
    int64_t lo, hi;
    const void *x;
    void *out;
} rt_cuda_unary_int_params;

/* *flag = 1 when one of x's n elements is all zero bits (kernels any_zero_1 ... _8): the
 * integer divisors of div and mod, checked before the division runs. */
typedef struct rt_cuda_any_zero_params {
    int64_t n;
    const void *x;
    int64_t *flag;
} rt_cuda_any_zero_params;

/* out (dense, row-major over sizes) = a op b, each read through its strides (0: broadcast). */
typedef struct rt_cuda_binary_params {
    int64_t n;
    int32_t kind;
    int32_t rank;
    int32_t b_type; /* pow_mixed_*: the exponent's dtype (RT_CUDA_* code); else unused */
    int32_t reserved;
    int64_t sizes[RT_CUDA_RANK];
    int64_t a_strides[RT_CUDA_RANK];
    int64_t b_strides[RT_CUDA_RANK];
    const void *a, *b;
    void *out;
} rt_cuda_binary_params;

/* tile: out (dense, row-major over out_sizes) element at index (i_0, ...) reads x at
 * (i_0 mod x_sizes[0], ...) through x_strides. */
typedef struct rt_cuda_tile_params {
    int64_t n;
    int32_t rank;
    int32_t reserved;
    int64_t out_sizes[RT_CUDA_RANK];
    int64_t x_sizes[RT_CUDA_RANK];
    int64_t x_strides[RT_CUDA_RANK];
    const void *x;
    void *out;
} rt_cuda_tile_params;

/* gather: out element i is (outer, k, j) over [outer, count, inner]; it reads data at
 * (outer, indices[k] (negative: from the end), j) of data viewed as [outer, dim, inner]. */
typedef struct rt_cuda_gather_params {
    int64_t n, count, dim, inner;
    int32_t index_bits; /* 32 or 64 */
    int32_t reserved;
    const void *data, *indices;
    void *out;
} rt_cuda_gather_params;

/* trilu: out element i (dense, [.., rows, cols]) is x's, or zero outside the kept triangle
 * (upper keeps column >= row + k, lower column <= row + k). */
typedef struct rt_cuda_trilu_params {
    int64_t n, rows, cols, k;
    int32_t upper;
    int32_t reserved;
    const void *x;
    void *out;
} rt_cuda_trilu_params;

/* pad: along dimension d, out index i reads x at skip[d] + j, j = i - lead[d]; j outside
 * [0, kept[d]) reads *value (zero when NULL) in mode 0 (constant), else the source of modes 1
 * (reflect), 2 (edge) and 3 (wrap), as ops/movement/pad.c maps it. */
typedef struct rt_cuda_pad_params {
    int64_t n;
    int32_t rank, mode;
    int64_t out_sizes[RT_CUDA_RANK];
    int64_t x_strides[RT_CUDA_RANK];
    int64_t skip[RT_CUDA_RANK], lead[RT_CUDA_RANK], kept[RT_CUDA_RANK];
    const void *x, *value;
    void *out;
} rt_cuda_pad_params;

/* constant_of_shape: out[i] = *value (device) for i < n. eye_like: out[i] = `one` (its bytes)
 * where column == row + k of a [rows, cols] out, else zero. */
typedef struct rt_cuda_fill_params {
    int64_t n, cols, k;
    uint64_t one;
    const void *value; /* NULL: the eye_like pattern */
    void *out;
} rt_cuda_fill_params;

/* one_hot: out viewed as [outer, depth, inner] is values[1] where the position along depth is
 * indices[outer, inner] (negative from depth; out of range or fractional: nowhere), else
 * values[0]. */
typedef struct rt_cuda_one_hot_params {
    int64_t n, depth, inner;
    int32_t index_type; /* RT_CUDA_F32 ... */
    int32_t reserved;
    const void *indices, *values;
    void *out;
} rt_cuda_one_hot_params;

/* cumsum, hardmax and lp_norm over x viewed as [outer, n, inner], one thread per (outer,
 * inner) line; out may be x. cumsum: float32 sums in double, integers wrap (summed in uint64).
 * hardmax: 1 at the first maximum (NaN counts as the maximum), 0 elsewhere. lp_norm: x divided
 * by the line's L1 or L2 norm (p), summed in double in the CPU's order; a zero norm gives 0s. */
typedef struct rt_cuda_scan_params {
    int64_t outer, n, inner;
    int32_t exclusive, reverse;
    int32_t p, reserved;
    const void *x;
    void *out;
} rt_cuda_scan_params;

/* gather_elements: out (dense over out_sizes, indices' sizes) element i reads data at i's
 * position with the axis coordinate replaced by indices[i] (negative: from the end). */
typedef struct rt_cuda_gather_elements_params {
    int64_t n, dim;
    int32_t rank, axis;
    int32_t index_bits; /* 32 or 64 */
    int32_t reserved;
    int64_t out_sizes[RT_CUDA_RANK];
    int64_t data_strides[RT_CUDA_RANK];
    const void *data, *indices;
    void *out;
} rt_cuda_gather_elements_params;

/* scatter_elements after out = data: one thread per line of indices along the axis (`lines`
 * of them; the lines' other coordinates are distinct, so no two threads touch one element),
 * applying its updates in index order as the CPU: replace (reduction 0), add, mul, max, min
 * (1-4). indices and updates are dense over idx_sizes; out over its own strides.
 * scatter_nd (nd = 1): `lines` is the slice length; thread e applies element e of every
 * tuple's slice (tuples of k indices into out's first k dimensions), tuples in order;
 * idx_sizes then holds out's sizes. */
typedef struct rt_cuda_scatter_params {
    int64_t lines, dim;
    int32_t rank, axis;
    int32_t index_bits, reduction;
    int32_t nd, k;
    int64_t tuples;
    int64_t idx_sizes[RT_CUDA_RANK];
    int64_t out_strides[RT_CUDA_RANK];
    const void *indices, *updates;
    void *out;
} rt_cuda_scatter_params;

/* gather_nd: out element i is element i % slice of tuple t = i / slice, which reads data at
 * batch (t / per_batch) * batch_stride plus the k indices of tuple t (negative: from the end)
 * in data's dimensions batch_dims, ..., batch_dims + k - 1. */
typedef struct rt_cuda_gather_nd_params {
    int64_t n, slice, per_batch, batch_stride;
    int32_t k, batch_dims;
    int32_t index_bits; /* 32 or 64 */
    int32_t reserved;
    int64_t data_sizes[RT_CUDA_RANK];
    int64_t data_strides[RT_CUDA_RANK];
    const void *data, *indices;
    void *out;
} rt_cuda_gather_nd_params;

/* topk over x viewed as [outer, n, inner]: one thread per element of x counts the elements
 * of its line that come before it in the CPU's total order (by value, largest or smallest
 * first; NaN first when largest, last when smallest; equal values by the lower index); an
 * element of rank r < k
 * goes to position r of values / indices ([outer, k, inner]). O(n) work per element. */
typedef struct rt_cuda_topk_params {
    int64_t outer, n, inner, k;
    int32_t largest, reserved;
    const void *x;
    void *values, *indices;
} rt_cuda_topk_params;

/* out = cond ? a : b with broadcasting, each read through its strides (0: broadcast). */
typedef struct rt_cuda_where_params {
    int64_t n;
    int32_t rank;
    int32_t reserved;
    int64_t sizes[RT_CUDA_RANK];
    int64_t strides[3][RT_CUDA_RANK]; /* cond, a, b */
    const void *cond, *a, *b;
    void *out;
} rt_cuda_where_params;

/* out[r, c] = act(out[r, c] + row_bias[r] + col_bias[c]) over a [rows, cols] matrix repeated
 * `n / (rows * cols)` times; either bias may be NULL. */
typedef struct rt_cuda_bias_act_params {
    int64_t n, rows, cols;
    int32_t act;
    float lo, hi;
    int32_t reserved;
    const void *row_bias, *col_bias;
    void *out;
} rt_cuda_bias_act_params;

typedef struct rt_cuda_cast_params {
    int64_t n;
    int32_t from, to; /* RT_CUDA_F32 ... */
    const void *x;
    void *out;
} rt_cuda_cast_params;

/* dst (strided) = src (strided), both walked in row-major order of sizes. */
typedef struct rt_cuda_copy_params {
    int64_t n;
    int32_t rank;
    int32_t reserved;
    int64_t sizes[RT_CUDA_RANK];
    int64_t dst_strides[RT_CUDA_RANK];
    int64_t src_strides[RT_CUDA_RANK];
    const void *src;
    void *dst;
} rt_cuda_copy_params;

/* Softmax over x viewed as [outer, n, inner], one block per (outer, inner) column. */
typedef struct rt_cuda_softmax_params {
    int64_t outer, n, inner;
    int32_t log; /* log_softmax */
    int32_t reserved;
    const void *x;
    void *out;
} rt_cuda_softmax_params;

/* Layer norm of `rows` contiguous rows of `len`; scale and bias repeat with their periods. */
typedef struct rt_cuda_layer_norm_params {
    int64_t rows, len, scale_period, bias_period;
    double eps;
    const void *x, *scale, *bias;
    void *out, *mean, *inv_std;
} rt_cuda_layer_norm_params;

/* RMS norm of `rows` contiguous rows of `len`; scale repeats with its period. */
typedef struct rt_cuda_rms_norm_params {
    int64_t rows, len, scale_period;
    double eps;
    const void *x, *scale;
    void *out;
} rt_cuda_rms_norm_params;

/* instance_norm / group_norm: row r is group r % groups of its image, group_channels channels
 * of `spatial` elements; scale and bias hold one value per channel, or per group. */
typedef struct rt_cuda_channel_norm_params {
    int64_t rows, groups, group_channels, spatial;
    double eps;
    int32_t per_group;
    int32_t reserved;
    const void *x, *scale, *bias;
    void *out;
} rt_cuda_channel_norm_params;

/* C[batch] (m x n) = A[batch] (m x k) @ B[batch] (k x n) with any element strides, then the
 * epilogue: + row_bias[i] + col_bias[j], activation. Batch entry b (b = blockIdx.z +
 * batch_offset) is decomposed over batch_sizes to find the A and B offsets. */
typedef struct rt_cuda_gemm_params {
    int64_t m, n, k;
    int64_t a_row_stride, a_col_stride, b_row_stride, b_col_stride, c_row_stride;
    int64_t c_batch_stride;
    int64_t batch_offset;
    int32_t batch_rank;
    int32_t act;
    float lo, hi;
    int64_t batch_sizes[RT_CUDA_RANK];
    int64_t a_batch_strides[RT_CUDA_RANK];
    int64_t b_batch_strides[RT_CUDA_RANK];
    const void *a, *b, *row_bias, *col_bias;
    void *c;
} rt_cuda_gemm_params;

/* Output element o (row-major over the kept dimensions) reduces the n_red elements of x at
 * offset(o over kept_sizes / kept_strides) + offset(r over red_sizes / red_strides). */
typedef struct rt_cuda_reduce_params {
    int64_t n_out, n_red;
    int32_t op, kept_rank, red_rank, reserved;
    int64_t kept_sizes[RT_CUDA_RANK];
    int64_t kept_strides[RT_CUDA_RANK];
    int64_t red_sizes[RT_CUDA_RANK];
    int64_t red_strides[RT_CUDA_RANK];
    const void *x;
    void *out;
} rt_cuda_reduce_params;

/* argmax / argmin over x viewed as [outer, n, inner]: out[o * inner + i] (int64) is the
 * position along n of the largest (smallest) element; NaN counts as the extreme; ties go to
 * the first position, or the last with `last`. */
typedef struct rt_cuda_arg_params {
    int64_t outer, n, inner;
    int32_t last, smallest;
    const void *x;
    void *out;
} rt_cuda_arg_params;

typedef struct rt_cuda_conv_params {
    int64_t batch, channels, height, width;
    int64_t out_channels, kernel_h, kernel_w, out_h, out_w, groups;
    int64_t stride[2], dilation[2], pad[4]; /* pad: top, left, bottom, right */
    int32_t act;
    float lo, hi;
    int32_t reserved;
    const void *x, *w, *bias;
    void *out;
} rt_cuda_conv_params;

typedef struct rt_cuda_pool_params {
    int64_t planes, height, width, out_h, out_w;
    int64_t kernel[2], stride[2], dilation[2], pad[4];
    int32_t count_include_pad;
    int32_t reserved;
    const void *x;
    void *out;
} rt_cuda_pool_params;

/* resize: out (dense, row-major over out_sizes) from the host-built tables of ops/movement/resize.h,
 * whose per-dimension parts start at the given int64 indices of `table`. Nearest (kernels
 * resize_nearest_*) reads one tap and writes `fill` where a dimension is outside; linear and
 * cubic (resize_f32 / _f64) sum the products of every dimension's taps in double. */
typedef struct rt_cuda_resize_params {
    int64_t n;
    int32_t rank;
    int32_t reserved;
    int64_t out_sizes[RT_CUDA_RANK];
    int64_t taps[RT_CUDA_RANK];
    int64_t offsets_at[RT_CUDA_RANK], weights_at[RT_CUDA_RANK], outside_at[RT_CUDA_RANK];
    double extrapolation;
    uint64_t fill; /* nearest: the fill element's bits, in its low bytes */
    const int64_t *table;
    const void *x;
    void *out;
} rt_cuda_resize_params;

/* lstm, gru, rnn: one step's cell arithmetic for one direction, one thread per (batch entry,
 * hidden unit), the rules of ops/rnn/kernels/cells_f32.c. proj [rows, gates * hidden] holds X @
 * W^T of every step (rows in x's order), rec [batch, rec_stride] H' @ R^T (gru phase 1: only z and
 * r; afterwards z), rec2 [batch, hidden] gru's (r * H') @ Rh^T; h, c, tmp are [batch, hidden].
 * Kernels: rnn_init (states from initial_h / c or zero), rnn_step (phase 0: the whole step; gru
 * without linear_before_reset: 1 = z, r and tmp = r * H', 2 = the rest), rnn_final (y_h, y_c). */
typedef struct rt_cuda_rnn_params {
    int64_t batch, hidden, seq, dirs, d, s, rec_stride;
    int32_t cell, phase, layout, reverse, input_forget, linear_before_reset;
    int32_t act_kind[3];
    float act_alpha[3], act_beta[3];
    float clip; /* 0: none */
    const float *proj;
    const float *bias; /* this direction's [2 * gates * hidden]: Wb then Rb, or NULL */
    const float *p;    /* this direction's peepholes [3 * hidden] (i, o, f), or NULL */
    const float *h0, *c0;
    const int64_t *lens; /* [batch] */
    float *rec, *rec2, *h, *c, *tmp;
    float *y, *y_h, *y_c; /* y_c: lstm only */
} rt_cuda_rnn_params;

/* non_zero over x (n elements, dense, row-major over sizes), in one block of 256 threads,
 * each owning a contiguous chunk: non_zero_count writes each chunk's count of nonzero elements
 * as its exclusive prefix into chunks[thread] and the total into chunks[256];
 * non_zero_write (count = that total) writes the indices, out [rank, count]. kind says what
 * is zero: 0 all bits zero, 1 float32 == 0, 2 float64 == 0, 3 float16 / bfloat16 (+-0). */
#define RT_CUDA_NON_ZERO_CHUNKS 256 /* the threads of the one block (every launch has 256) */

typedef struct rt_cuda_non_zero_params {
    int64_t n, count;
    int32_t rank, kind;
    int32_t elem_size, reserved;
    int64_t sizes[RT_CUDA_RANK];
    int64_t *chunks;
    const void *x;
    int64_t *out;
} rt_cuda_non_zero_params;

/* unique, the rules of ops/generate/kernels/unique.c, on one thread: x as [outer, n, inner];
 * kind says how elements compare (0 float32, 1 float64, 2 signed, 3 unsigned or bool, of
 * elem_size bytes); scratch holds 5 * n int64 and, after them, the number of groups, which
 * the host reads back. */
typedef struct rt_cuda_unique_params {
    int64_t outer, n, inner;
    int32_t kind, elem_size;
    int32_t sorted, reserved;
    const void *x;
    void *y;
    int64_t *indices, *inverse, *counts, *scratch;
} rt_cuda_unique_params;

/* non_max_suppression, the rules of ops/detection/kernels/nms_f32.c, in one block: each
 * thread selects for (batch, class) pairs thread, thread + 256, ... into kept[pair * count]
 * (taken[pair * count] marks the boxes it has visited) and counts[pair]; then thread 0 writes
 * the rows (batch, class, box) of every pair in order into out and their total into
 * counts[pairs]. */
typedef struct rt_cuda_nms_params {
    int64_t batches, classes, count, max_per_class;
    float iou_threshold, score_threshold;
    int32_t has_score_threshold, center;
    const float *boxes, *scores;
    int64_t *counts, *kept;
    unsigned char *taken;
    int64_t *out;
} rt_cuda_nms_params;

/* quantize_linear (quantize 1) and dequantize_linear (0), the rules of ops/quant/quant.c and
 * ops/quant/kernels/quantize.c: x viewed as [outer, length, inner] around the quantization axis;
 * a parameter is single (one element) or indexed by the axis position (block 0) or by (outer,
 * axis position / block, inner) with `blocks` blocks. float_type and int_type are RT_CUDA_*
 * codes; zero may be NULL. */
typedef struct rt_cuda_quant_params {
    int64_t n, outer, length, inner, block, blocks;
    int64_t lo, hi; /* the integer type's range */
    int32_t quantize, float_type, int_type, scale_single, zero_single, reserved;
    const void *x, *scale, *zero;
    void *out;
} rt_cuda_quant_params;

/* dynamic_quantize_linear's range pass (kernel quant_range, one block): lo = min(0, min x),
 * hi = max(0, max x) skipping NaN, then y_scale and y_zero_point in float32 as the CPU. */
typedef struct rt_cuda_quant_range_params {
    int64_t n;
    const float *x;
    float *scale;
    uint8_t *zero;
} rt_cuda_quant_range_params;

/* A zero point or scale of qmatmul: element (batch, row or column j) at
 * data[sum(batch index * batch_strides) + j * stride] (ops/quant/quant.h's rt_quant_mm_param). */
typedef struct rt_cuda_qparam {
    const void *data; /* NULL: absent (0) */
    int32_t type;
    int32_t reserved;
    int64_t stride;
    int64_t batch_strides[RT_CUDA_RANK];
} rt_cuda_qparam;

/* matmul_integer (requant 0: int32 out) and qlinear_matmul (requant 1), one thread per output
 * element: sum over k of (a - za) * (b - zb), wrapping in 32 bits, then requantized with
 * (sa * sb) / y_scale computed in the scales' type. */
typedef struct rt_cuda_qmatmul_params {
    int64_t m, n, k, batch_count;
    int32_t batch_rank, a_type, b_type, out_type, scale_type, requant;
    int64_t batch_sizes[RT_CUDA_RANK];
    int64_t a_batch_strides[RT_CUDA_RANK], b_batch_strides[RT_CUDA_RANK];
    rt_cuda_qparam za, zb, sa, sb;
    int64_t y_zero, lo, hi;
    const void *a, *b, *y_scale;
    void *out;
} rt_cuda_qmatmul_params;

/* conv_integer (requant 0) and qlinear_conv (requant 1), one thread per output element; taps
 * in the padding contribute nothing; w's zero point and scale are per tensor or per output
 * channel; qlinear_conv adds bias[o] (wrapping) before requantizing. */
typedef struct rt_cuda_qconv_params {
    int64_t batch, channels, height, width, out_channels, kernel_h, kernel_w, out_h, out_w;
    int64_t groups, stride[2], dilation[2], pad[4];
    int32_t x_type, w_type, scale_type, out_type, requant, x_zero;
    int32_t w_zero_type, w_zero_per_channel, w_scale_per_channel, reserved;
    int64_t y_zero, lo, hi;
    const void *x, *w, *w_zero, *x_scale, *w_scale, *y_scale;
    const int32_t *bias;
    void *out;
} rt_cuda_qconv_params;

/* attention, one block per query row (ops/attention/attention.h has the job it mirrors):
 * strides are batch, head, position; mask_strides over [B, Hq, Sq, Skv], 0 where broadcast;
 * lengths (int32 or int64, checked on the host) NULL or one per batch row (stride 0: shared). */
typedef struct rt_cuda_attention_params {
    int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
    int64_t qs[3], ks[3], vs[3], os[3];
    int64_t mask_strides[4], mask_len, lengths_stride;
    double scale, softcap;
    int32_t causal, mask_is_bool, lengths_are_i32, reserved;
    const void *q, *k, *v, *mask, *lengths;
    void *out;
} rt_cuda_attention_params;

/* rotary, one thread per element of x: rows (of `dim`) are [B, H, S] or [B, S, H] in memory,
 * pos_stride rows apart per position; the tables [1 or B, S, rotated] (table_batched 0 or 1). */
typedef struct rt_cuda_rotary_params {
    int64_t rows, heads, seq, dim, rotated, pos_stride;
    int32_t interleaved, table_batched;
    const void *x, *cos, *sin;
    void *out;
} rt_cuda_rotary_params;

#endif
