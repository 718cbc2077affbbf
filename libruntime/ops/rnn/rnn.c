/* rnn.c: the recurrent layers lstm, gru and rnn (ONNX LSTM, GRU, RNN), float32: arguments,
 * checks and output shapes; the computation is in kernels/cells_f32.c.
 *
 *   lstm(x, w, r, b, sequence_lens, initial_h, initial_c, p, direction, layout, activations,
 *        activation_params, clip, input_forget, y, y_h, y_c)
 *   gru(x, w, r, b, sequence_lens, initial_h, direction, layout, activations,
 *       activation_params, clip, linear_before_reset, y, y_h)
 *   rnn(x, w, r, b, sequence_lens, initial_h, direction, layout, activations,
 *       activation_params, clip, y, y_h)
 *
 * b, sequence_lens, initial_h, initial_c and p may be none. Every output is always computed. */
#include <inttypes.h>
#include <math.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"
#include "ops/rnn/rnn.h"

/* Gates per cell (rows of w per direction, in units of hidden) and activations per
 * direction. */
static const int64_t cell_gates[] = {1, 3, 4};
static const size_t cell_acts[] = {1, 2, 3};

/* activations (int list: kinds) and activation_params (double list: alpha, beta per
 * activation), one set per direction. */
static rt_status parse_activations(rt_op_ctx *ctx, rt_rnn_args *a, size_t index) {
    const int64_t *kinds = NULL;
    const double *params = NULL;
    size_t count = 0, nparams = 0, per = cell_acts[a->cell];
    RT_RETURN_IF_ERROR(rt_op__int_list(ctx, index, "activations", &kinds, &count));
    RT_RETURN_IF_ERROR(rt_op__double_list(ctx, index + 1, "activation_params", &params,
                                          &nparams));
    if (count != per * (size_t)a->dirs)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "activations has %zu items; this cell with %" PRId64
                           " direction(s) needs %zu",
                           count, a->dirs, per * (size_t)a->dirs);
    if (nparams != 2 * count)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "activation_params has %zu items; it needs 2 (alpha, beta) per "
                           "activation, %zu",
                           nparams, 2 * count);
    for (size_t i = 0; i < count; i++) {
        if (kinds[i] < 0 || kinds[i] >= RT_RNN_ACT_COUNT)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "activations item %zu is %" PRId64
                               ", not a known activation (0 to %d)", i, kinds[i],
                               RT_RNN_ACT_COUNT - 1);
        if (!isfinite(params[2 * i]) || !isfinite(params[2 * i + 1]))
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "activation_params of activation %zu must be finite", i);
        a->acts[i / per][i % per] =
            (rt_rnn_act){(int32_t)kinds[i], (float)params[2 * i], (float)params[2 * i + 1]};
    }
    return RT_OK;
}

/* The scalar parameters after the optional inputs. */
static rt_status parse_params(rt_op_ctx *ctx, rt_rnn_args *a, size_t index) {
    double clip;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, index, "direction", &a->direction));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, index + 1, "layout", &a->layout));
    if (a->direction < 0 || a->direction > 2)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "direction must be 0 (forward), 1 (reverse) "
                           "or 2 (bidirectional), not %" PRId64, a->direction);
    if (a->layout != 0 && a->layout != 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "layout must be 0 or 1, not %" PRId64,
                           a->layout);
    a->dirs = a->direction == 2 ? 2 : 1;
    RT_RETURN_IF_ERROR(parse_activations(ctx, a, index + 2));
    RT_RETURN_IF_ERROR(rt_op__double(ctx, index + 4, "clip", &clip));
    if (!(clip >= 0.0) || !isfinite(clip))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "clip must be a finite threshold > 0, or 0 for none, not %g", clip);
    a->clip = (float)clip;
    a->input_forget = a->linear_before_reset = false;
    if (a->cell == RT_RNN_CELL_LSTM)
        return rt_op__bool(ctx, index + 5, "input_forget", &a->input_forget);
    if (a->cell == RT_RNN_CELL_GRU)
        return rt_op__bool(ctx, index + 5, "linear_before_reset", &a->linear_before_reset);
    return RT_OK;
}

typedef struct named {
    rt_tensor_value *t;
    const char *what;
    int32_t rank;
} named;

