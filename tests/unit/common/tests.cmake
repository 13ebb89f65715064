ds_unit_test(common common)
