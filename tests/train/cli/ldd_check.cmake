# cmake -DCANZONA=<canzona> -DCANZONA_TRAIN=<canzona-train> -P ldd_check.cmake
# `canzona` must not load libtorch (only `canzona train`, which execs canzona-train, does): no
# libtorch* or libc10* among its shared libraries. canzona-train must list libtorch, so a broken
# ldd (or a statically linked libtorch) cannot make the first check pass vacuously.
function(shared_libs exe var)
  execute_process(COMMAND ldd "${exe}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 30)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ldd ${exe} failed (${rc}): ${err}")
  endif()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()
shared_libs("${CANZONA}" canzona_libs)
shared_libs("${CANZONA_TRAIN}" train_libs)
message("--- ldd ${CANZONA}\n${canzona_libs}--- ldd ${CANZONA_TRAIN}\n${train_libs}")
if(canzona_libs MATCHES "[^\n]*lib(torch|c10)[^\n]*")
  message(FATAL_ERROR "${CANZONA} loads libtorch: '${CMAKE_MATCH_0}'")
endif()
if(NOT train_libs MATCHES "libtorch")
  message(FATAL_ERROR "${CANZONA_TRAIN} does not list libtorch: the check above proves nothing")
endif()
