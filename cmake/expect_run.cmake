# cmake -DCOMMAND=<;-list> -DRC=<exit code> -DEXPECT=<regex> [-DONCE=<regex>] [-DTIMEOUT=<s>]
#       [-DNOT_EXPECT=<regex>] [-DONE_LINE=ON] -P expect_run.cmake
# Runs COMMAND and passes only when it exits with exactly RC and its stdout + stderr match EXPECT
# (and ONCE, when given, exactly once): a run must both end as it should and say why. NOT_EXPECT
# must not match stdout + stderr. ONE_LINE: stderr is exactly one line once Open MPI's own notice
# of a non-zero exit status is taken out (mpirun prints that block between dashed lines whenever
# a rank exits non-zero; `mpirun -q` silences it), and holds no MPI_ABORT banner. A run past
# TIMEOUT (default 110 s) fails.
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
if(NOT_EXPECT AND "${out}${err}" MATCHES "${NOT_EXPECT}")
  message(FATAL_ERROR "output matches '${NOT_EXPECT}' ('${CMAKE_MATCH_0}'), which it must not")
endif()
if(ONE_LINE)
  if("${err}" MATCHES "MPI_ABORT")
    message(FATAL_ERROR "stderr holds Open MPI's MPI_ABORT banner")
  endif()
  set(dashes "--------------------")
  string(REGEX REPLACE "${dashes}-*\n(([^\n-][^\n]*)?\n)*${dashes}-*\n" "" ours "${err}")
  string(REGEX MATCHALL "\n" newlines "${ours}")
  list(LENGTH newlines count)
  if(NOT count EQUAL 1 OR NOT "${ours}" MATCHES "\n$")
    message(FATAL_ERROR "stderr is not one line (besides Open MPI's exit notice):\n${ours}")
  endif()
endif()
