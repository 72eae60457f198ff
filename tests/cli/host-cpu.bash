# The host's CPU and the other one, for tests that build, run or install "the wheel of this
# machine" and cross-check "the other platform's": the suites are the same on x86_64 and aarch64
# hosts. The other CPU's cross tools, qemu and sysroot come from recipes/platforms.json, their
# one owner. Needs $ROOT (the repository) set before it is loaded.

HOST_CPU=$(uname -m)
case "$HOST_CPU" in
  aarch64) FOREIGN_CPU=x86_64 ;;
  *)       FOREIGN_CPU=aarch64 ;;
esac

platform_field() {  # platform_field CPU FIELD
  jq -r --arg cpu "$1" --arg field "$2" '.platforms[] | select(.name == $cpu) | .[$field]' \
    "$ROOT/recipes/platforms.json"
}

FOREIGN_CC=$(platform_field "$FOREIGN_CPU" cross_compiler)
FOREIGN_OBJDUMP=${FOREIGN_CC%-gcc}-objdump
FOREIGN_QEMU=$(platform_field "$FOREIGN_CPU" qemu)
FOREIGN_SYSROOT=$(platform_field "$FOREIGN_CPU" sysroot)

# The wheel file of CPU in folder DIR that `build` writes (version from VERSION).
wheel_for() {  # wheel_for DIR CPU
  printf '%s/msda-%s-py3-none-manylinux_2_17_%s.manylinux2014_%s.whl' \
    "$1" "$(cat "$ROOT/VERSION")" "$2" "$2"
}
