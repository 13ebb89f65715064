/*
 * Small-file helpers for metadata (shard map, manifests' CURRENT pointer): whole-file reads with
 * a size cap, and atomic replacement by temp file + fdatasync + rename + directory fsync, the
 * only sequence that leaves either the old or the new file after a crash at any instant.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"

int ds_read_file(const char *path, size_t size_max, char **data_out, size_t *len_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    /* A directory reads as an error on ext4 but as an empty file on some filesystems
     * (btrfs reports size 0): refuse it the same way everywhere. */
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return -EISDIR;
    }
    if ((uint64_t)st.st_size > size_max) {
        close(fd);
        return -EFBIG;
    }
    size_t size = (size_t)st.st_size;
    char *data = malloc(size + 1);
    if (data == NULL) {
        close(fd);
        return -ENOMEM;
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = pread(fd, data + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int err = n < 0 ? -errno : -EIO;
            free(data);
            close(fd);
            return err;
        }
        done += (size_t)n;
    }
    close(fd);
    data[size] = '\0';
    *data_out = data;
    *len_out = size;
    return 0;
}

int ds_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int rc = fsync(fd) != 0 ? -errno : 0;
    close(fd);
    return rc;
}

ssize_t ds_pread_full(int fd, void *dst, size_t len, uint64_t offset)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (uint8_t *)dst + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            break;
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int ds_pwrite_full(int fd, const void *src, size_t len, uint64_t offset)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, (const uint8_t *)src + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -EIO;
        }
        done += (size_t)n;
    }
    return 0;
}

int ds_write_full(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int ds_write_file_atomic(const char *path, const void *data, size_t len)
{
    char tmp[DS_PATH_MAX];
    char dir[DS_PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp) ||
        snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
        return -ENAMETOOLONG;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    int rc = ds_write_full(fd, data, len);
    if (rc == 0 && fdatasync(fd) != 0) {
        rc = -errno;
    }
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -errno;
    }
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    return ds_fsync_dir(dirname(dir));
}

int ds_mkdir_p(const char *path)
{
    char buf[DS_PATH_MAX];
    size_t len = strlen(path);
    if (len == 0) {
        return -ENOENT; /* what mkdir("") says */
    }
    if (len >= sizeof(buf)) {
        return -ENAMETOOLONG;
    }
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') {
            continue;
        }
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            return -errno;
        }
        buf[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        return -errno;
    }
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int file_remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

int ds_remove_tree(const char *path)
{
    ASSERT(path != NULL);
    /* 16 descriptors: nftw's depth bound for open directories, not a depth limit. */
    return nftw(path, file_remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 || errno == ENOENT ? 0
                                                                                           : -errno;
}
