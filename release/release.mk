# The portable release binaries: build/release/CPU/msda-doctor for x86_64 and aarch64, built on
# this machine with zig's cc as a cross compiler for glibc 2.17 and later. Every third-party
# library (release/static-deps.list) is linked statically; the binary needs only glibc's own
# libraries (libc, libm, libdl, libpthread), so dlopen keeps working. Not -static, not musl.
#
# Included from the Makefile after its variables (LIB_SRCS, CLI_SRCS, GEN_SRCS, CSTD, WARN,
# INCS, DEFS, BUILD) are defined. Targets: release-bin-x86_64, release-bin-aarch64, and the
# binaries $(BUILD)/release/CPU/msda-doctor. The licence files of the static libraries, to ship
# with a binary, are in $(RELEASE_LICENSES_DIR_x86_64) and $(RELEASE_LICENSES_DIR_aarch64).
#
# release/build-static-deps builds the libraries into $(BUILD)/static/CPU (the first time about
# ten minutes per CPU on two cores, then seconds) and writes the zig wrappers it and this file
# use into build/static/bin (zig itself is in build/venv-zig).

RELEASE_CPUS  := x86_64 aarch64
RELEASE_ZBIN  := build/static/bin
# gcc-only warning options clang (zig cc) does not know, which -Werror would turn into errors.
RELEASE_WARN  := $(filter-out -Wno-format-truncation,$(WARN))
RELEASE_OPT   := -O2
# Link order: each library before the ones it uses.
RELEASE_LIBS  := -larchive -lcurl -lssl -lcrypto -lelf -ljansson -lzstd -llz4 -llzma -lz \
                 -ldl -lm -lpthread
# Every source of the native binary, generated ones included (GEN_SRCS is read when the rules
# are expanded, so sources added to it later are picked up).
RELEASE_SRCS   = $(LIB_SRCS) $(CLI_SRCS) $(GEN_SRCS)

.PHONY: $(addprefix release-bin-,$(RELEASE_CPUS))

# release_rules CPU
define release_rules
RELEASE_DEPS_$(1)          := $$(BUILD)/static/$(1)
RELEASE_LICENSES_DIR_$(1)  := $$(BUILD)/static/$(1)/licenses
RELEASE_BIN_$(1)           := $$(BUILD)/release/$(1)/msda-doctor
RELEASE_OBJDIR_$(1)        := $$(BUILD)/release/$(1)/obj
# src/x.c -> obj/src/x.o; $(BUILD)/gen/x.c -> obj/gen/x.o
RELEASE_OBJS_$(1)           = $$(patsubst %.c,$$(RELEASE_OBJDIR_$(1))/%.o,$$(patsubst $$(BUILD)/%,%,$$(RELEASE_SRCS)))

# The static libraries, their headers and the zig wrappers. The script is idempotent: when
# the list or the script changes it rebuilds only what changed.
$$(RELEASE_DEPS_$(1))/.built: release/static-deps.list release/build-static-deps
	release/build-static-deps $(1) $$(RELEASE_DEPS_$(1))
	@touch $$@

$$(RELEASE_OBJDIR_$(1))/%.o: %.c $$(RELEASE_DEPS_$(1))/.built | $$(GEN_SRCS)
	@mkdir -p $$(@D)
	$$(RELEASE_ZBIN)/zcc-$(1) $$(CSTD) $$(RELEASE_WARN) $$(RELEASE_OPT) $$(INCS) $$(DEFS) \
	  -isystem $$(RELEASE_DEPS_$(1))/include -MMD -MP -c -o $$@ $$<

$$(RELEASE_OBJDIR_$(1))/%.o: $$(BUILD)/%.c $$(RELEASE_DEPS_$(1))/.built
	@mkdir -p $$(@D)
	$$(RELEASE_ZBIN)/zcc-$(1) $$(CSTD) $$(RELEASE_WARN) $$(RELEASE_OPT) $$(INCS) $$(DEFS) \
	  -isystem $$(RELEASE_DEPS_$(1))/include -MMD -MP -c -o $$@ $$<

$$(RELEASE_BIN_$(1)): $$(RELEASE_OBJS_$(1)) $$(RELEASE_DEPS_$(1))/.built
	$$(RELEASE_ZBIN)/zcc-$(1) $$(RELEASE_OPT) -s -o $$@ $$(RELEASE_OBJS_$(1)) \
	  -L$$(RELEASE_DEPS_$(1))/lib $$(RELEASE_LIBS)

release-bin-$(1): $$(RELEASE_BIN_$(1))
endef

$(foreach cpu,$(RELEASE_CPUS),$(eval $(call release_rules,$(cpu))))