/* Dtype, rank, layout and aliasing of every tensor present. */
static rt_status check_tensors(rt_op_ctx *ctx, const rt_rnn_args *a) {
    const named ins[] = {{a->x, "x", 3}, {a->w, "w", 3},          {a->r, "r", 3},
                         {a->b, "b", 2}, {a->h0, "initial_h", 3}, {a->c0, "initial_c", 3},
                         {a->p, "p", 2}, {a->seq_lens, "sequence_lens", 1}};
    const named outs[] = {{a->y, "y", 4}, {a->y_h, "y_h", 3}, {a->y_c, "y_c", 3}};
    const size_t nins = sizeof ins / sizeof ins[0], nouts = sizeof outs / sizeof outs[0];
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, a->x, "x", RT_TYPE_BIT(RT_F32), "float32"));
    for (size_t i = 0; i < nins; i++) {
        if (!ins[i].t)
            continue;
        if (i + 1 < nins)
            RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, ins[i].t, ins[i].what, a->x, "x"));
        else
            RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, ins[i].t, ins[i].what, RT_TYPES_INDEX,
                                                    "int32 or int64"));
        RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, ins[i].t, ins[i].what, ins[i].rank));
        RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, ins[i].t, ins[i].what));
    }
    for (size_t o = 0; o < nouts; o++) {
        if (!outs[o].t)
            continue;
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, outs[o].t, outs[o].what, a->x, "x"));
        RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, outs[o].t, outs[o].what, outs[o].rank));
        RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, outs[o].t, outs[o].what));
        RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, outs[o].t, outs[o].what));
        for (size_t i = 0; i < nins; i++)
            if (ins[i].t)
                RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, outs[o].t, outs[o].what, ins[i].t,
                                                         ins[i].what));
        for (size_t k = 0; k < o; k++)
            if (outs[k].t)
                RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, outs[o].t, outs[o].what,
                                                         outs[k].t, outs[k].what));
    }
    return RT_OK;
}

/* Fails unless t (when present) has the sizes `want`. */
static rt_status check_shape(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                             const int64_t *want, const char *form) {
    if (!t)
        return RT_OK;
    for (int32_t d = 0; d < t->rank; d++) {
        if (t->sizes[d] == want[d])
            continue;
        char got[RT_OP_SHAPE_TEXT], need[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "%s has shape %s; it must be %s = %s", what,
                           rt_op__shape_text(t->sizes, t->rank, got), form,
                           rt_op__shape_text(want, t->rank, need));
    }
    return RT_OK;
}

/* Sizes from x and w, every input's shape against them, and the outputs' sizes. */
static rt_status check_shapes(rt_op_ctx *ctx, rt_rnn_args *a) {
    const int64_t *xs = a->x->sizes, *ws = a->w->sizes;
    int64_t gates = cell_gates[a->cell];
    a->gates = gates;
    a->seq = a->layout == 0 ? xs[0] : xs[1];
    a->batch = a->layout == 0 ? xs[1] : xs[0];
    a->input = xs[2];
    if (ws[1] % gates != 0) {
        char t[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "w has shape %s; its dimension 1 must be "
                           "%" PRId64 " * hidden_size", rt_op__shape_text(ws, 3, t), gates);
    }
    int64_t n = ws[1] / gates, gh = ws[1], d = a->dirs, b = a->batch;
    a->hidden = n;
    const int64_t w_want[] = {d, gh, a->input}, r_want[] = {d, gh, n}, b_want[] = {d, 2 * gh};
    const int64_t p_want[] = {d, 3 * n}, len_want[] = {b};
    const int64_t state0[] = {d, b, n}, state1[] = {b, d, n};
    const int64_t *state = a->layout == 0 ? state0 : state1;
    const char *state_form = a->layout == 0 ? "[directions, batch, hidden]"
                                            : "[batch, directions, hidden]";
    RT_RETURN_IF_ERROR(check_shape(ctx, a->w, "w", w_want, "[directions, gates * hidden, "
                                   "input]"));
    RT_RETURN_IF_ERROR(check_shape(ctx, a->r, "r", r_want, "[directions, gates * hidden, "
                                   "hidden]"));
    RT_RETURN_IF_ERROR(check_shape(ctx, a->b, "b", b_want, "[directions, 2 * gates * hidden]"));
    RT_RETURN_IF_ERROR(check_shape(ctx, a->p, "p", p_want, "[directions, 3 * hidden]"));
    RT_RETURN_IF_ERROR(check_shape(ctx, a->seq_lens, "sequence_lens", len_want, "[batch]"));
    RT_RETURN_IF_ERROR(check_shape(ctx, a->h0, "initial_h", state, state_form));
    RT_RETURN_IF_ERROR(check_shape(ctx, a->c0, "initial_c", state, state_form));
    const int64_t y0[] = {a->seq, d, b, n}, y1[] = {b, a->seq, d, n};
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, a->y, "y", 4, a->layout == 0 ? y0 : y1));
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, a->y_h, "y_h", 3, state));
    if (a->y_c)
        RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, a->y_c, "y_c", 3, state));
    return RT_OK;
}

