# Fuzzing of the control envelope decoder (tests/fuzz/):
#  - envelope_corpus_test: replays tests/fuzz/corpus through the fuzz
#    target's checks with the main compiler (always, GCC included);
#  - envelope_fuzz: ctest test running tests/fuzz/run_fuzz.sh, a clang +
#    libFuzzer sub-build fuzzing for STRATA_FUZZ_SECONDS. STRATA_FUZZ=AUTO
#    skips it with a message when clang/libFuzzer are missing, ON fails
#    then, OFF does not register it.
set(STRATA_FUZZ AUTO CACHE STRING "Fuzz the envelope decoder in ctest: AUTO, ON or OFF")
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
  add_test(NAME envelope_corpus_test COMMAND envelope_corpus_test)

  if(NOT STRATA_FUZZ STREQUAL "OFF")
    add_test(NAME envelope_fuzz
      COMMAND bash ${PROJECT_SOURCE_DIR}/tests/fuzz/run_fuzz.sh
        ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/fuzz
        ${STRATA_FUZZ_SECONDS} ${STRATA_FUZZ})
    set_tests_properties(envelope_fuzz PROPERTIES
      SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS fuzz)
  endif()
endif()
