/* runner_grade.cu: the grading pieces every runner shares (runner_grade.h). */
#include "runner_grade.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include "cuda_check.h"
#include "gpu_env.h"
extern "C" {
#include "cpu_reference.h"
#include "diagnose.h"
}

static size_t rows_of(const problem_core &p) { return p.rows ? p.rows : (size_t)p.c.B * p.c.H * p.c.N; }

size_t output_row(const problem_core &p, int k, int bh, int i) {
    return p.row_at ? p.row_at(p, k, bh, i) : (size_t)bh * p.c.N + i;
}

size_t output_elements(const problem_core &p, int k) { return rows_of(p) * p.out[k].width; }

void add_output(problem_core &p, const char *name, dtype_t dt, int width) {
    device_output &o = p.out[p.n_out++];
    o.name = name;
    o.dt = dt;
    o.width = width;
    o.hit = guard_hits{0, 0, -1, -1, -1, -1};
    const int es = dtype_size(dt);
    guarded_alloc_or_exit(&o.buf, rows_of(p) * width, es, poison_of(es), p.c, p.dt, name);
}

void free_outputs(problem_core &p) {
    for (int k = 0; k < p.n_out; ++k) guarded_free(&p.out[k].buf);
    p.n_out = 0;
}

std::string output_names(const problem_core &p) {
    std::string s;
    for (int k = 0; k < p.n_out; ++k) s += std::string(k == 0 ? "" : k == p.n_out - 1 ? " and " : ", ") + p.out[k].name;
    return s;
}

int run_once(problem_core &p, double timeout_s, run_result &r) {
    for (int k = 0; k < p.n_out; ++k) {
        device_output &o = p.out[k];
        fill_pattern(o.buf.data, output_elements(p, k), o.buf.es, poison_of(o.buf.es), p.stream);
        guarded_rearm(&o.buf, p.stream);
    }
    const int rc = p.launch(&p);
    if (rc != ATTN_OK) return rc;
    CUDA_CHECK(cudaGetLastError());
    wait_stream(p.stream, timeout_s, p.kernels);
    for (int k = 0; k < p.n_out; ++k) {
        device_output &o = p.out[k];
        r.out[k].resize(output_elements(p, k) * o.buf.es);
        CUDA_CHECK(cudaMemcpy(r.out[k].data(), o.buf.data, r.out[k].size(), cudaMemcpyDeviceToHost));
        o.hit = guarded_check(&o.buf);
    }
    return ATTN_OK;
}

size_t count_unwritten(const problem_core &p, const run_result &r) {
    size_t n = 0;
    for (int k = 0; k < p.n_out; ++k)
        for (size_t i = 0; i < output_elements(p, k); ++i) {
            int po;
            decode_value(r.out[k].data(), i, p.out[k].dt, &po);
            n += po;
        }
    return n;
}

graded_rows forward_rows(std::vector<std::pair<int, int>> rows, int d, float scale, dtype_t dtype,
                         const std::function<attention_row(int, int)> &row_of) {
    graded_rows g;
    g.rows = std::move(rows);
    const size_t R = g.rows.size();
    for (int k = 0; k < 2; ++k) {
        g.ref[k].assign(k == 0 ? R * d : R, 0);
        g.plain[k].assign(k == 0 ? R * d : R, 0);
    }
#pragma omp parallel for schedule(dynamic, 8)
    for (long k = 0; k < (long)R; ++k) {
        const attention_row a = row_of(g.rows[k].first, g.rows[k].second);
        attention_prefix_f64(a.q, a.K, a.V, a.nk, d, scale, &g.ref[0][k * d], &g.ref[1][k]);
        attention_prefix_lowp(a.q, a.K, a.V, a.nk, d, scale, dtype, &g.plain[0][k * d], &g.plain[1][k]);
    }
    return g;
}

