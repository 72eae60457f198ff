# libmsda: the MSDA op as a C library with embedded CUDA fatbins (kernels/README.md).
# Included by the top Makefile, which sets BUILD, VERSION, CC, CSTD, SAN, RUN_SUITE.
#
# kernels/libmsda.json is the one description of how libmsda is compiled and linked, and only
# `msda-doctor build` compiles it: every target here runs on a library taken out of a wheel that
# build wrote, so the tests and the benchmark measure what users install.
#
#   make kernels        build/kernels/libmsda.so, out of a wheel make builds for this CPU
#   make check-kernels  the CPU tests (ASan+UBSan) and the embedded architectures of that wheel
#   make image-table    which image the loader picks per architecture and driver (fake driver)
#   make gpu-wheels     (here) the variant wheels gpu-check also runs, for MSDA_GPU_ARCH
#   make gpu-check      (GPU machine) GPU against the CPU path, compute-sanitizer, variants
#   make gpu-check-images (GPU machine) gpu-check's cases on each image, forced by MSDA_IMAGE
#   make bench          (GPU machine with torch) timings against grid_sample
#   make bench-points   (GPU machine with torch, transformers) the per-level-points op against
#                       transformers' PyTorch version of it
#   make bench-mmdet-prepare (here) what bench-mmdet needs there: mmdet's wheels, mmcv's MSDA sources
#   make bench-mmdet    (GPU machine with torch, nvcc) mmdet's Deformable-DETR and DINO on mmcv's
#                       compiled MSDA op and on msda.patch("mmcv")
#   make accuracy       (GPU machine with torch) f16 and bf16 against f64 on the encoder, per
#                       strategy (the library, then the variants); fails where the library's
#                       grad_value error is over issue 11's bound (tests/bench/accuracy.py)
#   make ncu            (GPU machine with torch and Nsight Compute) each kernel's time, L2 and
#                       DRAM traffic and bandwidth against its unit's peak (kernels/PERF.md)
#
# The wheel make builds: `msda-doctor build --arch $(MSDA_ARCH) [--define $(MSDA_DEFINES)...]`
# (default all) into build/kernels/dist; check-kernels and check-python use it.
# MSDA_WHEEL: the wheel gpu-check and bench run on. By default the one `msda-doctor build --arch
# all` (make run) wrote to wheels/dist for this CPU, which is what the GPU machine has (it does
# not build msda-doctor itself; tests/gpu/gpu-machine carries it there); without one, make's own.

KERNEL_DIR := $(BUILD)/kernels
KERNEL_LIB := $(KERNEL_DIR)/libmsda.so
KERNEL_DIST := $(KERNEL_DIR)/dist
HOST_ARCH := $(shell uname -m)
MSDA_ARCH ?= all
MSDA_DEFINES ?=
MSDA_WHEEL ?= $(firstword $(wildcard wheels/dist/msda-$(VERSION)-*_$(HOST_ARCH).whl))
# The cache of make run's build: the keys leave the project folder out, so a compile that make
# run did is not done again by make check, nor the other way round.
TEST_BUILD_CACHE := $(BUILD)/msda-cache

# cuda.h, for the tests that call the driver; nothing links against a CUDA library.
MSDA_CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(realpath $(shell command -v $(NVCC) 2>/dev/null))))
# The host flags of the CPU tests: kernels/libmsda.json's own, read here (not copied).
LIBMSDA_HOST_CFLAGS = $(shell python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["host"]["cflags"]))' kernels/libmsda.json)

