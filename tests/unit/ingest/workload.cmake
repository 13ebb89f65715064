ds_unit_test(ingest workload)
