# Unit tests of the loadgen folder (tests/unit/loadgen/test_<unit>.c).
ds_unit_test(loadgen produce_key)
ds_unit_test(loadgen workload)
ds_unit_test(loadgen soak_prom)
ds_unit_test(loadgen soak_verdict)
ds_unit_test(loadgen loadtest_gate)
ds_unit_test(loadgen loadtest_hist)
ds_unit_test(loadgen loadtest_html ds_query)
