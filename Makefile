# memdiag - build, test, demo. `make help` lists the targets.
CC ?= cc
# -flto lets the reader's hot paths inline across files (5-8 % on big snapshots)
CFLAGS ?= -O2 -g -flto=auto -ffat-lto-objects
AR = gcc-ar
WARN = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
LIBS = -ljansson -lz -lzstd -llzma -lm -ldl -lpthread
ifeq ($(STATIC_DEPS),1)  # a binary for machines without these -dev packages
LIBS = -Wl,-Bstatic -ljansson -lzstd -llzma -lz -Wl,-Bdynamic -lm -ldl -lpthread
endif
# The CLI is linked static (position-independent, so still randomized): a
# run then skips the dynamic loader's work, 0.4-0.8 ms of every run and
# 1.2 MB of resident memory (bench/RESULTS.md, session 6), which is most
# of what a 1 MB snapshot costs. The sanitizer builds set CLI_STATIC=0.
CLI_STATIC ?= 1
ifeq ($(CLI_STATIC),1)
# Its segments 64 KiB-aligned, so that the kernel's 64 KiB fault-around
# windows fall the same way in every run (the load address keeps its
# randomness above 64 KiB), and its relocations packed (RELR: 55 KB of
# relocations read at every start -> 0.5 KB).
CLI_LINK = -static-pie -Wl,-z,max-page-size=0x10000 -Wl,-z,pack-relative-relocs \
           -ljansson -lzstd -llzma -lz -lm -lpthread
# and the code and constants a summary touches laid side by side
# (src/cli/hot.ld, made by scripts/hot_text.sh; bench/RESULTS.md, sessions
# 31 and 32)
CLI_ORDER = -ffunction-sections -fdata-sections -Wl,-T,src/cli/hot.ld
else
CLI_LINK = $(LIBS)
endif
BUILD ?= build
SHARED ?= ../shared

SRC_LIB = $(wildcard src/util/*.c src/pickle/*.c src/snapshot/*.c src/model/*.c \
                     src/analyze/*.c src/render/*.c src/capture/*.c src/predict/*.c)
SRC_CLI = $(wildcard src/cli/*.c)
SRC_TEST = $(wildcard tests/unit/*.c)
OBJ_LIB = $(SRC_LIB:%.c=$(BUILD)/%.o) $(BUILD)/gen/page_js.o
OBJ_CLI = $(SRC_CLI:%.c=$(BUILD)/%.o)
TESTS = $(SRC_TEST:tests/unit/%.c=$(BUILD)/tests/%)

all: deps $(BUILD)/memdiag $(BUILD)/libmemdiag.so $(BUILD)/libmemdiag_capture.so

$(BUILD)/%.o: %.c $(wildcard include/*.h src/*/*.h) | deps
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -Iinclude -c $< -o $@

$(BUILD)/libmemdiag.a: $(OBJ_LIB)
	$(AR) rcs $@ $^

# The HTML pages' script, embedded into the library at build time (pages
# load nothing): page.js as a C array, by od, which every machine has.
$(BUILD)/gen/page_js.c: src/render/page.js
	@mkdir -p $(dir $@)
	{ echo '/* generated from src/render/page.js by the Makefile */'; \
	  echo 'extern const char md_page_js[];'; echo 'const char md_page_js[] = {'; \
	  od -An -v -tx1 $< | sed 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo '0};'; } > $@
$(BUILD)/gen/page_js.o: $(BUILD)/gen/page_js.c
	$(CC) $(WARN) $(CFLAGS) -c $< -o $@
$(BUILD)/pic/gen/page_js.o: $(BUILD)/gen/page_js.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(PIC_CFLAGS) -fPIC -c $< -o $@

# The shared library the Python capture glue loads with ctypes.
# Shared objects are loaded into uninstrumented processes (python), so the
# sanitizer build compiles them without -fsanitize (PIC_CFLAGS).
PIC_CFLAGS ?= $(CFLAGS)
OBJ_PIC = $(SRC_LIB:%.c=$(BUILD)/pic/%.o) $(BUILD)/pic/gen/page_js.o
$(BUILD)/pic/%.o: %.c $(wildcard include/*.h src/*/*.h) | deps
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(PIC_CFLAGS) -fPIC -Iinclude -c $< -o $@

$(BUILD)/libmemdiag.so: $(OBJ_PIC)
	$(CC) $(PIC_CFLAGS) -shared -o $@ $^ $(LIBS)

