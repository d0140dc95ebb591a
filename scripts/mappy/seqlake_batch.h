/* seqlake's batch mapping for mappy: a chunk of reads (or read pairs) mapped in one call, its `alignments` rows
 * written as columns (no Python object per hit), with minimap2 -ax sr's choices of SAM primary, flags and
 * soft-clipped CIGARs. Compiled into mappy by scripts/install_mappy.py; the rules are those of
 * seqlake.child.align (its module docstring), which tests/core/test_mappy_batch.py holds this code equal to. */
#ifndef SEQLAKE_BATCH_H
#define SEQLAKE_BATCH_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "minimap.h"
#include "cmappy.h"

/* minimap2's default pe_bonus (options.c) and the sr preset's max_gap: the floor of the pairing distance */
#define SL_PE_BONUS 33
#define SL_SR_MAX_GAP 100

typedef struct {
	int64_t n, m;            /* rows, capacity */
	int32_t *pair;           /* the read's (pair's) index in the call */
	uint8_t *mate;
	uint16_t *flag;
	int32_t *tid, *start, *end, *nm, *read_len, *n_cigar, *text_len;
	uint8_t *mapq;
	int64_t n_ops, m_ops;    /* packed CIGAR operations (length << 4 | op), soft clips included */
	uint32_t *ops;
	int64_t n_text, m_text;  /* the CIGARs as SAM text, end to end */
	char *text;
	int64_t stats[2][3];     /* per mate: mapped reads, properly paired, sum of MAPQ */
	int failed;              /* an allocation failed */
} sl_rows_t;

static void *sl_grow(void *p, int64_t m, size_t size, int *failed)
{
	void *q = realloc(p, (size_t)m * size);
	if (q == NULL) *failed = 1;
	return q == NULL ? p : q;
}

static int sl_reserve_rows(sl_rows_t *r, int64_t extra)
{
	if (r->n + extra <= r->m) return 1;
	int64_t m = r->m ? r->m : 1024;
	while (m < r->n + extra) m <<= 1;
#define SL_GROW(f) r->f = sl_grow(r->f, m, sizeof(*r->f), &r->failed)
	SL_GROW(pair); SL_GROW(mate); SL_GROW(flag); SL_GROW(tid); SL_GROW(start); SL_GROW(end); SL_GROW(nm);
	SL_GROW(read_len); SL_GROW(n_cigar); SL_GROW(text_len); SL_GROW(mapq);
#undef SL_GROW
	if (r->failed) return 0;
	r->m = m;
	return 1;
}

static void sl_rows_free(sl_rows_t *r)
{
	free(r->pair); free(r->mate); free(r->flag); free(r->tid); free(r->start); free(r->end); free(r->nm);
	free(r->read_len); free(r->n_cigar); free(r->text_len); free(r->mapq); free(r->ops); free(r->text);
	memset(r, 0, sizeof(*r));
}

static inline int sl_is_primary(const mm_reg1_t *h) { return h->id == h->parent; }
static inline int sl_nm(const mm_reg1_t *h) { return h->blen - h->mlen + h->p->n_ambi; }

/* mm_pair's geometry: one forward and one reverse hit on one contig, the forward hit leftmost, the reverse hit
 * starting at most max_gap after the forward hit ends */
static int sl_proper(const mm_reg1_t *a, const mm_reg1_t *b, int max_gap)
{
	if (a->rid != b->rid || a->rev == b->rev) return 0;
	const mm_reg1_t *fwd = a->rev ? b : a, *rev = a->rev ? a : b;
	return rev->rs >= fwd->rs && rev->rs - fwd->re <= max_gap;
}

/* the DP score under the sr scoring (match 2, mismatch 8, gaps min(12 + 2l, 24 + l)) from the CIGAR and NM, as
 * seqlake.child.align._dp_score derives it */
