# rlmem: two commands do everything on a fresh Debian 12 machine: `make demo` and `make test`.
# Each installs what is missing first (as root via apt-get; otherwise it prints the line to run).

PACKAGES := cmake g++ make pkg-config nlohmann-json3-dev libfmt-dev libcli11-dev \
            zlib1g-dev libzstd-dev libre2-dev libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev nodejs
# The Python package's tests (Debian's torch 1.13 gives them a real gloo process group), the
# terminal test of `rlmem watch`, the browser tests of `rlmem report` (headless chromium) and the
# corpus test, whose reference reads the .zst snapshots with the zstd command; doxygen checks that
# the C headers and every part's C++ API header document every declaration.
TEST_PACKAGES := python3 python3-venv python3-setuptools python3-wheel python3-pip python3-pytest python3-torch tmux \
                 chromium zstd doxygen
FUZZ_PACKAGES := clang libclang-rt-dev
# Debian's interpreter, where python3-pytest and python3-torch live (not a pyenv or venv one).
PYTHON := /usr/bin/python3
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build install wheel demo test test-release test-sanitize test-python test-wheel python-tests wheel-tests bench fuzz clean

all: build

# npm is looked for as a command: Debian's nodejs comes without it (npm is its own package),
# while NodeSource's nodejs bundles it and conflicts with Debian's npm.
deps:
	@missing=""; for p in $(PACKAGES) $(EXTRA_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  else \
	    echo "rlmem needs Debian packages; run:"; echo "  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

# Release binary at build/rlmem and the C library at build/librlmem.so.
build: deps
	cmake --preset release
	cmake --build --preset release --target rlmem rlmem_c -j $(JOBS)

# For those who build from source: bin/rlmem, lib/librlmem.so*, include/rlmem and the Python
# package (lib/python/rlmem: put PREFIX/lib/python on PYTHONPATH). docs/install.md.
PREFIX ?= /usr/local
install: build
	cmake --install build --prefix $(PREFIX)

# dist/rlmem-VERSION-py3-none-manylinux_2_Y_x86_64.whl for any CPython 3.9+: the package, librlmem
# (with the libre2.so.9 it needs) and the rlmem command of the release build, which links zstd and
# zlib in (and re2 into rlmem): the wheel ships what the tests ran. docs/install.md.
wheel: build
	$(PYTHON) tools/wheel/build_wheel.py --library build/librlmem.so --command build/rlmem --out dist

# The payoff on the bundled recordings, in seconds: a leak and its site, an OOM's verdict with the
# replay that proves it, a plan fitted to a card, and an HTML page; then the Python package.
demo: build
	tools/demo.sh build/rlmem build/demo
	@PYTHONPATH=python $(PYTHON) -c 'import rlmem; leak = rlmem.inspect("testdata/snapshots/grpo_leak_logits.pickle.zst")["leaks"][0]; \
	  print("\npython: rlmem", rlmem.version() + ", the same leak from import rlmem:", leak["site"] + ",", \
	        format(leak["bytes_per_step"], ","), "B per step")'

# Every C++ test twice (a Release build, then an AddressSanitizer + UBSan build), the Python
# package's tests once, against the Release librlmem, and the wheel's once. Those two run on one
# core each, so they run beside the sanitize build, which is all compiling, and their output is
# printed after it in one piece: the two cores of a small CI machine are never half idle.
test: test-release
	@rm -f build/python-and-wheel.log build/python-and-wheel.status; \
	( $(MAKE) --no-print-directory python-tests wheel-tests > build/python-and-wheel.log 2>&1; \
	  echo $$? > build/python-and-wheel.status ) & \
	$(MAKE) --no-print-directory test-sanitize; sanitize=$$?; wait; \
	echo "== the Python package's and the wheel's tests (run beside the sanitize build):"; \
	cat build/python-and-wheel.log; python_and_wheel=$$(cat build/python-and-wheel.status 2>/dev/null || echo 1); \
	echo "== sanitize: exit $$sanitize; Python and wheel: exit $$python_and_wheel"; \
	[ "$$sanitize" = 0 ] && [ "$$python_and_wheel" = 0 ]

test-release:
	$(MAKE) deps EXTRA_PACKAGES="$(TEST_PACKAGES)"
	cmake --preset release
	cmake --build --preset release -j $(JOBS)
	ctest --preset release -j $(JOBS)

test-python: test-release
	$(MAKE) --no-print-directory python-tests

# The wheel's archive and binaries, then the wheel installed into a venv of a Python that is not
# Debian's (skipped, with the reason, where the machine has none) running rlmem and import rlmem.
test-wheel: test-release
	$(MAKE) --no-print-directory wheel-tests

# The two suites alone, over the Release build that test-release made and tested.
python-tests:
	RLMEM_LIBRARY=$(CURDIR)/build/librlmem.so RLMEM_CLI=$(CURDIR)/build/rlmem \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/python

wheel-tests: wheel
	RLMEM_BUILD=$(CURDIR)/build $(PYTHON) -m pytest -q -rs -p no:cacheprovider tests/wheel

test-sanitize: deps
	cmake --preset sanitize
	cmake --build --preset sanitize -j $(JOBS)
	ctest --preset sanitize -j $(JOBS)

bench: deps
	cmake --preset bench
	cmake --build --preset bench -j $(JOBS)
	./build-bench/bench/rlmem_bench --benchmark_counters_tabular=true
	bench/peak_rss.sh build-bench/rlmem

# libFuzzer runs of every parser (the snapshot reader with inspect() and replay, the category
# rules, the alloc-conf parser, config.json and --buffer specs with every plan phase, librlmem's
# C ABI, StepMonitor log lines with watch's advice and views):
# make fuzz FUZZ_SECONDS=600
FUZZ_SECONDS ?= 600
fuzz:
	$(MAKE) deps EXTRA_PACKAGES="$(FUZZ_PACKAGES)"
	cmake --preset fuzz
	cmake --build --preset fuzz --target all_fuzzers -j $(JOBS)
	for target in fuzz_snapshot_reader fuzz_category_rules fuzz_alloc_conf fuzz_plan_inputs fuzz_capi fuzz_steplog fuzz_names_and_patterns; do \
	  mkdir -p build-fuzz/corpus/$$target && cp -n fuzz/corpus/$$target/* build-fuzz/corpus/$$target/ && \
	  ./build-fuzz/fuzz/$$target build-fuzz/corpus/$$target -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	    -artifact_prefix=build-fuzz/$$target- || exit 1; \
	done

clean:
	rm -rf build build-debug build-sanitize build-fuzz build-bench dist
