"""The level table's handling in msda._torch_kernels, on the CPU: made once per tensor and
version, and the one host check of a table that lives on a GPU (here played by CPU tensors with
the device status tensor replaced), which a repeated call must not redo and which must give the
same clear errors as a table on the host."""
import gc
import weakref

import pytest
import torch

import msda
from msda import _torch_kernels as tk
from msda._library import Memory, Sizes
from reference import make_inputs

SHAPES = [(4, 5), (2, 3)]
S = 26


def _sizes(spatial=S, levels=2):
    return Sizes(batch=1, spatial=spatial, heads=1, channels=1, queries=1, levels=levels,
                 points=1)


def test_host_table_is_made_once_per_tensor_and_version():
    shapes, starts = torch.tensor(SHAPES), torch.tensor([0, 20])
    first = tk.level_table(shapes, starts)
    assert first.memory == Memory.HOST and first.host == ((4, 5, 2, 3), (0, 20))
    assert tk.level_table(shapes, starts) is first
    shapes[1, 1] = 4  # in place: a new version, a new table
    second = tk.level_table(shapes, starts)
    assert second is not first and second.host == ((4, 5, 2, 4), (0, 20))
    # Equal numbers in other tensors: another entry, keyed by identity, not by value.
    assert tk.level_table(shapes.clone(), starts) is not second
    # level_start_index changed in place: a new version of the second tensor, a new table too.
    starts[1] = 21
    third = tk.level_table(shapes, starts)
    assert third is not second and third.host == ((4, 5, 2, 4), (0, 21))
    assert tk.level_table(shapes, starts) is third


def test_an_entry_goes_with_its_tensor():
    shapes, starts = torch.tensor(SHAPES), torch.tensor([0, 20])
    tk.level_table(shapes, starts)
    key = (id(shapes), id(starts))
    assert key in tk._tables
    del shapes
    gc.collect()
    assert key not in tk._tables


def test_the_cache_keeps_no_table_alive():
    shapes, starts = torch.tensor(SHAPES), torch.tensor([0, 20])
    tk.level_table(shapes, starts)
    gone = weakref.ref(shapes)
    del shapes
    gc.collect()
    assert gone() is None


def test_int32_table_gives_the_same_numbers():
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=40)
    assert torch.equal(msda.ms_deform_attn(value, shapes.int(), starts.int(), loc, w),
                       msda.ms_deform_attn(value, shapes, starts, loc, w))


@pytest.fixture
def fake_gpu(monkeypatch):
    """_check_device_table on CPU tensors: the device status is a CPU int32, no capture runs,
    and every copy of a table to the host is counted."""
    status = torch.zeros(1, dtype=torch.int32)
    monkeypatch.setattr(tk, "_status_tensor", lambda index: status)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    copies = []
    real_cat = torch.cat

    def counting_cat(tensors, *args, **kwargs):
        copies.append(len(tensors))
        return real_cat(tensors, *args, **kwargs)
    monkeypatch.setattr(torch, "cat", counting_cat)
    return status, copies


def _device_like(shapes, starts):
    """A _Table as level_table makes one for a GPU table, over CPU tensors."""
    key = (id(shapes), id(starts))
    t = tk._make_table(shapes, starts, key)
    return tk._Table(Memory.DEVICE, shapes.data_ptr(), starts.data_ptr(), (None, None), None,
                     t.refs, t.versions)


def test_a_consistent_device_table_is_copied_once(fake_gpu):
    _, copies = fake_gpu
    shapes, starts = torch.tensor(SHAPES), torch.tensor([0, 20])
    t = _device_like(shapes, starts)
    for _ in range(3):
        tk._check_device_table(t, shapes, starts, _sizes(), 0)
    assert copies == [3]  # one copy (shapes, starts and the status together), then none
    assert t.checked == {S}
    # Another S is another question: the same table cannot add up to both.
    with pytest.raises(msda.MSDAInputError, match="add up to 26, S is 27"):
        tk._check_device_table(t, shapes, starts, _sizes(spatial=27), 0)
    assert len(copies) == 2


@pytest.mark.parametrize("shapes,starts,status,words", [
    ([[4, 5], [0, 3]], [0, 20], msda.Status.BAD_SHAPE, "level 1 has shape (0, 3)"),
    ([[4, 5], [2, 3]], [0, 19], msda.Status.LEVEL_START, "level_start[1] is 19"),
    ([[4, 5], [2, 3]], [1, 20], msda.Status.LEVEL_START, "level_start[0] is 1"),
    ([[4, 5], [2, 2]], [0, 20], msda.Status.SHAPE_SUM, "add up to 24, S is 26"),
])
def test_an_inconsistent_device_table_is_named(fake_gpu, shapes, starts, status, words):
    shapes, starts = torch.tensor(shapes), torch.tensor(starts)
    t = _device_like(shapes, starts)
    for _ in range(2):  # and it stays refused: a failed check is not cached
        with pytest.raises(msda.MSDAInputError) as info:
            tk._check_device_table(t, shapes, starts, _sizes(), 0)
        assert info.value.status == status and words in str(info.value)
    assert not t.checked


def test_a_status_the_kernels_stored_is_reported_once(fake_gpu):
    status, _ = fake_gpu
    status.fill_(int(msda.Status.LEVEL_START))  # as a captured graph's kernels would
    shapes, starts = torch.tensor(SHAPES), torch.tensor([0, 20])
    t = _device_like(shapes, starts)
    with pytest.raises(msda.MSDAInputError, match="inconsistent in an earlier call") as info:
        tk._check_device_table(t, shapes, starts, _sizes(), 0)
    assert info.value.status == msda.Status.LEVEL_START
    assert int(status) == 0  # cleared: the next check of a good table passes
    tk._check_device_table(t, shapes, starts, _sizes(), 0)
    assert t.checked == {S}


def test_no_check_while_a_graph_is_captured(fake_gpu, monkeypatch):
    _, copies = fake_gpu
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    shapes, starts = torch.tensor([[4, 5], [2, 2]]), torch.tensor([0, 20])  # inconsistent
    t = _device_like(shapes, starts)
    tk._check_device_table(t, shapes, starts, _sizes(), 0)  # no copy, no error: the kernels check
    assert copies == [] and not t.checked


def test_check_level_tables_reports_and_clears(monkeypatch):
    status = torch.zeros(1, dtype=torch.int32)
    monkeypatch.setitem(tk._device_status, 5, status)
    tk.check_level_tables(torch.device("cuda", 5))  # nothing stored: no error
    status.fill_(int(msda.Status.SHAPE_SUM))
    with pytest.raises(msda.MSDAInputError, match="cuda:5 was inconsistent") as info:
        tk.check_level_tables(torch.device("cuda", 5))
    assert info.value.status == msda.Status.SHAPE_SUM
    tk.check_level_tables(torch.device("cuda", 5))


def test_cpu_value_with_a_gpu_table_is_refused():
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=41)
    with pytest.raises(msda.MSDAInputError, match="spatial_shapes is on meta and value on cpu"):
        msda.ms_deform_attn(value, shapes.to("meta"), starts, loc, w)
