# cmake -DCOMMAND=<;-list> -DRC=<exit code> -DEXPECT=<regex> -P expect_run.cmake
# Runs COMMAND (an mpirun line) and passes only when it exits with exactly RC and its stdout +
# stderr match EXPECT: a run must both end as it should and say why.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 100)
message("exit status: ${rc}\n--- stdout\n${out}--- stderr\n${err}")
if(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "expected exit status ${RC}, got '${rc}'")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}'")
endif()
