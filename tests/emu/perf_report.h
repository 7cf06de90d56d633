/* tests/emu/perf_report.h: what an emulator run saw that speaks for the speed of the kernel, for the
 * report tests/emu/report.py prints after `make emu-lessonN` (tests/emu/grade.py) and the Hopper
 * drivers. On when the environment names a file, EMU_REPORT_OUT: written there at exit, appended
 * (one process may run several launches, several processes one lesson), one record per line,
 * tab-separated, each ending with the text of its source line and the three above it (\x1f between
 * them); report.py adds them up, resolves them to lines of the graded file and prints them:
 *
 *   smem    FILE LINE KIND requests wavefronts ideal  a shared-memory access site whose line is known
 *                                                     (a wrapper: ldmatrix, st.shared, ld.shared.v2)
 *   smempc  BINARY PC KIND requests wavefronts ideal  an ordinary load or store of the kernel, by its
 *                                                     return address in BINARY (addr2line -i: its line)
 *   flight  FILE LINE reads sum min max               cp.async: at each ldmatrix of that line that reads
 *                                                     a tile cp.async wrote, the reading thread's copies
 *                                                     still in flight (committed groups not waited for)
 *   tma     FILE LINE wgmmas sum min max              TMA: at each wgmma of that line, the tiles landed
 *                                                     or landing that no wgmma has read yet
 *   overlap FILE LINE groups busy ops                 wgmma: the groups a wait_group of that line
 *                                                     retired, how many had other work run while they
 *                                                     were in flight, and that work (ex2, shuffles)
 *
 * Wavefronts are counted as Nsight Compute counts them (shared memory: 32 banks of 4 bytes; a
 * request is one warp-wide instruction, split into phases: 4-byte and narrower accesses one phase
 * of 32 lanes, 8-byte accesses two half-warps, 16-byte accesses four quarter-warps, ldmatrix and
 * stmatrix one phase per 8x8 matrix, its 8 row addresses; a phase takes as many wavefronts as the
 * most distinct 4-byte words any one bank holds among the words it touches; `ideal` is one per
 * phase that has an active lane). A request is paired from the lanes' own accesses: the k-th time
 * each lane of a warp runs the same instruction between the same two barriers (the CPU runs the
 * lanes one after another, a GPU in lock step). */
#pragma once
#include <stdint.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>
#include "core.h"

