#!/usr/bin/env bash
# Fake nvidia-smi of the 470 driver series: like nvidia-smi-ok.sh, but the compute_cap query
# field does not exist yet, so any query naming it fails with
#   Field "compute_cap" is not a valid field to query.
# and exit status 2, as the real one does. The name,driver_version,memory.total query works.
FAKE_SMI_NO_COMPUTE_CAP=1 exec "$(dirname "$0")/nvidia-smi-ok.sh" "$@"
