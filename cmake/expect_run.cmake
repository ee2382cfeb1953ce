# cmake -DCOMMAND=<;-list> -DRC=<exit code> -DEXPECT=<regex> [-DONCE=<regex>] [-DTIMEOUT=<s>]
#       -P expect_run.cmake
# Runs COMMAND and passes only when it exits with exactly RC and its stdout + stderr match EXPECT
# (and ONCE, when given, exactly once): a run must both end as it should and say why. A run past TIMEOUT (default 110 s) fails.
if(NOT TIMEOUT)
  set(TIMEOUT 110)
endif()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT ${TIMEOUT})
message("exit status: ${rc}\n--- stdout\n${out}--- stderr\n${err}")
if(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "expected exit status ${RC}, got '${rc}'")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}'")
endif()
if(ONCE)
  string(REGEX MATCHALL "${ONCE}" matches "${out}${err}")
  list(LENGTH matches count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "'${ONCE}' matched ${count} times, expected once")
  endif()
endif()
