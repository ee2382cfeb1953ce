# Test helpers shared by tests/<layer>/CMakeLists.txt.
include(GoogleTest)

# Environment for every test: one BLAS thread per rank (docs/design.md section 5).
set(CANZONA_TEST_ENV "OPENBLAS_NUM_THREADS=1")

# canzona_scale_timeout(<var>): triples a timeout in seconds in sanitizer builds (ASan + UBSan
# make the training runs of the CLI tests several times slower); unchanged otherwise.
function(canzona_scale_timeout var)
  if(CANZONA_SANITIZE)
    math(EXPR scaled "${${var}} * 3")
    set(${var} ${scaled} PARENT_SCOPE)
  endif()
endfunction()

# canzona_gtest(<target> LIBS <libs...> SOURCES <files...>): a GoogleTest binary, one ctest entry
# per test case.
function(canzona_gtest target)
  cmake_parse_arguments(ARG "" "" "LIBS;SOURCES" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  set(timeout 120)
  canzona_scale_timeout(timeout)
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60
                       PROPERTIES ENVIRONMENT "${CANZONA_TEST_ENV}" TIMEOUT ${timeout})
endfunction()

# canzona_mpi_test(<name> NP <n> COMMAND <exe-and-args...>): runs under mpirun as CI does (root,
# oversubscribed), labelled `mpi`, 60 s timeout.
function(canzona_mpi_test name)
  cmake_parse_arguments(ARG "WILL_FAIL" "NP" "COMMAND" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe
                   --mca btl self,vader -np ${ARG_NP} ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS mpi TIMEOUT 60
                       ENVIRONMENT "${CANZONA_TEST_ENV}")
  if(ARG_WILL_FAIL)
    set_tests_properties(${name} PROPERTIES WILL_FAIL TRUE)
  endif()
endfunction()

# canzona_cli_test(<name> RC <exit code> EXPECT <regex> [ONCE <regex>] [NP <n> | MPMD]
#                  [TIMEOUT <s>] COMMAND <exe-and-args...>):
# runs the command (under mpirun, as canzona_mpi_test does, when NP is given) and passes only when
# it exits with exactly RC and its stdout + stderr match EXPECT (cmake/expect_run.cmake), and, with
# ONCE, match that regex exactly once (an error line printed by one rank only); with NOT, do not
# match that regex; with ONE_LINE, print exactly one stderr line (Open MPI's own exit notice aside)
# and no MPI_ABORT banner (cmake/expect_run.cmake). With MPMD, COMMAND
# is everything after mpirun's own options, in OpenMPI's MPMD syntax
# (`-np 1 canzona run --steps 2 : -np 1 canzona run --steps 3`), so ranks get different flags.
function(canzona_cli_test name)
  cmake_parse_arguments(ARG "MPMD;ONE_LINE" "RC;EXPECT;ONCE;NOT;NP;TIMEOUT" "COMMAND" ${ARGN})
  set(command ${ARG_COMMAND})
  set(labels cli)
  set(mpirun ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe --mca btl self,vader)
  if(ARG_NP)
    set(command ${mpirun} -np ${ARG_NP} ${ARG_COMMAND})
    set(labels cli mpi)
  elseif(ARG_MPMD)
    set(command ${mpirun} ${ARG_COMMAND})
    set(labels cli mpi)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  canzona_scale_timeout(ARG_TIMEOUT)
  math(EXPR inner_timeout "${ARG_TIMEOUT} - 10")
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${command}" "-DRC=${ARG_RC}" "-DEXPECT=${ARG_EXPECT}"
                   "-DONCE=${ARG_ONCE}" "-DNOT_EXPECT=${ARG_NOT}" "-DONE_LINE=${ARG_ONE_LINE}"
                   "-DTIMEOUT=${inner_timeout}" -P ${PROJECT_SOURCE_DIR}/cmake/expect_run.cmake)
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${ARG_TIMEOUT}
                       ENVIRONMENT "${CANZONA_TEST_ENV}")
endfunction()
