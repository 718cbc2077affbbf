/* rnn.h: the recurrent layers lstm, gru and rnn (ONNX LSTM, GRU, RNN), shared by rnn.c
 * (arguments and checks) and kernels/cells_f32.c (the computation), and by the CUDA backend
 * (backends/cuda/cuda_ops_rnn.c). float32 only. */
#ifndef RT_OPS_RNN_H
#define RT_OPS_RNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/op_util.h"

typedef enum rt_rnn_cell { RT_RNN_CELL_RNN = 0, RT_RNN_CELL_GRU, RT_RNN_CELL_LSTM } rt_rnn_cell;

/* Activation kinds of the `activations` argument (ONNX's names and defaults). */
typedef enum rt_rnn_act_kind {
    RT_RNN_ACT_SIGMOID = 0,
    RT_RNN_ACT_TANH = 1,
    RT_RNN_ACT_RELU = 2,
    RT_RNN_ACT_HARD_SIGMOID = 3,     /* max(0, min(1, alpha * x + beta)) */
    RT_RNN_ACT_LEAKY_RELU = 4,       /* x >= 0 ? x : alpha * x */
    RT_RNN_ACT_THRESHOLDED_RELU = 5, /* x > alpha ? x : 0 */
    RT_RNN_ACT_SCALED_TANH = 6,      /* alpha * tanh(beta * x) */
    RT_RNN_ACT_AFFINE = 7,           /* alpha * x + beta */
    RT_RNN_ACT_ELU = 8,              /* x >= 0 ? x : alpha * (exp(x) - 1) */
    RT_RNN_ACT_SOFTSIGN = 9,         /* x / (1 + |x|) */
    RT_RNN_ACT_SOFTPLUS = 10,        /* log(1 + exp(x)) */
    RT_RNN_ACT_COUNT
} rt_rnn_act_kind;

typedef struct rt_rnn_act {
    int32_t kind;
    float alpha, beta;
} rt_rnn_act;

/* Activations per direction: lstm f, g, h; gru f, g; rnn f. */
#define RT_RNN_MAX_ACTS 3

typedef struct rt_rnn_args {
    rt_rnn_cell cell;
    rt_tensor_value *x, *w, *r, *b, *seq_lens, *h0, *c0, *p; /* b .. p may be NULL */
    rt_tensor_value *y, *y_h, *y_c;                          /* y_c: lstm only */
    int64_t direction; /* 0 forward, 1 reverse, 2 bidirectional */
    int64_t layout;    /* 0: x [seq, batch, input]; 1: x [batch, seq, input] */
    rt_rnn_act acts[2][RT_RNN_MAX_ACTS];
    float clip; /* 0: none */
    bool input_forget, linear_before_reset;
    int64_t seq, batch, input, hidden, dirs, gates; /* current sizes */
} rt_rnn_args;

/* The arguments of a `cell` instruction for the current sizes, checked (dtypes, ranks and
 * aliasing only while preparing), out's sizes set; reads no tensor contents. */
rt_status rt_rnn__setup(rt_op_ctx *ctx, rt_rnn_args *a, rt_rnn_cell cell);

/* Fails naming the item unless every sequence_lens item (read from `lens`, a host copy of
 * a->seq_lens's elements) lies in [0, seq]. */
rt_status rt_rnn__check_lengths(rt_op_ctx *ctx, const rt_rnn_args *a, const void *lens);

/* Scratch bytes for the sizes in `a` (the bounds, in prepare) with up to `threads` threads;
 * false when the size overflows. */
bool rt_rnn__scratch_bytes(const rt_rnn_args *a, int32_t threads, size_t *out);

/* Compute y, y_h (and y_c) into their current sizes. sequence_lens, when given, must already
 * be checked to lie in [0, seq]. */
void rt_rnn__run(const rt_op_ctx *ctx, const rt_rnn_args *a, int32_t threads);

#endif
