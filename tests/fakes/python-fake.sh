#!/usr/bin/env bash
# Fake Python for `diagnose` tests: whatever it is asked to run, it answers the probe with the
# JSON document named by FAKE_PYTHON_JSON, on one line after the marker the probe looks for
# (src/lib/diagnose/probes/diag_probe_python.c), after a line of noise as torch's warnings would be.
# Fields: executable, version, msda_importable, binaries (paths), torch (null, or version, cuda,
# lib). Needs bash and jq.
set -u
echo "UserWarning: a warning printed before the answer"
[ -r "${FAKE_PYTHON_JSON:-}" ] || { echo "python-fake: FAKE_PYTHON_JSON unset or unreadable" >&2; exit 1; }
printf 'MSDA-PROBE %s\n' "$(jq -c . "$FAKE_PYTHON_JSON")"
