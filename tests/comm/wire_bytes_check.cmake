# cmake -DMPIRUN=<;-list> -DNP=<n> -DEXE=<comm_wire_bytes_check> -DMODE=<mode> -DDIR=<dir>
#       -P wire_bytes_check.cmake
# Runs comm_wire_bytes_check twice under the monitoring PML, with 1 and then 3 workloads, and
# passes only when both runs exit 0: the second run compares, on every rank, the bytes Open MPI
# reports sent to other ranks (difference of the two reports) with the difference of the byte
# counters (see wire_bytes_main.cpp).
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
set(monitor --mca pml_monitoring_enable 2 --mca pml_monitoring_enable_output 3)
execute_process(COMMAND ${MPIRUN} ${monitor} --mca pml_monitoring_filename ${DIR}/baseline
                        -np ${NP} ${EXE} ${MODE} 1 ${DIR}/baseline
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 50)
message("baseline run: exit status ${rc}\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the baseline run failed")
endif()
execute_process(COMMAND ${MPIRUN} ${monitor} --mca pml_monitoring_filename ${DIR}/measured
                        -np ${NP} ${EXE} ${MODE} 3 ${DIR}/measured ${DIR}/baseline 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 50)
message("measured run: exit status ${rc}\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "wire bytes differ from the counters (or the run failed)")
endif()
string(REGEX MATCHALL "rank [0-9]+: [^\n]*: equal" equal_lines "${out}")
list(LENGTH equal_lines ranks_equal)
if(NOT ranks_equal EQUAL NP)
  message(FATAL_ERROR "expected ${NP} ranks to report 'equal', found ${ranks_equal}")
endif()
