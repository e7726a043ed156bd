# The README's two commands: `make run` and `make test`. Both install what they need first.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DHEDDLE_WERROR=ON
HEDDLE := $(BUILD)/tools/heddle/heddle
MAKEFLAGS += --no-print-directory
# `make run` shows this model: a zoo name or a text-IR file (e.g. MODEL=examples/mlp.hd).
MODEL ?= gpt3-1.3b

.PHONY: all deps configure build run test bench format clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	$(HEDDLE) show $(MODEL)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

bench: build
	@for b in $(BUILD)/bench/bench_*; do echo "== $$b"; $$b; done

format:
	@git ls-files '*.h' '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