static int sl_dp_score(const mm_reg1_t *h)
{
	int64_t aligned = 0, gaps = 0, gap_pen = 0;
	for (uint32_t k = 0; k < h->p->n_cigar; ++k) {
		int64_t n = h->p->cigar[k] >> 4, op = h->p->cigar[k] & 0xf;
		if (op == 0) aligned += n;
		else if (op == 1 || op == 2) {
			gaps += n;
			gap_pen += 12 + 2 * n < 24 + n ? 12 + 2 * n : 24 + n;
		}
	}
	int64_t mismatches = sl_nm(h) - gaps;
	return (int)(2 * (aligned - mismatches) - 8 * mismatches - gap_pen);
}

/* which hit of each mate is the SAM primary, as mm_pair decides (seqlake.child.align._pair_primaries) */
static int sl_pair_primaries(mm_reg1_t **h1, int n1, mm_reg1_t **h2, int n2, int max_gap, int *p1, int *p2)
{
	*p1 = *p2 = 0;
	if (n1 == 0 || n2 == 0) return 0;
	if (n1 == 1 && n2 == 1) return sl_proper(h1[0], h2[0], max_gap);
	int best1 = INT32_MIN, best2 = INT32_MIN, found = 0, best = 0;
	int s1[n1], s2[n2];
	for (int i = 0; i < n1; ++i) { s1[i] = sl_dp_score(h1[i]); if (s1[i] > best1) best1 = s1[i]; }
	for (int j = 0; j < n2; ++j) { s2[j] = sl_dp_score(h2[j]); if (s2[j] > best2) best2 = s2[j]; }
	int threshold = best1 + best2 - SL_PE_BONUS;
	for (int i = 0; i < n1; ++i)
		for (int j = 0; j < n2; ++j) {
			int score = s1[i] + s2[j];
			if (score >= threshold && (!found || score > best) && sl_proper(h1[i], h2[j], max_gap)) {
				found = 1, best = score, *p1 = i, *p2 = j;
			}
		}
	if (!found) *p1 = *p2 = 0;
	return found;
}

static int sl_put_int(char *s, int64_t v)
{
	char tmp[24];
	int n = 0, k = 0;
	do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
	while (n) s[k++] = tmp[--n];
	return k;
}

/* one hit's CIGAR with its soft clips, packed and as text. mappy's query coordinates are those of the sequence it
 * aligned, which for mate 2 of a pair is the read's reverse complement */
static void sl_put_cigar(sl_rows_t *r, const mm_reg1_t *h, int read_len, int revcomp_query)
{
	static const char OPS[] = "MIDNSHP=XB";
	int left = h->qs, right = read_len - h->qe;
	if (h->rev != revcomp_query) { int t = left; left = right; right = t; }
	uint32_t n = h->p->n_cigar + (left > 0) + (right > 0);
	if (r->n_ops + n > r->m_ops) {
		int64_t m = r->m_ops ? r->m_ops : 4096;
		while (m < r->n_ops + n) m <<= 1;
		r->ops = sl_grow(r->ops, m, sizeof(uint32_t), &r->failed);
		if (r->failed) return;
		r->m_ops = m;
	}
	if (r->n_text + 16 * (int64_t)n > r->m_text) {
		int64_t m = r->m_text ? r->m_text : 16384;
		while (m < r->n_text + 16 * (int64_t)n) m <<= 1;
		r->text = sl_grow(r->text, m, 1, &r->failed);
		if (r->failed) return;
		r->m_text = m;
	}
	uint32_t *o = r->ops + r->n_ops;
	char *t = r->text + r->n_text, *t0 = t;
	if (left) { *o++ = (uint32_t)left << 4 | 4; t += sl_put_int(t, left); *t++ = 'S'; }
	for (uint32_t k = 0; k < h->p->n_cigar; ++k) {
		uint32_t c = h->p->cigar[k];
		*o++ = c;
		t += sl_put_int(t, c >> 4);
		*t++ = OPS[c & 0xf];
	}
	if (right) { *o++ = (uint32_t)right << 4 | 4; t += sl_put_int(t, right); *t++ = 'S'; }
	r->n_cigar[r->n] = (int32_t)n;
	r->text_len[r->n] = (int32_t)(t - t0);
	r->n_ops += n;
	r->n_text += t - t0;
}

