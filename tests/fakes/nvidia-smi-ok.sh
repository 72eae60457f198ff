#!/usr/bin/env bash
# Fake nvidia-smi for tests: answers --query-gpu=... --format=csv[,noheader][,nounits] and -L
# from the GPU description named by MSDA_FAKE_GPUS (tests/fixtures/gpus/*.json), like a
# driver of the 510 series or later, which knows the compute_cap field.
#
#   MSDA_FAKE_GPUS=tests/fixtures/gpus/p40.json tests/fakes/nvidia-smi-ok.sh \
#       --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader,nounits
#   Tesla P40, 6.1, 535.183.01, 22919
#
# FAKE_SMI_NO_COMPUTE_CAP=1, or "nvidia_smi": "no-compute-cap" in the description, makes it
# reject compute_cap as 470-series drivers do (nvidia-smi-470.sh sets the variable). A
# description with "init_error" (no working driver) gives the driver-communication failure
# (exit 9); one with no devices "No devices were found" (exit 6); one with "nvidia_smi":
# "absent" (Jetson before JetPack 6) exit 127 as a shell would. Needs bash and jq.
set -u

no_driver() {
    echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
    echo
    exit 9
}

desc=${MSDA_FAKE_GPUS:-}
if [ -z "$desc" ] || [ ! -r "$desc" ]; then no_driver; fi
jq -e '(.driver_version|type)=="number" and (.devices|type)=="array"' "$desc" >/dev/null 2>&1 || no_driver
# a description whose cuInit fails (stub library, driver mismatch) has no working driver either
[ "$(jq -r '.init_error // 0' "$desc")" = 0 ] || no_driver
# a 470-series description says so itself
[ "$(jq -r '.nvidia_smi // "full"' "$desc")" != no-compute-cap ] || FAKE_SMI_NO_COMPUTE_CAP=1
# Jetson before JetPack 6 has no nvidia-smi at all; the caller should not find this program
[ "$(jq -r '.nvidia_smi // "full"' "$desc")" != absent ] || { echo "nvidia-smi: command not found" >&2; exit 127; }

query='' format='' gpu=''
for arg in "$@"; do
    case $arg in
        --query-gpu=*) query=${arg#--query-gpu=} ;;
        --format=*) format=${arg#--format=} ;;
        --id=*) gpu=${arg#--id=} ;;
        -L|--list-gpus) query=LIST ;;
        *) echo "ERROR: Option $arg is not recognized. Please run 'nvidia-smi -h'."; echo; exit 255 ;;
    esac
done

count=$(jq '.devices | length' "$desc")
if [ "$count" -eq 0 ]; then
    echo "No devices were found"
    exit 6
fi

if [ "$query" = LIST ]; then
    for ((i = 0; i < count; i++)); do
        name=$(jq -r ".devices[$i].name" "$desc")
        uuid=$(jq -r ".devices[$i].uuid // \"GPU-$(printf '%08x' $((i + 1)))-0000-4000-8000-000000000000\"" "$desc")
        echo "GPU $i: $name (UUID: $uuid)"
    done
    exit 0
fi
[ -n "$query" ] || { echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."; echo; exit 2; }
# --format defaults to csv with header and units, as with the real one
[ -n "$format" ] || format=csv
case ,$format, in
    *,csv,*) ;;
    *) echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."; echo; exit 2 ;;
esac
if [ -n "$gpu" ] && { ! [[ $gpu =~ ^[0-9]+$ ]] || [ "$gpu" -ge "$count" ]; }; then
    echo "No devices were found"
    exit 6
fi
header=1 units=1
case ,$format, in *,noheader,*) header=0 ;; esac
case ,$format, in *,nounits,*) units=0 ;; esac

IFS=, read -r -a fields <<< "$query"
names=()
for f in "${fields[@]}"; do
    f=${f// /}
    case $f in
        name|gpu_name|driver_version|memory.total|index|pci.bus_id|uuid|count) ;;
        compute_cap)
            if [ -n "${FAKE_SMI_NO_COMPUTE_CAP:-}" ]; then
                echo "Field \"compute_cap\" is not a valid field to query."
                echo
                exit 2
            fi ;;
        *) echo "Field \"$f\" is not a valid field to query."; echo; exit 2 ;;
    esac
    names+=("$f")
done

if [ $header -eq 1 ]; then
    line=
    for f in "${names[@]}"; do
        h=$f
        [ "$f" = memory.total ] && [ $units -eq 1 ] && h="memory.total [MiB]"
        line+="${line:+, }$h"
    done
    echo "$line"
fi

for ((i = 0; i < count; i++)); do
    [ -n "$gpu" ] && [ "$gpu" != "$i" ] && continue
    line=
    for f in "${names[@]}"; do
        case $f in
            name|gpu_name) v=$(jq -r ".devices[$i].name" "$desc") ;;
            compute_cap) v=$(jq -r ".devices[$i].cc" "$desc") ;;
            driver_version) v=$(jq -r '.driver_release' "$desc") ;;
            memory.total) v=$(jq -r ".devices[$i].memory_mb" "$desc"); [ $units -eq 1 ] && v="$v MiB" ;;
            index) v=$i ;;
            count) v=$count ;;
            pci.bus_id) v=$(jq -r ".devices[$i].pci_bus_id // \"00000000:$(printf '%02X' $((i + 1))):00.0\"" "$desc")
                        [ ${#v} -eq 12 ] && v="0000$v" ;;
            uuid) v=$(jq -r ".devices[$i].uuid // \"GPU-$(printf '%08x' $((i + 1)))-0000-4000-8000-000000000000\"" "$desc") ;;
        esac
        line+="${line:+, }$v"
    done
    echo "$line"
done
exit 0
