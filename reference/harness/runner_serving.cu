/* runner_serving.cu: what a failing case of a serving layout points at (runner_serving.h): the test
 * of a hypothesis on a wrong row (row_matches: is the row what the attention over these keys
 * gives?), the diagnosis of a paged KV cache, and that of an append to it (append_diagnosis). The pages of a graded case are shuffled in the
 * pool and every place no key is holds NaN (runner_attention.cu), so each mistake in a page
 * lookup reads keys that some hypothesis names: another sequence's row of the block table, the
 * pool in order, another K/V head, the rows past a sequence's end. */
#include <math.h>
#include <stdio.h>
#include <algorithm>
#include <string.h>
#include <map>
#include "runner_serving.h"
extern "C" {
#include "cpu_reference.h"
}

/* ---- what a wrong row matches ---- */

/* got within tolerance of the hypothesis' ref; two non-finite values match when they are both
 * NaN or the same infinity (a fully masked row's L = -inf). */
static bool close_to(double ref, double got, tolerance t) {
    if (!std::isfinite(ref) || !std::isfinite(got)) return std::isnan(ref) ? std::isnan(got) : ref == got;
    return fabs(got - ref) <= t.atol + t.rtol * fabs(ref);
}

bool finite_row(const got_row &r) {
    bool finite = std::isfinite(r.L);
    for (int col = 0; col < r.d && finite; ++col) finite = std::isfinite(r.O[col]);
    return finite;
}

bool row_matches(const got_row &r, const float *q, int nk, const key_rows &key) {
    const int d = r.d, n = std::max(nk, 0);
    std::vector<float> K((size_t)n * d), V((size_t)n * d);
    for (int j = 0; j < n; ++j)
        for (int w = 0; w < 2; ++w) {
            const float *src = key(j, w);
            float *dst = (w ? V : K).data() + (size_t)j * d;
            for (int col = 0; col < d; ++col) dst[col] = src ? src[col] : NAN;
        }
    std::vector<double> o(d);
    double L;
    attention_prefix_f64(q, K.data(), V.data(), nk, d, r.scale, o.data(), &L);
    for (int col = 0; col < d; ++col)
        if (!close_to(o[col], r.O[col], r.tolO)) return false;
    return close_to(L, r.L, r.tolL);
}

/* ---- a paged KV cache ---- */

/* The keys of sequence b as a kernel reads them through table row `row`, K/V head h_kv, from the
 * pool: an entry past the table's row is no key (NULL). */
static key_rows via_row(const paged_case &pc, int row, int h_kv) {
    return [&pc, row, h_kv](int j, int which) -> const float * {
        const page_map &m = *pc.pages;
        if (j / m.page_size >= m.max_pages) return NULL;
        return pc.pool[which] + page_map_offset(&m, row, j, h_kv, pc.c->H_kv, pc.c->d);
    };
}

/* The keys of sequence b as a kernel that ignores the table reads them: page p of sequence b taken
 * as pool page b * max_pages + p (the contiguous cache's order). */
static key_rows via_pool_order(const paged_case &pc, int b, int h_kv) {
    return [&pc, b, h_kv](int j, int which) -> const float * {
        const page_map &m = *pc.pages;
        const long page = (long)b * m.max_pages + j / m.page_size;
        if (page >= m.num_pages) return NULL;
        return pc.pool[which] + (((size_t)page * m.page_size + j % m.page_size) * pc.c->H_kv + h_kv) * pc.c->d;
    };
}

/* "1, 3 and 4": at most `most` of v, then ", ...". */
static std::string join(const std::vector<std::string> &v, size_t most = 6) {
    std::string s;
    for (size_t k = 0; k < v.size() && k < most; ++k)
        s += (k == 0 ? "" : k + 1 == v.size() ? " and " : ", ") + v[k];
    if (v.size() > most) s += ", ...";
    return s;
}

/* Where the rows of a causal sequence turn wrong: when its graded rows below query i0 are right
 * and (nearly) all from i0 on wrong, the keys row i0 is the first to see are the suspects. */
