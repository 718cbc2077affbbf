/* mapfile.h: private mappings of whole files (programs and data files). */
#ifndef RT_CORE_MAPFILE_H
#define RT_CORE_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

/* Map `path` privately. `what` names the file in messages ("program", "data file"). An empty
 * file gives *map == NULL and *size == 0. The mapping is writable until rt_map__seal, so the
 * loader can rt_map__own the parts it verifies; release with rt_map__release. */
rt_status rt_map__file(const char *path, const char *what, void **map, size_t *size);
/* Give the process its own copy of the pages of [offset, offset + length) (clamped to the
 * mapping): later writes to the file, by anyone, no longer show through them, and a truncated
 * file no longer takes them away. Pages not owned keep following the file. */
void rt_map__own(void *map, size_t size, uint64_t offset, uint64_t length);
/* Make the whole mapping read-only (after the owning). */
void rt_map__seal(void *map, size_t size);
void rt_map__release(void *map, size_t size);

#endif
