# Parataxis -- the two commands a new user runs:
#
#   make demo     build the library and watch it work from C, Python and Lua
#   make check    every test: the layer rules of core/src (tests/layers.sh), the
#                 C reference generated from the header (docs/gen_capi.py), the
#                 conformance list (tests/behaviours.txt, tests/conformance.py), C
#                 (plain, ASan+UBSan, TSan, ucontext fallback, AArch64 under qemu,
#                 fuzz), install tree, Python, Lua (also as luarocks and cmake
#                 --install put it)
#
# Each installs the Debian packages it needs and this machine lacks first (.ci/deps
# demo or check), and keeps Python packages in a virtual environment of the
# project, .venv/ (made on first use; PYTHON=... picks another interpreter).
# Other targets: make build, make bench (benchmarks, not tests; .ci/deps bench adds
# their peers), make clean (make distclean also removes .venv/).

PYTHON   ?= $(CURDIR)/.venv/bin/python
export PYTHON
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CONFIGURE = cmake -S . $(GENERATOR) -DPARATAXIS_WERROR=ON
CTEST     = ctest --output-on-failure --no-tests=ignore

.PHONY: all deps demo-deps bench-deps build demo-build check test-layers test-docs test-conformance test-c test-asan test-tsan test-ucontext test-fuzz \
        test-aarch64 test-python test-lua test-lua-install python-install demo-python-install bench clean distclean

all: build

deps:
	@sh .ci/deps check

demo-deps:
	@sh .ci/deps demo

build: deps
	@$(CONFIGURE) -B build >/dev/null
	@cmake --build build

# The library, the C demos and the Lua module: what make demo needs of the build.
demo-build: demo-deps
	@$(CONFIGURE) -B build >/dev/null
	@cmake --build build --target demos

# -Werror on the library and the binding's own C (_pxpy.c), as in `make build`.
python-install: deps
	$(PYTHON) -m pip install -q -C cmake.define.PARATAXIS_WERROR=ON .

demo-python-install: demo-deps
	@$(PYTHON) -m pip install -q -C cmake.define.PARATAXIS_WERROR=ON .

demo: demo-build demo-python-install
	@echo "== C: timers =="
	@./build/timer_demo
	@echo "== C: fibers and the sync family =="
	@./build/fiber_demo
	@echo "== C: fibers doing I/O (an echo server and its clients) =="
	@./build/io_echo_demo
	@echo "== Python: timers =="
	@$(PYTHON) docs/examples/timer_demo.py
	@echo "== Python: fibers and the sync family =="
	@$(PYTHON) docs/examples/fiber_demo.py
	@echo "== Python: fibers doing I/O (an echo server and its clients) =="
	@$(PYTHON) docs/examples/io_demo.py
	@if [ -f build/bindings/parataxis_core.so ]; then echo "== Lua: timers =="; \
	    LUA_CPATH="$$PWD/build/bindings/?.so;;" LUA_PATH="$$PWD/bindings/lua/?.lua;;" \
	    lua5.4 docs/examples/timer_demo.lua && \
	    echo "== Lua: fibers and the sync family ==" && \
	    LUA_CPATH="$$PWD/build/bindings/?.so;;" LUA_PATH="$$PWD/bindings/lua/?.lua;;" \
	    lua5.4 docs/examples/fiber_demo.lua && \
	    echo "== Lua: fibers doing I/O (an echo server and its clients) ==" && \
	    LUA_CPATH="$$PWD/build/bindings/?.so;;" LUA_PATH="$$PWD/bindings/lua/?.lua;;" \
	    lua5.4 docs/examples/io_demo.lua; fi

check: test-layers test-docs test-conformance test-c test-asan test-tsan test-ucontext test-aarch64 test-fuzz test-python test-lua test-lua-install
	@echo "make check: every suite passed"

test-layers:
	sh tests/layers.sh

test-docs: deps
	$(PYTHON) docs/gen_capi.py --check

# Every behaviour of tests/behaviours.txt tested under its name in each language
# it applies to, and no test of the three suites outside the list.
test-conformance: build python-install
	$(PYTHON) tests/conformance.py --build build

test-c: build
	cd build && $(CTEST)

test-asan: deps
	@$(CONFIGURE) -B build-asan -DCMAKE_BUILD_TYPE=Debug \
	    -DPARATAXIS_SANITIZE=address,undefined >/dev/null
	@cmake --build build-asan
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 $(CTEST)

test-tsan: deps
	@$(CONFIGURE) -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DPARATAXIS_SANITIZE=thread >/dev/null
	@cmake --build build-tsan
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 $(CTEST) -L "threaded|fiber"

test-ucontext: deps
	@$(CONFIGURE) -B build-ucontext -DPARATAXIS_CONTEXT=ucontext >/dev/null
	@cmake --build build-ucontext
	cd build-ucontext && $(CTEST) -L "fiber|io"

# The AArch64 context switch, cross-built and run under qemu-user.
test-aarch64: deps
	@$(CONFIGURE) -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
	    -DPARATAXIS_PYTHON=OFF >/dev/null
	@cmake --build build-aarch64
	cd build-aarch64 && $(CTEST) -L "fiber|io" -E "^fiber\.million$$"

test-fuzz: deps
	@CC=clang $(CONFIGURE) -B build-fuzz -DPARATAXIS_FUZZ=ON >/dev/null
	@cmake --build build-fuzz
	cd build-fuzz && $(CTEST) -L fuzz

test-python: python-install
	$(PYTHON) -m pytest -q tests/python

test-lua: build
	LUA_CPATH="$$PWD/build/bindings/?.so;;" LUA_PATH="$$PWD/bindings/lua/?.lua;;" \
	    busted --lua=lua5.4 tests/lua

# The Lua module installed into scratch trees (luarocks make, cmake --install):
# a smoke script and the busted specs against the installed copy.
test-lua-install: build
	sh tests/install/lua.sh build

# deps plus the peers of the benchmarks (gevent, trio, uvloop; Debian lua-copas and golang-go), if missing.
bench-deps:
	@sh .ci/deps bench

bench: bench-deps python-install
	@$(CONFIGURE) -B build-bench -DCMAKE_BUILD_TYPE=Release -DPARATAXIS_BENCH=ON >/dev/null
	@cmake --build build-bench
	PYTHON="$(PYTHON)" sh tests/bench/run.sh build-bench

clean:
	rm -rf build build-asan build-tsan build-ucontext build-aarch64 build-fuzz build-bench

distclean: clean
	rm -rf .venv
