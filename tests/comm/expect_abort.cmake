# cmake -DCOMMAND=<;-list> -DEXPECT=<regex> -P expect_abort.cmake
# Runs COMMAND (an mpirun line) and passes only when it exits non-zero and its stderr matches
# EXPECT: the fatal-error path must both fail and say why.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 50)
message("exit status: ${rc}\n--- stdout\n${out}--- stderr\n${err}")
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "expected a non-zero exit status, got '${rc}'")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "stderr does not match '${EXPECT}'")
endif()
