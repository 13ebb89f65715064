/*
 * `dayshard soak` from the top (loadgen.h): run (soak_run.c), judge (soak_verdict.c), write
 * and draw (soak_report.c). report.json is written before the plots, so a failed gnuplot or a
 * full disk while drawing never loses what was measured.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "loadgen/soak.h"

static void soak_remove(const char *out_dir, const char *name)
{
    char dir[DS_PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/%s", out_dir, name);
    int rc = ds_remove_tree(dir);
    if (rc != 0 && rc != -ENOENT) {
        fprintf(stderr, "dayshard soak: warning: cannot remove %s: %s\n", dir, ds_strerror(rc));
    }
}

int loadgen_soak_run(const struct loadgen_soak_config *cfg)
{
    ASSERT(cfg->out_dir != NULL && cfg->self != NULL);
    int rc = loadgen_soak_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct soak_samples *samples = calloc(1, sizeof(*samples));
    struct soak_outcome *out = calloc(1, sizeof(*out));
    struct soak_verdict *verdicts = calloc(SOAK_VERDICTS_MAX, sizeof(*verdicts));
    rc = samples != NULL && out != NULL && verdicts != NULL ? soak_samples_init(samples) : -ENOMEM;
    if (rc == 0) {
        rc = soak_run(cfg, samples, out);
    }
    if (rc >= 0) {
        struct soak_windows w;
        soak_windows(cfg->days, cfg->retention_days, cfg->restart_every, &w);
        size_t n = soak_verdicts(samples, &w, cfg->retention_days, verdicts, SOAK_VERDICTS_MAX);
        json_t *doc = soak_report_build(cfg, &w, samples, verdicts, n, out);
        rc = doc != NULL ? soak_report_write(cfg->out_dir, doc) : -ENOMEM;
        rc = rc == 0 ? soak_report_render(cfg->out_dir, doc) : rc;
        if (rc == 0) {
            rc = json_is_true(json_object_get(doc, "passed")) ? 0 : 1;
        }
        json_decref(doc);
    }
    if (!cfg->keep_data) {
        soak_remove(cfg->out_dir, "data");
        soak_remove(cfg->out_dir, "ref");
    }
    soak_samples_deinit(samples);
    free(verdicts);
    free(out);
    free(samples);
    return rc;
}

int loadgen_soak_render(const char *out_dir)
{
    char path[DS_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/report.json", out_dir);
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    if (doc == NULL) {
        return soak_error(-DS_EUSAGE, "%s: %s", path, err.text);
    }
    int rc = soak_report_render(out_dir, doc);
    json_decref(doc);
    return rc;
}
