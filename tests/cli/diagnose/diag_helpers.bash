# Set-up for the diagnose tests: a machine made of test doubles. $MSDA_DOCTOR is the sanitizer
# build, $MSDA_FAKE_LIBCUDA the fake driver, $MSDA_FIXTURES the nvcc-built fixtures (make check).
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
LOGS="$ROOT/tests/fixtures/logs"
GPUS="$ROOT/tests/fixtures/gpus"
FAKES="$ROOT/tests/fakes"

# A mirror of /usr/bin and /bin without the programs the probes look for (nvidia-smi, nvcc, g++,
# python), so that the machine running the tests does not leak into them; built once per file.
setup_file() {
  local base="$BATS_FILE_TMPDIR/base" f name
  mkdir -p "$base"
  for f in /usr/bin/* /bin/*; do
    name=${f##*/}
    case $name in
      nvidia-smi|nvcc|g++*|c++*|*-g++*|python*|cuobjdump) continue ;;
    esac
    [ -e "$base/$name" ] || ln -s "$f" "$base/$name"
  done
}

# Per test: fake programs first on PATH, then the mirror; an empty --root; no toolkit; a Python
# without torch.
setup() {
  BIN="$BATS_TEST_TMPDIR/bin"
  mkdir -p "$BIN" "$BATS_TEST_TMPDIR/root"
  export PATH="$BIN:$BATS_FILE_TMPDIR/base"
  export MSDA_TOOLKIT_PATHS=/nonexistent
  export MSDA_LIBCUDA="$MSDA_FAKE_LIBCUDA"
  unset MSDA_FAKE_GPUS CUDA_HOME MSDA_ROOT NO_COLOR
  FAKE_ROOT="$BATS_TEST_TMPDIR/root"
  python_json '{"executable": "/opt/fake/bin/python3", "version": "3.10.12", "msda_importable": false,
                "binaries": [], "torch": null}'
  PY=(--python "$FAKES/python-fake.sh")
}

# The fake Python answers with this JSON.
python_json() {
  export FAKE_PYTHON_JSON="$BATS_TEST_TMPDIR/python.json"
  printf '%s\n' "$1" > "$FAKE_PYTHON_JSON"
}

gpus() { export MSDA_FAKE_GPUS="$GPUS/$1.json"; }

# nvidia-smi on PATH: ok, 470, no-driver.
smi() {
  ln -sf "$FAKES/nvidia-smi-ok.sh" "$BIN/nvidia-smi-ok.sh"   # nvidia-smi-470.sh runs it from its own folder
  ln -sf "$FAKES/nvidia-smi-$1.sh" "$BIN/nvidia-smi"
}

# A fake CUDA toolkit VERSION (nvcc answering --version and --list-gpu-code).
toolkit() {
  local v=$1 codes
  case $v in
    11.8) codes="sm_35 sm_37 sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90" ;;
    12.4) codes="sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a" ;;
    13.0) codes="sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_110 sm_103 sm_120 sm_121" ;;
  esac
  mkdir -p "$BATS_TEST_TMPDIR/cuda-$v/bin"
  cat > "$BATS_TEST_TMPDIR/cuda-$v/bin/nvcc" <<NVCC
#!/bin/bash
case "\$1" in
  --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release $v, V$v.0" ;;
  --list-gpu-code) for c in $codes; do echo \$c; done ;;
  *) exit 1 ;;
esac
NVCC
  chmod +x "$BATS_TEST_TMPDIR/cuda-$v/bin/nvcc"
  if [ "$MSDA_TOOLKIT_PATHS" = /nonexistent ]; then MSDA_TOOLKIT_PATHS="$BATS_TEST_TMPDIR/cuda-$v"
  else MSDA_TOOLKIT_PATHS="$MSDA_TOOLKIT_PATHS:$BATS_TEST_TMPDIR/cuda-$v"; fi
  export MSDA_TOOLKIT_PATHS
}

# The default g++ on PATH answers -dumpversion with MAJOR; more majors become g++-N.
gxx() {
  printf '#!/bin/bash\necho %s.1.0\n' "$1" > "$BIN/g++"
  chmod +x "$BIN/g++"
  shift
  local v
  for v in "$@"; do printf '#!/bin/bash\necho %s.1.0\n' "$v" > "$BIN/g++-$v"; chmod +x "$BIN/g++-$v"; done
}

# An installed copy of the op: fixture FILE copied as NAME into a folder given to --search.
install_op() {
  local file=$1 name=${2:-MultiScaleDeformableAttention.cpython-310-x86_64-linux-gnu.so}
  [ -e "$MSDA_FIXTURES/$file" ] || skip "fixture $file not built (needs CUDA 11.8)"
  OPS="$BATS_TEST_TMPDIR/site-packages"
  mkdir -p "$OPS"
  cp "$MSDA_FIXTURES/$file" "$OPS/$name"
}

diagnose() { "$MSDA_DOCTOR" diagnose "$@"; }

assert_clean_stderr() {
  if grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' <<<"$stderr"; then
    echo "sanitizer report: $stderr" >&2
    return 1
  fi
}

# The finding IDs of a JSON report, space-separated, in order.
ids() { jq -r '[.findings[].id] | join(" ")' <<<"$output"; }

# The first finding with ID, as JSON.
finding() { jq -c --arg id "$1" 'first(.findings[] | select(.id == $id))' <<<"$output"; }

check_status() { jq -r --arg id "$1" '.checks[] | select(.id == $id) | .status' <<<"$output"; }
