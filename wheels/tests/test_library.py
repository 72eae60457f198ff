"""library_info, the numpy API, and `import msda` where torch (and numpy) are not installed."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import msda
from reference import make_inputs, ms_deform_attn_reference

WHEELS = Path(__file__).resolve().parent.parent
SHAPES = [(5, 6), (3, 3), (1, 2)]


def test_library_info_lists_version_and_archs():
    info = msda.library_info()
    assert info.version == msda.__version__
    assert Path(info.path).name == "libmsda.so"
    assert info.fatbins >= 0
    names = info.arch_names
    assert len(names) == len(set(names)), "de-duplicated"
    # An architecture two toolkits wrote is two images, one per fatbin, and one name.
    assert len({(a.name, a.fatbin) for a in info.archs}) == len(info.archs)
    assert set(names) == {a.name for a in info.archs}
    for name in names:
        kind, _, number = name.partition("_")
        assert kind in ("sm", "compute") and number.isdigit(), name
    assert str(info).startswith(f"libmsda {info.version} (")


def test_version_is_the_projects():
    """The package and the library both carry the VERSION file's version, through the build."""
    want = os.environ.get("MSDA_EXPECT_VERSION")
    if not want:
        pytest.skip("MSDA_EXPECT_VERSION is set by `make check-python`")
    assert msda.__version__ == want
    assert msda.library_info().version == want


def test_library_path_follows_the_variable(monkeypatch):
    monkeypatch.setenv("MSDA_LIBRARY", "/somewhere/libmsda.so")
    assert msda.library_path() == "/somewhere/libmsda.so"
    monkeypatch.delenv("MSDA_LIBRARY")
    # beside the package, wherever it was imported from (the sources or an installed wheel)
    assert msda.library_path() == str(Path(msda.__file__).resolve().parent / "libmsda.so")


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12),
                                       (np.float16, 2e-3)])
def test_numpy_forward_and_backward(dtype, tol):
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float64, seed=30)
    # Round the inputs to dtype; the reference computes on them in f64.
    value, loc, w = (torch.from_numpy(t.numpy().astype(dtype).astype(np.float64))
                     for t in (value, loc, w))
    grad_out = torch.randn(2, 5, 8, dtype=torch.float64)
    vs = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    ref = ms_deform_attn_reference(vs[0], SHAPES, vs[1], vs[2])
    ref.backward(grad_out)

    arrays = [t.numpy().astype(dtype) for t in (value, loc, w)]
    out = msda.cpu_forward(arrays[0], shapes.numpy(), starts.numpy(), arrays[1], arrays[2])
    assert out.dtype == dtype and out.shape == (2, 5, 8)
    assert np.linalg.norm(out - ref.detach().numpy()) / np.linalg.norm(ref.detach().numpy()) < tol
    grads = msda.cpu_backward(arrays[0], shapes.numpy(), starts.numpy(), arrays[1], arrays[2],
                              grad_out.numpy().astype(dtype), threads=2)
    for g, v in zip(grads, vs):
        r = v.grad.numpy()
        assert g.dtype == dtype
        assert np.linalg.norm(g.astype(np.float64) - r) / np.linalg.norm(r) < 2 * tol


def test_numpy_api_takes_lists_for_the_level_table():
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=31)
    out = msda.cpu_forward(value.numpy(), [list(s) for s in SHAPES], [0, 30, 39],
                           loc.numpy(), w.numpy())
    np.testing.assert_array_equal(out, msda.ms_deform_attn(value, shapes, starts, loc, w).numpy())


def test_numpy_api_errors():
    value, shapes, starts, loc, w = (t.numpy() for t in make_inputs(SHAPES, seed=32))
    with pytest.raises(msda.MSDAInputError, match="value has dtype int64"):
        msda.cpu_forward(value.astype(np.int64), shapes, starts, loc, w)
    with pytest.raises(msda.MSDAInputError, match=r"attention_weights has shape \(2, 5, 2, 3\)"):
        msda.cpu_forward(value, shapes, starts, loc, w[..., 0])
    with pytest.raises(msda.MSDAInputError, match="spatial_shapes has dtype float64"):
        msda.cpu_forward(value, shapes.astype(np.float64), starts, loc, w)


# ---- without torch ---------------------------------------------------------------------------
# A fresh interpreter in which importing the named packages fails as if they were not installed.
_HIDE = textwrap.dedent("""
    import importlib.abc, sys
    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Hide())
""")


def _run_hidden(hidden, code, cwd):
    # the msda these tests imported: the sources, or an installed wheel (make check-python)
    package_root = str(Path(msda.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=package_root)
    script = f"HIDDEN = {tuple(hidden)!r}\n{_HIDE}\n{textwrap.dedent(code)}"
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_import_without_torch_or_numpy(tmp_path):
    out = _run_hidden(("torch", "numpy"), """
        import sys
        import msda
        print(msda.library_info())
        assert "torch" not in sys.modules and "numpy" not in sys.modules
        for name in ("ms_deform_attn", "MSDeformAttn"):
            try:
                getattr(msda, name)
            except ImportError as exc:
                assert f"msda.{name} needs PyTorch" in str(exc), exc
                assert "msda.cpu_forward" in str(exc)
            else:
                raise AssertionError(name + " without torch")
        try:
            msda.cpu_forward(None, None, None, None, None)
        except ImportError as exc:
            assert "need numpy" in str(exc), exc
        else:
            raise AssertionError("cpu_forward without numpy")
        print("ok")
    """, tmp_path)
    assert out.startswith(f"libmsda {msda.__version__} (") and out.endswith("ok\n")


def test_numpy_api_without_torch(tmp_path):
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=33)
    expected = msda.ms_deform_attn(value, shapes, starts, loc, w).numpy()
    np.savez(tmp_path / "case.npz", value=value.numpy(), shapes=shapes.numpy(),
             starts=starts.numpy(), loc=loc.numpy(), w=w.numpy(), expected=expected)
    out = _run_hidden(("torch",), """
        import sys
        import numpy as np
        import msda
        c = np.load("case.npz")
        out = msda.cpu_forward(c["value"], c["shapes"], c["starts"], c["loc"], c["w"])
        np.testing.assert_array_equal(out, c["expected"])
        assert "torch" not in sys.modules
        print("ok")
    """, tmp_path)
    assert out == "ok\n"


def test_attribute_errors_stay_attribute_errors():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        msda.nothing_here
    assert "ms_deform_attn" in dir(msda)
