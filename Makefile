# Shardplan — one non-recursive Makefile.
#   make run    install missing Debian packages, build, start shardplan
#   make test   the same set-up, then every test (ASan + UBSan unit tests, lit conformance)
# Out-of-tree builds: build/rel (optimised), build/san (sanitised, for tests).

SHELL := /bin/bash
.DEFAULT_GOAL := all

# Debian packages the build and the tests need. `make deps` installs the
# missing ones (root on Debian 12); it is a prerequisite of run and test.
DEB_PKGS := build-essential pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev \
  libopenblas-dev libcurl4-openssl-dev libcmocka-dev llvm-14-tools clang-14 \
  libclang-rt-14-dev wrk
FILECHECK ?= FileCheck-14
SHARED ?= ../shared
SHARDY_TESTS ?= $(SHARED)/reference/shardy/tests

CC ?= cc
BUILD ?= build
WARN := -std=c11 -pedantic -Wall -Wextra -Werror -Wshadow -Wundef \
  -Wwrite-strings -Wstrict-prototypes -Wmissing-prototypes \
  -Wold-style-definition -Wcast-qual -Wconversion -Wsign-conversion \
  -Wformat=2 -Wvla -Wimplicit-fallthrough -Wdouble-promotion \
  -Wpointer-arith -fno-common -D_POSIX_C_SOURCE=200809L -g
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

# Layering: each folder sees only its own headers and those of lower layers.
INC_common   := -Icommon
INC_planner  := -Iplanner -Icommon
INC_store    := -Istore -Iplanner -Icommon
INC_executor := -Iexecutor -Iplanner -Icommon
INC_server   := -Iserver -Iexecutor -Istore -Iplanner -Icommon
INC_tests    := -Iserver -Iexecutor -Istore -Iplanner -Icommon

MODULES := common planner store executor server
SRC_common   := $(wildcard common/*.c)
SRC_planner  := $(wildcard planner/*.c)
SRC_store    := $(wildcard store/*.c)
SRC_executor := $(wildcard executor/*.c)
SRC_server   := $(filter-out server/srv_main.c,$(wildcard server/*.c))
MAIN_SRC     := server/srv_main.c
UNIT_TESTS   := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
BENCH_SRC    := $(wildcard bench/bench_*.c)

LIBS := -lm -lpthread

# ---- build rules, instantiated per flavour (rel, san) -------------------------
define FLAVOUR
$(1)_DIR := $(BUILD)/$(1)
$(1)_CFLAGS := $(WARN) $(2)
$(1)_LDFLAGS := $(3)

$$($(1)_DIR)/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$($(1)_CFLAGS) $$(INC_$$(firstword $$(subst /, ,$$<))) -MMD -MP -c $$< -o $$@

$(foreach m,$(MODULES),
$$($(1)_DIR)/lib$(m).a: $$(patsubst %.c,$$($(1)_DIR)/%.o,$$(SRC_$(m)))
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^ $$(if $$^,,&& true)
)

$(1)_LIBS := $$(foreach m,server executor store planner common,$$($(1)_DIR)/lib$$(m).a)

$$($(1)_DIR)/shardplan: $$($(1)_DIR)/$(MAIN_SRC:.c=.o) $$($(1)_LIBS)
	$$(CC) $$($(1)_CFLAGS) $$^ -o $$@ $$($(1)_LDFLAGS) $(LIBS)

$$($(1)_DIR)/tests/%: $$($(1)_DIR)/tests/unit/%.o $$($(1)_LIBS)
	@mkdir -p $$(dir $$@)
	$$(CC) $$($(1)_CFLAGS) $$^ -o $$@ $$($(1)_LDFLAGS) -lcmocka $(LIBS)

$$($(1)_DIR)/bench/%: $$($(1)_DIR)/bench/%.o $$($(1)_LIBS)
	@mkdir -p $$(dir $$@)
	$$(CC) $$($(1)_CFLAGS) $$^ -o $$@ $$($(1)_LDFLAGS) $(LIBS)
endef

$(eval $(call FLAVOUR,rel,-O2,))
$(eval $(call FLAVOUR,san,-O1 $(SAN),$(SAN)))

INC_bench := $(INC_tests)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---- top-level targets --------------------------------------------------------
.PHONY: all deps run test unit lit san fuzz bench bench-reader fmt fmt-check clean header-check

all: $(BUILD)/rel/shardplan

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root to install:$$missing" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

run: deps all
	$(BUILD)/rel/shardplan opt examples/flax_mlp.mlir -sdy-populate-op-sharding-rules

san: $(BUILD)/san/shardplan $(addprefix $(BUILD)/san/tests/,$(UNIT_TESTS))

unit: san header-check
	@fail=0; for t in $(UNIT_TESTS); do \
	  echo "== $$t"; ASAN_OPTIONS=detect_leaks=1 $(BUILD)/san/tests/$$t || fail=1; \
	done; exit $$fail

lit: $(BUILD)/san/shardplan
	@SHARDPLAN=$(CURDIR)/$(BUILD)/san/shardplan FILECHECK=$(FILECHECK) SHARDY_TESTS=$(SHARDY_TESTS) \
	  tests/lit/run.sh

test: deps
	$(MAKE) unit
	$(MAKE) lit

# Each public header compiles on its own.
header-check:
	@for h in common/cm.h $(wildcard planner/sp_*.h) $(wildcard store/st_*.h) \
	    $(wildcard executor/ex_*.h) $(wildcard server/srv_*.h); do \
	  case $$h in *_int.h) continue;; esac; \
	  d=$$(dirname $$h); echo "#include \"$$(basename $$h)\"" | \
	  $(CC) $(WARN) $(INC_tests) -x c -fsyntax-only - || exit 1; \
	done

bench-reader: $(BUILD)/rel/bench/bench_reader
	$(BUILD)/rel/bench/bench_reader

bench: bench-reader

FUZZ_SECONDS ?= 60
fuzz:
	@mkdir -p $(BUILD)/fuzz
	clang-14 -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -std=c11 \
	  -Iplanner -Icommon tests/fuzz/fuzz_mlir.c $(SRC_planner) $(SRC_common) -o $(BUILD)/fuzz/fuzz_mlir -lm
	$(BUILD)/fuzz/fuzz_mlir -max_total_time=$(FUZZ_SECONDS) -max_len=65536 tests/fuzz/corpus/mlir

fmt:
	clang-format -i $(shell git ls-files '*.c' '*.h')

fmt-check:
	clang-format --dry-run --Werror $(shell git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)
