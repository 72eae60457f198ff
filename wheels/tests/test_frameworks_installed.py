"""The frameworks msda.patch's tests run on are there, in the release make names (check-python:
transformers and mmcv-lite; check-transformers4: transformers 4.57; check-mmdet: mmdet and the
mmcv-lite it needs). Apart from those tests, which skip where their framework cannot be
imported: here a framework make expects but that cannot be imported (a missing dependency of it)
fails instead of skipping them all unseen."""
import importlib
import os

import pytest


@pytest.mark.parametrize("module, variable", [("transformers", "MSDA_EXPECT_TRANSFORMERS"),
                                              ("mmcv", "MSDA_EXPECT_MMCV"), ("mmdet", "MSDA_EXPECT_MMDET")])
def test_the_framework_under_test_is_importable_and_the_release_expected(module, variable):
    expected = os.environ.get(variable)
    if not expected:
        pytest.skip(f"{variable} is not set (make sets it)")
    assert importlib.import_module(module).__version__ == expected
