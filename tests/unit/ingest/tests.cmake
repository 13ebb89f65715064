# Unit tests of the ingest folder (tests/unit/ingest/test_<unit>.c).
ds_unit_test(ingest decode)
# The differential test checks the decoder against libjansson, a test-only dependency.
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
ds_unit_test(ingest decode_diff PkgConfig::JANSSON)
ds_unit_test(ingest pipeline)
ds_unit_test(ingest deadletter)
# The test reads back what librdkafka holds, so it links librdkafka itself.
ds_unit_test(ingest kafka_props PkgConfig::RDKAFKA)
ds_unit_test(ingest restore_select)
ds_unit_test(ingest tenure)
# The test hosts librdkafka's mock cluster in its own process, so it links librdkafka itself.
ds_unit_test(ingest node_pause PkgConfig::RDKAFKA)
