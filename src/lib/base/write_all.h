/* Writing a whole buffer to a file descriptor, through interrupted and partial writes.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_WRITE_ALL_H
#define MD_WRITE_ALL_H

#include <stddef.h>

/* Writes LEN bytes of DATA to FD. 0 on success, else the errno of the failing write (EIO for a
 * write that wrote nothing without an error). */
int md_write_all(int fd, const void *data, size_t len);

#endif
