ds_unit_test(http server)
ds_unit_test(http events)
