
# seqlake: a chunk of reads mapped in one call, its rows as column buffers (seqlake_batch.h; appended to mappy.pyx by
# seqlake's scripts/install_mappy.py)
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t
from libc.string cimport memcpy, memset
from cpython.bytes cimport PyBytes_FromStringAndSize

cdef extern from "Python.h":
	const char *PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL
	char *PyBytes_AsString(object o) except NULL
	Py_ssize_t PyBytes_Size(object o)

cdef extern from "seqlake_batch.h":
	ctypedef struct sl_rows_t:
		int64_t n, n_ops, n_text
		int32_t *pair
		uint8_t *mate
		uint16_t *flag
		int32_t *tid
		int32_t *start
		int32_t *end
		int32_t *nm
		int32_t *read_len
		int32_t *n_cigar
		int32_t *text_len
		uint8_t *mapq
		uint32_t *ops
		char *text
		int64_t stats[2][3]
		int failed
	void sl_rows_free(sl_rows_t *r)
	void sl_map_pair(const cmappy.mm_idx_t *mi, const cmappy.mm_mapopt_t *opt, cmappy.mm_tbuf_t *b, const char *name, const char *s1, int l1, const char *s2, int l2, int32_t pair, int max_frag_len, sl_rows_t *r)
	ctypedef struct sl_records_t:
		int64_t n
		const int64_t *tid
		const int64_t *pos
		const int64_t *mapq
		const int64_t *flag
		const int64_t *next_tid
		const int64_t *next_pos
		const int64_t *tlen
		const int64_t *nm
		const uint8_t *names
		const int64_t *name_off
		const uint32_t *cigar
		const int64_t *cigar_off
		const uint8_t *reads
		const int64_t *seq_start
		const int64_t *qual_start
		const int64_t *length
		const uint8_t *tags
		const int64_t *tag_off
		const int64_t *tag_code
		const uint8_t *nt16
		const uint8_t *complement
		const uint8_t *consumes_ref
	int64_t sl_record_size(const sl_records_t *r, int64_t i)
	void sl_encode_records(const sl_records_t *r, uint8_t *out, int64_t *starts, int64_t *ends)
	void sl_qc_tile(const uint8_t *arr, const int64_t *seq_start, const int64_t *qual_start, const int64_t *length, int64_t n, int64_t first, int64_t width, int64_t *base_counts, int64_t *qual_sums, int64_t *hist, int64_t *row_sums, int64_t *n_bases, int64_t *gap_bytes)
	void sl_map_single(const cmappy.mm_idx_t *mi, const cmappy.mm_mapopt_t *opt, cmappy.mm_tbuf_t *b, const char *name, const char *s, int l, int32_t pair, sl_rows_t *r)

cdef const char *_seqlake_chars(object s, Py_ssize_t *size) except NULL:
	if isinstance(s, bytes):
		size[0] = PyBytes_Size(s)
		return PyBytes_AsString(s)
	return PyUnicode_AsUTF8AndSize(s, size)

def seqlake_map_batch(Aligner aligner, names, seqs1, seqs2=None, int max_frag_len=800, ThreadBuffer buf=None):
	"""Map a chunk of reads (seqs2 None) or read pairs in one call: the rows as a dict of column buffers (bytes):
	pair (int32: the read's index in the call), mate (uint8), flag (uint16), tid (int32, -1 unmapped), start, end,
	nm, read_len, n_cigar, text_len (int32), mapq (uint8), ops (uint32: every row's packed CIGAR, soft clips
	included), text (the CIGARs as SAM text), and stats (int64 [mate][mapped, properly paired, MAPQ sum])."""
	cdef sl_rows_t r
	cdef cmappy.mm_mapopt_t map_opt
	cdef Py_ssize_t n = len(names), i, l1, l2, ln
	cdef const char *c1
	cdef const char *c2
	cdef const char *cn
	cdef ThreadBuffer b = ThreadBuffer() if buf is None else buf
	if aligner._idx == NULL:
		raise ValueError("the aligner has no index")
	if len(seqs1) != n or (seqs2 is not None and len(seqs2) != n):
		raise ValueError("names and sequences differ in length")
	map_opt = aligner.map_opt
	memset(&r, 0, sizeof(r))
	try:
		for i in range(n):
			cn = _seqlake_chars(names[i], &ln)
			c1 = _seqlake_chars(seqs1[i], &l1)
			if seqs2 is None:
				sl_map_single(aligner._idx, &map_opt, b._b, cn, c1, <int>l1, <int32_t>i, &r)
			else:
				c2 = _seqlake_chars(seqs2[i], &l2)
				sl_map_pair(aligner._idx, &map_opt, b._b, cn, c1, <int>l1, c2, <int>l2, <int32_t>i, max_frag_len, &r)
			if r.failed:
				raise MemoryError("seqlake_map_batch")
		out = {
			"pair": PyBytes_FromStringAndSize(<char *>r.pair, r.n * 4),
			"mate": PyBytes_FromStringAndSize(<char *>r.mate, r.n),
			"flag": PyBytes_FromStringAndSize(<char *>r.flag, r.n * 2),
			"tid": PyBytes_FromStringAndSize(<char *>r.tid, r.n * 4),
			"start": PyBytes_FromStringAndSize(<char *>r.start, r.n * 4),
			"end": PyBytes_FromStringAndSize(<char *>r.end, r.n * 4),
			"nm": PyBytes_FromStringAndSize(<char *>r.nm, r.n * 4),
			"read_len": PyBytes_FromStringAndSize(<char *>r.read_len, r.n * 4),
			"n_cigar": PyBytes_FromStringAndSize(<char *>r.n_cigar, r.n * 4),
			"text_len": PyBytes_FromStringAndSize(<char *>r.text_len, r.n * 4),
			"mapq": PyBytes_FromStringAndSize(<char *>r.mapq, r.n),
			"ops": PyBytes_FromStringAndSize(<char *>r.ops, r.n_ops * 4),
			"text": PyBytes_FromStringAndSize(r.text, r.n_text),
			"stats": PyBytes_FromStringAndSize(<char *>r.stats, 48),
		}
	finally:
		sl_rows_free(&r)
	return out


