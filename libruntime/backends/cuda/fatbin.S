/* fatbin.S: embeds the CUDA fatbinary built by nvcc (path from RT_CUDA_FATBIN_PATH) as
 * read-only data between two hidden labels. Assembled only in builds that found nvcc. */
    .section .rodata.rt_cuda_fatbin, "a"
    .balign 64
    .globl rt_cuda__fatbin_start
    .hidden rt_cuda__fatbin_start
rt_cuda__fatbin_start:
    .incbin RT_CUDA_FATBIN_PATH
    .globl rt_cuda__fatbin_end
    .hidden rt_cuda__fatbin_end
rt_cuda__fatbin_end:
    .byte 0
    .section .note.GNU-stack, "", @progbits
