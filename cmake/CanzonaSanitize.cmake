# Build options for the correctness checks: sanitizer builds and libFuzzer targets.
#
#   CANZONA_SANITIZE=ON  every target (libraries, apps, tests, benches) is compiled and linked with
#                        ASan + UBSan, UBSan fatal (-fno-sanitize-recover=undefined), frame pointers
#                        kept for readable stacks. Works with gcc (libasan8, libubsan1 come with
#                        gcc-12) and clang. `make test-sanitize` configures build-sanitize with it.
#   CANZONA_FUZZ=ON      clang only: the libraries are compiled with -fsanitize=fuzzer-no-link plus
#                        ASan + UBSan, and fuzz/ adds one libFuzzer binary per hostile-input reader
#                        (canzona_fuzz_<target>). `make fuzz` configures build-fuzz with it and
#                        builds only the target canzona_fuzz_all.
#   CANZONA_BUILD_BENCH  (default ON) builds bench/; the sanitizer and fuzz builds switch it off,
#                        since no test runs a benchmark binary.
#   CANZONA_UNITY        (default: ON in sanitizer builds) a unity build, up to 8 sources of a
#                        target compiled as one translation unit: ASan + UBSan compile about 35%
#                        faster so, which keeps the clean-clone .ci/run in its budget. Sources
#                        whose file-local names clash with a neighbour's are compiled alone:
#                        canzona_no_unity(<files...>) in their directory's CMakeLists.txt. A new
#                        clash shows as a "redefinition" error in build-sanitize only.
option(CANZONA_SANITIZE "Compile and link everything with ASan + UBSan" OFF)
option(CANZONA_FUZZ "Build the libFuzzer targets in fuzz/ (clang with libclang-rt-dev)" OFF)
option(CANZONA_BUILD_BENCH "Build the benchmarks in bench/" ON)
option(CANZONA_UNITY "Unity build (batches of 8 sources)" ${CANZONA_SANITIZE})
if(CANZONA_UNITY)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
endif()

# canzona_no_unity(<files...>): these sources of the current directory are compiled on their own
# in a unity build (their anonymous-namespace names clash with a neighbour's).
function(canzona_no_unity)
  set_source_files_properties(${ARGN} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

set(CANZONA_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                            -fno-omit-frame-pointer)
if(CANZONA_SANITIZE)
  add_compile_options(${CANZONA_SANITIZER_FLAGS})
  add_link_options(-fsanitize=address,undefined)
endif()
if(CANZONA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CANZONA_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(NOT CANZONA_SANITIZE)
    add_compile_options(${CANZONA_SANITIZER_FLAGS})
    add_link_options(-fsanitize=address,undefined)
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
