#!/bin/sh
# Writes a fatbin of PTX that drivers older than the toolkit JIT-compile: the toolkit's PTX with
# its .version lowered to ISA. Lowering is sound only where the code uses nothing newer than ISA,
# and the toolkit's ptxas checks exactly that (it rejects an instruction newer than the declared
# version), so a kernel change that needs a newer ISA fails this build, not a user's JIT. The
# PTX is compressed as CUDA 10.2's own nvcc compresses it (LZ4-style, fatbin flag 0x2000: seen in
# cupy-cuda102's libraries), which 10.2 drivers therefore read.
# ptxas and fatbinary are the toolkit's own, found on PATH (build puts its bin folder first).
# Usage: kernels/ptx-for-old-drivers.sh ISA SM -o OUT.fatbin IN.ptx
#   IN.ptx: the toolkit's PTX for compute_SM (build's PTX step, shared with that SASS).
set -eu
[ $# -eq 5 ] && [ "$3" = "-o" ] || { echo "ptx-for-old-drivers.sh: usage: ISA SM -o OUT IN.ptx" >&2; exit 2; }
isa=$1 sm=$2 out=$4 in=$5
case $isa in [0-9]*.[0-9]*) ;; *) echo "ptx-for-old-drivers.sh: bad ISA '$isa'" >&2; exit 2;; esac
case $sm in *[!0-9]*|'') echo "ptx-for-old-drivers.sh: bad SM '$sm'" >&2; exit 2;; esac
trap 'rm -f "$out.lowered.ptx" "$out.check.cubin"' EXIT
own=$(sed -n 's/^\.version \([0-9][0-9]*\.[0-9][0-9]*\)$/\1/p' "$in" | head -n 1)
[ -n "$own" ] || { echo "ptx-for-old-drivers.sh: no .version line in '$in'" >&2; exit 1; }
sed "s/^\.version $own\$/.version $isa/" "$in" > "$out.lowered.ptx"
# -O0: ptxas's parser is what rejects an instruction newer than the .version (the same errors at
# -O0 as at -O3); optimizing the check's cubin, which nobody loads, took half of its 2.5 s.
ptxas -arch="sm_$sm" "$out.lowered.ptx" -o "$out.check.cubin" -O0 || {
    echo "ptx-for-old-drivers.sh: the compute_$sm PTX needs a newer ISA than $isa (see ptxas above)" >&2
    exit 1
}
fatbinary --create="$out" -64 --image3=kind=ptx,sm="$sm",file="$out.lowered.ptx"
