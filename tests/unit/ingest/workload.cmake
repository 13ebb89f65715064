# The workload generator uses libm (log, exp, expm1, log1p) through ds_ingest.
ds_unit_test(ingest workload m)