/* the rows of one read (seqlake.child.align._emit): base holds 0x1 and 0x40 / 0x80 for a mate of a pair (0 for a
 * single-end read), mate_hit the mate's SAM primary (NULL: the mate is unmapped) */
static void sl_emit(sl_rows_t *r, int32_t pair, int mate, int read_len, mm_reg1_t **hits, int n_hits, int primary,
                    const mm_reg1_t *mate_hit, int base, int proper, int revcomp_query)
{
	if (base) {
		if (mate_hit == NULL) base |= 0x8;
		else if (mate_hit->rev) base |= 0x20;
	}
	if (!sl_reserve_rows(r, n_hits ? n_hits : 1)) return;
	if (n_hits == 0) {
		int64_t i = r->n++;
		r->pair[i] = pair, r->mate[i] = (uint8_t)mate, r->flag[i] = (uint16_t)(base | 0x4), r->tid[i] = -1;
		r->start[i] = r->end[i] = -1, r->mapq[i] = 0, r->nm[i] = 0, r->read_len[i] = read_len;
		r->n_cigar[i] = 0, r->text_len[i] = 0;
		return;
	}
	int64_t *st = r->stats[mate - 1];
	st[0] += 1;
	st[1] += proper ? 1 : 0;
	st[2] += hits[primary]->mapq;
	/* 0x2 on the SAM primary alone: minimap2 sets proper_frag on the two hits mm_pair paired */
	int primary_flag = base | (proper ? 0x2 : 0);
	for (int k = 0; k < n_hits; ++k) {
		const mm_reg1_t *h = hits[k];
		int64_t i = r->n;
		r->pair[i] = pair, r->mate[i] = (uint8_t)mate;
		r->flag[i] = (uint16_t)((k == primary ? primary_flag : base | 0x800) | (h->rev ? 0x10 : 0));
		r->tid[i] = h->rid, r->start[i] = h->rs, r->end[i] = h->re, r->mapq[i] = (uint8_t)h->mapq;
		r->nm[i] = sl_nm(h), r->read_len[i] = read_len;
		sl_put_cigar(r, h, read_len, revcomp_query);
		if (r->failed) return;
		r->n++;
	}
}

static void sl_free_regs(mm_reg1_t *regs, int n)
{
	for (int i = 0; i < n; ++i) free(regs[i].p);
	free(regs);
}

/* the primaries of regs (mappy's is_primary) whose segment is seg (-1: any) */
static int sl_primaries(mm_reg1_t *regs, int n, int seg, mm_reg1_t **out)
{
	int k = 0;
	for (int i = 0; i < n; ++i)
		if (sl_is_primary(&regs[i]) && (seg < 0 || regs[i].seg_id == seg)) out[k++] = &regs[i];
	return k;
}

/* one read pair (seqlake.child.align.ReadAligner._pairs): mapped together when both mates have bases (name seeds
 * minimap2's choice among equal placements, as the command line's read name does), the other alone when one is
 * empty (mappy is then given no name, as seqlake's aligner calls it) */
static void sl_map_pair(const mm_idx_t *mi, const mm_mapopt_t *opt, mm_tbuf_t *b, const char *name, const char *s1,
                        int l1, const char *s2, int l2, int32_t pair, int max_frag_len, sl_rows_t *r)
{
	mm_reg1_t *regs = NULL;
	int n = 0, n1 = 0, n2 = 0;
	if (l1 && l2) regs = mm_map_aux(mi, name, s1, s2, &n, b, opt);
	else if (l1 || l2) regs = mm_map_aux(mi, NULL, l1 ? s1 : s2, NULL, &n, b, opt);
	mm_reg1_t *h1[n > 0 ? n : 1], *h2[n > 0 ? n : 1];
	if (l1 && l2) {
		n1 = sl_primaries(regs, n, 0, h1);
		n2 = sl_primaries(regs, n, 1, h2);
	} else if (l1) n1 = sl_primaries(regs, n, -1, h1);
	else if (l2) n2 = sl_primaries(regs, n, -1, h2);
	int max_gap = max_frag_len - l1 - l2 > SL_SR_MAX_GAP ? max_frag_len - l1 - l2 : SL_SR_MAX_GAP;
	int p1, p2;
	int pp = sl_pair_primaries(h1, n1, h2, n2, max_gap, &p1, &p2);
	const mm_reg1_t *m1 = n1 ? h1[p1] : NULL, *m2 = n2 ? h2[p2] : NULL;
	sl_emit(r, pair, 1, l1, h1, n1, p1, m2, 0x41, pp, 0);
	sl_emit(r, pair, 2, l2, h2, n2, p2, m1, 0x81, pp, l1 != 0);
	sl_free_regs(regs, n);
}

