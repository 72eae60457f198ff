# A fake CUDA toolkit for the planner's tests (plan.bats, toolkit-minors.bats): an nvcc that
# answers --version and --list-gpu-code as the real release does, --help with 13.0's
# --split-compile line (the others' say nothing of it), and fails anything else.

# The real --list-gpu-code of each version.
gpu_codes() {
  case $1 in
    11.8) echo "sm_35 sm_37 sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90" ;;
    12.6) echo "sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a" ;;
    12.9) echo "sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a sm_100 sm_100a sm_101 sm_101a sm_103 sm_103a sm_120 sm_120a sm_121 sm_121a" ;;
    13.0) echo "sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_110 sm_103 sm_120 sm_121" ;;
  esac
}

# fake_nvcc DIR VERSION: DIR/bin/nvcc of that release.
fake_nvcc() {
  local dir=$1 v=$2
  mkdir -p "$dir/bin"
  cat > "$dir/bin/nvcc" <<NVCC
#!/bin/sh
case "\$1" in
  --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release $v, V$v.0" ;;
  --list-gpu-code) for c in $(gpu_codes "$v"); do echo \$c; done ;;
  --help) [ "$v" = 13.0 ] && echo "--split-compile <number>                            (-split-compile)" ; exit 0 ;;
  *) exit 1 ;;
esac
NVCC
  chmod +x "$dir/bin/nvcc"
}
