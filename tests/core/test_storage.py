"""Storage: the same calls on local paths and on S3 (moto's in-process mock_aws)."""

from __future__ import annotations

import gzip
import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from seqlake.base import clients, storage
from seqlake.base.errors import BadInputError
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.plan import shards
from seqlake.plan.planfile import load_plan
from seqlake.plan.planner import make_plan

BUCKET = "seqlake-test"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    moto = pytest.importorskip("moto")
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with moto.mock_aws():
        clients.reset()
        storage.s3_client().create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}"
    clients.reset()


def test_local_roundtrip(tmp_path: Path) -> None:
    uri = str(tmp_path / "a" / "b" / "c.bin")
    storage.write_bytes(uri, b"hello")
    assert storage.read_bytes(uri) == b"hello"
    assert storage.exists(uri)
    assert not storage.exists(uri + ".no")
    assert storage.head(uri).size == 5
    assert storage.head(uri).etag is None
    storage.copy(uri, str(tmp_path / "d.bin"))
    assert storage.list_uris(str(tmp_path)) == sorted([uri, str(tmp_path / "d.bin")])
    assert not [p for p in (tmp_path / "a" / "b").iterdir() if p.name.endswith(".tmp")]
    with storage.open_read(uri) as f:
        f.seek(1)
        assert f.read(3) == b"ell"
    assert storage.join(str(tmp_path), "x", "y") == str(tmp_path / "x" / "y")
    with pytest.raises(FileNotFoundError):
        storage.head(str(tmp_path / "missing"))


def test_join_s3() -> None:
    assert storage.join("s3://b/p/", "runs", "r1/") == "s3://b/p/runs/r1"
    assert storage.split_s3("s3://b/k/ey") == ("b", "k/ey")


def test_s3_roundtrip(s3: str, tmp_path: Path) -> None:
    uri = f"{s3}/x/y.bin"
    storage.write_bytes(uri, b"data" * 10)
    assert storage.read_bytes(uri) == b"data" * 10
    info = storage.head(uri)
    assert info.size == 40
    assert info.etag and '"' not in info.etag
    assert storage.exists(uri)
    assert not storage.exists(f"{s3}/x/none")
    storage.copy(uri, f"{s3}/z.bin")
    local = tmp_path / "dl.bin"
    storage.download(f"{s3}/z.bin", local)
    assert local.read_bytes() == b"data" * 10
    storage.upload(local, f"{s3}/up/u.bin")
    assert storage.list_uris(f"{s3}/") == [f"{s3}/up/u.bin", f"{s3}/x/y.bin", f"{s3}/z.bin"]
    with pytest.raises(FileNotFoundError):
        storage.head(f"{s3}/nope")


@pytest.mark.parametrize("where", ["s3", "local"])
def test_read_range_is_short_at_the_end_and_empty_past_it(s3: str, tmp_path: Path, where: str) -> None:
    uri = f"{s3}/r.bin" if where == "s3" else str(tmp_path / "r.bin")
    storage.write_bytes(uri, b"0123456789")
    assert storage.read_range(uri, 2, 5) == b"234"
    assert storage.read_range(uri, 8, 20) == b"89"
    assert storage.read_range(uri, 10, 20) == storage.read_range(uri, 30, 40) == b""
    with pytest.raises(FileNotFoundError):
        storage.read_range(uri + ".none", 0, 1)


def test_s3_range_reader_cache(s3: str) -> None:
    data = os.urandom(300_000)
    uri = f"{s3}/blob"
    storage.write_bytes(uri, data)
    r = storage.S3RangeReader(uri, block_size=10_000, cache_blocks=4)
    r.seek(25_000)
    assert r.read(100) == data[25_000:25_100]
    assert r.requests == 1
    assert r.read(100) == data[25_100:25_200]  # from the cache
    assert r.requests == 1
    r.seek(-10, io.SEEK_END)
    assert r.read(100) == data[-10:]
    assert r.read(5) == b""
    r.seek(0)
    big = r.read(100_000)  # larger than the cache: one GET
    assert big == data[:100_000]
    assert r.requests == 3
    buf = bytearray(50)
    r.seek(123)
    assert r.readinto(buf) == 50
    assert bytes(buf) == data[123:173]


