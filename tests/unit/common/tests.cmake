ds_unit_test(common common)
ds_unit_test(common log)
ds_unit_test(common varint)
