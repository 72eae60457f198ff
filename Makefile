# msda-doctor: build doctor and cross-arch packager for Multi-Scale Deformable Attention.
#
#   make              build ./msda-doctor (installs missing Debian packages first)
#   make run          build, then run the main job on this machine
#   make check        build the sanitizer variant and run every test
#   make install      install the binary and the man page (PREFIX, DESTDIR)
#   make release      the portable msda-doctor for x86_64 and aarch64: tarballs and wheels in dist/
#   make clean
#
# Set MSDA_NO_INSTALL=1 to skip the package check (e.g. on a non-Debian system).

# The one source of the version: --version, the wheel, its Python package and the man page.
VERSION  := $(strip $(file < VERSION))
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
BUILD    ?= build
NVCC     ?= nvcc
PKG_CONFIG ?= pkg-config

PKGS := libcurl jansson libelf libarchive libcrypto libzstd liblz4

WARN   := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
          -Wvla -Wformat=2 -Wno-format-nonliteral -Wno-format-truncation
CSTD   := -std=c11 -D_GNU_SOURCE
OPT    ?= -O2 -g
SAN    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
INCS   := -Isrc -Isrc/lib -Ikernels -I$(BUILD)/gen
DEFS   := -DMSDA_DOCTOR_VERSION='"$(VERSION)"'

# pkg-config is asked lazily so that `make clean` works before the packages are installed.
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)

