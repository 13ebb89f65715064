/* Placeholder while the differential test is being written. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>

#include "ingest/ingest.h"

static void test_decode_diff_placeholder_links(void **state)
{
    (void)state;
    assert_non_null(jansson_version_str());
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_decode_diff_placeholder_links)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
