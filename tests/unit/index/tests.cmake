# The by-customer index store: its answers against a ground truth and crashes (test_index), and
# against an in-memory model over random workloads, cut and damaged logs and kill -9 loops
# (test_index_oracle).
ds_unit_test(index index)
ds_unit_test(index index_oracle)
# Checkpoints taken on the writer's own thread while applies go on.
ds_unit_test(index index_checkpoint)
# The cursor's delta records: bytes per apply, pieces, cuts, old whole-cursor logs.
ds_unit_test(index index_cursor)
# The seal's retention floor and the rule that says when to seal.
ds_unit_test(index index_compact)