rt_status rt_rnn__setup(rt_op_ctx *ctx, rt_rnn_args *a, rt_rnn_cell cell) {
    bool lstm = cell == RT_RNN_CELL_LSTM;
    size_t params = lstm ? 8 : 6, outs = params + (cell == RT_RNN_CELL_RNN ? 5 : 6);
    *a = (rt_rnn_args){.cell = cell};
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, outs + (lstm ? 3 : 2)));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "w", &a->w));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "r", &a->r));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 3, "b", &a->b));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 4, "sequence_lens", &a->seq_lens));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 5, "initial_h", &a->h0));
    if (lstm) {
        RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 6, "initial_c", &a->c0));
        RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 7, "p", &a->p));
    }
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, outs, "y", &a->y));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, outs + 1, "y_h", &a->y_h));
    if (lstm)
        RT_RETURN_IF_ERROR(rt_op__tensor(ctx, outs + 2, "y_c", &a->y_c));
    RT_RETURN_IF_ERROR(parse_params(ctx, a, params));
    if (ctx->preparing)
        RT_RETURN_IF_ERROR(check_tensors(ctx, a));
    return check_shapes(ctx, a);
}

static rt_status rnn_prepare(rt_op_ctx *ctx, rt_rnn_cell cell) {
    rt_rnn_args a;
    RT_RETURN_IF_ERROR(rt_rnn__setup(ctx, &a, cell));
    if (!rt_rnn__scratch_bytes(&a, rt_threadpool__hardware_threads(), &ctx->scratch_bytes))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "the working memory for seq %" PRId64
                           ", batch %" PRId64 " and hidden %" PRId64 " overflows",
                           a.seq, a.batch, a.hidden);
    return RT_OK;
}

rt_status rt_rnn__check_lengths(rt_op_ctx *ctx, const rt_rnn_args *a, const void *lens) {
    for (int64_t b = 0; a->seq_lens && b < a->batch; b++) {
        int64_t len = a->seq_lens->type == RT_I32 ? ((const int32_t *)lens)[b]
                                                  : ((const int64_t *)lens)[b];
        if (len < 0 || len > a->seq)
            return rt_op__fail(ctx, RT_INVALID_ARGUMENT, "sequence_lens[%" PRId64 "] is %" PRId64
                               ", outside [0, %" PRId64 "] (the sequence length of x)",
                               b, len, a->seq);
    }
    return RT_OK;
}

static rt_status rnn_run(rt_op_ctx *ctx, rt_rnn_cell cell) {
    rt_rnn_args a;
    size_t need;
    RT_RETURN_IF_ERROR(rt_rnn__setup(ctx, &a, cell));
    RT_RETURN_IF_ERROR(rt_rnn__check_lengths(ctx, &a, a.seq_lens ? a.seq_lens->data : NULL));
    /* The current sizes never exceed the planned ones; this guards the arithmetic anyway. */
    if (!rt_rnn__scratch_bytes(&a, rt_op__slot_threads(ctx), &need) || need > ctx->scratch_bytes)
        return rt_op__fail(ctx, RT_INVALID_ARGUMENT, "the working memory for these sizes exceeds "
                           "the planned %zu bytes", ctx->scratch_bytes);
    rt_rnn__run(ctx, &a, rt_op__slot_threads(ctx));
    return RT_OK;
}

rt_status rt_ops__lstm_prepare(rt_op_ctx *ctx) { return rnn_prepare(ctx, RT_RNN_CELL_LSTM); }

rt_status rt_ops__lstm_run(rt_op_ctx *ctx) { return rnn_run(ctx, RT_RNN_CELL_LSTM); }

rt_status rt_ops__gru_prepare(rt_op_ctx *ctx) { return rnn_prepare(ctx, RT_RNN_CELL_GRU); }

rt_status rt_ops__gru_run(rt_op_ctx *ctx) { return rnn_run(ctx, RT_RNN_CELL_GRU); }

rt_status rt_ops__rnn_prepare(rt_op_ctx *ctx) { return rnn_prepare(ctx, RT_RNN_CELL_RNN); }

rt_status rt_ops__rnn_run(rt_op_ctx *ctx) { return rnn_run(ctx, RT_RNN_CELL_RNN); }
