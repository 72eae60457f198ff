"""The per-level-points layout against the op's uniform one, for numpy arrays and torch tensors
alike (XP: numpy or torch), with no torch import, so that the numpy API's tests run without it."""


def padded(points, loc, w, xp):
    """The same points in the op's uniform layout (N, Lq, M, L, max P, ...): each level padded to
    the largest count with zero weights at the map's centre."""
    widest = max(points)
    n, q, m = loc.shape[:3]
    pl = xp.full((n, q, m, len(points), widest, 2), 0.5, dtype=loc.dtype)
    pw = xp.zeros((n, q, m, len(points), widest), dtype=w.dtype)
    at = 0
    for level, count in enumerate(points):
        pl[:, :, :, level, :count] = loc[:, :, :, at:at + count]
        pw[:, :, :, level, :count] = w[:, :, :, at:at + count]
        at += count
    return pl, pw


def unpadded(points, padded_array, xp):
    """The per-level layout of an array in the uniform one: each level's first points[l]."""
    cat = getattr(xp, "cat", None) or xp.concatenate  # torch.cat, numpy.concatenate
    return cat([padded_array[:, :, :, level, :count] for level, count in enumerate(points)], 3)
