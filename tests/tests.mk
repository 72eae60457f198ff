# Unit tests (Check framework) and command-line tests (bats), both against the sanitizer build.
CHECK_CFLAGS = $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
UNIT_BIN  := $(BUILD)/san/tests/unit-tests
FIXTURES  := $(BUILD)/fixtures

$(BUILD)/san/tests/unit/%.o: tests/unit/%.c | deps $(GEN_SRCS)
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) $(INCS) $(DEFS) $(PKG_CFLAGS) $(CHECK_CFLAGS) -MMD -MP -c -o $@ $<

$(UNIT_BIN): $(patsubst %.c,$(BUILD)/san/%.o,$(UNIT_SRCS)) $(SAN_LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(SAN) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS)

# Fixtures are compiled at test time with the local nvcc (tests/fixtures/make-fixtures).
$(FIXTURES)/.stamp: tests/fixtures/make-fixtures $(wildcard tests/fixtures/src/*.cu)
	NVCC=$(NVCC) tests/fixtures/make-fixtures $(FIXTURES)
	@touch $@

.PHONY: check-unit check-cli fixtures
fixtures: $(FIXTURES)/.stamp

check-unit: $(UNIT_BIN) $(FIXTURES)/.stamp
	@MSDA_FIXTURES=$(FIXTURES) CK_FORK=yes $(RUN_SUITE) unit check $(UNIT_BIN)

check-cli: $(BUILD)/san/msda-doctor $(FIXTURES)/.stamp
	@MSDA_DOCTOR=$(abspath $(BUILD)/san/msda-doctor) MSDA_FIXTURES=$(abspath $(FIXTURES)) \
	  $(RUN_SUITE) cli tap bats --tap tests/cli

# The fake CUDA driver (tests/fakes/README.md), loaded through MSDA_LIBCUDA. Not sanitized: it
# is dlopened by the sanitized msda-doctor, whose runtime is already loaded.
FAKE_LIBCUDA := $(BUILD)/fakes/libcuda.so.1
$(FAKE_LIBCUDA): tests/fakes/fakecuda.c | deps
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 -g -fPIC -shared -fvisibility=hidden -Wl,-soname,libcuda.so.1 \
	  $(shell $(PKG_CONFIG) --cflags jansson) -o $@ $< $(shell $(PKG_CONFIG) --libs jansson) -pthread

CHECK_SUITES += plan
.PHONY: check-plan
check-plan: $(BUILD)/san/msda-doctor $(FAKE_LIBCUDA)
	@MSDA_DOCTOR=$(abspath $(BUILD)/san/msda-doctor) MSDA_FAKE_LIBCUDA=$(abspath $(FAKE_LIBCUDA)) \
	  $(RUN_SUITE) plan tap bats --tap tests/cli/plan