cdef const int64_t *_seqlake_i64(const int64_t[::1] a, Py_ssize_t n, str name) except NULL:
	if a.shape[0] != n:
		raise ValueError(f"{name}: {a.shape[0]} values, not {n}")
	return &a[0] if n else <const int64_t *>1

def seqlake_encode_records(const int64_t[::1] tid, const int64_t[::1] pos, const int64_t[::1] mapq,
		const int64_t[::1] flag, const int64_t[::1] next_tid, const int64_t[::1] next_pos, const int64_t[::1] tlen,
		const int64_t[::1] nm, const uint8_t[::1] names, const int64_t[::1] name_off, const uint32_t[::1] cigar,
		const int64_t[::1] cigar_off, const uint8_t[::1] reads, const int64_t[::1] seq_start,
		const int64_t[::1] qual_start, const int64_t[::1] length, const uint8_t[::1] tags, const int64_t[::1] tag_off,
		const int64_t[::1] tag_code, const uint8_t[::1] nt16, const uint8_t[::1] complement,
		const uint8_t[::1] consumes_ref):
	"""BAM records (SAM/BAM 4.2, block_size first, one after the other) of a batch given as arrays (seqlake_batch.h,
	sl_encode_records): returns (bytearray of the records, each one's start and reference end as int64 bytes).
	Every offset is checked against its buffer first."""
	cdef sl_records_t r
	cdef Py_ssize_t n = tid.shape[0], i
	cdef int64_t total = 0, a, b
	if nt16.shape[0] != 256 or complement.shape[0] != 256 or consumes_ref.shape[0] != 16:
		raise ValueError("the lookup tables have 256, 256 and 16 entries")
	if name_off.shape[0] != n + 1 or cigar_off.shape[0] != n + 1 or tag_off.shape[0] < 1:
		raise ValueError("offsets: one more than the records")
	r.n = n
	r.tid, r.pos, r.mapq = _seqlake_i64(tid, n, "tid"), _seqlake_i64(pos, n, "pos"), _seqlake_i64(mapq, n, "mapq")
	r.flag, r.next_tid = _seqlake_i64(flag, n, "flag"), _seqlake_i64(next_tid, n, "next_tid")
	r.next_pos, r.tlen = _seqlake_i64(next_pos, n, "next_pos"), _seqlake_i64(tlen, n, "tlen")
	r.nm, r.seq_start = _seqlake_i64(nm, n, "nm"), _seqlake_i64(seq_start, n, "seq_start")
	r.qual_start, r.length = _seqlake_i64(qual_start, n, "qual_start"), _seqlake_i64(length, n, "length")
	r.tag_code = _seqlake_i64(tag_code, n, "tag_code")
	r.name_off, r.cigar_off, r.tag_off = &name_off[0], &cigar_off[0], &tag_off[0]
	r.names = &names[0] if names.shape[0] else NULL
	r.cigar = &cigar[0] if cigar.shape[0] else NULL
	r.reads = &reads[0] if reads.shape[0] else NULL
	r.tags = &tags[0] if tags.shape[0] else NULL
	r.nt16, r.complement, r.consumes_ref = &nt16[0], &complement[0], &consumes_ref[0]
	for i in range(n):
		if not (0 <= name_off[i] <= name_off[i + 1] <= names.shape[0] and name_off[i + 1] - name_off[i] < 255):
			raise ValueError(f"record {i}: its name is outside the names or longer than 254 bytes")
		if not (0 <= cigar_off[i] <= cigar_off[i + 1] <= cigar.shape[0] and cigar_off[i + 1] - cigar_off[i] < 65536):
			raise ValueError(f"record {i}: its CIGAR is outside the CIGARs or has 65536 operations or more")
		a, b = seq_start[i], qual_start[i]
		if not (length[i] >= 0 and 0 <= a and a + length[i] <= reads.shape[0] and 0 <= b and b + length[i] <= reads.shape[0]):
			raise ValueError(f"record {i}: its bases or qualities are outside the reads")
		if not (0 <= tag_code[i] < tag_off.shape[0] - 1 and 0 <= tag_off[tag_code[i]] <= tag_off[tag_code[i] + 1] <= tags.shape[0]):
			raise ValueError(f"record {i}: its tag is outside the tags")
		if not (0 <= mapq[i] <= 255 and 0 <= flag[i] <= 65535):
			raise ValueError(f"record {i}: MAPQ or flag out of range")
		total += sl_record_size(&r, i)
	out = bytearray(total)
	starts = bytearray(8 * n)
	ends = bytearray(8 * n)
	cdef unsigned char[::1] o = out
	cdef unsigned char[::1] s = starts
	cdef unsigned char[::1] e = ends
	if n:
		sl_encode_records(&r, &o[0], <int64_t *>&s[0], <int64_t *>&e[0])
	return out, starts, ends