# What a training process loads: the capture runtime alone (libc, libz).
SRC_CAP = $(wildcard src/capture/*.c) src/util/err.c
$(BUILD)/libmemdiag_capture.so: $(SRC_CAP:%.c=$(BUILD)/pic/%.o)
	$(CC) $(PIC_CFLAGS) -shared -o $@ $^ -lz -ldl -lpthread

$(BUILD)/memdiag: $(OBJ_CLI) $(BUILD)/libmemdiag.a src/cli/hot.ld
	$(CC) $(CFLAGS) $(CLI_ORDER) -o $@ $(OBJ_CLI) $(BUILD)/libmemdiag.a $(CLI_LINK)

# The CLI's link without its order, for scripts/hot_text.sh to link it
# again with a map: the compiler and flags, then what follows `-o OUT`.
cli-link:
	@echo '$(CC) $(CFLAGS)'
	@echo '$(OBJ_CLI) $(BUILD)/libmemdiag.a $(CLI_LINK)'

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(BUILD)/libmemdiag.a | deps
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(filter-out -flto%,$(CFLAGS)) -fno-lto -Iinclude -Isrc $(CUDA_FLAGS) -o $@ $< $(BUILD)/libmemdiag.a -lcmocka $(LIBS)

# The driver tracer's test drives it through a stand-in libcupti.
$(BUILD)/tests/libfake_cupti.so: tests/unit/fake/fake_cupti.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -g -fPIC -shared -o $@ $<
$(BUILD)/tests/test_driver: $(BUILD)/tests/libfake_cupti.so
# CUPTI's header, where the toolkit is installed: the test checks the
# tracer's copies of its structs against it.
CUDA_INC ?= $(firstword $(wildcard /usr/local/cuda/include /usr/local/cuda-*/include))
$(BUILD)/tests/test_driver: CUDA_FLAGS = $(if $(CUDA_INC),-idirafter $(CUDA_INC) -DMD_HAVE_CUPTI_H)

# Checks the Debian packages the build needs; installs them when run as root.
# Every compile waits for it (order-only), so `make -j` on a fresh machine
# does not race the install.
deps:
	@scripts/deps.sh

test: deps $(BUILD)/memdiag $(BUILD)/libmemdiag.so $(BUILD)/libmemdiag_capture.so $(TESTS)
	@scripts/run-tests.sh $(BUILD)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) BUILD=build-asan CC=clang AR=ar PIC_CFLAGS="-O1 -g" CLI_STATIC=0 \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

# The CLI under ThreadSanitizer (snapshots are read on several threads):
# the CLI tests run against it.
tsan:
	$(MAKE) BUILD=build-tsan CC=clang AR=ar CLI_STATIC=0 CFLAGS="-O1 -g -fsanitize=thread" \
	  build-tsan/memdiag
	MEMDIAG=build-tsan/memdiag TSAN_OPTIONS=halt_on_error=1:exitcode=66 sh tests/cli/test_cli.sh

fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

demo: all
	@scripts/demo.sh $(BUILD)/memdiag

# Per-stage timing of one file: build/stages FILE [RUNS]
$(BUILD)/stages: bench/stages.c $(BUILD)/libmemdiag.a
	$(CC) $(WARN) $(CFLAGS) -Iinclude $< $(BUILD)/libmemdiag.a $(LIBS) -o $@

# The reader's time beside busy threads: build/contend FILE RUNS [alu|mem|mm] [CPUS|free]
# (static, to run on the device host)
$(BUILD)/contend: bench/contend.c $(BUILD)/libmemdiag.a
	$(CC) $(WARN) $(CFLAGS) -Iinclude $< $(BUILD)/libmemdiag.a -static \
	    -ljansson -lzstd -llzma -lz -lm -lpthread -o $@

bench: all $(BUILD)/stages $(BUILD)/contend
	bench/run.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz

help:
	@echo "make demo   build and run memdiag on the bundled real snapshots"
	@echo "make test   build and run the unit and CLI tests"
	@echo "make asan   the tests under ASan+UBSan"
	@echo "make tsan   the CLI tests under ThreadSanitizer"
	@echo "make fuzz   fuzz the pickle/snapshot reader (FUZZ_SECONDS=60)"
	@echo "make bench  reader benchmarks (bench/RESULTS.md)"

.PHONY: all deps test asan tsan fuzz demo bench clean help cli-link
