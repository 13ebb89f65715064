# The by-customer index store: its answers against a ground truth and crashes (test_gsi), and
# against an in-memory model over random workloads, cut and damaged logs and kill -9 loops
# (test_gsi_oracle).
ds_unit_test(gsi gsi)
ds_unit_test(gsi gsi_oracle)
# Checkpoints taken on the writer's own thread while applies go on (issue 16).
ds_unit_test(gsi gsi_checkpoint)
