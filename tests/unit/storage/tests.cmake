ds_unit_test(storage block)
ds_unit_test(storage manifest)
ds_unit_test(storage storage)