def seqlake_gather(const uint8_t[::1] data, const int64_t[::1] starts, const int64_t[::1] sizes):
	"""The byte ranges data[starts[i]:starts[i] + sizes[i]], in that order, end to end (BAM records put in
	sorted order: one copy per record, where joining Python slices cost a slice object per record)."""
	cdef Py_ssize_t n = starts.shape[0], i
	cdef int64_t total = 0, at = 0
	if sizes.shape[0] != n:
		raise ValueError("starts and sizes differ in length")
	for i in range(n):
		if not (sizes[i] >= 0 and 0 <= starts[i] and starts[i] + sizes[i] <= data.shape[0]):
			raise ValueError(f"range {i} is outside the data")
		total += sizes[i]
	out = bytearray(total)
	cdef unsigned char[::1] o = out
	for i in range(n):
		if sizes[i]:
			memcpy(&o[at], &data[starts[i]], <size_t>sizes[i])
			at += sizes[i]
	return out


def seqlake_qc_tile(const uint8_t[::1] arr, const int64_t[::1] seq_start, const int64_t[::1] qual_start,
		const int64_t[::1] length, int64_t first, int64_t width):
	"""Read QC of cycles first .. first + width - 1 of the reads arr[seq_start[i]:...] (seqlake_batch.h, sl_qc_tile):
	returns (int64 bytes of the A, C, G, T counts per cycle, 4 x width; the Phred+33 sums per cycle; the quality
	bytes' histogram, 256; each read's Phred sum over the tile), the N bases and the gap bytes."""
	cdef Py_ssize_t n = length.shape[0], i
	cdef int64_t inside, n_bases = 0, gap_bytes = 0
	if seq_start.shape[0] != n or qual_start.shape[0] != n or first < 0 or width < 1:
		raise ValueError("seq_start, qual_start and length differ in length, or the tile is empty")
	for i in range(n):
		inside = min(max(length[i] - first, 0), width)
		if inside and not (0 <= seq_start[i] and seq_start[i] + first + inside <= arr.shape[0]
				and 0 <= qual_start[i] and qual_start[i] + first + inside <= arr.shape[0]):
			raise ValueError(f"read {i} is outside the data")
	counts = bytearray(8 * 5 * width)
	sums = bytearray(8 * width)
	hist = bytearray(8 * 256)
	rows = bytearray(8 * max(n, 1))
	cdef unsigned char[::1] c = counts
	cdef unsigned char[::1] s = sums
	cdef unsigned char[::1] h = hist
	cdef unsigned char[::1] r = rows
	if n:
		sl_qc_tile(&arr[0] if arr.shape[0] else NULL, &seq_start[0], &qual_start[0], &length[0], n, first, width, <int64_t *>&c[0],
			<int64_t *>&s[0], <int64_t *>&h[0], <int64_t *>&r[0], &n_bases, &gap_bytes)
		if n_bases < 0:
			raise MemoryError("seqlake_qc_tile")
	return bytes(counts[: 8 * 4 * width]), bytes(sums), bytes(hist), bytes(rows[: 8 * n]), n_bases, gap_bytes


def seqlake_record_starts(const uint8_t[::1] data):
	"""Where each BAM record of record bytes starts (their block_size chain walked once): int64 bytes, or
	ValueError naming where the chain leaves the data."""
	cdef Py_ssize_t end = data.shape[0], at = 0, n = 0, k
	cdef int32_t size
	cdef int64_t start
	while at + 4 <= end:
		memcpy(&size, &data[at], 4)
		if size < 32:
			raise ValueError(f"BAM record at byte {at}: block_size {size} is less than a record's fixed part")
		at += size + 4
		n += 1
	if at != end:
		raise ValueError(f"BAM records cut short: the last record ends at byte {at}, the data at {end}")
	out = bytearray(8 * n)
	cdef unsigned char[::1] o = out
	at = 0
	for k in range(n):
		start = at
		memcpy(&o[8 * k], &start, 8)
		memcpy(&size, &data[at], 4)
		at += size + 4
	return bytes(out)
