/*
 * A data directory's model (storage.h): the MODEL file, the rules an open follows, and the
 * names on the command line.
 *
 * DIR/MODEL holds the model's name and a newline ("events\n"); its first line is the record. A
 * writer that creates a directory writes it before anything else of the store: MODEL.tmp written
 * and synced through storage_io, renamed over MODEL, the directory synced; only then is the
 * MANIFEST created (and segments only after that). So a crash at any instant leaves either no MODEL
 * and no data (the next open creates the directory again, with its own model) or a complete MODEL:
 * a directory that holds data always knows its model. A directory made before models were recorded
 * has a MANIFEST or segments and no MODEL: it holds events and reads as such; it is not rewritten
 * (readers cannot, and one rule for every open is simpler than an upgrade).
 *
 * Rejected: a field of the MANIFEST's file header. The MANIFEST is replaced by rotation and by
 * fsck --repair, its format has readers of its own, and a new header would have made every
 * older directory a format change; a file of its own is written once, never touched again,
 * and a directory without it is simply an older one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/data_model.h"

/* MODEL's record is its first line, a model's name: far shorter than this. */
#define DATA_MODEL_FILE_BYTES_MAX 64u

int storage_model_parse(const char *text, enum storage_model *out)
{
    ASSERT(text != NULL);
    ASSERT(out != NULL);
    if (strcmp(text, "events") == 0) {
        *out = STORAGE_MODEL_EVENTS;
        return 0;
    }
    if (strcmp(text, "orders") == 0) {
        *out = STORAGE_MODEL_ORDERS;
        return 0;
    }
    return -DS_EUSAGE;
}

const char *storage_model_name(enum storage_model model)
{
    switch (model) {
    case STORAGE_MODEL_EVENTS: return "events";
    case STORAGE_MODEL_ORDERS: return "orders";
    case STORAGE_MODEL_RECORDED: return "recorded";
    }
    ASSERT(false && "unknown storage_model");
    return NULL;
}

/* The model named by MODEL's first line; what follows its newline is not read (see
 * model_file_read). */
static int model_from_file(const char *data, size_t len, enum storage_model *out)
{
    const char *newline = memchr(data, '\n', len);
    if (newline == NULL) {
        return -DS_ECORRUPT;
    }
    char name[DATA_MODEL_FILE_BYTES_MAX + 1];
    size_t name_len = (size_t)(newline - data);
    ASSERT(name_len < sizeof(name));
    memcpy(name, data, name_len);
    name[name_len] = '\0';
    return storage_model_parse(name, out) == 0 ? 0 : -DS_ECORRUPT;
}

/* Reads the head of MODEL into dst. Only the first line is the record: a power cut can leave
 * junk past a file's synced end (the fake I/O's garbage crash does), and MODEL, synced once and
 * never written again, is judged by its synced bytes as segments are by their committed ends.
 * Returns the bytes read or a negated errno. */
static ssize_t model_file_read(const char *path, char *dst, size_t dst_capacity)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    ssize_t n = ds_pread_full(fd, dst, dst_capacity, 0);
    close(fd);
    return n;
}

