/* attention.h: scaled dot-product attention in one pass (attention.c is the operator): the
 * kernels (kernels/) take a job that says where every row of q, k, v, the mask and out is, and
 * never form the whole score matrix. */
#ifndef RT_OPS_ATTENTION_H
#define RT_OPS_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/* The `layout` bits: which of q, k, v and out are [B, S, H, D] (heads inside the sequence, as
 * a linear layer's output reshapes to) instead of [B, H, S, D]. */
enum {
    RT_ATTN_Q_SEQ_MAJOR = 1,
    RT_ATTN_K_SEQ_MAJOR = 2,
    RT_ATTN_V_SEQ_MAJOR = 4,
    RT_ATTN_OUT_SEQ_MAJOR = 8,
    RT_ATTN_LAYOUT_BITS = 15
};

/* `causal`: none; query i sees keys j <= i (top-left, torch's is_causal); or the queries are
 * the last Sq of the row's L keys, query i sees j <= i + L - Sq (bottom-right, a KV cache). */
enum { RT_ATTN_NOT_CAUSAL = 0, RT_ATTN_CAUSAL_TOP_LEFT = 1, RT_ATTN_CAUSAL_BOTTOM_RIGHT = 2 };

/* Strides (elements) of a [B, H, S, D]-indexed view: batch, head, position; the last dimension
 * is contiguous. */
typedef struct rt_attn_view {
    int64_t b, h, s;
} rt_attn_view;

typedef struct rt_attn_job {
    const void *q, *k, *v;
    void *out;
    rt_attn_view qs, ks, vs, os;
    int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
    /* mask: NULL, or a float mask (added to the scores) or a bool one (false masks); its
     * strides over [B, H, Sq, Skv] are 0 along broadcast dimensions, and keys from mask_len on
     * are masked. */
    const void *mask;
    bool mask_is_bool;
    int64_t mask_strides[4];
    int64_t mask_len;
    /* kv_lengths: NULL, or one length per batch row (int64, already checked in [0, kv_len]);
     * keys from it on are masked. */
    const int64_t *kv_lengths;
    int64_t kv_lengths_stride; /* 0 when one length serves every row */
    double scale, softcap;     /* softcap 0: none */
    int causal;
    /* Work split: items are (batch, kv head, tile of `tile_queries` queries), each over the
     * group of q heads that share the kv head. */
    int64_t tile_queries;
    void *scratch;
    size_t slot_bytes;  /* scratch per thread slot */
    int64_t slot_rows;  /* tile rows a slot has room for */
} rt_attn_job;

/* Rows of a tile: every q head of a group, each with up to tile_queries queries. */
#define RT_ATTN_TILE_ROWS 128
/* Keys per block of the online softmax. */
#define RT_ATTN_KEY_BLOCK 256

/* Queries per tile for a group of `group` q heads per kv head. */
static inline int64_t rt_attn__tile_queries(int64_t group, int64_t q_len) {
    int64_t t = group < RT_ATTN_TILE_ROWS ? RT_ATTN_TILE_ROWS / group : 1;
    return t < q_len ? t : (q_len > 0 ? q_len : 1);
}

/* Scratch bytes per thread slot for a job of these (bound) sizes. */
size_t rt_attn__f32_slot_bytes(int64_t rows, int64_t head_dim, int64_t v_dim);
size_t rt_attn__f64_slot_bytes(int64_t rows, int64_t head_dim, int64_t v_dim);

/* Run the job on up to `threads` threads (scratch holds that many slots). */
/* The float32 kernel's instruction set: "avx512", "avx2" or "portable". */
const char *rt_attn__f32_variant(void);
void rt_attn__f32(const rt_attn_job *job, int32_t threads);
void rt_attn__f64(const rt_attn_job *job, int32_t threads);

/* The checks of the op's prepare, for the current sizes, and its job without the kernel's
 * part (kv_lengths, tiles, scratch): for other backends. */
struct rt_op_ctx;
rt_status rt_ops__attention_job(struct rt_op_ctx *ctx, rt_attn_job *job);
/* Fails naming the first of kv_lengths (argument 4, when a tensor) outside [0, kv_len]. */
rt_status rt_ops__attention_check_lengths(struct rt_op_ctx *ctx, const rt_attn_job *job);

/* The first key row r of a tile may not see: the causal frontier, kv_lengths and mask_len. */
int64_t rt_attn__key_limit(const rt_attn_job *job, int64_t b, int64_t query);

#endif
