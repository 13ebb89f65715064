/*
 * Clocks and civil dates. The date algorithms are Howard Hinnant's days_from_civil /
 * civil_from_days (public domain description), exact for the proleptic Gregorian calendar and
 * free of tables and loops. Rejected: timegm/gmtime_r, which consult the TZ machinery and are
 * an order of magnitude slower on the decode hot path.
 */
#include <stdio.h>
#include <time.h>

#include "common/common.h"

uint64_t ds_clock_ns(void)
{
    struct timespec ts;
    int rc = clock_gettime(CLOCK_MONOTONIC, &ts);
    ASSERT(rc == 0);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t ds_clock_realtime_ms(void)
{
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    ASSERT(rc == 0);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polling, not a condition variable: the waits it serves look at state another process (or a
 * broker) changes, which nothing here could signal. */
bool ds_wait_until(ds_wait_fn done, void *user, uint64_t deadline_ns, uint64_t step_ns)
{
    ASSERT(done != NULL);
    ASSERT(step_ns > 0 && step_ns < 1000000000u);
    for (;;) { /* bounded by the deadline */
        if (done(user)) {
            return true;
        }
        if (ds_clock_ns() >= deadline_ns) {
            return false;
        }
        struct timespec step = {.tv_sec = 0, .tv_nsec = (long)step_ns};
        nanosleep(&step, NULL);
    }
}

int32_t ds_days_from_civil(int32_t year, uint32_t month, uint32_t day)
{
    ASSERT(month >= 1 && month <= 12);
    ASSERT(day >= 1 && day <= 31);
    int32_t y = year - (month <= 2 ? 1 : 0);
    int32_t era = (y >= 0 ? y : y - 399) / 400;
    uint32_t yoe = (uint32_t)(y - era * 400);
    uint32_t mp = month > 2 ? month - 3 : month + 9;
    uint32_t doy = (153 * mp + 2) / 5 + day - 1;
    uint32_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int32_t)doe - 719468;
}

void ds_civil_from_days(int32_t days, int32_t *year, uint32_t *month, uint32_t *day)
{
    int32_t z = days + 719468;
    int32_t era = (z >= 0 ? z : z - 146096) / 146097;
    uint32_t doe = (uint32_t)(z - era * 146097);
    uint32_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    uint32_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    uint32_t mp = (5 * doy + 2) / 153;
    uint32_t d = doy - (153 * mp + 2) / 5 + 1;
    uint32_t m = mp < 10 ? mp + 3 : mp - 9;
    *year = (int32_t)yoe + era * 400 + (m <= 2 ? 1 : 0);
    *month = m;
    *day = d;
}

bool ds_date_valid(int32_t year, uint32_t month, uint32_t day)
{
    static const uint8_t month_days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month < 1 || month > 12 || day < 1) {
        return false;
    }
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    uint32_t limit = month_days[month - 1] + (month == 2 && leap ? 1u : 0u);
    return day <= limit;
}

static bool digits_value(const char *text, size_t count, uint32_t *value)
{
    uint32_t v = 0;
    for (size_t i = 0; i < count; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < '0' || c > '9') {
            return false;
        }
        v = v * 10 + (uint32_t)(c - '0');
    }
    *value = v;
    return true;
}

int ds_date_parse(const char *text, size_t len, int32_t *days_out)
{
    uint32_t year = 0;
    uint32_t month = 0;
    uint32_t day = 0;
    if (len != 10 || text[4] != '-' || text[7] != '-') {
        return -DS_EUSAGE;
    }
    if (!digits_value(text, 4, &year) || !digits_value(text + 5, 2, &month) ||
        !digits_value(text + 8, 2, &day)) {
        return -DS_EUSAGE;
    }
    if (year < 1970 || !ds_date_valid((int32_t)year, month, day)) {
        return -DS_EUSAGE;
    }
    *days_out = ds_days_from_civil((int32_t)year, month, day);
    return 0;
}

void ds_date_format(int32_t days, char *dst)
{
    int32_t year = 0;
    uint32_t month = 0;
    uint32_t day = 0;
    ds_civil_from_days(days, &year, &month, &day);
    ASSERT(year >= 0 && year <= 9999);
    uint32_t y = (uint32_t)year;
    dst[0] = (char)('0' + y / 1000);
    dst[1] = (char)('0' + y / 100 % 10);
    dst[2] = (char)('0' + y / 10 % 10);
    dst[3] = (char)('0' + y % 10);
    dst[4] = '-';
    dst[5] = (char)('0' + month / 10);
    dst[6] = (char)('0' + month % 10);
    dst[7] = '-';
    dst[8] = (char)('0' + day / 10);
    dst[9] = (char)('0' + day % 10);
    dst[10] = '\0';
}

int32_t ds_day_from_ms(int64_t ts_ms)
{
    int64_t day = ts_ms / DS_DAY_MS;
    if (ts_ms % DS_DAY_MS < 0) {
        day -= 1;
    }
    return (int32_t)day;
}

void ds_ts_format(int64_t ts_ms, char *dst)
{
    ASSERT(ts_ms >= DS_TS_MS_MIN && ts_ms <= DS_TS_MS_MAX);
    int32_t day = ds_day_from_ms(ts_ms);
    int64_t ms = ts_ms - (int64_t)day * DS_DAY_MS;
    ASSERT(ms >= 0 && ms < DS_DAY_MS);
    ds_date_format(day, dst);
    unsigned v = (unsigned)ms;
    int n = snprintf(dst + 10, DS_TS_TEXT_SIZE - 10, "T%02u:%02u:%02u.%03uZ", v / 3600000u,
                     (v / 60000u) % 60u, (v / 1000u) % 60u, v % 1000u);
    ASSERT(n == DS_TS_TEXT_SIZE - 11);
}
