"""Points the package at a libmsda.so before anything imports it: $MSDA_LIBRARY if set, else
the one inside the package (as in an installed wheel), else the repository's build."""
import os
from pathlib import Path

import pytest

WHEELS = Path(__file__).resolve().parent.parent
REPO_BUILD_LIB = WHEELS.parent / "build" / "kernels" / "libmsda.so"

if not os.environ.get("MSDA_LIBRARY") and not (WHEELS / "msda" / "libmsda.so").exists():
    os.environ["MSDA_LIBRARY"] = str(REPO_BUILD_LIB)

_lib = Path(os.environ.get("MSDA_LIBRARY") or WHEELS / "msda" / "libmsda.so")
if not _lib.exists():
    pytest.exit(f"no libmsda.so at {_lib}: run `make build/kernels/libmsda.so` in the repository "
                f"root, or set MSDA_LIBRARY", returncode=4)


def pytest_terminal_summary(terminalreporter):
    # One line in the "N passed, M failed" form that tests/run-suite's `counts` format reads.
    n = lambda key: len(terminalreporter.stats.get(key, []))
    terminalreporter.write_line(f"{n('passed')} passed, {n('failed') + n('error')} failed, "
                                f"{n('skipped')} skipped")


def pytest_sessionstart(session):
    # `make check-python` runs these tests against an installed wheel: make sure that is what
    # got imported, not the sources beside the tests.
    expected = os.environ.get("MSDA_EXPECT_INSTALLED")
    if expected:
        import msda
        if not str(Path(msda.__file__).resolve()).startswith(str(Path(expected).resolve())):
            pytest.exit(f"msda was imported from {msda.__file__}, not from the installed wheel in {expected}",
                        returncode=4)


@pytest.fixture
def deterministic_algorithms():
    """A setter of torch.use_deterministic_algorithms(mode, warn_only=...) for one test; what was
    set before is set again after it."""
    import torch
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    yield lambda mode, warn_only=False: torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])


@pytest.fixture
def unpatched():
    """msda.patch's tests: every framework on its own code before and after the test."""
    import msda
    msda.unpatch()
    yield
    msda.unpatch()