static std::string first_wrong_page(const paged_case &pc, const graded_run &run, int b) {
    const shape_case &c = *pc.c;
    const page_map &m = *pc.pages;
    int i0 = c.N, good_below = 0, bad_above = 0, rows_above = 0;
    for (size_t r = 0; r < run.rows.size(); ++r)
        if (run.rows[r].first / c.H == b && run.bad[r]) i0 = std::min(i0, run.rows[r].second);
    for (size_t r = 0; r < run.rows.size(); ++r) {
        if (run.rows[r].first / c.H != b) continue;
        const int i = run.rows[r].second;
        if (i < i0) good_below += !run.bad[r];
        else { ++rows_above; bad_above += run.bad[r]; }
    }
    if (i0 == 0 || i0 >= c.N || good_below == 0 || 10 * bad_above < 9 * rows_above) return "";
    const int j0 = pc.seqlens[b] - c.N + i0, p = j0 / m.page_size;
    char buf[400];
    snprintf(buf, sizeof buf, "sequence %d's query rows 0..%d are right and its rows from %d on are wrong: row %d is the "
             "first to see key %d, %s %d of its page %d (pool page %d, block_table[%d * max_pages + %d]): the keys "
             "of that page come from the wrong place", b, i0 - 1, i0, i0, j0,
             j0 % m.page_size ? "row" : "the first key, row", j0 % m.page_size, p,
             m.table[(size_t)b * m.max_pages + p], b, p);
    return buf;
}

