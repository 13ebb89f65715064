ds_unit_test(storage block)
ds_unit_test(storage manifest)
ds_unit_test(storage storage)
ds_unit_test(storage ids)
# storage/ids.h is private to storage/, so its benchmark lives here (only tests/ may include it).
add_executable(bench_ids ${CMAKE_CURRENT_LIST_DIR}/bench_ids.c)
ds_target_defaults(bench_ids)
target_link_libraries(bench_ids PRIVATE ds_storage)
