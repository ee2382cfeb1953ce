# Two commands on a fresh machine: `make demo` and `make test`. Both install missing Debian
# packages first (scripts/install-deps.sh), configure with CMake + Ninja and build.
BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CANZONA := $(BUILD)/apps/canzona

.PHONY: all deps configure build demo test bench format clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 4 $(CANZONA) compare \
	  --model qwen3-tiny --dp 2 --tp 2 --split-qkv qkv --split-fc1 --bucket-size 100000 --verify
	$(CANZONA) plan --model qwen3-32b --dp 32 --tp 8 --optimizer muon

test: build
	cd $(BUILD) && OPENBLAS_NUM_THREADS=1 ctest --output-on-failure -j $(JOBS)

bench: build
	$(BUILD)/bench/plan/canzona_bench_plan --benchmark_min_time=0.2
	$(BUILD)/bench/optim/canzona_bench_optim --benchmark_min_time=0.2
	$(CANZONA) bench-kernels --quick

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD)
