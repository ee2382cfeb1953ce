# The project's Python stack (scripts/install-deps.sh makes it in .venv from requirements.txt).
# One interpreter, CANZONA_PYTHON, decides both the Python package's interpreter (python/) and the
# libtorch the train layer links: the one of that interpreter's torch wheel, found through the
# wheel's own CMake config (torch.utils.cmake_prefix_path). -DCANZONA_PYTHON=/usr/bin/python3 builds
# against Debian's python3-torch / libtorch-dev 1.13 instead (docs/python.md, supported versions).
set(CANZONA_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python interpreter whose torch the project builds and tests against")
if(NOT EXISTS "${CANZONA_PYTHON}")
  message(FATAL_ERROR "CANZONA_PYTHON '${CANZONA_PYTHON}' does not exist: run scripts/install-deps.sh "
                      "(make deps) to make .venv, or pass -DCANZONA_PYTHON=<python with torch>")
endif()
execute_process(
  COMMAND "${CANZONA_PYTHON}" -c "import torch, torch.utils; print(torch.__version__); print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE _canzona_torch RESULT_VARIABLE _canzona_torch_rc ERROR_VARIABLE _canzona_torch_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _canzona_torch_rc EQUAL 0)
  message(FATAL_ERROR "CANZONA_PYTHON '${CANZONA_PYTHON}' cannot import torch: ${_canzona_torch_err}")
endif()
string(REPLACE "\n" ";" _canzona_torch "${_canzona_torch}")
list(GET _canzona_torch 0 CANZONA_TORCH_VERSION)
list(GET _canzona_torch 1 _canzona_torch_prefix)
# A wheel carries its CMake config under torch/share/cmake; Debian's python3-torch does not (its
# libtorch-dev installs it where find_package looks anyway).
if(EXISTS "${_canzona_torch_prefix}/Torch/TorchConfig.cmake")
  list(PREPEND CMAKE_PREFIX_PATH "${_canzona_torch_prefix}")
endif()

# PyPI's torch wheel is a CUDA build: its config finds the machine's CUDA toolkit and, unless told
# which GPU architectures to name, runs a program to detect the GPU, which fails where there is none.
# Nothing here compiles CUDA code, so the list only has to be valid; Hopper (sm_90) by default.
set(TORCH_CUDA_ARCH_LIST "9.0" CACHE STRING "GPU architectures the torch wheel's CMake config names")
find_package(Torch REQUIRED)
message(STATUS "canzona: torch ${CANZONA_TORCH_VERSION} of ${CANZONA_PYTHON}")

# canzona_torch: what the train layer links. The CPU half of libtorch only (torch_cpu and c10):
# libtorch.so would also load torch_cuda and its CUDA libraries into every process, 0.1 s and
# 370 MB of RSS more per start here, for kernels nothing runs without a GPU (a CUDA data plane would
# link torch_library instead).
add_library(canzona_torch INTERFACE)
target_link_libraries(canzona_torch INTERFACE torch_cpu_library c10)
target_include_directories(canzona_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_canzona_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(canzona_torch INTERFACE ${_canzona_torch_flags})