def test_s3_range_reader_streams_sequential_reads(s3: str) -> None:
    data = os.urandom(200_000)
    uri = f"{s3}/seq"
    storage.write_bytes(uri, data)
    r = storage.S3RangeReader(uri, block_size=1000, cache_blocks=4)
    got = b"".join(r.read(700) for _ in range(200))
    assert got == data[:140_000]
    assert r.requests < 10  # one streaming GET after a few cached blocks, not one GET per block
    r.seek(5)
    assert r.read(10) == data[5:15]
    r.seek(150_000)
    assert r.read() == data[150_000:]
    r.close()


def test_s3_range_reader_fills_in_order_misses_from_one_stream(s3: str) -> None:
    """rapidgzip's index pass reads 1-block windows that move forward while stepping back into the
    cache: its misses come in block order and are served by one open-ended GET, not one GET per block."""
    data = os.urandom(400_000)
    uri = f"{s3}/scan"
    storage.write_bytes(uri, data)
    r = storage.S3RangeReader(uri, block_size=10_000, cache_blocks=4)
    pos = 0
    while pos < len(data):
        for at in (pos, max(0, pos - 3_000), pos):
            r.seek(at)
            assert r.read(10_000) == data[at : at + 10_000]
        pos += 9_000
    assert r.requests == 2  # block 0 alone, then one stream from block 1 to the end
    assert r.fetched == len(data)  # every byte once
    # blocks 0 and 1 left the cache long ago: block 0 is a miss out of order (a GET of its own, the
    # stream, at block 40, is closed), block 1 follows it in order (a new stream)
    r.seek(5)
    assert r.read(100) == data[5:105]
    r.seek(10_005)
    assert r.read(100) == data[10_005:10_105]
    assert r.requests == 4
    r.close()


def test_plan_and_shards_on_s3(s3: str, miseq: tuple[Path, Path]) -> None:
    """gzip pair in S3: index pass through ranged reads, plan in S3, shards read back exactly."""
    uris = []
    for p in miseq:
        uri = f"{s3}/incoming/b1/{p.name}"
        storage.upload(p, uri)
        uris.append(uri)
    plan = make_plan("s3run", [Sample("s1", uris[0], uris[1])], out_prefix=f"{s3}/lake", shards=7)
    assert plan.plan_uri == f"{s3}/lake/runs/s3run/plan.json"
    assert storage.exists(plan.inputs[0].index_uri or "")
    assert plan.inputs[0].etag == storage.head(uris[0]).etag
    assert plan.layout.staging == f"{s3}/lake/runs/s3run/staging/"
    loaded = load_plan(plan.plan_uri)
    assert loaded == plan
    parts: dict[int, list[bytes]] = {1: [], 2: []}
    for i in range(loaded.array_size):
        for chunks in shards.iter_shard_chunks(loaded, i):
            for c in chunks:
                parts[c.mate].append(c.data)
    assert b"".join(parts[1]) == gzip.decompress(miseq[0].read_bytes())
    assert b"".join(parts[2]) == gzip.decompress(miseq[1].read_bytes())


