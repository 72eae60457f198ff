"""One command timed under several environments (another package, another library), in fresh
processes taken in turns, so that a busy host's slow spells fall on all of them rather than on
one: what overhead.py --against and cpu_bench.py compare with."""
import json
import subprocess


class TurnFailed(RuntimeError):
    """A process exited non-zero: its environment's name and the end of its stderr."""


def in_turns(argv, envs, processes):
    """{name: [the JSON its process printed last, a process each]} for argv run under each
    environment of envs ({name: environ}) `processes` times, the order reversed every other
    round."""
    names = list(envs)
    got = {name: [] for name in names}
    for k in range(processes):
        for name in (names if k % 2 == 0 else names[::-1]):
            run = subprocess.run(argv, env=envs[name], capture_output=True, text=True)
            if run.returncode != 0:
                raise TurnFailed(f"the {name} process failed:\n{run.stderr[-2000:]}")
            got[name].append(json.loads(run.stdout.strip().splitlines()[-1]))
    return got