KERNEL_SRCS := $(sort $(wildcard kernels/*.c))
KERNEL_HDRS := $(wildcard kernels/*.h)
KERNEL_INPUTS := $(KERNEL_SRCS) $(KERNEL_HDRS) $(wildcard kernels/*.cu kernels/*.cuh) kernels/libmsda.json \
                 kernels/gen-fatbin-asm.sh kernels/ptx-for-old-drivers.sh
KERNEL_SAN_OBJS := $(patsubst kernels/%.c,$(KERNEL_DIR)/san/%.o,$(KERNEL_SRCS))

CHECK_SUITES += kernels

.PHONY: kernels check-kernels image-table gpu-check-images gpu-wheels gpu-variants gpu-check bench accuracy ncu \
        bench-frameworks bench-points bench-mmdet-prepare bench-mmdet

kernels: $(KERNEL_LIB)

# build --json says what it made: the wheel, and the plan's architectures for the arch check.
# The build options are part of the stamp, so that a new MSDA_ARCH or MSDA_DEFINES rebuilds.
KERNEL_BUILD_ARGS := --arch $(MSDA_ARCH) $(addprefix --define ,$(MSDA_DEFINES)) --platform $(HOST_ARCH)
$(KERNEL_DIR)/build-args: FORCE
	@mkdir -p $(@D)
	@echo '$(KERNEL_BUILD_ARGS)' | cmp -s - $@ || echo '$(KERNEL_BUILD_ARGS)' > $@

$(KERNEL_DIR)/build.json: $(BUILD)/san/msda-doctor $(KERNEL_INPUTS) $(wildcard wheels/msda/*.py) $(KERNEL_DIR)/build-args
	@rm -rf $(KERNEL_DIST) && mkdir -p $(KERNEL_DIST)
	$(BUILD)/san/msda-doctor build --json $(KERNEL_BUILD_ARGS) --out $(KERNEL_DIST) \
	  --cache $(TEST_BUILD_CACHE) > $@.tmp || { jq -r .error $@.tmp >&2; rm -f $@.tmp; exit 1; }
	@# The fatbins object linked into that library, before another build overwrites it.
	cp "$$(dirname "$$(jq -r '.outputs[0].library' $@.tmp)")/fatbins.o" $(KERNEL_DIR)/shipped-fatbins.o
	@mv $@.tmp $@
$(KERNEL_DIR)/shipped-fatbins.o: $(KERNEL_DIR)/build.json
KERNEL_WHEEL = $(shell jq -r '.outputs[0].wheel' $(KERNEL_DIR)/build.json)
KERNEL_WHEEL_DEP := $(KERNEL_DIR)/build.json
# What the arch check expects: the plan's SASS and PTX architectures.
KERNEL_EXPECTED = -DMSDA_EXPECTED_ARCHS='"$(shell jq -r '[.plan.targets[] | select(.kind == "sass") | .sm] | join(" ")' $(KERNEL_DIR)/build.json)"' \
                  -DMSDA_EXPECTED_PTX='"$(shell jq -r '[.plan.targets[] | select(.kind == "ptx") | .sm] | join(" ")' $(KERNEL_DIR)/build.json)"'
$(KERNEL_LIB): $(KERNEL_WHEEL_DEP) kernels/library-from-wheel
	kernels/library-from-wheel $(KERNEL_WHEEL) $@

# ---- CPU tests, with AddressSanitizer and UBSan -----------------------------------------------
# The kernels' C compiled again with the sanitizers, linked with the fatbins object that build
# linked into the tested library, so the arch check sees what ships.
$(KERNEL_DIR)/san/%.o: kernels/%.c $(KERNEL_HDRS) kernels/libmsda.json | deps
	@mkdir -p $(@D)
	$(CC) $(LIBMSDA_HOST_CFLAGS) -DMSDA_VERSION_STRING='"$(VERSION)"' -Ikernels -I$(MSDA_CUDA_HOME)/include \
	  -O1 -g $(SAN) -c -o $@ $<

KERNEL_TEST_SRCS := $(sort $(wildcard tests/kernels/*.c))
KERNEL_TEST_HDRS := $(wildcard tests/kernels/*.h)

$(KERNEL_DIR)/test-kernels: $(KERNEL_TEST_SRCS) $(KERNEL_TEST_HDRS) tests/fakes/fakelaunch.h $(KERNEL_SAN_OBJS) $(KERNEL_DIR)/shipped-fatbins.o | test-deps
	$(CC) $(CSTD) $(WARN) -ffp-contract=off -O1 -g $(SAN) -Ikernels -Itests/kernels -Itests/fakes \
	  -DMSDA_VERSION_STRING='"$(VERSION)"' $(KERNEL_EXPECTED) \
	  $(shell $(PKG_CONFIG) --cflags check 2>/dev/null) -o $@ $(KERNEL_TEST_SRCS) $(KERNEL_SAN_OBJS) \
	  $(KERNEL_DIR)/shipped-fatbins.o $(shell $(PKG_CONFIG) --libs check 2>/dev/null) -ldl -lpthread -lm

# The fake CUDA driver of the launcher tests (tests/kernels/test_launch.c), which load it
# themselves. Not sanitized, as tests/fakes/fakecuda.c.
FAKE_LAUNCH_DRIVER := $(KERNEL_DIR)/fake-launch/libcuda.so.1
$(FAKE_LAUNCH_DRIVER): tests/fakes/fakelaunch.c tests/fakes/fakelaunch.h kernels/msda_kparams.h | deps
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 -g -fPIC -shared -fvisibility=hidden -Wl,-soname,libcuda.so.1 -Ikernels \
	  -I$(MSDA_CUDA_HOME)/include -o $@ $< -lelf -llz4 -lzstd

# The architecture x driver table of the images the loader picks (tests/kernels/test_images.c).
image-table: $(KERNEL_DIR)/test-kernels $(FAKE_LAUNCH_DRIVER)
	@MSDA_PRINT_IMAGE_TABLE=1 CK_RUN_CASE=images CK_VERBOSITY=silent \
	  MSDA_FAKE_LAUNCH_DRIVER=$(abspath $(FAKE_LAUNCH_DRIVER)) $(KERNEL_DIR)/test-kernels

# The arch check also compares the shipped library's own list with the test binary's.
check-kernels: $(KERNEL_DIR)/test-kernels $(KERNEL_LIB) $(FAKE_LAUNCH_DRIVER)
	@MSDA_SHIPPED_LIBRARY=$(KERNEL_LIB) MSDA_FAKE_LAUNCH_DRIVER=$(abspath $(FAKE_LAUNCH_DRIVER)) \
	  $(RUN_SUITE) kernels check $(KERNEL_DIR)/test-kernels

# ---- GPU machine ---------------------------------------------------------------------------------
# gpu-check also runs the f16/bf16 cases on the library built for the GPU's own architecture
# with the two other half-atomic strategies (compare-and-swap, f32 buffer). Those wheels are
# made here by `make gpu-wheels MSDA_GPU_ARCH=90` (build --define) and carried with build/.
MSDA_GPU_ARCH ?= $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d .)
GPU_VARIANTS := cas:2 f32buf:3
GPU_VARIANT_NAMES := $(foreach v,$(GPU_VARIANTS),$(firstword $(subst :, ,$(v))))

gpu-wheels: $(BUILD)/san/msda-doctor
	@[ -n "$(MSDA_GPU_ARCH)" ] || { echo "gpu-wheels: set MSDA_GPU_ARCH (e.g. 90)" >&2; exit 1; }
	@for v in $(GPU_VARIANTS); do \
	  name=$${v%%:*}; s=$${v##*:}; dir=$(BUILD)/variant-$$name; rm -rf $$dir/dist; \
	  $(BUILD)/san/msda-doctor build --arch sm_$(MSDA_GPU_ARCH) --platform $(HOST_ARCH) \
	    --define MSDA_F16_ATOMIC=$$s --define MSDA_BF16_ATOMIC=$$s --out $$dir/dist \
	    --cache $(TEST_BUILD_CACHE) >/dev/null || exit 1; \
	done

gpu-variants:
	@for v in $(GPU_VARIANTS); do \
	  name=$${v%%:*}; dir=$(BUILD)/variant-$$name; \
	  wheel=$$(ls $$dir/dist/*_$(HOST_ARCH).whl 2>/dev/null | head -n 1); \
	  [ -n "$$wheel" ] || { echo "gpu-variants: no wheel in $$dir/dist: run 'make gpu-wheels' first" >&2; exit 1; }; \
	  kernels/library-from-wheel $$wheel $$dir/kernels/libmsda.so || exit 1; \
	done

# The library gpu-check and bench run on, and where gpu-check's binary finds it ($ORIGIN).
GPU_DIR := $(KERNEL_DIR)/gpu
GPU_LIB := $(GPU_DIR)/libmsda.so
ifeq ($(MSDA_WHEEL),)
GPU_WHEEL = $(KERNEL_WHEEL)
$(GPU_LIB): $(KERNEL_LIB)
	@mkdir -p $(@D)
	cp $< $@
else
GPU_WHEEL := $(MSDA_WHEEL)
$(GPU_LIB): $(MSDA_WHEEL) kernels/library-from-wheel
	kernels/library-from-wheel $(MSDA_WHEEL) $@
endif

$(GPU_DIR)/gpu-check: tests/gpu/gpu_check.c $(GPU_LIB)
	$(CC) $(CSTD) $(WARN) -O2 -Ikernels -I$(MSDA_CUDA_HOME)/include -o $@ $< \
	  -L$(GPU_DIR) -lmsda -Wl,--enable-new-dtags,-rpath,'$$ORIGIN' -L$(MSDA_CUDA_HOME)/lib64/stubs -lcuda -lpthread -lm

gpu-check: $(GPU_DIR)/gpu-check gpu-variants
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@tests/gpu/run-gpu-check $(GPU_DIR)/gpu-check $(BUILD) $(GPU_VARIANTS)

# gpu-check's cases once more per kind of image the wheel carries, each forced by MSDA_IMAGE
# (kernels/msda_module.h): the SASS of each toolkit and each PTX, through this GPU's driver.
GPU_IMAGES ?= sass:13.0 sass:11.8 ptx:9.0 ptx:6.5
gpu-check-images: $(GPU_DIR)/gpu-check
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@rc=0; for image in $(GPU_IMAGES); do \
	  echo "== MSDA_IMAGE=$$image"; \
	  MSDA_IMAGE=$$image GPU_CHECK_LOGS=$(BUILD)/gpu-check-logs/$$(echo $$image | tr : -) \
	    tests/gpu/run-gpu-check $(GPU_DIR)/gpu-check $(BUILD) || rc=1; \
	  grep -h '^loaded image' $(BUILD)/gpu-check-logs/$$(echo $$image | tr : -)/default.log; \
	done; exit $$rc

bench: $(GPU_LIB)
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@PYTHONUNBUFFERED=1 python3 tests/bench/bench.py --lib $(GPU_LIB)

accuracy: $(GPU_LIB) gpu-variants
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@PYTHONUNBUFFERED=1 python3 tests/bench/accuracy.py --cases enc_b2 default=$(GPU_LIB) \
	  $(foreach n,$(GPU_VARIANT_NAMES),$(n)=$(BUILD)/variant-$(n)/kernels/libmsda.so)

# The msda package of this tree with the library under test, as the model benchmarks import it
# (BENCH_SITE_ENV: PYTHONPATH last, so that a benchmark may add folders after it).
BENCH_SITE := $(BUILD)/bench-site
BENCH_SITE_ENV = MSDA_LIBRARY=$(abspath $(BENCH_SITE)/msda/libmsda.so) PYTHONPATH=$(abspath $(BENCH_SITE))
bench_site = rm -rf $(BENCH_SITE) && mkdir -p $(BENCH_SITE) && cp -r wheels/msda $(BENCH_SITE)/ && \
  cp $(GPU_LIB) $(BENCH_SITE)/msda/libmsda.so

# transformers' models (the machine's transformers) with their own MSDA path and with msda.patch.
# FRAMEWORKS_BENCH_ARGS: more arguments of frameworks.py (--models DFineModel, --iters 100...).
FRAMEWORKS_BENCH_ARGS ?=
bench-frameworks: $(GPU_LIB)
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@$(bench_site)
	@$(BENCH_SITE_ENV) \
	  HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 python3 tests/bench/frameworks.py $(FRAMEWORKS_BENCH_ARGS)

# The per-level-points op against transformers' PyTorch version of it (RT-DETR v2's, D-FINE's).
bench-points: $(GPU_LIB)
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@$(bench_site)
	@$(BENCH_SITE_ENV) \
	  PYTHONUNBUFFERED=1 python3 tests/bench/points_op.py

# mmdet's Deformable-DETR and DINO with mmcv's compiled MSDA op (the default path of an mmcv built
# with its ops) and with msda.patch("mmcv"): tests/bench/mmdet_models.py --mmcv-ext. The GPU
# machine has no network, and of tests.mk's PY_MMDET_PACKAGES its python3 lacks GPU_MMDET_NAMES
# (it has the others: numpy, scipy, matplotlib, OpenCV, Pillow...). bench-mmdet-prepare (here)
# downloads their wheels, at tests.mk's versions, for its CPython 3.12 on x86_64, and mmcv 2.1.0's
# MSDA op sources (tests/bench/mmcv-msda-ext/fetch.py) into GPU_MMDET, to be carried there with
# the msda wheel. bench-mmdet (there) installs the wheels into GPU_MMDET_SITE, compiles the op
# into MMCV_MSDA_EXT (tests/bench/mmcv-msda-ext/build.py: out of the carried folder, so that a
# second call while the machine is warm does not compile again), then times.
# MMDET_BENCH_ARGS: more arguments of mmdet_models.py (--models DINO, --iters 5...).
GPU_MMDET := $(BUILD)/gpu-mmdet
GPU_MMDET_SITE := $(BUILD)/gpu-mmdet-site
MMCV_MSDA_EXT := $(BUILD)/mmcv-msda-ext
GPU_MMDET_NAMES := mmdet mmcv-lite mmengine addict yapf termcolor platformdirs pycocotools shapely terminaltables
GPU_MMDET_PACKAGES = $(filter $(addsuffix ==%,$(GPU_MMDET_NAMES)),$(PY_MMDET_PACKAGES))
MMDET_BENCH_ARGS ?=

bench-mmdet-prepare:
	@[ $(words $(GPU_MMDET_PACKAGES)) -eq $(words $(GPU_MMDET_NAMES)) ] || \
	  { echo "bench-mmdet-prepare: PY_MMDET_PACKAGES pins $(GPU_MMDET_PACKAGES), not all of $(GPU_MMDET_NAMES)" >&2; exit 1; }
	@rm -rf $(GPU_MMDET)/wheels
	python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  -d $(GPU_MMDET)/wheels $(GPU_MMDET_PACKAGES)
	python3 tests/bench/mmcv-msda-ext/fetch.py $(GPU_MMDET)/mmcv-src
	@du -sh $(GPU_MMDET)

bench-mmdet: $(GPU_LIB)
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@[ -d $(GPU_MMDET)/wheels ] && [ -d $(GPU_MMDET)/mmcv-src ] || { echo "bench-mmdet: no $(GPU_MMDET)/wheels" \
	  "or $(GPU_MMDET)/mmcv-src: run 'make bench-mmdet-prepare' where PyPI is reachable, and carry $(GPU_MMDET)" >&2; exit 1; }
	@$(bench_site)
	@rm -rf $(GPU_MMDET_SITE) && python3 -m pip install -q --no-index --no-deps --target $(GPU_MMDET_SITE) \
	  $(GPU_MMDET)/wheels/*.whl
	@PYTHONUNBUFFERED=1 python3 tests/bench/mmcv-msda-ext/build.py $(GPU_MMDET)/mmcv-src $(MMCV_MSDA_EXT)
	@$(BENCH_SITE_ENV):$(abspath $(GPU_MMDET_SITE)) PYTHONUNBUFFERED=1 \
	  python3 tests/bench/mmdet_models.py --mmcv-ext $(MMCV_MSDA_EXT) $(MMDET_BENCH_ARGS)

ncu: $(GPU_LIB)
	@echo "library under test: $(GPU_LIB), from $(GPU_WHEEL)"
	@PYTHONUNBUFFERED=1 python3 tests/bench/ncu-kernels.py --lib $(GPU_LIB)