/* one single-end read (seqlake.child.align.ReadAligner._single) */
static void sl_map_single(const mm_idx_t *mi, const mm_mapopt_t *opt, mm_tbuf_t *b, const char *name, const char *s,
                          int l, int32_t pair, sl_rows_t *r)
{
	mm_reg1_t *regs = NULL;
	int n = 0;
	if (l) regs = mm_map_aux(mi, name, s, NULL, &n, b, opt);
	mm_reg1_t *h[n > 0 ? n : 1];
	int k = sl_primaries(regs, n, -1, h);
	sl_emit(r, pair, 1, l, h, k, 0, NULL, 0, 0, 0);
	sl_free_regs(regs, n);
}

/* --- BAM records (SAM/BAM specification 4.2) of a batch's rows, in one pass per record ------------------------
 * What seqlake.formats.bam.encode writes for seqlake.lake.bamrows.records_of's records, without their
 * intermediate arrays: each record's bases and qualities are read once from the reads' buffer (reverse-strand
 * rows as the reverse complement, SAM's way), Phred+33 made Phred, bases packed two to a byte. The lookup tables
 * (the 4-bit base codes, the complement, the ops that consume reference bases) are seqlake.formats.bam's,
 * passed in. Host byte order is little-endian (x86-64, aarch64), as BAM's. */

typedef struct {
	int64_t n;
	const int64_t *tid, *pos, *mapq, *flag, *next_tid, *next_pos, *tlen, *nm;
	const uint8_t *names; const int64_t *name_off;     /* names, end to end */
	const uint32_t *cigar; const int64_t *cigar_off;   /* packed ops, end to end */
	const uint8_t *reads; const int64_t *seq_start, *qual_start, *length;
	const uint8_t *tags; const int64_t *tag_off; const int64_t *tag_code; /* per record the tag blob tag_code[i] */
	const uint8_t *nt16, *complement, *consumes_ref;  /* 256, 256, 16 entries */
} sl_records_t;

/* the NM tag's type and width, as htslib stores a SAM text integer: the smallest of CcSsIi that holds it */
static inline int sl_int_tag(int64_t v, char *type)
{
	if (v >= 0 && v <= 255) { *type = 'C'; return 1; }
	if (v >= -128 && v < 0) { *type = 'c'; return 1; }
	if (v >= 256 && v <= 65535) { *type = 'S'; return 2; }
	if (v >= -32768 && v < -128) { *type = 's'; return 2; }
	if (v >= 65536 && v <= 4294967295LL) { *type = 'I'; return 4; }
	*type = 'i';
	return 4;
}

/* each record's size in bytes (block_size included) */
static int64_t sl_record_size(const sl_records_t *in, int64_t i)
{
	char t;
	int64_t l = in->length[i], tag = in->tag_code[i];
	return 36 + (in->name_off[i + 1] - in->name_off[i]) + 1 + 4 * (in->cigar_off[i + 1] - in->cigar_off[i])
		+ (l + 1) / 2 + l + 3 + sl_int_tag(in->nm[i], &t) + (in->tag_off[tag + 1] - in->tag_off[tag]);
}

