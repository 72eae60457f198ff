#!/usr/bin/env bash
# Fake nvidia-smi on a machine whose NVIDIA kernel driver is not loaded (or does not match the
# user-space libraries): whatever is asked, it prints the real message and exits with 9.
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
echo
exit 9