std::string paged_diagnosis(const paged_case &pc, const graded_run &run) {
    const shape_case &c = *pc.c;
    const page_map &m = *pc.pages;
    const int G = c.H / c.H_kv, ps = m.page_size;
    std::vector<std::string> lines;
    char buf[1200];
    /* which sequences */
    std::vector<long> bad(c.B, 0), checked(c.B, 0);
    std::vector<size_t> wrong; /* the wrong rows whose values are finite: a NaN row matches every hypothesis that reads a NaN */
    int n_wrong = 0;
    for (size_t r = 0; r < run.rows.size(); ++r) {
        const int b = run.rows[r].first / c.H;
        ++checked[b];
        if (!run.bad[r]) continue;
        ++bad[b];
        ++n_wrong;
        if (finite_row(run.got[r])) wrong.push_back(r);
    }
    if (!n_wrong) return "";
    const bool all_nan = wrong.empty();
    describe_sequences(buf, sizeof buf, bad.data(), checked.data(), c.B);
    lines.push_back(std::string(buf) + "; page_size = " + std::to_string(ps));
    /* the rows that cross a page boundary: every row that sees fewer than page_size keys (the first
     * page alone) right, the rows that see more wrong */
    long short_ok = 0, short_bad = 0, long_bad = 0, long_all = 0;
    for (size_t r = 0; r < run.rows.size(); ++r) {
        const int b = run.rows[r].first / c.H, i = run.rows[r].second, len = pc.seqlens[b];
        const int nk = c.causal ? len - c.N + i + 1 : len;
        if (nk < ps) { short_ok += !run.bad[r]; short_bad += run.bad[r]; }
        if (nk > ps) { ++long_all; long_bad += run.bad[r]; }
    }
    const bool boundary = short_ok > 0 && short_bad == 0 && long_bad > 0 && 10 * long_bad >= 9 * long_all;
    if (boundary) {
        snprintf(buf, sizeof buf, "every graded row that sees fewer than page_size = %d keys (its sequence's first page "
                 "alone) is right, and the rows that see more are wrong: look at the page boundaries, where key j "
                 "moves to the next page: key j is row j %% page_size of the page at entry j / page_size (the last "
                 "key of page p, j = p * page_size + page_size - 1, is still in page p; the first of page p + 1 is "
                 "j = (p + 1) * page_size)", ps);
        lines.push_back(buf);
    }
    /* the sequences that end inside a page (every one of them wrong) */
    int bad_full = 0, ok_full = 0, bad_partial = 0, ok_partial = 0;
    std::vector<std::string> partial;
    for (int b = 0; b < c.B; ++b) {
        if (!checked[b]) continue;
        const bool part = pc.seqlens[b] % ps != 0;
        if (part && bad[b]) { ++bad_partial; partial.push_back(std::to_string(b)); }
        ok_partial += part && !bad[b];
        if (!part) { bad_full += bad[b] > 0; ok_full += bad[b] == 0; }
    }
    if (!boundary && bad_partial > 0 && ok_partial == 0 && bad_full == 0 && (ok_full > 0 || all_nan)) {
        snprintf(buf, sizeof buf, "the wrong sequences (%s) are those whose length is not a multiple of page_size = "
                 "%d%s%s: the rows of a sequence's last page past its length hold NaN (so does every spare page): "
                 "read keys j < seqlens_kv[b] only, not whole pages (the last page holds seqlens_kv[b] - (pages - 1) "
                 "* page_size keys), and never load a row past them, not even to mask it", join(partial).c_str(), ps,
                 ok_full ? ", every sequence that fills its last page is right" : "",
                 all_nan ? "; every wrong row is NaN" : "");
        lines.push_back(buf);
        if (!ok_full) /* no sequence that fills its last page to compare with */
            lines.push_back("no graded sequence fills its last page, so this cannot be told from a read of the wrong "
                            "page (a spare page holds NaN too): check also which table entry each tile reads, "
                            "block_table[b * max_pages + j / page_size] for key j, in a split that starts past the "
                            "sequence's first page");
    }
    /* hypotheses, on up to 32 of the finite wrong rows spread over them */
    const size_t step = std::max<size_t>(1, wrong.size() / 32);
    std::vector<size_t> sample;
    for (size_t k = 0; k < wrong.size(); k += step) sample.push_back(wrong[k]);
    std::map<int, int> other_row;  /* sequence -> the table row its wrong rows match */
    std::map<int, int> other_head; /* query head -> the K/V head its wrong rows match */
    int n_row = 0, n_order = 0, n_head = 0, n_topleft = 0, head_mod = 0;
    for (size_t r : sample) {
        const int bh = run.rows[r].first, b = bh / c.H, h = bh % c.H, i = run.rows[r].second, hk = h / G;
        const int len = pc.seqlens[b], nk = c.causal ? len - c.N + i + 1 : len;
        const float *q = pc.Q + ((size_t)bh * c.N + i) * c.d;
        const got_row &g = run.got[r];
        for (int b2 = 0; b2 < c.B && b2 < 16; ++b2)
            if (b2 != b && row_matches(g, q, nk, via_row(pc, b2, hk))) {
                ++n_row;
                other_row[b] = b2;
                break;
            }
        n_order += row_matches(g, q, nk, via_pool_order(pc, b, hk));
        for (int h2 = 0; h2 < c.H_kv; ++h2)
            if (h2 != hk && row_matches(g, q, nk, via_row(pc, b, h2))) {
                ++n_head;
                other_head[h] = h2;
                head_mod += h2 == h % c.H_kv;
                break;
            }
        if (c.causal && std::min(i + 1, len) != nk) n_topleft += row_matches(g, q, std::min(i + 1, len), via_row(pc, b, hk));
    }
    const int n = (int)sample.size();
    auto fits = [n](int k) { return k > 0 && 10 * k >= 9 * n; };
    if (fits(n_row)) {
        std::vector<std::string> pairs;
        for (const auto &e : other_row) pairs.push_back(std::to_string(e.first) + " through " + std::to_string(e.second) + "'s");
        snprintf(buf, sizeof buf, "the wrong rows are what keys read through another sequence's row of block_table give "
                 "(sequence %s): sequence b's page p is entry block_table[b * max_pages + p], max_pages = %d entries "
                 "per sequence", join(pairs).c_str(), m.max_pages);
        lines.push_back(buf);
    } else if (fits(n_order)) {
        snprintf(buf, sizeof buf, "the wrong rows are what the pool read in order gives (page p of sequence b taken "
                 "as pool page b * max_pages + p, as if the cache were contiguous): the pool's pages are shuffled, "
                 "so look each page up in block_table");
        lines.push_back(buf);
    } else if (fits(n_head)) {
        std::vector<std::string> pairs;
        for (const auto &e : other_head) pairs.push_back(std::to_string(e.first) + " reads " + std::to_string(e.second));
        snprintf(buf, sizeof buf, "the wrong rows are what another K/V head gives (query head %s%s): query head h reads "
                 "K/V head h / (H / H_kv) = h / %d, the %d query heads of a group neighbours; in a page the K/V head "
                 "is inside each key row, at ((page * page_size + j %% page_size) * H_kv + h_kv) * d", join(pairs).c_str(),
                 head_mod == n_head ? ", which is h % H_kv" : "", G, G);
        lines.push_back(buf);
    } else if (fits(n_topleft)) {
        lines.push_back("the wrong rows are causal aligned top-left (query i sees keys j <= i): with N queries on "
                        "seqlens_kv[b] keys query i sees keys j <= seqlens_kv[b] - N + i (aligned bottom-right, to "
                        "the end of the cache)");
    }
    /* where a causal sequence's rows turn wrong: the first page its wrong rows see */
    if (c.causal && c.N > 1) {
        int named = 0;
        for (int b = 0; b < c.B && named < 3; ++b)
            if (bad[b]) {
                const std::string s = first_wrong_page(pc, run, b);
                if (!s.empty()) { lines.push_back(s); ++named; }
            }
    }
    snprintf(buf, sizeof buf, "in the paged cache key j of sequence b is row j %% page_size of pool page "
             "block_table[b * max_pages + j / page_size] (page_size = %d, max_pages = %d, num_pages = %d), its K/V "
             "head h_kv at ((page * page_size + j %% page_size) * H_kv + h_kv) * d; the sequence's keys end at "
             "seqlens_kv[b] (N_kv = %d when seqlens_kv is NULL)", ps, m.max_pages, m.num_pages, c.N_kv);
    lines.push_back(buf);
    std::string s;
    for (const std::string &l : lines) s += (s.empty() ? "" : "\n      ") + std::string("diagnosis: ") + l;
    return s;
}

