# Fuzzing (tests/fuzz/) of the control envelope decoder and of config-file
# parsing (model, cluster, job files, and planning what they accept):
#  - envelope_corpus_test, config_corpus_test: replay tests/fuzz/corpus and
#    tests/fuzz/config_corpus through the fuzz targets' checks with the main
#    compiler (always, GCC included);
#  - envelope_fuzz, config_fuzz: ctest tests running tests/fuzz/run_fuzz.sh,
#    a clang + libFuzzer sub-build fuzzing for STRATA_FUZZ_SECONDS.
#    STRATA_FUZZ=AUTO skips them with a message when clang/libFuzzer are
#    missing, ON fails then, OFF does not register them.
set(STRATA_FUZZ AUTO CACHE STRING "Fuzz the envelope decoder and config parsing in ctest: AUTO, ON or OFF")
set_property(CACHE STRATA_FUZZ PROPERTY STRINGS AUTO ON OFF)
set(STRATA_FUZZ_SECONDS 20 CACHE STRING "Seconds envelope_fuzz runs in ctest")

if(STRATA_BUILD_TESTS)
  add_executable(envelope_corpus_test
    ${PROJECT_SOURCE_DIR}/tests/fuzz/envelope_corpus_test.cc
    ${PROJECT_SOURCE_DIR}/tests/fuzz/envelope_fuzz.cc)
  target_compile_definitions(envelope_corpus_test PRIVATE
    STRATA_FUZZ_CORPUS_DIR="${PROJECT_SOURCE_DIR}/tests/fuzz/corpus")
  target_link_libraries(envelope_corpus_test PRIVATE strata_control
    GTest::gtest GTest::gtest_main)
  strata_add_command_test(NAME envelope_corpus_test TIMEOUT 1500
    COMMAND envelope_corpus_test)

  add_executable(config_corpus_test
    ${PROJECT_SOURCE_DIR}/tests/fuzz/config_corpus_test.cc
    ${PROJECT_SOURCE_DIR}/tests/fuzz/config_fuzz.cc)
  target_compile_definitions(config_corpus_test PRIVATE
    STRATA_CONFIG_CORPUS_DIR="${PROJECT_SOURCE_DIR}/tests/fuzz/config_corpus")
  target_link_libraries(config_corpus_test PRIVATE strata_planner
    GTest::gtest GTest::gtest_main)
  strata_add_command_test(NAME config_corpus_test TIMEOUT 1500
    COMMAND config_corpus_test)

  if(NOT STRATA_FUZZ STREQUAL "OFF")
    strata_add_command_test(NAME envelope_fuzz TIMEOUT 600 LABELS fuzz
      COMMAND bash ${PROJECT_SOURCE_DIR}/tests/fuzz/run_fuzz.sh
        ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/fuzz
        ${STRATA_FUZZ_SECONDS} ${STRATA_FUZZ})
    set_tests_properties(envelope_fuzz PROPERTIES
      RESOURCE_LOCK strata_fuzz_build)
    strata_add_command_test(NAME config_fuzz TIMEOUT 600 LABELS fuzz
      COMMAND bash ${PROJECT_SOURCE_DIR}/tests/fuzz/run_fuzz.sh
        ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/fuzz
        ${STRATA_FUZZ_SECONDS} ${STRATA_FUZZ} config_fuzz)
    set_tests_properties(config_fuzz PROPERTIES
      RESOURCE_LOCK strata_fuzz_build)
  endif()
endif()