namespace emu_perf {

/* The wavefronts of one phase: the lanes' [addr, addr + bytes) in shared memory. */
inline int phase_wavefronts(const uint32_t *addr, const unsigned *bytes, int n) {
    std::vector<uint32_t> words;
    for (int i = 0; i < n; ++i)
        for (uint32_t w = addr[i] / 4; w <= (addr[i] + std::max(bytes[i], 1u) - 1) / 4; ++w) words.push_back(w);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    int per_bank[32] = {0}, most = 0;
    for (uint32_t w : words) most = std::max(most, ++per_bank[w % 32]);
    return most;
}

struct Sum { long requests = 0, wavefronts = 0, ideal = 0; };
struct Range { long n = 0, sum = 0, lo = 1L << 40, hi = -1; void add(long v) { ++n; sum += v; lo = std::min(lo, v); hi = std::max(hi, v); } };
struct Busy { long groups = 0, busy = 0, ops = 0; };
using Line = std::pair<std::string, int>;

/* One lane's access, kept until its block ends (then paired into requests): an instruction by its
 * return address (pc), or a per-lane wrapper by its caller's line (file, line; pc 0). */
struct LaneAccess {
    uint64_t pc, sync;
    const char *file;
    int line;
    uint32_t addr;
    uint16_t warp, lane;
    uint8_t bytes, store;
    auto key() const { return std::tie(warp, pc, file, line, store, sync); }
};

struct State {
    std::map<std::tuple<std::string, int, std::string>, Sum> sites;  // known lines
    std::map<std::pair<uint64_t, std::string>, Sum> pcs;             // return addresses
    std::map<Line, Range> flight, tma;
    std::map<Line, Busy> overlap;
    std::vector<LaneAccess> block;
    ~State() { write(); }
    void write();
};
inline State &st() { static State s; return s; }
inline bool on() {
    static const bool yes = getenv("EMU_REPORT_OUT") && *getenv("EMU_REPORT_OUT");
    return yes;
}

/* A whole warp's request, computed where all its addresses are known (a warp-collective
 * wrapper): `phases` phases of `per` lanes each, lane i at addr[i] reading or writing bytes[i]. */
inline void warp_request(const char *file, int line, const char *kind, const uint32_t *addr, const unsigned *bytes,
                         int phases, int per) {
    if (!on()) return;
    Sum &s = st().sites[{file, line, kind}];
    s.requests++;
    for (int p = 0; p < phases; ++p) {
        s.wavefronts += phase_wavefronts(addr + p * per, bytes + p * per, per);
        s.ideal++;
    }
}

/* One lane's load or store: an ordinary one by its return address `pc` (the compiler's
 * instrumentation, perf_hooks.h), or a per-lane wrapper's by its caller's file and line; `sync`
 * counts the barriers this lane has passed (every lane of a warp passes the same ones in the same
 * order). */
inline void lane_access(uint64_t pc, const char *file, int line, uint32_t addr, unsigned bytes, bool store,
                        uint64_t sync) {
    if (!on() || emu::self() < 0) return;
    const int t = emu::self();
    st().block.push_back(LaneAccess{pc, sync, file, line, addr, (uint16_t)(t / 32), (uint16_t)(t % 32),
                                    (uint8_t)std::min(bytes, 255u), (uint8_t)store});
}

/* The source line of each ordinary access's instruction, so that the instructions of one line pair up
 * as one: a compiler may give a line two stores (`p[i] = masked ? 0.f : e` as a branch, one store per
 * side), and a lane that took the other side would otherwise be paired with another lane's next
 * element, a conflict the GPU (one select, one store) never has. pc -> the representative pc of its
 * line and width (the first one seen), from addr2line over this executable (the report build: -g1,
 * -no-pie), asked once per batch of new pcs; without addr2line each pc stands for itself. */
inline std::map<uint64_t, uint64_t> &line_map() { static std::map<uint64_t, uint64_t> m; return m; }
inline uint64_t line_pc(uint64_t pc) {
    auto it = line_map().find(pc);
    return it == line_map().end() ? pc : it->second;
}
inline void resolve_lines(const std::vector<LaneAccess> &v) {
    static std::map<std::string, uint64_t> first;  // "file:line width" -> its representative pc
    static bool no_tool = false;
    if (no_tool) return;
    std::vector<std::pair<uint64_t, unsigned>> todo;  // (pc, bytes) not asked yet
    for (const auto &a : v)
        if (!a.file && !line_map().count(a.pc) &&
            std::find(todo.begin(), todo.end(), std::make_pair(a.pc, (unsigned)a.bytes)) == todo.end())
            todo.push_back({a.pc, a.bytes});
    if (todo.empty()) return;
    std::string cmd = "addr2line -e /proc/" + std::to_string(getpid()) + "/exe";
    for (auto &t : todo) { char h[24]; snprintf(h, sizeof h, " 0x%llx", (unsigned long long)(t.first - 1)); cmd += h; }
    FILE *f = popen((cmd + " 2>/dev/null").c_str(), "r");
    if (!f) { no_tool = true; return; }
    char buf[4096];
    size_t k = 0;
    for (; k < todo.size() && fgets(buf, sizeof buf, f); ++k) {
        std::string loc(buf);
        loc = loc.substr(0, loc.find_first_of(" \n"));  // "file:line", the discriminator dropped
        if (loc.empty() || loc.find('?') != std::string::npos) { line_map()[todo[k].first] = todo[k].first; continue; }
        auto ins = first.emplace(loc + " " + std::to_string(todo[k].second), todo[k].first);
        line_map()[todo[k].first] = ins.first->second;
    }
    pclose(f);
    if (k == 0) no_tool = true;  // addr2line missing or silent: pair by instruction, as before
}

/* At the end of a block: the k-th access of each lane to one source line (one instruction where its
 * line is not known) of one width between the same barriers is one request of its warp; split into
 * phases by width, counted. */
inline void block_end() {
    auto &v = st().block;
    if (v.empty()) return;
    resolve_lines(v);
    for (auto &a : v)
        if (!a.file) a.pc = line_pc(a.pc);
    std::stable_sort(v.begin(), v.end(), [](const LaneAccess &a, const LaneAccess &b) {
        return std::tuple_cat(a.key(), std::tie(a.lane)) < std::tuple_cat(b.key(), std::tie(b.lane));
    });
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j < v.size() && v[j].key() == v[i].key()) ++j;
        /* [i, j): one instruction of one warp between two barriers; per lane, in program order */
        std::vector<std::vector<const LaneAccess *>> lane(32);
        unsigned width = 0;
        for (size_t k = i; k < j; ++k) { lane[v[k].lane].push_back(&v[k]); width = std::max<unsigned>(width, v[k].bytes); }
        size_t reps = 0;
        for (auto &l : lane) reps = std::max(reps, l.size());
        const int per = width >= 16 ? 8 : width == 8 ? 16 : 32;
        const std::string kind = std::string(v[i].store ? "st" : "ld") + ".shared " + std::to_string(width) + " B";
        Sum &s = v[i].file ? st().sites[{v[i].file, v[i].line, kind}] : st().pcs[{v[i].pc, kind}];
        for (size_t r = 0; r < reps; ++r) {
            s.requests++;
            for (int p = 0; p < 32 / per; ++p) {
                uint32_t a[32];
                unsigned b[32];
                int n = 0;
                for (int ln = p * per; ln < (p + 1) * per; ++ln)
                    if (r < lane[ln].size()) { a[n] = lane[ln][r]->addr; b[n] = lane[ln][r]->bytes; ++n; }
                if (!n) continue;
                s.wavefronts += phase_wavefronts(a, b, n);
                s.ideal++;
            }
        }
        i = j;
    }
    v.clear();
}