/* ---- the append of a step's keys ---- */

/* A key row of a pool: the d values of one key and K/V head, number e = (page * page_size + r) * H_kv + h. */
struct pool_row {
    int page, r, h;
};
static pool_row row_of(const append_case &ac, size_t e) {
    const int H_kv = ac.c->H_kv, ps = ac.pages->page_size;
    return {(int)(e / H_kv / ps), (int)(e / H_kv % ps), (int)(e % H_kv)};
}

/* Which key of which sequence a pool page row is: owner[page] = (b, p) for the pages the table gives
 * the sequences, (-1, -1) for a page no sequence uses. */
static std::vector<std::pair<int, int>> page_owners(const append_case &ac) {
    const page_map &m = *ac.pages;
    std::vector<std::pair<int, int>> owner(m.num_pages, {-1, -1});
    for (int b = 0; b < ac.c->B; ++b)
        for (int p = 0; p <= (ac.seqlens[b] - 1) / m.page_size; ++p) owner[m.table[(size_t)b * m.max_pages + p]] = {b, p};
    return owner;
}

/* "row 5 of pool page 17 (sequence 2's key 69, a new key), K/V head 1" */
static std::string row_text(const append_case &ac, const std::vector<std::pair<int, int>> &owner, pool_row w) {
    char buf[240];
    const auto o = owner[w.page];
    if (o.first < 0) {
        snprintf(buf, sizeof buf, "row %d of pool page %d (a page no sequence uses), K/V head %d", w.r, w.page, w.h);
    } else {
        const int b = o.first, j = o.second * ac.pages->page_size + w.r, len = ac.seqlens[b];
        snprintf(buf, sizeof buf, "row %d of pool page %d (sequence %d's key %d, %s), K/V head %d", w.r, w.page, b, j,
                 j >= len ? "past its end" : j >= len - ac.n_new ? "a new key" : "a cached key", w.h);
    }
    return buf;
}

