# Two commands on a fresh machine: `make demo` and `make test`. Both install missing Debian
# packages first (scripts/install-deps.sh), configure with CMake + Ninja and build.
BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CANZONA := $(BUILD)/apps/canzona

.PHONY: all deps configure build demo test test-sanitize fuzz fuzz-deps fuzz-build bench format clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job in about 80 lines: every strategy trains qwen3-tiny at DP 2 x TP 2 and is checked
# against one process (a step line every 10 steps, --log-interval), then the Qwen3-32B plan at
# DP 32 x TP 8. Checkpoints and the synthetic-gradient runtime: README.md, "Quickstart".
demo: build
	OPENBLAS_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 4 \
	  $(CANZONA) train --model qwen3-tiny --dp 2 --tp 2 --split-qkv qkv --split-fc1 \
	  --strategies all --steps 30 --warmup 3 --eval-every 10 --verify
	$(CANZONA) plan --model qwen3-32b --dp 32 --tp 8 --optimizer muon

test: build
	cd $(BUILD) && OPENBLAS_NUM_THREADS=1 ctest --output-on-failure -j $(JOBS)

# The ctest suite again, built with ASan + UBSan (-DCANZONA_SANITIZE=ON, a unity build, no
# benches) in its own build dir, less the tests that only repeat a kept test's code paths on
# another grid or optimizer (the list and why: tests/CMakeLists.txt, canzona_sanitize_skip). detect_leaks=0: OpenMPI's MPI_Init/MPI_Finalize leak by design
# (hwloc, PMIx, opal state) and LeakSanitizer would fail every MPI test on them; use-after-free,
# overflows and every UBSan check stay fatal. Also the options gtest_discover_tests runs with.
# CANZONA_SANITIZE=1 tells test scripts that the binaries are ASan builds: ASan reserves ~15 TB of
# virtual shadow memory at start, so `ulimit -v` kills them; such scripts bound memory with
# ASAN_OPTIONS=...:hard_rss_limit_mb=N instead.
# -O1 -g1 (line tables only) instead of RelWithDebInfo's -O2 -g: ASan + UBSan at -O2 -g compile the
# libtorch translation units 2.8x slower (apps/train/main.cpp: 151 s against 54 s) and reports
# keep file:line either way.
SAN_BUILD ?= build-sanitize
SAN_OPT ?= -O1 -g1 -DNDEBUG
SAN_ENV := CANZONA_SANITIZE=1 ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OPENBLAS_NUM_THREADS=1

$(SAN_BUILD)/build.ninja: | deps
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCANZONA_SANITIZE=ON \
	  -DCANZONA_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(SAN_OPT)"

test-sanitize: deps $(SAN_BUILD)/build.ninja
	$(SAN_ENV) cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS)

# libFuzzer targets (fuzz/CMakeLists.txt), built with clang + ASan + UBSan in their own build dir;
# each runs FUZZ_SECONDS on a scratch copy of its seed corpus fuzz/corpus/<target>/ (new inputs
# stay out of the repo) with the dictionary fuzz/dict/<target>.dict when there is one. Fails when
# any target finds a crash, a sanitizer report, a leak, an input over FUZZ_RSS_MB or one slower
# than FUZZ_INPUT_TIMEOUT s; the reproducer is saved as $(FUZZ_BUILD)/findings/<target>/crash-*
# (or leak-*, oom-*, timeout-*). Copy it to fuzz/crashes/<target>/ and it becomes a regression
# test: ctest's fuzz_replay_<target> replays that folder in `make test` and `make test-sanitize`.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_MAX_LEN ?= 4096
FUZZ_RSS_MB ?= 2048
FUZZ_INPUT_TIMEOUT ?= 10
FUZZ_TARGETS := model_json cluster calibration planner

fuzz-deps:
	@scripts/install-deps.sh --fuzz

$(FUZZ_BUILD)/build.ninja: | fuzz-deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCANZONA_FUZZ=ON -DCANZONA_BUILD_BENCH=OFF

fuzz-build: deps fuzz-deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) --target canzona_fuzz_all -j $(JOBS)

fuzz: fuzz-build
	@status=0; for t in $(FUZZ_TARGETS); do \
	  work=$(FUZZ_BUILD)/corpus/$$t; found=$(FUZZ_BUILD)/findings/$$t; \
	  rm -rf $$work $$found; mkdir -p $$work $$found; cp fuzz/corpus/$$t/* $$work/; \
	  dict=; if [ -f fuzz/dict/$$t.dict ]; then dict=-dict=fuzz/dict/$$t.dict; fi; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  if ! ASAN_OPTIONS=halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	       OPENBLAS_NUM_THREADS=1 $(FUZZ_BUILD)/fuzz/canzona_fuzz_$$t $$work \
	       -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) -rss_limit_mb=$(FUZZ_RSS_MB) \
	       -timeout=$(FUZZ_INPUT_TIMEOUT) -print_final_stats=1 -artifact_prefix=$$found/ $$dict \
	       >$(FUZZ_BUILD)/findings/$$t.log 2>&1; then \
	    echo "fuzz: $$t FOUND A CRASH: $$(ls $$found); log $(FUZZ_BUILD)/findings/$$t.log"; \
	    grep -E '^(==|SUMMARY|.*runtime error)' $(FUZZ_BUILD)/findings/$$t.log | head -5; status=1; \
	  else grep -E '^(stat::number_of_executed_units|stat::new_units_added)' \
	         $(FUZZ_BUILD)/findings/$$t.log | tr '\n' ' '; echo; fi; \
	done; exit $$status

bench: build
	$(BUILD)/bench/plan/canzona_bench_plan --benchmark_min_time=0.2
	$(BUILD)/bench/optim/canzona_bench_optim --benchmark_min_time=0.2
	$(CANZONA) bench-kernels --quick

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD)
