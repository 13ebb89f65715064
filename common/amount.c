/*
 * Exact decimal formatting of amount sums kept as 128-bit integers of 1/10000.
 * Rejected: double, which cannot represent 0.1 and loses cents on large sums.
 */
#include "common/common.h"

size_t ds_amount_format(ds_i128 units, char *dst)
{
    char digits[48];
    size_t count = 0;
    bool negative = units < 0;
    /* Work on the magnitude as unsigned so that the most negative value is safe. */
    __extension__ unsigned __int128 mag =
        negative ? (unsigned __int128)0 - (unsigned __int128)units : (unsigned __int128)units;
    while (mag > 0 || count < 5) {
        digits[count++] = (char)('0' + (int)(mag % 10));
        mag /= 10;
    }
    ASSERT(count < sizeof(digits));
    size_t len = 0;
    if (negative) {
        dst[len++] = '-';
    }
    for (size_t i = count; i > 4; i--) {
        dst[len++] = digits[i - 1];
    }
    dst[len++] = '.';
    for (size_t i = 4; i > 0; i--) {
        dst[len++] = digits[i - 1];
    }
    dst[len] = '\0';
    ASSERT(len < DS_AMOUNT_TEXT_SIZE);
    return len;
}
