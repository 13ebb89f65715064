ds_unit_test(storage io)
