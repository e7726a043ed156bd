# The README's two commands: `make run` and `make test`. Both install what they need first.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DHEDDLE_WERROR=ON
HEDDLE := $(BUILD)/tools/heddle/heddle
MAKEFLAGS += --no-print-directory
# `make run` shows this model: a zoo name or a text-IR file (e.g. MODEL=examples/mlp.hd).
MODEL ?= gpt3-1.3b

.PHONY: all deps configure build run test bench bench-torch fuzz test-sanitize test-sanitize-ci format clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# The main job: summarize the default model, plan gpt3-175b training on 1,024 A100s, then plan a
# small GPT for four thread-devices and run it, checked against the single-device interpreter.
run: build
	$(HEDDLE) show $(MODEL) --limit 12
	$(HEDDLE) plan gpt3-175b --cluster a100x1024 --train --batch 1536 --time-limit 30
	$(HEDDLE) run gpt-tiny --mesh 4 --strategy auto --train --steps 3 --check

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

bench: build
	@for b in $(BUILD)/bench/bench_*; do echo "== $$b"; $$b; done

# heddle against PyTorch eager on the same models, weights, inputs and core counts, forward and
# training, plus dp=2/tp=2 on 2 devices (threads and MPI ranks): bench/torch_compare.py, table in
# docs/benchmarks.md. Needs Debian's PyTorch (scripts/install-deps --bench; `make test` never
# does). BENCH_TORCH_ARGS adds options, e.g. BENCH_TORCH_ARGS="--quick --out table.md".
BENCH_TORCH_ARGS ?=
bench-torch: configure
	@scripts/install-deps --bench
	@cmake --build $(BUILD) -j$(JOBS) --target heddle
	/usr/bin/python3 bench/torch_compare.py --heddle $(HEDDLE) $(BENCH_TORCH_ARGS)

# libFuzzer targets, each run for FUZZ_SECONDS on a scratch copy of its seed corpus
# (fuzz/corpus/<target>); FUZZ_TARGETS picks some. Findings (crashes, sanitizer reports, undefined
# behaviour: UBSan halts) are left in build-fuzz/ as crash-*. NDEBUG stays unset, so the debug
# asserts (a kernel's reads inside its tiles) are checked too. fuzz_onnx mutates the seeds under
# 32 KB only (the weight-stripped models): whole exported models run it at half the speed.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= text_ir text_ir_run placement onnx cluster npy
fuzz:
	@scripts/install-deps --fuzz
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" \
	  -DHEDDLE_FUZZ=ON -DHEDDLE_BUILD_TESTS=OFF -DHEDDLE_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	  rm -rf build-fuzz/corpus-$$t && cp -r fuzz/corpus/$$t build-fuzz/corpus-$$t; \
	  echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  maxlen=65536; \
	  if [ $$t = onnx ]; then maxlen=32768; find build-fuzz/corpus-$$t -size +32k -delete; fi; \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  build-fuzz/fuzz/fuzz_$$t build-fuzz/corpus-$$t -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=$$maxlen -timeout=10 -print_final_stats=1 -artifact_prefix=build-fuzz/ 2>&1 | \
	    grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|ERROR|SUMMARY" ; \
	done

# Sanitizer trees build at -O1 with line tables only (-g1): the sanitizers' usual setting, and
# 2.5x faster to compile than RelWithDebInfo's -O2 -g (DeviceExecutor.cpp under ASan: 21 s
# against 53 s), which keeps .ci/run inside its time on a fresh 2-core machine. NDEBUG as in
# Release, so the tests see the code that ships.
SANITIZE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"

# Every test under AddressSanitizer + UndefinedBehaviorSanitizer, then the runtime's tests (threaded
# executor, pipelines, lowering) under ThreadSanitizer. SANITIZE_TESTS picks the ASan ctest regex.
SANITIZE_TESTS ?= .
test-sanitize: deps
	@cmake -S . -B build-asan $(SANITIZE_FLAGS) -DHEDDLE_SANITIZE=address,undefined \
	  -DHEDDLE_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-asan -j$(JOBS)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j$(JOBS) -R '$(SANITIZE_TESTS)'
	@cmake -S . -B build-tsan $(SANITIZE_FLAGS) -DHEDDLE_SANITIZE=thread \
	  -DHEDDLE_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-tsan -j$(JOBS) --target test_runtime
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" build-tsan/tests/runtime/test_runtime --gtest_brief=1

# The CI subset of test-sanitize (.ci/run): ASan+UBSan on the ir, sharding and runtime unit tests
# plus test_ops_graphs (every zoo training step: built at default size, run shrunk), test_frontend and
# test_driver (every imported fixture: imported, run partitioned, trained on 2 thread-devices),
# TSan on the runtime's tests; builds only those binaries. About 33 min from nothing on 2 idle
# cores, the ASan binaries two at a time (docs/reliability.md).
SANITIZE_CI_ASAN ?= test_runtime test_frontend test_ops_graphs test_sharding test_driver test_ir \
  test_support
test-sanitize-ci: deps
	@cmake -S . -B build-asan $(SANITIZE_FLAGS) -DHEDDLE_SANITIZE=address,undefined \
	  -DHEDDLE_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-asan -j$(JOBS) --target $(SANITIZE_CI_ASAN)
	@mkdir -p build-asan/logs
	@printf '%s\n' $(SANITIZE_CI_ASAN) | xargs -P$(JOBS) -I{} sh -c \
	  'bin=$$(find build-asan/tests -type f -name {} | head -1); \
	  if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $$bin --gtest_brief=1 \
	    >build-asan/logs/{}.log 2>&1; then echo "== {} (ASan+UBSan): $$(grep -h "PASSED" build-asan/logs/{}.log)"; \
	  else cat build-asan/logs/{}.log; echo "== {} (ASan+UBSan) FAILED"; exit 255; fi'
	@cmake -S . -B build-tsan $(SANITIZE_FLAGS) -DHEDDLE_SANITIZE=thread \
	  -DHEDDLE_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-tsan -j$(JOBS) --target test_runtime
	@echo "== test_runtime (TSan)"
	@TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" build-tsan/tests/runtime/test_runtime --gtest_brief=1

format:
	@git ls-files '*.h' '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-fuzz build-asan build-tsan
