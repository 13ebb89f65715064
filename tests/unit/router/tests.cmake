# The merged documents are parsed back with libjansson, an independent JSON reader.
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
ds_unit_test(router router_merge PkgConfig::JANSSON)
ds_unit_test(router router_owner PkgConfig::JANSSON)
ds_unit_test(router router_heat PkgConfig::JANSSON)
