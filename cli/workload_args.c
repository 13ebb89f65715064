/*
 * The generator options shared by `dayshard generate` and `dayshard produce` (--events,
 * --profile, --seed, --first-day, --days, --customers, --busy-fraction, and --rate, which is the
 * schedule's rate for `generate` and also the pacing for `produce`; --updates, --duplicates and
 * --items), parsed in one place so the commands cannot drift apart.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "loadgen/loadgen.h"

static int parse_fraction(const char *text, double *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !(v >= 0.0 && v <= 1.0)) {
        return -DS_EUSAGE;
    }
    *out = v;
    return 0;
}

int cli_parse_workload_option(int c, const char *value, struct loadgen_workload_config *cfg)
{
    uint64_t n = 0;
    int32_t day = 0;
    int rc = -DS_EUSAGE;
    switch (c) {
    case 'n': rc = cli_parse_u64(value, 0, UINT64_MAX / 2, &cfg->events); break;
    case 'p': rc = loadgen_profile_parse(value, &cfg->profile); break;
    case 's': rc = cli_parse_u64(value, 0, UINT64_MAX, &cfg->seed); break;
    case 'f':
        rc = cli_parse_day(value, &day);
        cfg->first_day = day;
        break;
    case 'D':
        rc = cli_parse_u64(value, 1, 3660, &n);
        cfg->days = (uint32_t)n;
        break;
    case 'c': rc = cli_parse_u64(value, 1, 1ull << 40, &cfg->customers); break;
    case 'b': rc = parse_fraction(value, &cfg->busy_fraction); break;
    case 'r':
        rc = cli_parse_u64(value, 0, LOADGEN_WORKLOAD_RATE_EPS_MAX, &n);
        cfg->rate_eps = (double)n;
        break;
    case 'U': rc = parse_fraction(value, &cfg->update_fraction); break;
    case 'P': rc = parse_fraction(value, &cfg->duplicate_fraction); break;
    case 'I': rc = parse_fraction(value, &cfg->items_fraction); break;
    }
    return rc;
}
