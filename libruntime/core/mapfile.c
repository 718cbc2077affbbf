/* mapfile.c: private mappings of whole files, the verified parts copied into the process. */
#include "core/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

rt_status rt_map__file(const char *path, const char *what, void **map, size_t *size) {
    *map = NULL;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer, forever; it has no
     * effect on a regular file, and anything else is refused below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return rt_error__set(RT_IO_ERROR, "cannot open %s '%s': %s", what, path,
                             strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return rt_error__set(RT_IO_ERROR, "%s '%s' is not a regular file", what, path);
    }
    size_t n = (size_t)st.st_size;
    if (n > 0) {
        /* Private: constants are used in place and paged in on demand; writable until
         * rt_map__seal so that rt_map__own can copy the pages the loader verifies. */
        void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int err = errno;
            close(fd);
            return rt_error__set(err == ENOMEM ? RT_OUT_OF_MEMORY : RT_IO_ERROR,
                                 "cannot map %s '%s': %s", what, path, strerror(err));
        }
        *map = m;
        *size = n;
    }
    close(fd);
    return RT_OK;
}

void rt_map__own(void *map, size_t size, uint64_t offset, uint64_t length) {
    if (map == NULL || offset >= size || length == 0)
        return;
    uint64_t end = length > size - offset ? size : offset + length;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* Writing a byte of a private page makes the kernel copy it (copy on write). */
    for (uint64_t at = offset - offset % page; at < end; at += page) {
        volatile uint8_t *byte = (volatile uint8_t *)map + at;
        *byte = *byte;
    }
}

void rt_map__seal(void *map, size_t size) {
    if (map != NULL)
        mprotect(map, size, PROT_READ);
}

void rt_map__release(void *map, size_t size) {
    if (map != NULL)
        munmap(map, size);
}