std::string append_diagnosis(const append_case &ac) {
    const shape_case &c = *ac.c;
    const page_map &m = *ac.pages;
    const size_t rb = (size_t)c.d * ac.es, rows = (size_t)m.num_pages * m.page_size * c.H_kv;
    const auto owner = page_owners(ac);
    auto is_new = [&](pool_row w) {
        const auto o = owner[w.page];
        if (o.first < 0) return false;
        const int j = o.second * m.page_size + w.r, len = ac.seqlens[o.first];
        return j < len && j >= len - ac.n_new;
    };
    std::vector<std::string> lines;
    std::string pattern;
    const char *pool_name[2] = {"K", "V"};
    long wrong[2] = {0, 0};
    for (int w = 0; w < 2; ++w) {
        const char *want = ac.want[w]->data(), *got = ac.got[w]->data();
        std::map<std::string, pool_row> new_at; /* a new key row's values -> where they belong */
        for (size_t e = 0; e < rows; ++e)
            if (is_new(row_of(ac, e))) new_at.emplace(std::string(want + e * rb, rb), row_of(ac, e));
        long missing = 0, unwritten = 0, stray = 0, moved = 0, to_spare = 0;
        std::string first_missing, first_stray;
        std::map<std::string, int> shifts; /* how each moved new key went wrong, for a common pattern */
        for (size_t e = 0; e < rows; ++e) {
            if (!memcmp(want + e * rb, got + e * rb, rb)) continue;
            ++wrong[w];
            const pool_row at = row_of(ac, e);
            if (is_new(at)) {
                bool nan_row = true;
                for (size_t k = 0; k < (size_t)c.d && nan_row; ++k) {
                    int po;
                    nan_row = std::isnan(decode_value(got + e * rb, k, ac.dt, &po));
                }
                ++missing;
                unwritten += nan_row;
                if (first_missing.empty()) first_missing = row_text(ac, owner, at) + (nan_row ? ", still NaN" : ", other values");
                continue;
            }
            ++stray;
            const auto src = new_at.find(std::string(got + e * rb, rb));
            std::string where = row_text(ac, owner, at);
            if (src != new_at.end()) {
                ++moved;
                const pool_row from = src->second;
                const auto o = owner[at.page], of = owner[from.page];
                where += " holds the values of " + row_text(ac, owner, from);
                if (o.first < 0) {
                    ++to_spare;
                } else {
                    const int dj = (o.second * m.page_size + at.r) - (of.second * m.page_size + from.r);
                    char key[120];
                    if (o.first != of.first) snprintf(key, sizeof key, "into another sequence's pages");
                    else if (at.h != from.h && dj == 0) snprintf(key, sizeof key, "to another K/V head of the same key");
                    else snprintf(key, sizeof key, "%d key%s %s", abs(dj), abs(dj) == 1 ? "" : "s", dj > 0 ? "late" : "early");
                    ++shifts[key];
                }
            } else {
                where += " holds values that are no new key's";
            }
            if (first_stray.empty()) first_stray = where;
        }
        if (!wrong[w] && !ac.hit[w].before && !ac.hit[w].after) continue;
        char buf[900];
        snprintf(buf, sizeof buf, "the append (attention_append_kv) left %ld key rows of the %s pool wrong (a key row: "
                 "the d = %d values of one key and K/V head; %d new keys per sequence, %ld new key rows in all)",
                 wrong[w], pool_name[w], c.d, ac.n_new, (long)c.B * ac.n_new * c.H_kv);
        lines.push_back(buf);
        if (missing) {
            snprintf(buf, sizeof buf, "%ld new key rows do not hold their values (%ld still NaN: not written), the first: %s",
                     missing, unwritten, first_missing.c_str());
            lines.push_back(buf);
        }
        if (stray) {
            snprintf(buf, sizeof buf, "%ld rows that belong to no new key were written (%ld of them with a new key's values, "
                     "%ld into a page no sequence uses), the first: %s", stray, moved, to_spare, first_stray.c_str());
            lines.push_back(buf);
        }
        if (shifts.size() == 1 && pattern.empty())
            pattern = shifts.begin()->first;
        if (ac.hit[w].before || ac.hit[w].after) {
            snprintf(buf, sizeof buf, "the append wrote outside the %s pool: %ld elements before its first, %ld after its last",
                     pool_name[w], ac.hit[w].before, ac.hit[w].after);
            lines.push_back(buf);
        }
    }
    if (lines.empty()) return "";
    if (!pattern.empty()) {
        std::string why = pattern == "into another sequence's pages"
                              ? "look the key's page up in its own sequence's row of block_table, b * max_pages + j / page_size"
                          : pattern == "to another K/V head of the same key"
                              ? "K/V head h_kv is h_kv d elements into each key row of a page"
                              : "check which key token t becomes: j = seqlens_kv[b] - n_new + t (the lengths already count the new keys)";
        lines.push_back("every new key whose values turned up elsewhere went " + pattern + ": " + why);
    }
    char buf[600];
    snprintf(buf, sizeof buf, "new token t of sequence b (K_new [B, n_new, H_kv, d]) is its key j = seqlens_kv[b] - n_new + t, "
             "at row j %% page_size of pool page block_table[b * max_pages + j / page_size], K/V head h_kv at "
             "((page * page_size + j %% page_size) * H_kv + h_kv) * d (page_size = %d, max_pages = %d, n_new = %d)",
             m.page_size, m.max_pages, ac.n_new);
    lines.push_back(buf);
    std::string s;
    for (const std::string &l : lines) s += (s.empty() ? "" : "\n      ") + std::string("diagnosis: ") + l;
    return s;
}
