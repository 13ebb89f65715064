/*
 * storage_io_create and friends: choosing an I/O backend.
 *
 * AUTO prefers io_uring and falls back to the sync backend only when io_uring is refused as a
 * whole (-ENOSYS: no kernel support or DS_IO_URING_DISABLE; -EPERM: seccomp or the
 * io_uring_disabled sysctl, common in containers), logging the choice once here. Other errors
 * (-ENOMEM from a small RLIMIT_MEMLOCK on old kernels, for one) are returned: they point at a
 * configuration worth fixing rather than silently running slower.
 *
 * Rejected: probing io_uring with a test operation at create. A ring that initialises but then
 * refuses operations is not a failure mode seen in practice, and the probe would cost every start.
 */
#include <errno.h>
#include <string.h>

#include "common/common.h"
#include "storage/io_private.h"
#include "storage/storage.h"

static int io_create_auto(struct storage_io **out)
{
    int rc = io_uring_backend_create(out);
    if (rc != -ENOSYS && rc != -EPERM) {
        return rc;
    }
    ds_log_warn("io_uring unavailable (%s), using sync I/O", ds_strerror(rc));
    return io_sync_create(out);
}

int storage_io_create(enum storage_io_mode mode, struct storage_io **out)
{
    ASSERT(out != NULL);
    ASSERT(mode == STORAGE_IO_AUTO || mode == STORAGE_IO_URING || mode == STORAGE_IO_SYNC);
    struct storage_io *io = NULL;
    int rc;
    if (mode == STORAGE_IO_AUTO) {
        rc = io_create_auto(&io);
    } else if (mode == STORAGE_IO_URING) {
        rc = io_uring_backend_create(&io);
    } else {
        rc = io_sync_create(&io);
    }
    if (rc != 0) {
        return rc;
    }
    ASSERT(io != NULL);
    ASSERT(io->ops != NULL);
    *out = io;
    return 0;
}

int storage_io_mode_parse(const char *text, enum storage_io_mode *mode)
{
    static const struct {
        const char *name;
        enum storage_io_mode mode;
    } modes[] = {
        {"auto", STORAGE_IO_AUTO},
        {"uring", STORAGE_IO_URING},
        {"sync", STORAGE_IO_SYNC},
    };
    ASSERT(mode != NULL);
    if (text == NULL) {
        return -DS_EUSAGE;
    }
    for (size_t i = 0; i < DS_ARRAY_LEN(modes); i++) {
        if (strcmp(text, modes[i].name) == 0) {
            *mode = modes[i].mode;
            return 0;
        }
    }
    return -DS_EUSAGE;
}

const char *storage_io_name(const struct storage_io *io)
{
    ASSERT(io != NULL);
    ASSERT(io->ops != NULL);
    ASSERT(io->ops->name != NULL);
    return io->ops->name;
}
