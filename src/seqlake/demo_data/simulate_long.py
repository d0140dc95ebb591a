"""A deterministic Nanopore-like long-read simulator, for the long-read bench and tests.

The model, per read (one seeded numpy generator for the whole run; vectorised over each read's bases):

1. **Length.** Log-normal around ``median_length`` (``sigma``), clipped to ``[min_length, max_length]`` and
   to the contig (a contig is chosen with probability proportional to its length).
2. **Template.** A uniform start on the contig, either strand with probability 1/2.
3. **Qualities.** Each read gets a mean Phred score ``normal(q_mean, q_read_sd)`` (some pores are worse
   than others) and each base independent noise ``normal(0, base_sd)``, rounded and clipped to ``[3, 40]``.
4. **Errors.** Each template base is an error with probability ``10^(-Q/10)`` of its quality: a
   substitution (a uniformly chosen other base), an insertion (a random base after it) or a deletion, in
   the proportions ``error_mix``; so the qualities are calibrated by construction, and reads of a few per
   cent error, as Nanopore's, come from means near Q14.

Read names carry the truth: ``@long<i> <contig>:<1-based start>:<strand>``. Output is gzip (level 6) with a
zero mtime, so the bytes depend only on the parameters, the seed and the zlib build.
:func:`random_genome` makes a reference of any length (a seeded uniform sequence) when reads longer than the
bundled 30 kb SARS-CoV-2 genome are wanted.

    python -m seqlake.demo_data.simulate_long --genome ref.fa --genome-length 2000000 --reads 500 \
        --out long.fastq.gz
"""

from __future__ import annotations

import argparse
import gzip
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seqlake.demo_data.simulate import Reference, read_reference

_BASES = np.frombuffer(b"ACGT", dtype=np.uint8)
_COMPLEMENT = np.zeros(256, dtype=np.uint8)
for _a, _b in zip(b"ACGTN", b"TGCAN", strict=True):
    _COMPLEMENT[_a] = _b


@dataclass(frozen=True)
class LongReadConfig:
    median_length: int = 8_000
    sigma: float = 0.9
    min_length: int = 500
    max_length: int = 100_000
    q_mean: float = 14.0
    q_read_sd: float = 2.0
    base_sd: float = 4.0
    #: the shares of substitutions, insertions and deletions among errors
    error_mix: tuple[float, float, float] = (0.4, 0.3, 0.3)


def random_genome(length: int, seed: int, name: str = "random_genome") -> Reference:
    """A uniform random sequence of ``length`` bases (one contig)."""
    rng = np.random.default_rng(seed)
    offsets = np.zeros(1, dtype=np.int64)
    return Reference((name,), _BASES[rng.integers(0, 4, length)], offsets, offsets + length)


def write_fasta(ref: Reference, path: Path, width: int = 80) -> None:
    with path.open("wb") as f:
        for i, name in enumerate(ref.names):
            seq = ref.contig(i).tobytes()
            f.write(b">" + name.encode() + b"\n")
            for k in range(0, len(seq), width):
                f.write(seq[k : k + width] + b"\n")


def simulate_read(rng: np.random.Generator, ref: Reference, i: int, cfg: LongReadConfig) -> bytes:
    """One FASTQ record (see the module docstring)."""
    lengths = ref.lengths
    k = int(rng.choice(len(lengths), p=lengths / lengths.sum()))
    want = float(rng.lognormal(np.log(cfg.median_length), cfg.sigma))
    length = int(min(max(want, cfg.min_length), cfg.max_length, lengths[k]))
    start = int(rng.integers(0, lengths[k] - length + 1))
    template = ref.contig(k)[start : start + length]
    reverse = bool(rng.integers(0, 2))
    if reverse:
        template = _COMPLEMENT[template[::-1]]
    read_q = rng.normal(cfg.q_mean, cfg.q_read_sd)
    qual = np.clip(np.rint(rng.normal(read_q, cfg.base_sd, length)), 3, 40).astype(np.uint8)
    error = rng.random(length) < np.power(10.0, qual / -10.0)
    kind = rng.choice(3, size=length, p=cfg.error_mix)
    seq = template.copy()
    sub = error & (kind == 0)
    seq[sub] = _BASES[(np.searchsorted(_BASES, seq[sub]) + rng.integers(1, 4, int(sub.sum()))) % 4]
    keep = ~(error & (kind == 2))
    inserted = np.flatnonzero(error & (kind == 1))
    seq = np.insert(seq, inserted + 1, _BASES[rng.integers(0, 4, len(inserted))])[np.insert(keep, inserted + 1, True)]
    qual = np.insert(qual, inserted + 1, qual[inserted])[np.insert(keep, inserted + 1, True)]
    name = f"@long{i + 1} {ref.names[k]}:{start + 1}:{'-' if reverse else '+'}"
    return b"%s\n%s\n+\n%s\n" % (name.encode(), seq.tobytes(), (qual + 33).tobytes())


def simulate(ref: Reference, n_reads: int, seed: int, cfg: LongReadConfig | None = None) -> Iterator[bytes]:
    rng = np.random.default_rng(seed)
    for i in range(n_reads):
        yield simulate_read(rng, ref, i, cfg or LongReadConfig())


def write_reads(ref: Reference, path: Path, n_reads: int, seed: int, cfg: LongReadConfig | None = None) -> None:
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0, filename="") as f:
        for record in simulate(ref, n_reads, seed, cfg):
            f.write(record)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", help="FASTA to draw reads from (or --genome)")
    ap.add_argument("--genome", help="write a random genome here and draw reads from it")
    ap.add_argument("--genome-length", type=int, default=2_000_000)
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--median-length", type=int, default=LongReadConfig.median_length)
    ap.add_argument("--max-length", type=int, default=LongReadConfig.max_length)
    ap.add_argument("--out", required=True, help="gzip FASTQ to write")
    args = ap.parse_args(argv)
    if args.genome:
        ref = random_genome(args.genome_length, args.seed)
        write_fasta(ref, Path(args.genome))
    elif args.reference:
        ref = read_reference(args.reference)
    else:
        ap.error("give --reference or --genome")
    cfg = LongReadConfig(median_length=args.median_length, max_length=args.max_length)
    write_reads(ref, Path(args.out), args.reads, args.seed, cfg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