def test_plain_byte_ranges_on_s3(s3: str, tmp_path: Path) -> None:
    recs = b"".join(b"@r%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(3000))
    uri = f"{s3}/in/plain.fastq"
    storage.write_bytes(uri, recs)
    plan = make_plan("ranges", [Sample("a", uri)], out_prefix=f"{s3}/lake", shards=5,
                     count_plain_below=0)
    assert plan.array_size == 5
    got = b"".join(c.data for i in range(5) for cs in shards.iter_shard_chunks(plan, i) for c in cs)
    assert got == recs


def _reads(n: int, mate: int) -> bytes:
    return b"".join(b"@r%d/%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % (i, mate) for i in range(n))


def test_plan_of_small_samples_reads_each_file_once_and_asks_no_size(s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The request's listing gives the sizes and ETags (no HEAD); a small sample that is one shard is
    read by its sniff in one GET, which also serves the check for whole gzip members (what the index pass
    would check), with no index pass and nothing written for it; a split one is still indexed."""
    files = {}
    for name in ("a", "b"):
        for mate in (1, 2):
            uri = f"{s3}/incoming/{name}_R{mate}.fastq.gz"
            storage.write_bytes(uri, gzip.compress(_reads(300 if name == "a" else 3000, mate)))
            files[uri] = storage.head(uri)
    calls = _sent_requests()
    samples = [Sample(n, f"{s3}/incoming/{n}_R1.fastq.gz", f"{s3}/incoming/{n}_R2.fastq.gz") for n in ("a", "b")]
    plan = make_plan("small", samples, out_prefix=f"{s3}/lake", params=Params(reads_per_shard=1000), known=files)
    assert "HeadObject" not in [op for op, _ in calls]
    # a's files: one GET each (their sniff; their members checked whole from its bytes); nothing written for them
    assert sorted(str(key) for op, key in calls if str(key).startswith("incoming/a_")) == [
        "incoming/a_R1.fastq.gz", "incoming/a_R2.fastq.gz"]
    small, split = plan.inputs[:2], plan.inputs[2:]
    assert [(i.records, i.index_uri, i.checkpoints_uri) for i in small] == [(300, None, None)] * 2
    assert [i.etag for i in plan.inputs] == [files[i.uri].etag for i in plan.inputs]
    assert all(i.records == 3000 and i.index_uri and storage.exists(i.index_uri) for i in split)
    written = {f"{s3}/{key}" for op, key in calls if op == "PutObject" and "/index/" in str(key)}
    assert written == {f(i) for i in (2, 3) for f in (plan.layout.index, plan.layout.checkpoints)}  # b's only
    assert [s.sample for s in plan.shards] == ["a", "b", "b", "b"]
    whole = {m: b"".join(b"".join(c.data for c in chunks if c.mate == m)
                         for i in range(plan.array_size) for chunks in shards.iter_shard_chunks(plan, i))
             for m in (1, 2)}
    assert whole == {m: _reads(300, m) + _reads(3000, m) for m in (1, 2)}


def test_plan_refuses_bytes_after_the_last_gzip_member_of_a_small_file_from_its_one_get(
        s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small gzip file read whole by its sniff, with bytes after its last whole member: refused naming
    the byte where they start, from the sniff's own GET (the reader stops at the last whole member)."""
    body = gzip.compress(_reads(20, 1))
    uri = f"{s3}/incoming/padded.fastq.gz"
    storage.write_bytes(uri, body + b"\0" * 10)
    sent = _sent_requests()
    with pytest.raises(BadInputError, match=f"corrupt gzip stream at byte {len(body)}: not a gzip member"):
        make_plan("padded", [Sample("a", uri)], out_prefix=f"{s3}/lake", known={uri: storage.head(uri)})
    assert [key for op, key in sent if op == "GetObject"] == ["incoming/padded.fastq.gz"]


def _sent_requests() -> list[tuple[str, str]]:
    """Every request this process's S3 client sends from now on, as (operation, key), by either route: a
    call of the client, or a ranged GET of :class:`clients.RangedGets` (both emit ``before-send``)."""
    import urllib.parse

    sent: list[tuple[str, str]] = []

    def record(event_name: str, request: object, **_: object) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(str(getattr(request, "url", ""))).path)
        sent.append((event_name.rsplit(".", 1)[1], path.removeprefix(f"/{BUCKET}").lstrip("/")))

    storage.s3_client().meta.events.register_first("before-send.s3", record)  # before moto's mock answers
    return sent


def test_a_ranged_get_skips_botocores_call_and_keeps_its_answers(s3: str) -> None:
    """The small ranged GETs of a plan's sniffs are signed and sent by :class:`clients.RangedGets` (none of
    botocore's per-call steps: no ``before-call``), with the bytes ``get_object`` gives; what is not the bytes
    (a missing key) is botocore's own call and error."""
    from botocore.exceptions import ClientError

    body = bytes(range(256)) * 40
    storage.write_bytes(f"{s3}/in/x.bin", body)
    calls: list[str] = []
    storage.s3_client().meta.events.register("before-call.s3.*", lambda model, **_: calls.append(model.name))
    sent = _sent_requests()
    with storage.open_read(f"{s3}/in/x.bin") as f:
        f.seek(1000)
        assert f.read(100) == body[1000:1100]
    assert storage.read_range(f"{s3}/in/x.bin", 0, 10) == body[:10]
    assert calls.count("GetObject") == 1 and ("GetObject", "in/x.bin") in sent  # read_range: botocore's call
    assert sent.count(("GetObject", "in/x.bin")) == 2
    gets = clients.ranged_gets()
    assert gets is not None
    assert gets.get(BUCKET, "in/x.bin", 5000, 20000) == body[5000:]
    with pytest.raises(ClientError, match="NoSuchKey"):
        gets.get(BUCKET, "in/missing.bin", 0, 10)
    assert calls[-1] == "GetObject"
    # a redirect (a bucket in another region): that GET and the bucket's next ones are botocore's
    from botocore.awsrequest import AWSResponse

    lean: list[str] = []

    def moved(request: object, **_: object) -> object:
        if "amz-sdk-invocation-id" in getattr(request, "headers", {}):  # botocore's own call: moto answers
            return None
        lean.append(str(getattr(request, "url", "")))
        return AWSResponse(str(getattr(request, "url", "")), 301, {}, io.BytesIO(b""))

    storage.s3_client().meta.events.register_first("before-send.s3.GetObject", moved)
    gets._declined.clear()
    calls.clear()
    assert gets.get(BUCKET, "in/x.bin", 0, 99) == body[:100] and gets.get(BUCKET, "in/x.bin", 100, 199) == body[100:200]
    assert len(lean) == 1 and calls == ["GetObject", "GetObject"]


def _concatenated(base: str, tmp_path: Path) -> tuple[list[storage.Source], bytes]:
    """Pieces of two objects and some bytes, and what joining them gives."""
    rng = __import__("numpy").random.default_rng(5)
    a, b = (rng.integers(0, 256, n, dtype="uint8").tobytes() for n in (16 << 20, 3 << 20))
    ua, ub = storage.join(base, "a.bin"), storage.join(base, "b.bin")
    storage.write_bytes(ua, a)
    storage.write_bytes(ub, b)
    mib = 1 << 20
    pieces: list[storage.Source] = [
        (ua, 0, 6 * mib),                  # a large range first: copied whole
        b"middle\n",                       # small bytes and ranges: read and sent together
        (ub, 10, mib),
        (ua, 6 * mib, 7 * mib),
        (ua, 7 * mib, 16 * mib),           # a large range after small ones: topped up, the rest copied
        (ub, mib, 3 * mib),
        b"eof",                            # the last part may be small
    ]
    want = a[: 6 * mib] + b"middle\n" + b[10:mib] + a[6 * mib :] + b[mib:] + b"eof"
    return pieces, want


def test_concatenate_joins_pieces_on_s3_by_copying_large_ones(s3: str, tmp_path: Path) -> None:
    pieces, want = _concatenated(s3, tmp_path)
    client = storage.s3_client()
    calls: list[str] = []
    client.meta.events.register("before-call.s3.*", lambda model, **_: calls.append(model.name))
    dst = f"{s3}/joined/x.vcf.gz"
    storage.concatenate(dst, pieces)
    assert storage.read_bytes(dst) == want  # moto refuses a part under 5 MiB that is not the last
    assert calls.count("UploadPartCopy") == 2 and calls.count("UploadPart") >= 2
    # a small file is read and written whole
    storage.concatenate(f"{s3}/small", [b"ab", (f"{s3}/a.bin", 5, 9)])
    assert storage.read_bytes(f"{s3}/small") == b"ab" + storage.read_range(f"{s3}/a.bin", 5, 9)
    assert "CreateMultipartUpload" not in calls[calls.index("CompleteMultipartUpload") + 1 :]


def test_mock_aws_after_the_local_clouds_patches_reads_large_ranges(s3: str, tmp_path: Path) -> None:
    """A local cloud's moto patches stay applied for the process's life (any test that started one);
    ``mock_aws`` after them still gets a range of more than a MiB as bytes (it got patch 2's stream, which only
    a server can send: ``TypeError: a bytes-like object is required, not 'generator'`` in the test above,
    whenever its xdist worker had run a local cloud first)."""
    from localcloud import patches

    patches.apply_all()
    test_concatenate_joins_pieces_on_s3_by_copying_large_ones(s3, tmp_path)


def test_concatenate_local(tmp_path: Path) -> None:
    pieces, want = _concatenated(str(tmp_path), tmp_path)
    dst = str(tmp_path / "out" / "x.bin")
    storage.concatenate(dst, pieces)
    assert Path(dst).read_bytes() == want
    assert not [p for p in (tmp_path / "out").iterdir() if p.name != "x.bin"]


def test_copy_many_copies_in_the_server_and_in_parts_past_copy_objects_limit(
    s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the commit publishes: each source to its destination by CopyObject, or by UploadPartCopy in parts
    when it is larger than one CopyObject may copy (here the limit made small: S3's is 5 GB); no GET."""
    from dataclasses import replace

    from seqlake.base import limits

    part = 5 << 20  # S3's smallest part but the last
    big = bytes(range(256)) * ((2 * part + 777) // 256)
    small = b"small part"
    storage.write_bytes(f"{s3}/runs/r/parts/t/big.parquet", big)
    storage.write_bytes(f"{s3}/runs/r/parts/t/small.parquet", small)
    monkeypatch.setattr(limits, "S3_COPY_OBJECT", replace(limits.S3_COPY_OBJECT, value=part + 1))
    monkeypatch.setattr(storage, "COPY_PART_BYTES", part)
    calls: list[str] = []
    client = storage.s3_client()
    client.meta.events.register("before-call.s3.*", lambda model, **kw: calls.append(model.name))
    copies = [(f"{s3}/runs/r/parts/t/{n}.parquet", f"{s3}/results/t/run_id=r/{n}.parquet", len(body))
              for n, body in (("big", big), ("small", small))]
    assert storage.copy_many(copies, workers=2) == 2
    assert sorted(calls) == sorted(["CopyObject", "CreateMultipartUpload", "UploadPartCopy", "UploadPartCopy",
                                    "UploadPartCopy", "CompleteMultipartUpload"])  # no byte read here
    # read back a MiB at a time: a larger read is streamed once a local cloud has run in this process
    copied = b"".join(storage.read_range(f"{s3}/results/t/run_id=r/big.parquet", a, a + (1 << 20))
                      for a in range(0, len(big), 1 << 20))
    assert copied == big
    assert storage.read_bytes(f"{s3}/results/t/run_id=r/small.parquet") == small
    # locally: a hard link (the file is replaced whole, never written in place), the same bytes
    src = tmp_path / "runs" / "a.parquet"
    src.parent.mkdir()
    src.write_bytes(small)
    dst = tmp_path / "results" / "t" / "a.parquet"
    assert storage.copy_many([(str(src), str(dst), len(small))]) == 1
    assert dst.read_bytes() == small and dst.stat().st_ino == src.stat().st_ino


def _small_inputs(s3: str, samples: int, bad: frozenset[int] = frozenset(),
                  ) -> tuple[list[Sample], dict[str, storage.ObjectInfo]]:
    """``samples`` paired samples of small gzip files (the files numbered in ``bad``, in the run's order, with
    bytes after their last gzip member) and their listed sizes."""
    known = {}
    for n in range(samples * 2):
        uri = f"{s3}/incoming/s{n // 2}_R{n % 2 + 1}.fastq.gz"
        storage.write_bytes(uri, gzip.compress(_reads(5, n % 2 + 1)) + (b"\0" * 7 if n in bad else b""))
        known[uri] = storage.head(uri)
    return [Sample(f"s{i}", f"{s3}/incoming/s{i}_R1.fastq.gz", f"{s3}/incoming/s{i}_R2.fastq.gz")
            for i in range(samples)], known


def _counting_get_many(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], str]]:
    """The keys of each :meth:`clients.RangedGets.get_many` call from now on, and the thread that made it."""
    batches: list[tuple[list[str], str]] = []
    get_many = clients.RangedGets.get_many

    def counted(self: clients.RangedGets, ranges: list[tuple[str, str, int, int]], *args: object) -> object:
        batches.append(([key for _, key, _, _ in ranges], threading.current_thread().name))
        return get_many(self, ranges, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(clients.RangedGets, "get_many", counted)
    return batches


def test_a_plans_small_inputs_are_read_ahead_in_batches_and_sniffed_without_threads(
        s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files whose listed size fits a reader's block are read whole beforehand, a batch at a time, from one
    thread (:meth:`clients.RangedGets.get_many`: one GET a file, the one its sniff would send) while the batch
    before is sniffed, and a batch read whole is sniffed in the planning thread: no scan threads, no second
    GET."""
    from seqlake.plan import planner

    monkeypatch.setattr(planner, "READ_AHEAD_FILES", 3)
    samples, known = _small_inputs(s3, 4)

    sniffed_in: set[str] = set()
    sniff_input = planner._sniff_input

    def sniff(*args: object) -> object:
        sniffed_in.add(threading.current_thread().name)
        return sniff_input(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(planner, "_sniff_input", sniff)
    batches = _counting_get_many(monkeypatch)
    sent = _sent_requests()
    plan = make_plan("ahead", samples, out_prefix=f"{s3}/lake", known=known)
    keys = [k.removeprefix(f"{s3}/") for k in known]
    assert [keys for keys, _ in batches] == [keys[0:3], keys[3:6], keys[6:8]]
    # read beside the sniffs (the next batch while this one is sniffed), which run in the planning thread
    assert sniffed_in == {threading.current_thread().name} and threading.current_thread().name not in {
        thread for _, thread in batches}
    assert sorted(key for op, key in sent if op == "GetObject") == sorted(keys)  # each file once
    assert [i.records for i in plan.inputs] == [5] * 8 and plan.array_size == 1


def test_a_plans_read_ahead_stops_at_the_first_bad_file_and_names_it(s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the scan threads do: the error is the first failing file's in the run's order, and no batch is read
    after the one after its own (read while its own was sniffed)."""
    from seqlake.plan import planner

    monkeypatch.setattr(planner, "READ_AHEAD_FILES", 2)
    samples, known = _small_inputs(s3, 4, bad=frozenset({3, 7}))
    batches = _counting_get_many(monkeypatch)
    with pytest.raises(BadInputError, match=r"s1_R2\.fastq\.gz.*corrupt gzip stream at byte"):
        make_plan("ahead-bad", samples, out_prefix=f"{s3}/lake", known=known)
    assert len(batches) == 3


def test_small_objects_read_whole_and_held_serve_their_readers_without_a_request(s3: str) -> None:
    """:func:`storage.read_small_objects` reads each object whole (leaving out one missing, one of another
    size than listed, an empty one, a local path); a reader of a held object reads it without a request, but
    only bytes that are the whole object (of its listed size), within one of its blocks."""
    storage.write_bytes(f"{s3}/in/a", b"A" * 100)
    storage.write_bytes(f"{s3}/in/b", b"B" * 50)
    storage.write_bytes(f"{s3}/in/empty", b"")
    held = storage.read_small_objects({f"{s3}/in/a": 100, f"{s3}/in/b": 60, f"{s3}/in/missing": 10,
                                       f"{s3}/in/empty": 0, "/tmp/local": 5})
    assert held == {f"{s3}/in/a": b"A" * 100}
    listed = {f"{s3}/in/a": storage.ObjectInfo(100), f"{s3}/in/b": storage.ObjectInfo(50)}
    sent = _sent_requests()
    with storage.objects_known(listed), storage.objects_held({**held, f"{s3}/in/b": b"held"}):
        with storage.open_read(f"{s3}/in/a") as f:
            f.seek(10)
            assert f.read(5) == b"AAAAA"
        assert sent == []
        with storage.open_read(f"{s3}/in/b") as f:  # not the whole object: read from S3
            assert f.read() == b"B" * 50
        with storage.open_read(f"{s3}/in/a", block_size=64) as f:  # more than a block: read from S3
            assert f.read(3) == b"AAA"
    assert sent[0][1] == "in/b" and {key for _, key in sent[1:]} == {"in/a"}
