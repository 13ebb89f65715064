/*
 * Error names: negated errno values through strerror's table, project codes through our own.
 * strerror() is not thread-safe for unknown values, so known errno values go through
 * strerrordesc_np (glibc >= 2.32), which returns a constant string.
 */
#include <errno.h>
#include <string.h>

#include "common/common.h"

static const char *const project_names[] = {
    [DS_ECORRUPT - DS_ERR_BASE] = "corrupt data (checksum or sanity check failed)",
    [DS_EZSTD - DS_ERR_BASE] = "zstd compression error",
    [DS_EKAFKA - DS_ERR_BASE] = "kafka error",
    [DS_EFORMAT - DS_ERR_BASE] = "unknown file format version",
    [DS_ELIMIT - DS_ERR_BASE] = "a configured limit would be exceeded",
    [DS_EUSAGE - DS_ERR_BASE] = "invalid argument",
    [DS_ELOCKED - DS_ERR_BASE] = "data directory is locked by another writer",
    [DS_ENOSTORE - DS_ERR_BASE] = "not a dayshard data directory (no MANIFEST)",
};

const char *ds_strerror(int err)
{
    if (err == 0) {
        return "success";
    }
    /* Negate in a wider type: -INT_MIN overflows int. */
    long long code = err < 0 ? -(long long)err : err;
    if (code >= DS_ERR_BASE && code < DS_ERR_END) {
        const char *name = project_names[code - DS_ERR_BASE];
        return name != NULL ? name : "unknown dayshard error";
    }
    const char *desc = code < DS_ERR_BASE ? strerrordesc_np((int)code) : NULL;
    return desc != NULL ? desc : "unknown error";
}
