ds_unit_test(query count)
ds_unit_test(query count_days)
ds_unit_test(query serve_request)
ds_unit_test(query metrics)
# The heat document is parsed back with libjansson, an independent JSON reader.
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
ds_unit_test(query heat_render PkgConfig::JANSSON)
# The order lookup's document and its items are parsed back with libjansson too.
ds_unit_test(query render PkgConfig::JANSSON)
ds_unit_test(query heat_history_render)
