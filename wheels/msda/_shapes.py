"""Shape checks of the op's arguments, on plain shape tuples (torch.Size, numpy shapes, or
symbolic sizes while torch.compile traces), so that the torch and numpy front ends give the
same messages before anything reaches libmsda.

The contents of spatial_shapes and level_start_index (that the levels add up to S, that the
starts are their prefix sums) are checked by libmsda itself, whose message is passed on.
"""
from __future__ import annotations

import functools
import operator
from typing import Callable, Sequence, Tuple

from ._errors import MSDAInputError
from ._library import MAX_LEVELS, Sampling, Sizes

_LAYOUT = ("value (N, S, M, D), spatial_shapes (L, 2), level_start_index (L,), "
           "sampling_locations (N, Lq, M, L, P, 2), attention_weights (N, Lq, M, L, P)")


def _fmt(shape: Sequence) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _fail(what: str) -> MSDAInputError:
    return MSDAInputError(f"msda: {what}; the op takes {_LAYOUT}")


_POINTS_LAYOUT = ("value (N, S, M, D), spatial_shapes (L, 2), level_start_index (L,), "
                  "sampling_locations (N, Lq, M, sum(points_per_level), 2), attention_weights "
                  "(N, Lq, M, sum(points_per_level))")


def _fail_points(what: str, op: str = "ms_deform_attn_points_per_level") -> MSDAInputError:
    return MSDAInputError(f"msda: {what}; {op} takes {_POINTS_LAYOUT}")


def _check_value_and_table(value: Sequence, spatial_shapes: Sequence, level_start_index: Sequence,
                           fail: Callable[[str], MSDAInputError]) -> int:
    """value's rank and the level table's shapes, which both layouts share; the level count."""
    if len(value) != 4:
        raise fail(f"value must have 4 dimensions (N, S, M, D), it has shape {_fmt(value)}")
    if len(spatial_shapes) != 2 or spatial_shapes[1] != 2:
        raise fail(f"spatial_shapes must have shape (L, 2), it has {_fmt(spatial_shapes)}")
    levels = spatial_shapes[0]
    if levels > MAX_LEVELS:
        raise fail(f"{levels} levels: at most {MAX_LEVELS} are supported")
    if tuple(level_start_index) != (levels,):
        raise fail(f"level_start_index must have shape ({levels},) to match spatial_shapes, "
                   f"it has {_fmt(level_start_index)}")
    return levels


def check_forward(value: Sequence, spatial_shapes: Sequence, level_start_index: Sequence,
                  sampling_locations: Sequence, attention_weights: Sequence) -> Sizes:
    """The sizes of a forward call, or MSDAInputError naming the first mismatch."""
    levels = _check_value_and_table(value, spatial_shapes, level_start_index, _fail)
    n, s, m, d = value
    if len(sampling_locations) != 6:
        raise _fail(f"sampling_locations must have 6 dimensions (N, Lq, M, L, P, 2), it has "
                    f"shape {_fmt(sampling_locations)}")
    queries, points = sampling_locations[1], sampling_locations[4]
    expected = (n, queries, m, levels, points, 2)
    if tuple(sampling_locations) != expected:
        raise _fail(f"sampling_locations has shape {_fmt(sampling_locations)}, expected "
                    f"{_fmt(expected)} from value {_fmt(value)} and {levels} levels")
    if tuple(attention_weights) != expected[:5]:
        raise _fail(f"attention_weights has shape {_fmt(attention_weights)}, expected "
                    f"{_fmt(expected[:5])} from sampling_locations {_fmt(sampling_locations)}")
    return Sizes(batch=n, spatial=s, heads=m, channels=d, queries=queries, levels=levels,
                 points=points)


def check_forward_points(value: Sequence, spatial_shapes: Sequence, level_start_index: Sequence,
                         sampling_locations: Sequence, attention_weights: Sequence,
                         points_per_level: Sequence[int], *,
                         op: str = "ms_deform_attn_points_per_level") -> Sizes:
    """As check_forward, for a point count per level: sampling_locations
    (N, Lq, M, sum(points_per_level), 2), attention_weights (N, Lq, M, sum(points_per_level));
    the Sizes' points is the largest count (msda.h, level_points). op: the function the
    messages name as taking that layout (the one the caller called)."""
    fail = functools.partial(_fail_points, op=op)
    levels = _check_value_and_table(value, spatial_shapes, level_start_index, fail)
    n, s, m, d = value
    if len(points_per_level) != levels or min(points_per_level, default=0) < 1:
        raise fail(f"points_per_level must be one positive count per level ({levels}), it "
                   f"is {list(points_per_level)}")
    total = sum(points_per_level)
    if len(sampling_locations) != 5:
        raise fail(f"sampling_locations must have 5 dimensions (N, Lq, M, {total}, 2), it "
                   f"has shape {_fmt(sampling_locations)}")
    queries = sampling_locations[1]
    expected = (n, queries, m, total, 2)
    if tuple(sampling_locations) != expected:
        raise fail(f"sampling_locations has shape {_fmt(sampling_locations)}, expected "
                   f"{_fmt(expected)} from value {_fmt(value)} and points_per_level "
                   f"{list(points_per_level)}")
    if tuple(attention_weights) != expected[:4]:
        raise fail(f"attention_weights has shape {_fmt(attention_weights)}, expected "
                   f"{_fmt(expected[:4])} from sampling_locations {_fmt(sampling_locations)}")
    return Sizes(batch=n, spatial=s, heads=m, channels=d, queries=queries, levels=levels,
                 points=max(points_per_level))


def output_shape(sizes: Sizes) -> tuple:
    return (sizes.batch, sizes.queries, sizes.heads * sizes.channels)


def check_grad_output(sizes: Sizes, grad_output: Sequence) -> None:
    expected = output_shape(sizes)
    if tuple(grad_output) != expected:
        raise _fail(f"grad_output has shape {_fmt(grad_output)}, the output's is "
                    f"{_fmt(expected)}")


# The sampling methods of the per-level-points layout, by the names its functions take (torch's
# ms_deform_attn_points_per_level and the numpy API alike).
SAMPLING_METHODS = {"bilinear": Sampling.BILINEAR, "discrete": Sampling.DISCRETE}


def check_method(method: str, op: str) -> Sampling:
    """METHOD's Sampling, or MSDAInputError naming the methods OP (the function called) takes."""
    if not isinstance(method, str) or method not in SAMPLING_METHODS:
        raise MSDAInputError(f"msda: method '{method}' is not known; {op} takes "
                             + " or ".join(f"'{m}'" for m in SAMPLING_METHODS))
    return SAMPLING_METHODS[method]


def check_counts(points_per_level: Sequence[int], op: str) -> Tuple[int, ...]:
    """points_per_level as Python ints (a list, a tuple, an array or a tensor of integers). A
    float count is refused rather than truncated: it would be a count the caller did not mean."""
    try:
        return tuple(operator.index(p) for p in points_per_level)
    except TypeError:
        raise MSDAInputError(f"msda: points_per_level must be a sequence of integers, one per "
                             f"level, it is {points_per_level!r}; {op} takes a point count per "
                             f"level") from None
