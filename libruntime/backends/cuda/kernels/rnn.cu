// rnn.cu: the cell arithmetic of lstm, gru and rnn (ops/rnn/kernels/cells_f32.c's rules), one
// thread per (batch entry, hidden unit) of one direction; the products around it are GEMMs launched
// by the host at every step (backends/cuda/cuda_ops_rnn.c).
#include "common.cuh"

enum { RNN_CELL = 0, GRU_CELL = 1, LSTM_CELL = 2 };

// ops/rnn/rnn.h's activation kinds.
__device__ inline float rnn_act(int kind, float al, float be, float x) {
    switch (kind) {
    case 0: return 1.0f / (1.0f + expf(-x));
    case 1: return tanhf(x);
    case 2: return x > 0.0f ? x : 0.0f;
    case 3: {
        float v = al * x + be;
        return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
    }
    case 4: return x >= 0.0f ? x : al * x;
    case 5: return x > al ? x : 0.0f;
    case 6: return al * tanhf(be * x);
    case 7: return al * x + be;
    case 8: return x >= 0.0f ? x : al * (expf(x) - 1.0f);
    case 9: return x / (1.0f + fabsf(x));
    case 10: return x > 30.0f ? x : log1pf(expf(x));
    default: return x;
    }
}

// Clip, then activation k of the direction: ONNX clips every gate's input.
__device__ inline float rnn_gate(const rt_cuda_rnn_params &p, int k, float x) {
    if (p.clip > 0.0f)
        x = x < -p.clip ? -p.clip : x > p.clip ? p.clip : x;
    return rnn_act(p.act_kind[k], p.act_alpha[k], p.act_beta[k], x);
}

__device__ inline int64_t rnn_state_offset(const rt_cuda_rnn_params &p, int64_t b) {
    return (p.layout == 0 ? p.d * p.batch + b : b * p.dirs + p.d) * p.hidden;
}

extern "C" __global__ void rt_k_rnn_init(rt_cuda_rnn_params p) {
    RT_GRID_LOOP(i, p.batch * p.hidden) {
        int64_t b = i / p.hidden, j = i % p.hidden, at = rnn_state_offset(p, b) + j;
        p.h[i] = p.h0 ? p.h0[at] : 0.0f;
        p.c[i] = p.c0 ? p.c0[at] : 0.0f;
    }
}

// An entry of length 0 gets zero states, as onnxruntime gives.
extern "C" __global__ void rt_k_rnn_final(rt_cuda_rnn_params p) {
    RT_GRID_LOOP(i, p.batch * p.hidden) {
        int64_t b = i / p.hidden, j = i % p.hidden, at = rnn_state_offset(p, b) + j;
        bool empty = p.lens[b] == 0;
        p.y_h[at] = empty ? 0.0f : p.h[i];
        if (p.y_c)
            p.y_c[at] = empty ? 0.0f : p.c[i];
    }
}

extern "C" __global__ void rt_k_rnn_step(rt_cuda_rnn_params p) {
    const int64_t n = p.hidden, gh = (p.cell == LSTM_CELL ? 4 : p.cell == GRU_CELL ? 3 : 1) * n;
    RT_GRID_LOOP(i, p.batch * n) {
        int64_t b = i / n, j = i % n;
        if (p.s >= p.lens[b]) { // this entry's sequence has ended: its state stays
            if (p.phase == 1)
                p.tmp[i] = 0.0f; // the next product reads every row
            continue;
        }
        int64_t t = p.reverse ? p.lens[b] - 1 - p.s : p.s;
        const float *x = p.proj + (p.layout == 0 ? t * p.batch + b : b * p.seq + t) * gh;
        float *g = p.rec + b * p.rec_stride;
        const float *wb = p.bias, *rb = p.bias ? p.bias + gh : nullptr;
        // The projection plus both biases of gate column col.
        auto in = [&](int64_t col) { return x[col] + (wb ? wb[col] + rb[col] : 0.0f); };
        float h = p.h[i];
        if (p.cell == RNN_CELL) {
            h = rnn_gate(p, 0, g[j] + in(j));
        } else if (p.cell == LSTM_CELL) {
            float c = p.c[i];
            float gi = g[j] + in(j), go = g[n + j] + in(n + j);
            float gf = g[2 * n + j] + in(2 * n + j), gc = g[3 * n + j] + in(3 * n + j);
            if (p.p)
                gi += p.p[j] * c;
            gi = rnn_gate(p, 0, gi);
            if (p.input_forget) {
                gf = 1.0f - gi;
            } else {
                if (p.p)
                    gf += p.p[2 * n + j] * c;
                gf = rnn_gate(p, 0, gf);
            }
            gc = rnn_gate(p, 1, gc);
            c = gf * c + gi * gc;
            if (p.p)
                go += p.p[n + j] * c;
            go = rnn_gate(p, 0, go);
            h = go * rnn_act(p.act_kind[2], p.act_alpha[2], p.act_beta[2], c);
            p.c[i] = c;
        } else if (p.phase == 1) { // gru: z and r; z stays in rec for phase 2
            float z = rnn_gate(p, 0, g[j] + in(j)), r = rnn_gate(p, 0, g[n + j] + in(n + j));
            g[j] = z;
            p.tmp[i] = r * h;
            continue;
        } else if (p.phase == 2) {
            float z = g[j];
            float hh = rnn_gate(p, 1, in(2 * n + j) + p.rec2[i]);
            h = (1.0f - z) * hh + z * h;
        } else { // gru with linear_before_reset: Rbh inside the reset
            float z = rnn_gate(p, 0, g[j] + in(j)), r = rnn_gate(p, 0, g[n + j] + in(n + j));
            float rbh = rb ? rb[2 * n + j] : 0.0f;
            float wx = x[2 * n + j] + (wb ? wb[2 * n + j] : 0.0f);
            float hh = rnn_gate(p, 1, wx + r * (g[2 * n + j] + rbh));
            h = (1.0f - z) * hh + z * h;
        }
        p.h[i] = h;
        int64_t y = p.layout == 0 ? (t * p.dirs + p.d) * p.batch + b
                                  : (b * p.seq + t) * p.dirs + p.d;
        p.y[y * n + j] = h;
    }
}