static bool holds_store(const char *dir)
{
    char path[DS_PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/MANIFEST", dir);
    if (stat(path, &sb) == 0 && sb.st_size > 0) {
        return true;
    }
    snprintf(path, sizeof(path), "%s/parts", dir);
    return stat(path, &sb) == 0;
}

int data_model_read(const char *dir, struct data_model_state *out, char *why, size_t why_size)
{
    ASSERT(dir != NULL);
    ASSERT(out != NULL);
    char path[DS_PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/MODEL", dir);
    ASSERT(n > 0 && n < DS_PATH_MAX);
    char head[DATA_MODEL_FILE_BYTES_MAX];
    ssize_t len = model_file_read(path, head, sizeof(head));
    struct data_model_state state = {.recorded = STORAGE_MODEL_RECORDED};
    int rc = 0;
    if (len >= 0) {
        rc = model_from_file(head, (size_t)len, &state.recorded);
    } else if (len != -ENOENT && len != -ENOTDIR) {
        rc = (int)len; /* ENOENT, ENOTDIR: no record (a writer's mkdir says why) */
    }
    if (rc != 0) {
        snprintf(why, why_size, "%s: %s (it must hold \"events\" or \"orders\" and a newline)",
                 path, rc == -DS_ECORRUPT ? "the data model record is damaged" : ds_strerror(rc));
        return rc;
    }
    state.holds_store = holds_store(dir);
    *out = state;
    return 0;
}

int data_model_choose(const char *dir, const struct data_model_state *state,
                      enum storage_model wanted, enum storage_model *model, char *why,
                      size_t why_size)
{
    ASSERT(state != NULL);
    ASSERT(model != NULL);
    enum storage_model has = state->recorded;
    if (has == STORAGE_MODEL_RECORDED && state->holds_store) {
        has = STORAGE_MODEL_EVENTS; /* made before models were recorded: it holds events */
    }
    if (has != STORAGE_MODEL_RECORDED && wanted != STORAGE_MODEL_RECORDED && wanted != has) {
        snprintf(why, why_size,
                 "%s holds the %s model (chosen when it was created%s); --model %s does not "
                 "match it",
                 dir, storage_model_name(has),
                 state->recorded == STORAGE_MODEL_RECORDED ? ", before models were recorded" : "",
                 storage_model_name(wanted));
        return -DS_EUSAGE;
    }
    enum storage_model chosen = has;
    if (chosen == STORAGE_MODEL_RECORDED) {
        chosen = wanted != STORAGE_MODEL_RECORDED ? wanted : STORAGE_MODEL_NEW_DEFAULT;
    }
    ASSERT(chosen != STORAGE_MODEL_RECORDED);
    *model = chosen;
    return 0;
}

bool data_model_must_record(const struct data_model_state *state)
{
    return state->recorded == STORAGE_MODEL_RECORDED && !state->holds_store;
}

int data_model_write(struct storage_io *io, const char *dir, enum storage_model model)
{
    ASSERT(model != STORAGE_MODEL_RECORDED);
    char path[DS_PATH_MAX];
    char tmp[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/MODEL", dir);
    snprintf(tmp, sizeof(tmp), "%s/MODEL.tmp", dir);
    char text[DATA_MODEL_FILE_BYTES_MAX];
    int len = snprintf(text, sizeof(text), "%s\n", storage_model_name(model));
    ASSERT(len > 0 && (size_t)len < sizeof(text));
    int fd = io->ops->open(io, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        ds_log_error("%s: cannot create: %s", tmp, ds_strerror(fd));
        return fd;
    }
    int rc = io->ops->write(io, fd, text, (size_t)len, 0);
    if (rc == 0) {
        rc = io->ops->sync(io, fd);
    }
    int flushed = io->ops->flush(io); /* also when queueing failed: leave none queued */
    rc = rc != 0 ? rc : flushed;
    io->ops->close(io, fd);
    if (rc == 0) {
        rc = io->ops->rename(io, tmp, path);
    }
    if (rc == 0) {
        rc = ds_fsync_dir(dir);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot record the data model: %s", path, ds_strerror(rc));
        (void)unlink(tmp);
    }
    return rc;
}

int storage_model_check(const char *dir, enum storage_model wanted, enum storage_model *model,
                        char *why, size_t why_size)
{
    ASSERT(why_size >= STORAGE_MODEL_WHY_SIZE);
    if (strlen(dir) > DS_PATH_MAX - 64) { /* the bound storage_config_check sets */
        snprintf(why, why_size, "%.64s...: %s", dir, ds_strerror(-ENAMETOOLONG));
        return -ENAMETOOLONG;
    }
    struct data_model_state state;
    int rc = data_model_read(dir, &state, why, why_size);
    return rc == 0 ? data_model_choose(dir, &state, wanted, model, why, why_size) : rc;
}
