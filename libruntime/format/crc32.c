/* crc32.c: CRC-32 (IEEE 802.3, reflected, as zlib.crc32) with a table built once
 * on first use. Only program metadata is checksummed on every load, so this need not be fast. */
#include <pthread.h>

#include "format/format.h"

static uint32_t crc_table[256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t rt_format__crc32(uint32_t crc, const uint8_t *data, size_t size) {
    pthread_once(&crc_table_once, build_table);
    crc = ~crc;
    for (size_t i = 0; i < size; i++)
        crc = crc_table[(crc ^ data[i]) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}
