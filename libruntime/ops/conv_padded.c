/* conv_padded.c: input planes copied once into a zero-padded buffer split by horizontal
 * stride phase (phase r of padded row i holds the padded columns stride * j + r), which the
 * direct convolution kernels read as contiguous runs for every tap. */
#include <string.h>

#include "core/multiversion.h"
#include "ops/conv.h"
#include "ops/op_util.h"

#define MAX_PLANE_BYTES ((size_t)64 << 20)

bool rt_conv__padded_layout(const conv_dims *d, rt_conv_padded *out) {
    int64_t s = d->stride[1], width, floats;
    if (s < 1 || !rt_op__add(d->height, d->pad[0], &out->rows) ||
        !rt_op__add(out->rows, d->pad[2], &out->rows) ||
        !rt_op__add(d->width, d->pad[1], &width) || !rt_op__add(width, d->pad[3], &width))
        return false;
    out->phase_len = ((width + s - 1) / s + 8 + 7) / 8 * 8;
    out->row_floats = s * out->phase_len;
    if (!rt_op__mul(out->rows, out->row_floats, &floats) ||
        (uint64_t)floats > MAX_PLANE_BYTES / sizeof(float))
        return false;
    out->plane_floats = (floats + 15) / 16 * 16; /* keeps every plane 64-byte aligned */
    return true;
}

int64_t rt_conv__tap_offset(const conv_dims *d, const rt_conv_padded *p, int64_t kh,
                            int64_t kw) {
    int64_t s = d->stride[1], col = kw * d->dilation[1];
    return kh * d->dilation[0] * p->row_floats + col % s * p->phase_len + col / s;
}

RT_MULTIVERSION void rt_conv__fill_padded(const conv_dims *d, const rt_conv_padded *p,
                                          const float *x, float *buf, bool zero) {
    int64_t s = d->stride[1], len = p->phase_len;
    if (zero)
        memset(buf, 0, (size_t)p->plane_floats * sizeof(float));
    for (int64_t ih = 0; ih < d->height; ih++) {
        const float *src = x + ih * d->width;
        float *row = buf + (ih + d->pad[0]) * p->row_floats;
        if (s == 1) {
            memcpy(row + d->pad[1], src, (size_t)d->width * sizeof(float));
            continue;
        }
        /* Phase r takes the columns iw with (iw + pad_left) % s == r: a strided run each. */
        for (int64_t r = 0; r < s; r++) {
            int64_t first = ((r - d->pad[1]) % s + s) % s; /* the first such iw */
            float *dst = row + r * len + (first + d->pad[1]) / s;
            for (int64_t k = 0, iw = first; iw < d->width; k++, iw += s)
                dst[k] = src[iw];
        }
    }
}
