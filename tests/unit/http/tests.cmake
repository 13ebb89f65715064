ds_unit_test(http server)