inline void flight(const char *file, int line, long in_flight) {
    if (on()) st().flight[{file, line}].add(in_flight);
}
inline void tma(const char *file, int line, long ready) {
    if (on()) st().tma[{file, line}].add(ready);
}
/* A wait_group of that line retired a wgmma group during which this thread ran `ops` other
 * operations (ex2, shuffles). */
inline void overlap(const char *file, int line, long ops) {
    if (!on()) return;
    Busy &b = st().overlap[{file, line}];
    b.groups++;
    b.busy += ops > 0;
    b.ops += ops;
}

/* The text of line `line` of `file` (read while the file exists: a driver's build of a variant
 * removes it at the end), tabs as spaces: report.py finds the line in the graded file by it. */
inline std::string line_text(const std::string &file, int line);
/* A site's line and the three before it, separated by \x1f (report.py tells apart two lines of the
 * same text by the lines above them). */
inline std::string context(const std::string &file, int line) {
    std::string out;
    for (int k = line - 3; k <= line; ++k) out += (k > line - 3 ? "\x1f" : "") + line_text(file, k);
    return out;
}
inline std::string line_text(const std::string &file, int line) {
    static std::map<std::string, std::vector<std::string>> files;
    auto it = files.find(file);
    if (it == files.end()) {
        std::vector<std::string> lines;
        if (FILE *f = fopen(file.c_str(), "r")) {
            char buf[4096];
            while (fgets(buf, sizeof buf, f)) {
                std::string l(buf);
                while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
                std::replace(l.begin(), l.end(), '\t', ' ');
                lines.push_back(l);
            }
            fclose(f);
        }
        it = files.emplace(file, std::move(lines)).first;
    }
    return line >= 1 && line <= (int)it->second.size() ? it->second[line - 1] : std::string();
}

inline void State::write() {
    if (!on()) return;
    FILE *f = fopen(getenv("EMU_REPORT_OUT"), "a");
    if (!f) { perror("emu perf report: EMU_REPORT_OUT"); return; }
    char exe[4096] = {0};
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    for (auto &kv : sites)
        fprintf(f, "smem\t%s\t%d\t%s\t%ld\t%ld\t%ld\t%s\n", std::get<0>(kv.first).c_str(), std::get<1>(kv.first),
                std::get<2>(kv.first).c_str(), kv.second.requests, kv.second.wavefronts, kv.second.ideal,
                context(std::get<0>(kv.first), std::get<1>(kv.first)).c_str());
    for (auto &kv : pcs)
        fprintf(f, "smempc\t%s\t%#llx\t%s\t%ld\t%ld\t%ld\n", exe, (unsigned long long)kv.first.first,
                kv.first.second.c_str(), kv.second.requests, kv.second.wavefronts, kv.second.ideal);
    for (auto *m : {&flight, &tma})
        for (auto &kv : *m)
            fprintf(f, "%s\t%s\t%d\t%ld\t%ld\t%ld\t%ld\t%s\n", m == &flight ? "flight" : "tma",
                    kv.first.first.c_str(), kv.first.second, kv.second.n, kv.second.sum, kv.second.lo, kv.second.hi,
                    context(kv.first.first, kv.first.second).c_str());
    for (auto &kv : overlap)
        fprintf(f, "overlap\t%s\t%d\t%ld\t%ld\t%ld\t%s\n", kv.first.first.c_str(), kv.first.second,
                kv.second.groups, kv.second.busy, kv.second.ops, context(kv.first.first, kv.first.second).c_str());
    fclose(f);
}

}  // namespace emu_perf

/* An emulator function that touches the emulated shared memory itself: its own accesses are not the
 * kernel's (a report build instruments every access: perf_hooks.h). */
#define EMU_UNCOUNTED __attribute__((no_sanitize_address))

/* Where a wrapper is called from: its caller's file and line, as default arguments (the kernel
 * file's own line: tests/emu/prep.py starts the rewritten file with #line 1 "SRC"). */
#define EMU_SITE , const char *emu_file = __builtin_FILE(), int emu_line = __builtin_LINE()
#define EMU_SITE_ONLY const char *emu_file = __builtin_FILE(), int emu_line = __builtin_LINE()
