"""Errors name their cause: bad shapes and types found in Python, bad level tables found by
libmsda, and the failures of the CUDA path with their finding IDs and fixes."""
import pytest
import torch

import msda
from msda import _errors
from msda._library import Library
from reference import make_inputs

SHAPES = [(4, 5), (2, 3)]


@pytest.fixture
def inputs():
    return list(make_inputs(SHAPES, seed=20))


def _call(args):
    return msda.ms_deform_attn(*args)


@pytest.mark.parametrize("index,bad,pattern", [
    (0, lambda t: t[0], r"value must have 4 dimensions \(N, S, M, D\), it has shape \(26, 2, 4\)"),
    (1, lambda t: t[:, :1], r"spatial_shapes must have shape \(L, 2\), it has \(2, 1\)"),
    (2, lambda t: t[:1], r"level_start_index must have shape \(2,\) to match spatial_shapes, "
                         r"it has \(1,\)"),
    (3, lambda t: t[..., 0], r"sampling_locations must have 6 dimensions"),
    (3, lambda t: t[:, :, :1], r"sampling_locations has shape \(2, 5, 1, 2, 3, 2\), expected "
                               r"\(2, 5, 2, 2, 3, 2\) from value \(2, 26, 2, 4\) and 2 levels"),
    (3, lambda t: t[:1], r"sampling_locations has shape \(1, 5, 2, 2, 3, 2\), expected "
                         r"\(2, 5, 2, 2, 3, 2\)"),
    (4, lambda t: t[..., :2], r"attention_weights has shape \(2, 5, 2, 2, 2\), expected "
                              r"\(2, 5, 2, 2, 3\)"),
])
def test_bad_shapes_are_named(inputs, index, bad, pattern):
    inputs[index] = bad(inputs[index])
    with pytest.raises(msda.MSDAInputError, match=pattern) as info:
        _call(inputs)
    assert info.value.status is None  # found in Python, before libmsda
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)


def test_too_many_levels():
    with pytest.raises(msda.MSDAInputError, match="17 levels: at most 16"):
        _call(make_inputs([(1, 1)] * 17, seed=21))


def test_the_maximum_number_of_levels_is_accepted():
    # The boundary itself: 16 levels run (17 are refused above), in Python and in libmsda.
    out = _call(make_inputs([(1, 1)] * 16, seed=22))
    assert torch.isfinite(out).all()


def test_a_first_level_start_other_than_zero_is_reported_by_libmsda(inputs):
    inputs[2] = torch.tensor([1, 20])
    with pytest.raises(msda.MSDAInputError, match=r"level_start\[0\] is 1, the sum of the "
                                                  r"levels before it is 0") as info:
        _call(inputs)
    assert info.value.status == msda.Status.LEVEL_START


def test_levels_not_adding_up_to_s_is_reported_by_libmsda(inputs):
    inputs[1] = torch.tensor([[4, 5], [2, 2]])
    with pytest.raises(msda.MSDAInputError, match="add up to 24, S is 26") as info:
        _call(inputs)
    assert info.value.status == msda.Status.SHAPE_SUM


def test_wrong_level_start_is_reported_by_libmsda(inputs):
    inputs[2] = torch.tensor([0, 19])
    with pytest.raises(msda.MSDAInputError, match=r"level_start\[1\] is 19, the sum of the "
                                                  r"levels before it is 20") as info:
        _call(inputs)
    assert info.value.status == msda.Status.LEVEL_START


def test_bad_dtypes(inputs):
    args = list(inputs)
    args[0] = args[0].long()
    with pytest.raises(msda.MSDAInputError, match="value has dtype torch.int64"):
        _call(args)
    args = list(inputs)
    args[1] = args[1].float()
    with pytest.raises(msda.MSDAInputError, match="spatial_shapes has dtype torch.float32; it "
                                                  "must be an integer tensor"):
        _call(args)
    args = list(inputs)
    args[4] = args[4].int()
    with pytest.raises(msda.MSDAInputError, match="attention_weights has dtype torch.int32"):
        _call(args)


def test_tensors_on_different_devices(inputs):
    inputs[3] = inputs[3].to("meta")
    with pytest.raises(msda.MSDAInputError, match="sampling_locations is on meta and value on "
                                                  "cpu"):
        _call(inputs)


