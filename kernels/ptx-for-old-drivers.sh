#!/bin/sh
# Writes a fatbin of PTX that drivers older than the toolkit JIT-compile: the toolkit's PTX with
# its .version lowered to ISA. Lowering is sound only where the code uses nothing newer than ISA,
# and the toolkit's ptxas checks exactly that (it rejects an instruction newer than the declared
# version), so a kernel change that needs a newer ISA fails this build, not a user's JIT. The
# PTX is compressed as CUDA 10.2's own nvcc compresses it (LZ4-style, fatbin flag 0x2000: seen in
# cupy-cuda102's libraries), which 10.2 drivers therefore read.
# ptxas and fatbinary are the toolkit's own, found on PATH (build puts its bin folder first).
# Usage: kernels/ptx-for-old-drivers.sh ISA SM NVCC NVCC-ARGS... -o OUT.fatbin SOURCE
#   NVCC-ARGS make PTX for compute_SM (-ptx -gencode arch=compute_SM,code=compute_SM ...).
set -eu
[ $# -ge 6 ] || { echo "ptx-for-old-drivers.sh: usage: ISA SM NVCC ARGS... -o OUT SOURCE" >&2; exit 2; }
isa=$1 sm=$2
shift 2
case $isa in [0-9]*.[0-9]*) ;; *) echo "ptx-for-old-drivers.sh: bad ISA '$isa'" >&2; exit 2;; esac
case $sm in *[!0-9]*|'') echo "ptx-for-old-drivers.sh: bad SM '$sm'" >&2; exit 2;; esac
# The nvcc command again, its output renamed to OUT.ptx; OUT is what this script makes.
out= prev= n=$#
for a in "$@"; do
    if [ "$prev" = "-o" ]; then out=$a; set -- "$@" "$out.ptx"; else set -- "$@" "$a"; fi
    prev=$a
done
shift "$n"
[ -n "$out" ] || { echo "ptx-for-old-drivers.sh: no -o OUT given" >&2; exit 2; }
trap 'rm -f "$out.ptx" "$out.lowered.ptx" "$out.check.cubin"' EXIT
"$@"
own=$(sed -n 's/^\.version \([0-9][0-9]*\.[0-9][0-9]*\)$/\1/p' "$out.ptx" | head -n 1)
[ -n "$own" ] || { echo "ptx-for-old-drivers.sh: no .version line in the PTX nvcc wrote" >&2; exit 1; }
sed "s/^\.version $own\$/.version $isa/" "$out.ptx" > "$out.lowered.ptx"
ptxas -arch="sm_$sm" "$out.lowered.ptx" -o "$out.check.cubin" || {
    echo "ptx-for-old-drivers.sh: the compute_$sm PTX needs a newer ISA than $isa (see ptxas above)" >&2
    exit 1
}
fatbinary --create="$out" -64 --image3=kind=ptx,sm="$sm",file="$out.lowered.ptx"