LIB_SRCS := $(sort $(wildcard src/lib/*/*.c src/lib/*/*/*.c))
CLI_SRCS := $(sort $(wildcard src/cli/*.c))
RECIPES  := $(sort $(wildcard recipes/*.json))
# What `build` reads from the project folder, embedded so that an installed msda-doctor builds
# from anywhere (src/lib/build/embedded_source.h): the kernels' sources, recipe and scripts, and
# the Python package's files as package.c collects them.
BUILD_INPUTS := $(sort $(wildcard kernels/*.c kernels/*.h kernels/*.cu kernels/*.cuh kernels/*.sh \
                  kernels/libmsda.json) $(filter-out %.pyc %/__pycache__,$(wildcard wheels/*.py \
                  wheels/msda/* wheels/MultiScaleDeformableAttention/*)))
GEN_SRCS := $(BUILD)/gen/recipes_data.c $(BUILD)/gen/sources_data.c
MAN_PAGE := $(BUILD)/man/msda-doctor.1

REL_OBJS := $(patsubst %.c,$(BUILD)/rel/%.o,$(LIB_SRCS) $(CLI_SRCS)) $(patsubst $(BUILD)/%.c,$(BUILD)/rel/%.o,$(GEN_SRCS))
SAN_LIB_OBJS := $(patsubst %.c,$(BUILD)/san/%.o,$(LIB_SRCS)) $(patsubst $(BUILD)/%.c,$(BUILD)/san/%.o,$(GEN_SRCS))
SAN_CLI_OBJS := $(patsubst %.c,$(BUILD)/san/%.o,$(CLI_SRCS))

all: msda-doctor

.PHONY: all run check install uninstall clean deps test-deps man FORCE
.DELETE_ON_ERROR:

deps:
	@[ -n "$(MSDA_NO_INSTALL)" ] || scripts/install-deps
test-deps:
	@[ -n "$(MSDA_NO_INSTALL)" ] || scripts/install-deps --test

# ---- the embedded recipes (docs/DESIGN.md decision 6) ----------------------------------------
$(BUILD)/host/embed: tools/embed.c | deps
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 -o $@ $<

$(BUILD)/gen/recipes_data.c: $(BUILD)/host/embed $(RECIPES)
	@mkdir -p $(@D)
	$(BUILD)/host/embed $@ $(RECIPES)

$(BUILD)/gen/sources_data.c: $(BUILD)/host/embed $(BUILD_INPUTS)
	@mkdir -p $(@D)
	$(BUILD)/host/embed --tree $@ $(BUILD_INPUTS)

# ---- release build -----------------------------------------------------------------------------
$(BUILD)/rel/%.o: %.c | deps $(GEN_SRCS)
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) $(OPT) $(INCS) $(DEFS) $(PKG_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/rel/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) $(OPT) $(INCS) $(CFLAGS) -c -o $@ $<

msda-doctor: $(REL_OBJS)
	$(CC) $(OPT) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -ldl -lm

# ---- sanitizer build, used by every test -------------------------------------------------------
$(BUILD)/san/%.o: %.c | deps $(GEN_SRCS)
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) $(INCS) $(DEFS) $(PKG_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/san/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) $(INCS) -c -o $@ $<

$(BUILD)/san/msda-doctor: $(SAN_LIB_OBJS) $(SAN_CLI_OBJS)
	$(CC) $(SAN) -o $@ $^ $(PKG_LIBS) -ldl -lm

# Only the object folders: build/ also holds whole root file systems (release/arm64-run), whose
# etc/*.d folders are not dependency files.
-include $(shell find $(addprefix $(BUILD)/,rel san release fuzz kernels) -name '*.d' -type f 2>/dev/null)

# ---- tests -------------------------------------------------------------------------------------
# Every suite writes its counts to $(RESULTS)/<suite>; `check` sums them and fails on any failure
# or on a suite that left no counts (it crashed).
RESULTS := $(BUILD)/test-results
RUN_SUITE := tests/run-suite $(RESULTS)
CHECK_SUITES := unit cli

# ---- the portable release: one msda-doctor per CPU that runs on any glibc from 2.17 ---------
# release/release.mk links it (zig's cc, the static libraries of release/static-deps.list);
# here it is checked and packed (tools/release-tool.c): a tarball and a wheel per CPU in dist/.
DIST         ?= dist
REL_LIB_OBJS := $(patsubst %.c,$(BUILD)/rel/%.o,$(LIB_SRCS)) $(patsubst $(BUILD)/%.c,$(BUILD)/rel/%.o,$(GEN_SRCS))
include release/release.mk

$(BUILD)/host/release-tool: tools/release-tool.c $(REL_LIB_OBJS) | deps
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) $(OPT) $(INCS) $(DEFS) $(PKG_CFLAGS) -o $@ $^ $(PKG_LIBS) -ldl -lm

# dist/msda-doctor-VERSION-linux-CPU.tar.gz, and the tool's wheel beside it.
$(DIST)/msda-doctor-$(VERSION)-linux-%.tar.gz: $(BUILD)/release/%/msda-doctor $(BUILD)/host/release-tool $(MAN_PAGE) \
                                               release/NOTICE.md
	@mkdir -p $(@D)
	$(BUILD)/host/release-tool pack $< $* $(VERSION) $(DIST) $(MAN_PAGE) release/NOTICE.md $(BUILD)/static/$*/licenses

.PHONY: release release-host
release: $(foreach c,$(RELEASE_CPUS),$(DIST)/msda-doctor-$(VERSION)-linux-$(c).tar.gz)
release-host: $(DIST)/msda-doctor-$(VERSION)-linux-$(shell uname -m).tar.gz

# kernels.mk first: tests.mk's python suite takes its wheel from there.
include kernels/kernels.mk
include tests/tests.mk

# tests/sanitizer-env turns leak checks off where LeakSanitizer cannot run (qemu-user), saying so.
# A suite asked for alone (make check-kernels) is probed here, when the Makefile is read, so that
# its prerequisites' recipes run with the options too: check-kernels builds the wheel with the
# sanitized msda-doctor, which under qemu died at exit with LeakSanitizer's fatal error.
# `check` probes in its recipe instead, after test-deps has installed the compiler the probe needs.
ifneq ($(filter check-%,$(MAKECMDGOALS)),)
ifndef MSDA_SANITIZER_PROBED
export ASAN_OPTIONS := $(shell tests/sanitizer-env $(CC))
export MSDA_SANITIZER_PROBED := 1
endif
endif

# A failing suite's target fails (tests/run-suite exits non-zero), so the suites run with -k and
# whatever they return: every suite runs, and tests/summarize, last, fails on any failure.
check: test-deps
	@rm -rf $(RESULTS) && mkdir -p $(RESULTS)
	@ASAN_OPTIONS="$$(tests/sanitizer-env $(CC))" MSDA_SANITIZER_PROBED=1 \
	  $(MAKE) -k --no-print-directory $(addprefix check-,$(CHECK_SUITES)) || true
	@tests/summarize $(RESULTS) $(CHECK_SUITES)

# ---- the main job ------------------------------------------------------------------------------
# What is on this machine and what is wrong with it; then every architecture the toolkits here
# can target, one wheel per CPU platform, what the wheels carry, and a check of one here. test-deps brings the aarch64 cross
# compiler and CUDA 11.8 (for sm_50 to sm_72), which `build --arch all` uses when present.
RUN_GPUS := --gpu m40 --gpu p40 --gpu tx2 --gpu xavier --gpu t4 --gpu a100 --gpu orin --gpu h100
run: msda-doctor test-deps
	./msda-doctor --version
	@# diagnose exits 1 when it finds something (here, for one, no GPU): that is its report
	-./msda-doctor diagnose
	./msda-doctor build --arch all
	./msda-doctor inspect $(RUN_GPUS) wheels/dist/msda-$(VERSION)-*.whl
	./msda-doctor verify wheels/dist/msda-$(VERSION)-*_$(shell uname -m).whl

# Wall time of build --arch all, cold and with nothing changed.
.PHONY: bench-build
bench-build: msda-doctor test-deps
	@tests/bench/build-time.sh ./msda-doctor

# kernels/libmsda.json's same_ptx still true: each group's PTX the same (minutes; not in check).
.PHONY: check-same-ptx
check-same-ptx: msda-doctor
	@tests/kernels/check-same-ptx ./msda-doctor

# ---- install -----------------------------------------------------------------------------------
# The man page with the version of the VERSION file in its header.
$(MAN_PAGE): man/msda-doctor.1 VERSION
	@mkdir -p $(@D)
	sed 's/@VERSION@/$(VERSION)/g' $< > $@.tmp && mv $@.tmp $@
man: $(MAN_PAGE)

install: msda-doctor $(MAN_PAGE)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 msda-doctor $(DESTDIR)$(BINDIR)/msda-doctor
	install -m 0644 $(MAN_PAGE) $(DESTDIR)$(MANDIR)/man1/msda-doctor.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/msda-doctor $(DESTDIR)$(MANDIR)/man1/msda-doctor.1

clean:
	rm -rf $(BUILD) msda-doctor $(DIST)
