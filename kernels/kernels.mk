# libmsda: the MSDA op as a C library with embedded CUDA fatbins (kernels/README.md).
# Included by the top Makefile, which sets BUILD, NVCC, CC, CSTD, WARN, SAN, RUN_SUITE.
#
#   make build/kernels/libmsda.so   the library: host C + one fatbin for every SASS arch the local
#                                   nvcc lists, plus PTX of the newest
#   make check-kernels              the CPU tests (ASan+UBSan) and the embedded-arch check
#   make gpu-check                  on a GPU machine: GPU against the CPU path, compute-sanitizer
#   make bench                      on a GPU machine with torch: timings against grid_sample
#
# Overridable: MSDA_ARCHS (e.g. "80 90"), MSDA_GENCODE (nvcc -gencode flags), MSDA_DEFS (the
# device knobs, e.g. -DMSDA_MAX_THREADS=128 -DMSDA_F16_ATOMIC=2), MSDA_FATBINS (a list of
# fatbins to embed, tried in order by the loader; the planner builds them per toolkit).

KERNEL_DIR := $(BUILD)/kernels
KERNEL_LIB := $(KERNEL_DIR)/libmsda.so

# cuda.h comes from the toolkit of $(NVCC); nothing links against a CUDA library.
MSDA_CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(realpath $(shell command -v $(NVCC) 2>/dev/null))))
MSDA_ARCHS ?= $(shell $(NVCC) --list-gpu-code 2>/dev/null | sed -n 's/^sm_//p' | sort -n)
MSDA_PTX_ARCH ?= $(lastword $(MSDA_ARCHS))
MSDA_GENCODE ?= $(foreach a,$(MSDA_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
                -gencode=arch=compute_$(MSDA_PTX_ARCH),code=compute_$(MSDA_PTX_ARCH)
MSDA_DEFS ?=
MSDA_NVCC_FLAGS ?= -O3 -std=c++17 -Werror all-warnings --threads 0
MSDA_FATBINS ?= $(KERNEL_DIR)/msda.fatbin

KERNEL_SRCS := $(sort $(wildcard kernels/*.c))
KERNEL_HDRS := $(wildcard kernels/*.h)
KERNEL_CU_DEPS := kernels/msda_kernels.cu kernels/msda_device.cuh kernels/msda_kparams.h
# -ffp-contract=off: the CPU path rounds h = y*H - 0.5 exactly as the device code does.
KERNEL_CFLAGS := $(CSTD) $(WARN) -ffp-contract=off -fvisibility=hidden -Ikernels \
                 -I$(MSDA_CUDA_HOME)/include

KERNEL_REL_OBJS := $(patsubst kernels/%.c,$(KERNEL_DIR)/rel/%.o,$(KERNEL_SRCS)) $(KERNEL_DIR)/rel/fatbins.o
KERNEL_SAN_OBJS := $(patsubst kernels/%.c,$(KERNEL_DIR)/san/%.o,$(KERNEL_SRCS)) $(KERNEL_DIR)/rel/fatbins.o

CHECK_SUITES += kernels

.PHONY: check-kernels gpu-check gpu-variants bench kernels

kernels: $(KERNEL_LIB)

# The nvcc command line, rewritten only when it changes, so that a new MSDA_GENCODE or
# MSDA_DEFS rebuilds the fatbin.
$(KERNEL_DIR)/nvcc-flags: FORCE
	@mkdir -p $(@D)
	@echo '$(NVCC) $(MSDA_GENCODE) $(MSDA_NVCC_FLAGS) $(MSDA_DEFS)' | cmp -s - $@ || \
	  echo '$(NVCC) $(MSDA_GENCODE) $(MSDA_NVCC_FLAGS) $(MSDA_DEFS)' > $@

$(KERNEL_DIR)/msda.fatbin: $(KERNEL_CU_DEPS) $(KERNEL_DIR)/nvcc-flags
	@mkdir -p $(@D)
	$(NVCC) -fatbin $(MSDA_GENCODE) $(MSDA_NVCC_FLAGS) $(MSDA_DEFS) -Ikernels -o $@ $<

$(KERNEL_DIR)/fatbins.S: $(MSDA_FATBINS) kernels/gen-fatbin-asm.sh
	kernels/gen-fatbin-asm.sh $@ $(MSDA_FATBINS)

$(KERNEL_DIR)/rel/fatbins.o: $(KERNEL_DIR)/fatbins.S
	@mkdir -p $(@D)
	$(CC) -fPIC -c -o $@ $<

$(KERNEL_DIR)/rel/%.o: kernels/%.c $(KERNEL_HDRS)
	@mkdir -p $(@D)
	$(CC) $(KERNEL_CFLAGS) -O2 -fPIC -c -o $@ $<

$(KERNEL_LIB): $(KERNEL_REL_OBJS)
	$(CC) -shared -Wl,-soname,libmsda.so -Wl,-z,noexecstack -Wl,--no-undefined -o $@ $^ \
	  -ldl -lpthread -lm

# ---- CPU tests, with AddressSanitizer and UBSan -----------------------------------------------
$(KERNEL_DIR)/san/%.o: kernels/%.c $(KERNEL_HDRS)
	@mkdir -p $(@D)
	$(CC) $(KERNEL_CFLAGS) -O1 -g $(SAN) -c -o $@ $<

KERNEL_TEST_SRCS := $(sort $(wildcard tests/kernels/*.c))
KERNEL_TEST_HDRS := $(wildcard tests/kernels/*.h)

# MSDA_EXPECTED_ARCHS: what the embedded-arch test expects to find (the arch list above).
$(KERNEL_DIR)/test-kernels: $(KERNEL_TEST_SRCS) $(KERNEL_TEST_HDRS) $(KERNEL_SAN_OBJS) | test-deps
	$(CC) $(CSTD) $(WARN) -ffp-contract=off -O1 -g $(SAN) -Ikernels -Itests/kernels \
	  -DMSDA_EXPECTED_ARCHS='"$(strip $(MSDA_ARCHS))"' -DMSDA_EXPECTED_PTX=$(MSDA_PTX_ARCH) \
	  $(shell $(PKG_CONFIG) --cflags check 2>/dev/null) -o $@ $(KERNEL_TEST_SRCS) $(KERNEL_SAN_OBJS) \
	  $(shell $(PKG_CONFIG) --libs check 2>/dev/null) -ldl -lpthread -lm

check-kernels: $(KERNEL_DIR)/test-kernels $(KERNEL_LIB)
	@$(RUN_SUITE) kernels check $(KERNEL_DIR)/test-kernels

# ---- GPU machine ---------------------------------------------------------------------------------
# gpu-check also builds the library for the GPU's own arch with the two other half-atomic
# strategies (compare-and-swap, f32 buffer) and runs the f16/bf16 cases on each.
MSDA_GPU_ARCH ?= $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d .)
GPU_VARIANTS := cas:2 f32buf:3

$(KERNEL_DIR)/gpu-check: tests/gpu/gpu_check.c $(KERNEL_LIB)
	$(CC) $(CSTD) $(WARN) -O2 -Ikernels -I$(MSDA_CUDA_HOME)/include -o $@ $< \
	  -L$(KERNEL_DIR) -lmsda -Wl,--enable-new-dtags,-rpath,'$$ORIGIN' -L$(MSDA_CUDA_HOME)/lib64/stubs -lcuda -lpthread -lm

gpu-variants:
	@[ -n "$(MSDA_GPU_ARCH)" ] || { echo "gpu-variants: no GPU seen by nvidia-smi; set MSDA_GPU_ARCH (e.g. 90)" >&2; exit 1; }
	@for v in $(GPU_VARIANTS); do \
	  name=$${v%%:*}; s=$${v##*:}; \
	  $(MAKE) --no-print-directory BUILD=$(BUILD)/variant-$$name MSDA_ARCHS=$(MSDA_GPU_ARCH) \
	    MSDA_DEFS="-DMSDA_F16_ATOMIC=$$s -DMSDA_BF16_ATOMIC=$$s" $(BUILD)/variant-$$name/kernels/libmsda.so \
	    || exit 1; \
	done

gpu-check: $(KERNEL_DIR)/gpu-check gpu-variants
	@tests/gpu/run-gpu-check $(KERNEL_DIR)/gpu-check $(BUILD) $(GPU_VARIANTS)

bench: $(KERNEL_LIB)
	@PYTHONUNBUFFERED=1 python3 tests/bench/bench.py --lib $(KERNEL_LIB)
