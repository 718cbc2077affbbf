/* mapfile.c: read-only private mappings of whole files. */
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
        /* Private and read-only: constants are used in place and paged in on demand. */
        void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
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

void rt_map__release(void *map, size_t size) {
    if (map != NULL)
        munmap(map, size);
}
