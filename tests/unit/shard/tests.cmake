ds_unit_test(shard route)
ds_unit_test(shard shardmap)
ds_unit_test(shard heat)
ds_unit_test(shard grow)
