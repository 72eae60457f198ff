#!/usr/bin/env bash
# The bench's peers (tests/bench/bench.py --peers): the original Deformable-DETR op and DCNv4's
# flash MSDA, compiled as torch extensions for one GPU architecture. Their sources are never
# committed: `extract` copies them out of local git mirrors into an ignored folder (build/), and
# `build` patches a copy there for today's torch and compiles it.
#
#   tests/bench/peers/build-peers.sh extract [DEST]        here; sources into DEST/src
#   tests/bench/peers/build-peers.sh build [DEST] [ARCH]   GPU machine; DEST/ext/{orig,dcnv4}
# DEST defaults to build/peers, ARCH to 9.0 (TORCH_CUDA_ARCH_LIST syntax). MAX_JOBS (default:
# the cores) compilations at a time, through ninja; PEERS (default orig,dcnv4) which to build;
# PEERS_NO_SPLIT=1 compiles them as their own setup.py does (build_peers.py). Git mirrors:
# PEERS_GIT_DDETR and PEERS_GIT_DCNV4 (bare repositories).
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=tests/bench/peers
dest=${2:-build/peers}

# The commits benchmarked: the original op has not changed since 2020; DCNv4 as of 2024-05.
DDETR_COMMIT=11169a60c33333af00a4849f1808023eba96a931
DCNV4_COMMIT=4b848f7dd7da74ff03f7d278f902c6fd05b391b5

extract() {
    local git_ddetr=${PEERS_GIT_DDETR:-/work/.mirror/fundamentalvision+Deformable-DETR/repo}
    local git_dcnv4=${PEERS_GIT_DCNV4:-/work/.mirror/OpenGVLab+DCNv4/repo}
    rm -rf "$dest" && mkdir -p "$dest/src"
    git --git-dir="$git_ddetr" archive "$DDETR_COMMIT" models/ops | tar -x -C "$dest/src"
    mv "$dest/src/models/ops" "$dest/src/deformable-detr" && rmdir "$dest/src/models"
    git --git-dir="$git_dcnv4" archive "$DCNV4_COMMIT" DCNv4_op | tar -x -C "$dest/src"
    mv "$dest/src/DCNv4_op" "$dest/src/dcnv4"
    du -sh "$dest/src"
}

build() {
    local arch=${3:-9.0}
    local peer
    for peer in $(echo "${PEERS:-orig,dcnv4}" | tr , ' '); do
        [ -d "$dest/src/$([ "$peer" = orig ] && echo deformable-detr || echo "$peer")" ] ||
            { echo "build-peers: no $peer sources in $dest/src: run '$0 extract' where the mirrors are" >&2; exit 1; }
    done
    # Patched once: a second build on the same machine then only relinks (ninja sees no change).
    if [ ! -d "$dest/patched" ]; then
        cp -r "$dest/src" "$dest/patched.tmp"
        patch_sources "$dest/patched.tmp"
        mv "$dest/patched.tmp" "$dest/patched"
    fi
    MAX_JOBS=${MAX_JOBS:-$(nproc)} TORCH_CUDA_ARCH_LIST=$arch python3 "$here/build_peers.py" "$dest"
}

patch_sources() {
    local d=$1
    # The one change torch 2.x needs: AT_DISPATCH_* takes a ScalarType, and the original passes
    # value.type() (DeprecatedTypeProperties), which no longer converts. Tensor::type() and
    # data<T>() elsewhere still compile, with deprecation warnings.
    sed -i 's/AT_DISPATCH_FLOATING_TYPES(value\.type(),/AT_DISPATCH_FLOATING_TYPES(value.scalar_type(),/' \
        "$d/deformable-detr/src/cuda/ms_deform_attn_cuda.cu"
    ! grep -n 'AT_DISPATCH[A-Z_0-9]*(value\.type()' -r "$d" ||
        { echo "build-peers: a dispatch on value.type() is left" >&2; exit 1; }
    [ ! -d "$d/dcnv4" ] || cp "$here/dcnv4_flash_binding.cpp" "$d/dcnv4/src/"
}

case ${1:-} in
extract) extract ;;
build) build "$@" ;;
*) echo "usage: $0 extract [DEST] | build [DEST] [ARCH]" >&2; exit 2 ;;
esac
