#!/usr/bin/env bats
# Every fix is a command one can paste: diagnose over the whole log corpus (the tuned part, the
# held-out part and the fixture logs), with --no-probe and on fake machines, and every fix line
# of the JSON checked: no <placeholder> (nor in a cause or note), and every absolute path it
# names either comes from the log or exists on the (fake) machine. Only the fixes' form is
# checked here, not which finding wins (the held-out logs are run, not read).
load diag_helpers

# The checker's Python, found before setup leaves python off PATH (the fake machines have none).
CHECKER=$(command -v python3)

# The machines: MACHINE GPUS TOOLKITS... (one line each, read by the checker below).
machines() {
  cat <<EOF
p40-535 p40 13.0 11.8
h100-550 old-driver-h100 13.0
no-gpu-no-toolkit none
EOF
}

@test "every fix of every corpus log, alone and on fake machines, is pasteable" {
  gxx 12 11   # no nvidia-smi: the driver API tells the GPU, and each run stays short
  toolkit 13.0; toolkit 12.4; toolkit 11.8
  local v
  for v in 13.0 12.4 11.8; do mkdir -p "$BATS_TEST_TMPDIR/cuda-$v/lib64/stubs"; done
  # a Python with torch whose executable exists here, so that {python} names a real file
  mkdir -p "$BATS_TEST_TMPDIR/torch/lib"
  python_json '{"executable": "'"$FAKES/python-fake.sh"'", "version": "3.10.12", "msda_importable": false,
                "binaries": [], "torch": {"version": "2.1.2+cu118", "cuda": "11.8", "lib": "'"$BATS_TEST_TMPDIR/torch/lib"'"}}'
  run --separate-stderr "$CHECKER" - "$MSDA_DOCTOR" "$ROOT" "$GPUS" "$BATS_TEST_TMPDIR" "$FAKE_ROOT" \
    "$FAKES/python-fake.sh" "$(machines)" <<'PY'
import glob, json, os, re, subprocess, sys

doctor, root, gpus, tmp, fake_root, python, machine_lines = sys.argv[1:8]
logs = sorted(glob.glob(f"{root}/tests/diagnose-corpus/*.log") +
              glob.glob(f"{root}/tests/diagnose-corpus/held-out/*.log") +
              glob.glob(f"{root}/tests/fixtures/logs/*.log"))
assert len(logs) > 300, f"only {len(logs)} logs found"
machines = [line.split() for line in machine_lines.splitlines() if line.strip()]

PLACEHOLDER = re.compile(r"<[a-z][a-z0-9_|]*>")
# an absolute path: after the start, a space, =, :, a quote or a parenthesis; sed scripts
# ('s/OLD/NEW/') are not paths
PATH = re.compile(r"""(?:^|(?<=[\s=:'"(]))(/[^\s:'"();,$]+)""")
SED_SCRIPT = re.compile(r"""'s([/#]).*?\1.*?\1[a-z]*(?:;[^']*)?'""")
counts = {"runs": 0, "fixes": 0, "placeholders": 0, "paths": 0, "paths_from_logs": 0}
problems = []

def check(log, where, out, must_exist):
    data = json.loads(out)
    text = open(log, "rb").read()
    for f in data["findings"]:
        # a <name> the log itself holds (a capture: "<stdin>") is the log's, not a placeholder
        for s in [f["cause"]] + f["notes"] + [c["cause"] for c in f["causes"]] + f["fix"]:
            for m in PLACEHOLDER.findall(s):
                if m.encode() not in text:
                    counts["placeholders"] += 1
                    problems.append(f"{where} {os.path.basename(log)} {f['id']}: placeholder {m} in {s!r}")
        for fix in f["fix"]:
            counts["fixes"] += 1
            for p in PATH.findall(SED_SCRIPT.sub("", fix)):
                # from the log: the path, or its folder (a capture with a suffix: NAME.cu)
                if p.encode() in text or os.path.dirname(p).encode() + b"/" in text:
                    counts["paths_from_logs"] += 1
                    continue
                counts["paths"] += 1
                probe = os.path.dirname(p) if any(c in p for c in "*?[") else p
                if not must_exist or not os.path.exists(probe):
                    problems.append(f"{where} {os.path.basename(log)} {f['id']}: {p} (in {fix!r}) "
                                    + ("is made up: nothing was probed" if not must_exist else "does not exist"))

def run(args, env):
    counts["runs"] += 1
    r = subprocess.run([doctor, "diagnose", "--json", *args], env=env, capture_output=True)
    if r.returncode not in (0, 1) or b"Sanitizer" in r.stderr or b"runtime error:" in r.stderr:
        problems.append(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.decode(errors='replace')[-400:]}")
        return None
    return r.stdout

env = dict(os.environ)
for log in logs:
    out = run(["--no-probe", log], env)
    if out:
        check(log, "no-probe", out, must_exist=False)
for name, gpu, *toolkits in machines:
    menv = dict(env, MSDA_FAKE_GPUS=f"{gpus}/{gpu}.json",
                MSDA_TOOLKIT_PATHS=":".join(f"{tmp}/cuda-{v}" for v in toolkits) or "/nonexistent")
    for log in logs + [None]:
        out = run(["--python", python, "--root", fake_root] + ([log] if log else []), menv)
        if out:
            check(log or os.devnull, name, out, must_exist=True)
print(f"logs {len(logs)}, runs {counts['runs']}: fixes checked {counts['fixes']}, placeholders found "
      f"{counts['placeholders']}, paths checked {counts['paths']} (and {counts['paths_from_logs']} from the logs)")
for p in problems[:40]:
    print(p)
sys.exit(1 if problems else 0)
PY
  echo "$output" >&3
  [ "$status" -eq 0 ]
  [[ "$output" == *"placeholders found 0,"* ]]
}
