"""The spread of step-by-step speed ratios (own / msda) of two interleaved paths, and the type of
their step counts' argument (compile-profile.py's --top too), for the model benchmarks
(frameworks.py, mmdet_models.py, dfine_core.py): their steps are bound by the CPU's launches,
whose speed moves by 10 % and more between runs on a shared machine, so a median alone can sit
on either side of 1 by chance."""
import argparse
import random
import statistics


def count(least):
    """An argparse type: a whole number of at least LEAST (a count of steps: none would leave no
    median to take)."""
    def parse(text):
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if n < least:
            raise argparse.ArgumentTypeError(f"{n}: at least {least}")
        return n
    return parse


def quartiles(ratios):
    """The first and third quartiles of RATIOS."""
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else list(ratios) * 3
    return q[0], q[2]


def median_interval(ratios, resamples=2000):
    """A 95 % confidence interval of the median of RATIOS: the 2.5th and 97.5th percentiles of
    the medians of RESAMPLES resamples with replacement (seeded: the same steps give the same
    interval)."""
    pick = random.Random(0)
    medians = sorted(statistics.median(pick.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def verdict(interval):
    """'slower' where the whole interval is below 1, 'faster' where above, else 'even' (not
    shown either way)."""
    low, high = interval
    return "slower" if high < 1 else "faster" if low > 1 else "even"
