/* mapfile.h: read-only private mappings of whole files (programs and data files). */
#ifndef RT_CORE_MAPFILE_H
#define RT_CORE_MAPFILE_H

#include <stddef.h>

#include "runtime.h"

/* Map `path` read-only. `what` names the file in messages ("program", "data file"). An empty
 * file gives *map == NULL and *size == 0. Release with rt_map__release. */
rt_status rt_map__file(const char *path, const char *what, void **map, size_t *size);
void rt_map__release(void *map, size_t size);

#endif