def test_bad_grad_output_shape(inputs):
    import MultiScaleDeformableAttention as MSDA
    with pytest.raises(msda.MSDAInputError, match=r"grad_output has shape \(2, 5, 7\), the "
                                                  r"output's is \(2, 5, 8\)"):
        MSDA.ms_deform_attn_backward(*inputs, torch.zeros(2, 5, 7), 64)


def test_missing_library_names_the_path_and_the_variable(tmp_path):
    path = str(tmp_path / "libmsda.so")
    with pytest.raises(msda.MSDAError, match=r"\[shared-lib-not-found\]: cannot load libmsda "
                                             r"from .*libmsda\.so") as info:
        Library(path)
    assert info.value.finding_id == "shared-lib-not-found"
    assert "MSDA_LIBRARY" in str(info.value)


# ---- the CUDA path's failures (built from a status, as the library reports them) -----------
GPU61 = _errors.GPU(0, "Tesla P40", (6, 1))
ARCHS = "sm_75 sm_80 sm_86 sm_90 compute_90"
NO_BINARY = ("cuModuleLoadData (MSDA device code): CUDA_ERROR_NO_BINARY_FOR_GPU (209): no "
             "kernel image is available for execution on the device")


def test_no_kernel_image_names_archs_device_and_fix():
    err = _errors.error_from_status(msda.Status.NO_KERNEL_IMAGE, NO_BINARY, cuda_result=209,
                                    cuda_name="CUDA_ERROR_NO_BINARY_FOR_GPU",
                                    archs=lambda: ARCHS, gpu=lambda: GPU61)
    text = str(err)
    assert type(err) is msda.MSDAError
    assert err.finding_id == "no-kernel-image" and err.status == msda.Status.NO_KERNEL_IMAGE
    assert err.cuda_result == 209 and err.cuda_name == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert text.startswith("msda [no-kernel-image]: ")
    assert "cuda:0 (Tesla P40, compute capability 6.1, sm_61)" in text
    assert f"this build carries: {ARCHS}" in text
    assert "`msda-doctor build --arch sm_61`" in text
    # The driver's own words stay in, for log matchers that know the original error.
    assert "no kernel image is available for execution on the device" in text


@pytest.mark.parametrize("status,cuda_result,finding,words", [
    (msda.Status.NO_KERNEL_IMAGE, 218, "ptx-jit-failure", "could not compile libmsda's PTX"),
    (msda.Status.NO_KERNEL_IMAGE, 222, "driver-too-old", "update the driver"),
    (msda.Status.DRIVER_TOO_OLD, 0, "driver-too-old", "update the driver"),
    (msda.Status.DTYPE_NOT_BUILT, 0, "dtype-half-unsupported", "built without this data type"),
    (msda.Status.CUDA, 701, "launch-out-of-resources", "more registers or threads"),
    (msda.Status.CUDA, 700, "illegal-memory-access", "outside its tensors"),
    (msda.Status.CUDA, 2, None, "libmsda failed"),
    (msda.Status.NO_DRIVER, 0, None, "libcuda.so.1"),
])
def test_cuda_failures_map_to_findings(status, cuda_result, finding, words):
    err = _errors.error_from_status(status, "detail from libmsda", cuda_result=cuda_result,
                                    archs=lambda: ARCHS, gpu=lambda: GPU61)
    assert err.finding_id == finding
    assert words in str(err) and "(libmsda: detail from libmsda)" in str(err)
    if finding:
        assert str(err).startswith(f"msda [{finding}]: ")
    if finding in ("ptx-jit-failure", "dtype-half-unsupported", "launch-out-of-resources"):
        assert "msda-doctor build --arch sm_61" in str(err)
    if finding == "driver-too-old":  # no toolkit folder to quote: diagnose finds the one here
        assert "msda-doctor diagnose names one installed here" in str(err)
        assert "<" not in str(err)


def test_input_statuses_are_input_errors():
    err = _errors.error_from_status(msda.Status.BAD_SIZE, "D (channels) is 0")
    assert isinstance(err, msda.MSDAInputError) and err.finding_id is None
    assert str(err) == "msda: invalid input: D (channels) is 0"