/* htslib hts_reg2bin with min_shift 14 and 5 levels (0-based, end exclusive) */
static inline int sl_reg2bin(int64_t beg, int64_t end)
{
	--end;
	if (beg >> 14 == end >> 14) return (int)(((1 << 15) - 1) / 7 + (beg >> 14));
	if (beg >> 17 == end >> 17) return (int)(((1 << 12) - 1) / 7 + (beg >> 17));
	if (beg >> 20 == end >> 20) return (int)(((1 << 9) - 1) / 7 + (beg >> 20));
	if (beg >> 23 == end >> 23) return (int)(((1 << 6) - 1) / 7 + (beg >> 23));
	if (beg >> 26 == end >> 26) return (int)(((1 << 3) - 1) / 7 + (beg >> 26));
	return 0;
}

static inline void sl_put32(uint8_t *p, int64_t v) { int32_t x = (int32_t)v; memcpy(p, &x, 4); }
static inline void sl_put16(uint8_t *p, int64_t v) { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); }

/* the records into out (sized by sl_record_size, record after record), each one's start and reference end
 * (0-based, exclusive; pos + 1 for a record without reference bases, as htslib's bam_endpos) */
static void sl_encode_records(const sl_records_t *in, uint8_t *out, int64_t *starts, int64_t *ends)
{
	int64_t at = 0;
	for (int64_t i = 0; i < in->n; ++i) {
		uint8_t *r = out + at;
		int64_t size = sl_record_size(in, i), l_name = in->name_off[i + 1] - in->name_off[i];
		int64_t c0 = in->cigar_off[i], n_cigar = in->cigar_off[i + 1] - c0, l = in->length[i], span = 0;
		for (int64_t k = 0; k < n_cigar; ++k)
			if (in->consumes_ref[in->cigar[c0 + k] & 0xf]) span += in->cigar[c0 + k] >> 4;
		int64_t end = in->pos[i] + (span > 1 ? span : 1);
		starts[i] = at, ends[i] = end;
		sl_put32(r, size - 4); sl_put32(r + 4, in->tid[i]); sl_put32(r + 8, in->pos[i]);
		r[12] = (uint8_t)(l_name + 1); r[13] = (uint8_t)in->mapq[i];
		sl_put16(r + 14, sl_reg2bin(in->pos[i], end)); sl_put16(r + 16, n_cigar); sl_put16(r + 18, in->flag[i]);
		sl_put32(r + 20, l); sl_put32(r + 24, in->next_tid[i]); sl_put32(r + 28, in->next_pos[i]);
		sl_put32(r + 32, in->tlen[i]);
		uint8_t *p = r + 36;
		memcpy(p, in->names + in->name_off[i], (size_t)l_name);
		p += l_name;
		*p++ = 0;
		memcpy(p, in->cigar + c0, (size_t)(4 * n_cigar));
		p += 4 * n_cigar;
		const uint8_t *seq = in->reads + in->seq_start[i], *qual = in->reads + in->qual_start[i];
		int reverse = (in->flag[i] & 0x10) != 0;
		uint8_t *q = p + (l + 1) / 2;
		if (reverse) {
			for (int64_t k = 0; k < l; ++k) {
				uint8_t code = in->nt16[in->complement[seq[l - 1 - k]]];
				if (k & 1) p[k >> 1] |= code; else p[k >> 1] = (uint8_t)(code << 4);
				q[k] = (uint8_t)(qual[l - 1 - k] - 33);
			}
		} else {
			for (int64_t k = 0; k < l; ++k) {
				uint8_t code = in->nt16[seq[k]];
				if (k & 1) p[k >> 1] |= code; else p[k >> 1] = (uint8_t)(code << 4);
				q[k] = (uint8_t)(qual[k] - 33);
			}
		}
		p = q + l;
		char type;
		int width = sl_int_tag(in->nm[i], &type);
		*p++ = 'N'; *p++ = 'M'; *p++ = (uint8_t)type;
		if (width == 1) *p = (uint8_t)in->nm[i];
		else if (width == 2) sl_put16(p, in->nm[i]);
		else sl_put32(p, in->nm[i]);
		p += width;
		int64_t tag = in->tag_code[i], tl = in->tag_off[tag + 1] - in->tag_off[tag];
		memcpy(p, in->tags + in->tag_off[tag], (size_t)tl);
		at += size;
	}
}

