# The README's two commands, `make demo` and `make test`, and a few helpers.
# The build itself is Meson + Ninja; this file only wraps it.

BUILD ?= build
SAN ?= build-san
PYTHON := /usr/bin/python3
DPFLOW := $(BUILD)/tools/dpflow/dpflow

# CUDA's compiler, where installed: the GPU target builds with it (lib/gpu).
NVCC ?= $(wildcard /usr/local/cuda/bin/nvcc)
export NVCC

SAN_OPTS := -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
	-Db_lundef=false -Dc_args=-fno-sanitize-recover=all \
	-Dnative=false -Dfuzz=true

.PHONY: all deps build san test demo bench install format clean

all: build

deps:
	@sh scripts/deps.sh

build: deps
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD)
	ninja -C $(BUILD)

# Unit tests and tools under AddressSanitizer and UBSan, with clang so that
# the libFuzzer targets build too.
san: deps
	@[ -f $(SAN)/build.ninja ] || CC=clang meson setup $(SAN) $(SAN_OPTS)
	ninja -C $(SAN)

# The live hot-update test times the data path: it runs the plain build's
# binaries (a sanitizer build's timing means nothing), found through these.
test: build san
	DPFLOW_PLAIN_BIN=$(abspath $(BUILD))/tools \
		$(PYTHON) tests/run_all.py $(SAN)

demo: build
	sh scripts/demo.sh $(DPFLOW)

# Benchmarks with their peers: DPDK is installed on first use, and the
# build is reconfigured to pick it up.
bench: build
	@sh scripts/deps.sh --bench
	@meson setup --reconfigure $(BUILD) >/dev/null
	ninja -C $(BUILD)
	$(DPFLOW) bench parse

install: build
	meson install -C $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(SAN)
