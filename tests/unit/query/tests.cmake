ds_unit_test(query count)
ds_unit_test(query http_request)
ds_unit_test(query metrics)
ds_unit_test(query gsi)
