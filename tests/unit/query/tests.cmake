ds_unit_test(query count)
