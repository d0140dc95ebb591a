"""Exact depth profiles (seqlake.lake.depth) against a per-base array, and the read-name metadata."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from seqlake.base.metadata import illumina_fields, parse_control
from seqlake.lake.depth import DepthAccumulator, Profile, add_profiles, cigar_blocks, profile_of_blocks
from seqlake.lake.tables import DEPTH_CAP, THRESHOLDS


def per_base(profile: Profile, length: int) -> np.ndarray:
    depth = np.zeros(length, dtype=np.int64)
    for s, e, d in zip(profile.start, profile.end, profile.depth, strict=True):
        depth[s:e] = d
    return depth


def test_summed_profiles_equal_the_capped_per_base_depth_whatever_the_split() -> None:
    rng = np.random.default_rng(3)
    length = 5000
    starts = rng.integers(0, length - 150, 4000)
    ends = starts + rng.integers(1, 150, 4000)
    truth = np.zeros(length, dtype=np.int64)
    for s, e in zip(starts, ends, strict=True):
        truth[s:e] += 1
    assert truth.max() > DEPTH_CAP > truth.min()  # both sides of the cap are exercised
    cuts = [0, 17, 1000, 2500, 4000]
    parts = [profile_of_blocks(starts[a:b], ends[a:b]) for a, b in itertools.pairwise(cuts)]
    summed = add_profiles(*reversed(parts))
    assert (per_base(summed, length) == np.minimum(truth, DEPTH_CAP)).all()
    touching = summed.start[1:] == summed.end[:-1]
    assert (summed.depth[1:][touching] != summed.depth[:-1][touching]).all()  # runs are maximal
    for t in THRESHOLDS:
        assert summed.bases_at_least(t) == np.count_nonzero(truth >= t)
        low = np.zeros(length, dtype=np.bool_)
        s, e = summed.below(t, length)
        for a, b in zip(s, e, strict=True):
            low[a:b] = True
        assert (low == (truth < t)).all()
        assert (s[1:] > e[:-1]).all()  # merged: no two intervals touch


def test_the_accumulator_sums_its_batches_exactly_and_sweeps_each_run_a_logarithmic_number_of_times(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of reads that barely overlap (a child's share of a big genome): the accumulator's profile is the
    capped per-base depth of all of them, whatever it read in between; the runs it sweeps grow as n log n, not
    as n times the batches (folding each batch into the whole profile swept ~batches/2 times the runs)."""
    import seqlake.lake.depth as depth_module

    rng = np.random.default_rng(11)
    length, batches, per_batch = 2_000_000, 200, 500
    starts = rng.integers(0, length - 150, batches * per_batch)
    ends = starts + rng.integers(1, 150, len(starts))
    swept = [0]
    real_sweep = depth_module._sweep

    def counted(positions: np.ndarray, deltas: np.ndarray) -> Profile:
        swept[0] += len(positions)
        return real_sweep(positions, deltas)

    monkeypatch.setattr(depth_module, "_sweep", counted)
    acc = DepthAccumulator()
    for b in range(batches):
        cut = slice(b * per_batch, (b + 1) * per_batch)
        acc.add_blocks({"chr": (starts[cut], ends[cut])})
        if b == batches // 2:
            assert len(acc.profiles["chr"])  # read in the middle: the sums go on exactly
    whole = profile_of_blocks(starts, ends)
    got = acc.profiles["chr"]
    assert (got.start == whole.start).all() and (got.end == whole.end).all() and (got.depth == whole.depth).all()
    boundaries = 2 * len(starts)  # what one sweep of every batch's blocks takes
    # ~log2(200) ~ 8 merges each plus its batch's own sweep and the middle read; one whole profile folded with
    # every batch swept ~batches / 2 = 100 times the boundaries
    assert swept[0] < boundaries * 16, swept[0]
    assert len(acc._stacks["chr"]) == 1


def test_an_empty_profile_is_one_interval_below_every_threshold() -> None:
    s, e = Profile().below(10, 300)
    assert (s.tolist(), e.tolist()) == ([0], [300])
    assert add_profiles(Profile(), Profile()).bases_at_least(1) == 0


@pytest.mark.parametrize(
    ("pos", "cigar", "blocks"),
    [
        (1, "100M", [(0, 100)]),
        (11, "5S20M2D30M3I10M", [(10, 30), (32, 72)]),
        (5, "10=1X9=", [(4, 24)]),
        (1, "10M100N10M", [(0, 10), (110, 120)]),
    ],
)
def test_cigar_blocks_leave_out_deletions_and_skips(pos: int, cigar: str, blocks: list[tuple[int, int]]) -> None:
    assert cigar_blocks(pos, cigar) == blocks


def test_illumina_read_names_and_control_values() -> None:
    assert illumina_fields("A00123:8:HABCDEFXX:2:1101:1000:2000 1:N:0:ACGT") == {
        "instrument": "A00123", "run": "8", "flowcell": "HABCDEFXX", "lane": "2"}
    assert illumina_fields("MS2_34001:1:1101:11301:5707") == {"instrument": "MS2_34001", "lane": "1"}
    assert illumina_fields("SRR123.1 length=150") == {}
    assert [parse_control(v) for v in ("TRUE", "false", " False ", "")] == [True, False, False, None]
    for guess in ("neg", "yes", "no", "1", "0"):  # what the README promises: anything but true/false is rejected
        with pytest.raises(ValueError, match="true or false"):
            parse_control(guess)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blocks_sorted_as_one_key_give_the_general_sweep_s_profile(seed: int) -> None:
    """``profile_of_blocks`` sorts its +1/-1 steps as one key each; the general sweep (any deltas, an argsort)
    gives the same runs: blocks that start where others end, empty blocks, depths past the cap."""
    from seqlake.lake.depth import _sweep

    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 500, 3_000)
    ends = starts + rng.integers(0, 60, 3_000)
    starts[:50] = ends[50:100]  # starts where other blocks end
    starts = np.concatenate([starts, np.full(DEPTH_CAP + 5, 7)])  # past the cap at one place
    ends = np.concatenate([ends, np.full(DEPTH_CAP + 5, 9)])
    ones = np.ones(len(starts), dtype=np.int64)
    want = _sweep(np.concatenate([starts, ends]).astype(np.int64), np.concatenate([ones, -ones]))
    got = profile_of_blocks(starts, ends)
    for name in ("start", "end", "depth"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
