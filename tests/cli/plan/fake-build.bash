# The fake build of faults.bats and full-disk.bats: a fake nvcc (FAKE_NVCC_MODE) in a fake CUDA
# 13.0 folder, the real host C compiler and link, a cache, an output folder and a source folder
# of links to the kernels and the Python package.
ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
load ../host-cpu

setup() {
  FAKE="$BATS_TEST_TMPDIR/cuda-13.0"
  mkdir -p "$FAKE/bin"
  ln -s "$(dirname "$(dirname "$(realpath "$(command -v nvcc)")")")/include" "$FAKE/include"
  cat > "$FAKE/bin/nvcc" <<'NVCC'
#!/bin/sh
case "$1" in
  --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release 13.0, V13.0.0"; exit 0 ;;
  --list-gpu-code) echo sm_80; echo sm_90; exit 0 ;;
  --help) exit 0 ;;
esac
out= image=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; [ "$1" = -fatbin ] && image=1; shift; done
mode=${FAKE_NVCC_MODE:-ok}
# hang-tree-image: the PTX steps run, the image step (into the cache) hangs as hang-tree
[ "$mode" = hang-tree-image ] && { [ -n "$image" ] && mode=hang-tree || mode=ok; }
case "$mode" in
  fail) echo "msda_kernels.cu(1): error: this nvcc was told to fail" >&2; exit 2 ;;
  kill) kill -9 $$ ;;
  # part of the output first: a compiler stopped mid-write, and a sign for the tests that it runs
  hang) printf 'partial' > "$out"; exec sleep 600 ;;
  # the same, as a compiler driver waiting on a child (nvcc on cicc); both pids into FAKE_PIDS
  hang-tree) printf 'partial' > "$out"; sleep 600 & echo "$! $$" >> "$FAKE_PIDS"; wait; exit 1 ;;
  slow) sleep 3 ;;
esac
# the same bytes whatever the (temporary) output name, so that wheels from two runs compare
printf 'fatbin bytes\n' > "$out"
NVCC
  chmod +x "$FAKE/bin/nvcc"
  CACHE="$BATS_TEST_TMPDIR/cache" OUT="$BATS_TEST_TMPDIR/out"
  SRC="$BATS_TEST_TMPDIR/src"
  mkdir -p "$SRC" && ln -sfn "$ROOT/kernels" "$SRC/kernels" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
}

# --quiet: the tests read stderr for the one error line (signals.bats tests the progress lines).
build() {
  env MSDA_TOOLKIT_PATHS="$FAKE" "$@" "$MSDA_DOCTOR" build --quiet --arch sm_90 --platform "$HOST_CPU" \
      --source "$SRC" --cache "$CACHE" --out "$OUT"
}

# Nothing a failed step made is in the cache: no entry, no temporary file (a fatbin, or the PTX
# it is made from).
cache_has_no_fatbin() {
  [ -z "$(find "$CACHE" -name '*.fatbin*' -o -name '*.ptx*' 2>/dev/null)" ] ||
    { find "$CACHE" -name '*.fatbin*' -o -name '*.ptx*' >&2; return 1; }
}