double plain_error(const graded_rows &g, int k) {
    double e = 0;
    for (size_t i = 0; i < g.ref[k].size(); ++i) e = std::max(e, fabs(g.plain[k][i] - g.ref[k][i]));
    return e;
}

double max_abs_ref(const graded_rows &g, int k) {
    double big = 0;
    for (size_t i = 0; i < g.ref[k].size(); ++i) big = std::max(big, fabs(g.ref[k][i]));
    return big;
}

grader *check_output(const problem_core &p, int k, const graded_rows &g, const std::vector<char> &got,
                     tolerance tol) {
    const shape_case &c = p.c;
    const int BH = c.B * c.H, w = p.out[k].width;
    const dtype_t dt = p.out[k].dt;
    grader *gr = grader_new(BH, c.H, c.N, w);
    std::vector<char> graded((size_t)BH * c.N, 0);
    for (size_t r = 0; r < g.rows.size(); ++r) {
        const int bh = g.rows[r].first, i = g.rows[r].second;
        const size_t at = output_row(p, k, bh, i);
        graded[(size_t)bh * c.N + i] = 1;
        for (int col = 0; col < w; ++col) {
            int po;
            const double x = decode_value(got.data(), at * w + col, dt, &po);
            grader_check(gr, bh, i, col, g.ref[k][r * w + col], x, po, tol);
        }
    }
    /* every element, graded row or not, must have been written */
    for (int bh = 0; bh < BH; ++bh)
        for (int i = 0; i < c.N; ++i) {
            const size_t at = output_row(p, k, bh, i);
            if (graded[(size_t)bh * c.N + i] || at == NO_ROW) continue;
            for (int col = 0; col < w; ++col) {
                int po;
                decode_value(got.data(), at * w + col, dt, &po);
                if (po) grader_check(gr, bh, i, col, 0.0, NAN, 1, tol);
            }
        }
    return gr;
}

std::string outside_writes(const problem_core &p) {
    std::string s;
    char buf[768];
    for (int k = 0; k < p.n_out; ++k) {
        const guard_hits &h = p.out[k].hit;
        describe_outside(buf, sizeof buf, p.out[k].name, h.before, h.after, h.after_first, h.after_last,
                         h.before_nearest, h.before_farthest, p.c.B, p.c.H, p.c.N, p.out[k].width);
        if (*buf) s += std::string(s.empty() ? "" : "\n      ") + buf;
    }
    return s;
}

long count_differences(const problem_core &p, int k, const std::vector<char> &a, const std::vector<char> &b, int r0,
                       int r1, bool within, tolerance t, double *max_diff) {
    const dtype_t dt = p.out[k].dt;
    const int es = dtype_size(dt), w = p.out[k].width;
    long n = 0;
    for (int bh = 0; bh < p.c.B * p.c.H; ++bh)
        for (int row = r0; row < r1; ++row) {
            const size_t at = output_row(p, k, bh, row);
            for (size_t i = at * w; at != NO_ROW && i < (at + 1) * w; ++i) {
                if (!memcmp(&a[i * es], &b[i * es], es)) continue;
                if (within) {
                    int pa, pb;
                    const double x = decode_value(a.data(), i, dt, &pa), y = decode_value(b.data(), i, dt, &pb);
                    if (max_diff && std::isfinite(x - y)) *max_diff = std::max(*max_diff, fabs(x - y));
                    if (!pa && !pb && fabs(x - y) <= t.atol + t.rtol * fabs(x)) continue;
                }
                ++n;
            }
        }
    return n;
}

void print_fail_block(const problem_core &p, bool name_x30, const std::string &why, const grade_report *rep) {
    const shape_case &c = p.c;
    printf("    FAIL  %-6s %s%s%s%s\n      %s", c.name, dtype_name(p.dt), c.causal ? " causal" : "",
           name_x30 ? logits_text(c).c_str() : "", ranks_text(c).c_str(), why.c_str());
    for (int k = 0; k < p.n_out; ++k) grade_print_first(&rep[k], c.H, p.out[k].name);
}
