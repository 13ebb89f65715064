/*
 * The soak's configuration (loadgen.h): defaults, the usage check, the stream it feeds, and
 * its error line. The lowest layer of the soak's files: the others call it, it calls none.
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "loadgen/soak.h"

int soak_error(int code, const char *fmt, ...)
{
    char message[768];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    fprintf(stderr, "dayshard soak: %s\n", message);
    return code;
}

void loadgen_soak_config_defaults(struct loadgen_soak_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->days = 60;
    cfg->first_day = ds_days_from_civil(2026, 1, 1);
    cfg->orders_per_day = 60000;
    cfg->updated = 0.5;
    cfg->seed = 25;
    cfg->rate = 100000;
    cfg->partitions = 8;
    cfg->retention_days = 5;
    cfg->restart_every = 20;
    cfg->restart_signal = SIGTERM;
    cfg->model = "orders";
}

int loadgen_soak_config_check(const struct loadgen_soak_config *cfg)
{
    uint32_t n = cfg->retention_days;
    if (n < 1 || n > LOADGEN_SOAK_RETENTION_DAYS_MAX) {
        return soak_error(-DS_EUSAGE, "--retention-days must be 1..%u",
                          LOADGEN_SOAK_RETENTION_DAYS_MAX);
    }
    uint32_t days_min = soak_windows_days_min(n, cfg->restart_every);
    if (cfg->days < days_min && soak_windows_by_restart(n, cfg->restart_every)) {
        return soak_error(-DS_EUSAGE,
                          "--days %u is under %u = R + 2 x --restart-every, R the first restart "
                          "at or after stream day 2 x --retention-days: the growth rule compares "
                          "the restart cycle from R with the last one, which must come after it",
                          cfg->days, days_min);
    }
    if (cfg->days < days_min) {
        return soak_error(-DS_EUSAGE,
                          "--days %u is under %u = 4 x --retention-days: without restarts at "
                          "least N days apart the growth rule compares stream days [2N, 3N) "
                          "with the last N days, which must come after them",
                          cfg->days, days_min);
    }
    if (cfg->orders_per_day == 0 || cfg->rate == 0 || cfg->rate > LOADGEN_WORKLOAD_RATE_EPS_MAX) {
        return soak_error(-DS_EUSAGE, "--orders-per-day must be at least 1 and --rate 1..%u",
                          LOADGEN_WORKLOAD_RATE_EPS_MAX);
    }
    double fraction = cfg->updated / (1.0 + cfg->updated);
    if (!(cfg->updated >= 0.0) || fraction > LOADGEN_WORKLOAD_REPEAT_FRACTION_MAX) {
        return soak_error(-DS_EUSAGE, "--updated must be 0..9 (updates per new order)");
    }
    if (cfg->partitions < 1 || cfg->partitions > LOADGEN_BROKER_PARTITIONS_MAX) {
        return soak_error(-DS_EUSAGE, "--partitions must be 1..%u", LOADGEN_BROKER_PARTITIONS_MAX);
    }
    if ((cfg->brokers == NULL) != (cfg->topic == NULL)) {
        return soak_error(-DS_EUSAGE, "--brokers and --topic go together");
    }
    if (strcmp(cfg->model, "orders") != 0 && strcmp(cfg->model, "events") != 0) {
        return soak_error(-DS_EUSAGE, "--model must be orders or events");
    }
    struct loadgen_workload_config w;
    soak_workload(cfg, &w);
    return loadgen_workload_config_check(&w);
}

void soak_workload(const struct loadgen_soak_config *cfg, struct loadgen_workload_config *w)
{
    loadgen_workload_defaults(w);
    w->profile = LOADGEN_PROFILE_UNIFORM;
    w->seed = cfg->seed;
    w->first_day = cfg->first_day;
    w->days = cfg->days;
    w->busy_day_index = 0;
    w->events = (uint64_t)llround((double)cfg->orders_per_day * cfg->days * (1.0 + cfg->updated));
    w->update_fraction = cfg->updated / (1.0 + cfg->updated);
    w->updates_keep_day = true;
    w->rate_eps = (double)cfg->rate;
}