/* --- read QC of a tile: cycles first .. first + width - 1 of some reads (seqlake.lake.qc.QCAccumulator._add_tile's
 * sums, over the reads' own bytes instead of a padded (reads x cycles) copy). Per cycle: the A, C, G, T bases in
 * either case (rows 0-3 of base_counts) and the Phred sums (Phred+33 minus 33); the quality bytes' histogram;
 * per read its Phred sum over the tile; the N bases and the gap bytes ('-', '.', ' '). */
static void sl_qc_flush(uint32_t *acc, int64_t *out, int64_t m)
{
	for (int64_t k = 0; k < m; ++k) out[k] += acc[k], acc[k] = 0;
}

static void sl_qc_tile(const uint8_t *arr, const int64_t *seq_start, const int64_t *qual_start, const int64_t *length,
                       int64_t n, int64_t first, int64_t width, int64_t *base_counts, int64_t *qual_sums,
                       int64_t *hist, int64_t *row_sums, int64_t *n_bases, int64_t *gap_bytes)
{
	int64_t ns = 0, gaps = 0, acgt = 0, total = 0;
	/* per cycle, the A, C, G, T counts and the quality sums in 32 bits (the loops below vectorise: a compare
	 * and an add per class and byte), added into the 64-bit sums every 2^24 reads, before they could overflow */
	uint32_t *acc = calloc((size_t)(5 * width), sizeof(uint32_t));
	if (acc == NULL) { *n_bases = -1; return; }
	uint32_t *a = acc, *cc = acc + width, *g = acc + 2 * width, *t = acc + 3 * width, *qs = acc + 4 * width;
	/* four histograms, cycle by cycle in turn: a run of one quality value would chain every increment of one
	 * counter to the one before */
	int64_t h4[4][256];
	memset(h4, 0, sizeof(h4));
	for (int64_t i = 0; i < n; ++i) {
		if ((i & ((1 << 24) - 1)) == (1 << 24) - 1) {
			sl_qc_flush(acc, base_counts, 4 * width);
			sl_qc_flush(qs, qual_sums, width);
		}
		int64_t inside = length[i] - first;
		if (inside <= 0) { row_sums[i] = 0; continue; }
		if (inside > width) inside = width;
		const uint8_t *s = arr + seq_start[i] + first, *q = arr + qual_start[i] + first;
		for (int64_t c = 0; c < inside; ++c) {
			uint8_t low = s[c] | 0x20;
			a[c] += low == 'a';
			cc[c] += low == 'c';
			g[c] += low == 'g';
			t[c] += low == 't';
		}
		uint32_t row = 0;
		for (int64_t c = 0; c < inside; ++c) {
			qs[c] += q[c];
			row += q[c];
		}
		for (int64_t c = 0; c < inside; ++c) h4[c & 3][q[c]] += 1;
		row_sums[i] = (int64_t)row - 33 * inside;
		total += inside;
	}
	sl_qc_flush(acc, base_counts, 4 * width);
	sl_qc_flush(qs, qual_sums, width);
	free(acc);
	for (int64_t c = 0; c < 4 * width; ++c) acgt += base_counts[c];
	if (acgt < total) {  /* a base other than A, C, G, T: count the N bases and the gaps (rare: a second pass) */
		for (int64_t i = 0; i < n; ++i) {
			int64_t inside = length[i] - first;
			if (inside > width) inside = width;
			const uint8_t *s = arr + seq_start[i] + first;
			for (int64_t c = 0; c < inside; ++c) {
				ns += (s[c] | 0x20) == 'n';
				gaps += s[c] == '-' || s[c] == '.' || s[c] == ' ';
			}
		}
	}
	for (int k = 0; k < 256; ++k) hist[k] += h4[0][k] + h4[1][k] + h4[2][k] + h4[3][k];
	*n_bases = ns, *gap_bytes = gaps;
}

#endif
