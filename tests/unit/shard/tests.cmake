ds_unit_test(shard route)
ds_unit_test(shard shardmap)
