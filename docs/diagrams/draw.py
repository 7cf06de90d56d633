#!/usr/bin/env python3
"""draw.py: write the course diagrams as SVG (standard library only, deterministic).

    python3 docs/diagrams/draw.py [OUTDIR]     (default: the folder of this script)

memory-hierarchy.svg   where data lives on an H100 and what FlashAttention keeps at each level
tiling-loop-nest.svg   Q_i, K_j, V_j, S_ij, O_i and the two loops of FlashAttention-2 Algorithm 1
causal-blocks.svg      which Br x Bc blocks a causal kernel computes fully, masks, or skips
mma-m16n8k16.svg       which lane holds which element of mma.sync m16n8k16 (f16 A/B, f32 C/D)
backward-loop.svg      the backward pass (Algorithm 2): a block per K_j, V_j, query tiles streaming, dQ atomics
swizzle-128b.svg       lesson 09: one 8-row atom of the 128-byte swizzle, and what a descriptor points at
mbarrier-ring.svg      lesson 09: the producer, the K/V slots, full and empty mbarriers, phase parities
pingpong.svg           lesson 09: two consumer warpgroups taking turns, and the overlap inside one
wgmma-descriptors.svg  lesson 09: a K-major and an MN-major wgmma operand in the TMA layout, LBO and SBO

The SVGs are committed; tests/docs/check_site.sh fails if they differ from what this
script draws, so edit the script, run it, and commit both.
"""
import os
import sys

FONT = "DejaVu Sans, Verdana, sans-serif"
MONO = "DejaVu Sans Mono, monospace"
INK, MUTED = "#111", "#555"


class Svg:
    def __init__(self, w, h, title):
        self.w, self.h, self.parts = w, h, []
        self.title = title

    def add(self, s):
        self.parts.append(s)

    def rect(self, x, y, w, h, fill="none", stroke=INK, sw=1.0, rx=0, extra=""):
        self.add(f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="{rx:g}" '
                 f'fill="{fill}" stroke="{stroke}" stroke-width="{sw:g}"{extra}/>')

    def text(self, x, y, s, size=15, anchor="start", weight="normal", fill=INK, font=FONT, style=""):
        s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        st = f' font-style="{style}"' if style else ""
        self.add(f'<text x="{x:g}" y="{y:g}" font-family="{font}" font-size="{size:g}" '
                 f'text-anchor="{anchor}" font-weight="{weight}" fill="{fill}"{st}>{s}</text>')

    def line(self, x1, y1, x2, y2, stroke=INK, sw=1.5, arrow=False, dash=""):
        m = ' marker-end="url(#arrow)"' if arrow else ""
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{stroke}" '
                 f'stroke-width="{sw:g}"{m}{d}/>')

    def write(self, path):
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                f'viewBox="0 0 {self.w} {self.h}" role="img">\n<title>{self.title}</title>\n'
                '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#111"/>'
                '</marker></defs>\n'
                f'<rect width="{self.w}" height="{self.h}" fill="#fff"/>\n')
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(head + "\n".join(self.parts) + "\n</svg>\n")


def memory_hierarchy(path):
    s = Svg(980, 560, "GPU memory hierarchy (H100 SXM, approximate) and what FlashAttention keeps where")
    s.text(490, 34, "Memory hierarchy of an H100 (SXM, approximate figures)", 20, "middle", "bold")
    levels = [  # name, size, detail, fill, what FlashAttention keeps there
        ("Registers", "256 KB per SM", "64K 32-bit registers; about 33 MB over 132 SMs",
         "#c9e4c5", ["S_ij, P_ij tiles, O_i accumulator,", "running m_i and l_i of my rows"]),
        ("Shared memory (SMEM)", "up to 228 KB per SM", "carved from the SM's L1; about 29 MB over 132 SMs",
         "#d7e6f5", ["Q_i, K_j, V_j tiles,", "shared by the threads of a block"]),
        ("L2 cache", "50 MB", "shared by all SMs, managed by hardware",
         "#efe3c6", ["(the K and V tiles that many", "blocks re-read often hit here)"]),
        ("HBM3 (global memory)", "80 GB, ≈3.35 TB/s", "off-chip DRAM stacks",
         "#f3d0cc", ["Q read once; K, V once per Q block;", "O and L written once. Standard", "attention also writes and re-reads", "S and P (N×N) here."]),
    ]
    x0, top, h, gap = 40, 70, 96, 18
    for k, (name, size, detail, fill, keeps) in enumerate(levels):
        y = top + k * (h + gap)
        inset = (3 - k) * 42
        w = 560 - 2 * inset
        s.rect(x0 + inset, y, w, h, fill, rx=8)
        cx = x0 + 280
        s.text(cx, y + 32, name, 18, "middle", "bold")
        s.text(cx, y + 56, size, 16, "middle")
        s.text(cx, y + 78, detail, 12.5, "middle", fill=MUTED)
        for i, line in enumerate(keeps):
            s.text(650, y + 34 + 20 * i, line, 14.5)
    s.text(650, 60, "FlashAttention keeps here:", 15, weight="bold")
    # arrow: faster/smaller upward
    s.line(20, top + 4 * (h + gap) - gap, 20, top + 2, arrow=True, sw=2)
    s.add(f'<text x="14" y="{top + 2 * (h + gap):g}" font-family="{FONT}" font-size="13" fill="{MUTED}" '
          f'text-anchor="middle" transform="rotate(-90 14 {top + 2 * (h + gap):g})">'
          'smaller, faster, closer to the cores</text>')
    s.write(path)


def tiling(path):
    s = Svg(1000, 760, "The FlashAttention-2 loop nest: tiles of Q, K, V, S and O")
    c = 34           # block size on screen
    T = 6            # Tr = Tc = 6 blocks shown
    d = 2.2 * c      # head dimension on screen
    i_hl, j_hl = 2, 3
    qx, sx, sy = 60, 200, 190
    vx = sx + T * c + 70
    ox = vx + d + 60
    kty = sy - d - 26
    blue, orange, green, grey = "#d7e6f5", "#f8d9b0", "#c9e4c5", "#eef0f3"
    s.text(500, 32, "One pass of FlashAttention-2 (Algorithm 1) over one (batch, head)", 20, "middle", "bold")
    # Q
    for i in range(T):
        s.rect(qx, sy + i * c, d, c, blue if i == i_hl else grey)
    s.text(qx + d / 2, sy - 10, "Q  (N×d)", 15, "middle", "bold")
    s.text(qx - 8, sy + i_hl * c + c / 2 + 5, "Q_i", 14, "end", "bold")
    # K^T above S
    for j in range(T):
        s.rect(sx + j * c, kty, c, d, orange if j == j_hl else grey)
    s.text(sx + T * c / 2, kty - 10, "Kᵀ  (d×N)", 15, "middle", "bold")
    s.text(sx + j_hl * c + c / 2, kty + d / 2 + 5, "K_jᵀ", 12, "middle", "bold")
    # S
    for i in range(T):
        for j in range(T):
            fill = "#fff"
            if i == i_hl and j == j_hl:
                fill = green
            s.rect(sx + j * c, sy + i * c, c, c, fill, stroke="#888")
    s.rect(sx, sy, T * c, T * c, sw=1.5)
    s.text(sx + T * c / 2, sy + T * c + 24, "S = scale·QKᵀ  (N×N, never stored)", 14, "middle")
    s.text(sx + j_hl * c + c / 2, sy + i_hl * c + c / 2 + 5, "S_ij", 12, "middle", "bold")
    s.line(sx + 4, sy + i_hl * c - 10, sx + (j_hl + 1) * c + 40, sy + i_hl * c - 10, arrow=True, sw=1.8)
    s.text(sx + (j_hl + 1) * c + 44, sy + i_hl * c - 6, "inner loop j", 13)
    # V
    for j in range(T):
        s.rect(vx, sy + j * c, d, c, orange if j == j_hl else grey)
    s.text(vx + d / 2, sy - 10, "V  (N×d)", 15, "middle", "bold")
    s.text(vx + d + 6, sy + j_hl * c + c / 2 + 5, "V_j", 14, weight="bold")
    # O
    for i in range(T):
        s.rect(ox, sy + i * c, d, c, green if i == i_hl else grey)
    s.text(ox + d / 2, sy - 10, "O  (N×d), L  (N)", 15, "middle", "bold")
    s.text(ox + d + 6, sy + i_hl * c + c / 2 + 5, "O_i, L_i", 14, weight="bold")
    s.text(sx + T * c + 35, sy + T * c / 2, "·", 30, "middle")
    s.text(vx + d + 30, sy + T * c / 2 + 5, "→", 22, "middle")
    # outer loop arrow on the left of Q
    s.line(qx - 36, sy + 4, qx - 36, sy + T * c - 4, arrow=True, sw=1.8)
    s.add(f'<text x="{qx - 44}" y="{sy + T * c / 2:g}" font-family="{FONT}" font-size="13" text-anchor="middle" '
          f'transform="rotate(-90 {qx - 44} {sy + T * c / 2:g})">outer loop i (in parallel)</text>')
    # legend
    ly = sy + T * c + 50
    for k, (fill, what) in enumerate([(blue, "in SMEM for the whole inner loop"),
                                      (orange, "streamed through SMEM, one j at a time"),
                                      (green, "on chip (registers), written to HBM once")]):
        s.rect(60 + k * 310, ly, 18, 18, fill)
        s.text(86 + k * 310, ly + 14, what, 13.5)
    # pseudo-code
    code = [
        "for i in 0 .. Tr-1:                      # parallel: one thread block per Br query rows",
        "    load Q_i from HBM;  O_i = 0;  m_i = -inf;  l_i = 0",
        "    for j in 0 .. Tc-1:                  # sequential: Bc keys at a time",
        "        load K_j, V_j from HBM",
        "        S_ij  = scale * Q_i K_j^T        # Br x Bc, on chip",
        "        m_new = max(m_i, rowmax(S_ij))",
        "        P_ij  = exp(S_ij - m_new)",
        "        l_i   = exp(m_i - m_new) * l_i + rowsum(P_ij)",
        "        O_i   = exp(m_i - m_new) * O_i + P_ij V_j",
        "        m_i   = m_new",
        "    write O_i / l_i  and  L_i = m_i + log(l_i)  to HBM",
    ]
    cy = ly + 44
    s.rect(40, cy - 6, 920, 22 * len(code) + 18, "#f4f5f7", stroke="#ccc", rx=6)
    for k, line in enumerate(code):
        s.add(f'<text x="56" y="{cy + 16 + 22 * k}" font-family="{MONO}" font-size="14" fill="{INK}" '
              f'xml:space="preserve">{line}</text>')
    s.write(path)


def causal(path):
    T = 8
    c = 44
    s = Svg(1000, 560, "Causal attention: blocks computed fully, masked on the diagonal, or skipped")
    gx, gy = 80, 90
    full, diag, skip = "#c9e4c5", "#f8d9b0", "#f1f2f4"
    s.text(500, 34, "Causal mask by blocks (Br = Bc, Tr = Tc = 8)", 20, "middle", "bold")
    for i in range(T):
        for j in range(T):
            fill = full if j < i else diag if j == i else skip
            s.rect(gx + j * c, gy + i * c, c, c, fill, stroke="#999")
            if j > i:
                s.text(gx + j * c + c / 2, gy + i * c + c / 2 + 5, "–", 14, "middle", fill="#aaa")
    s.rect(gx, gy, T * c, T * c, sw=1.5)
    s.text(gx + T * c / 2, gy - 12, "key block j →", 14, "middle")
    s.add(f'<text x="{gx - 14}" y="{gy + T * c / 2}" font-family="{FONT}" font-size="14" text-anchor="middle" '
          f'transform="rotate(-90 {gx - 14} {gy + T * c / 2})">query block i →</text>')
    # zoom of one diagonal block
    zi = 5
    zx, zy, e = 560, 110, 26
    n = 8
    for r in range(n):
        for q in range(n):
            s.rect(zx + q * e, zy + r * e, e, e, diag if q <= r else "#fff", stroke="#bbb", sw=0.8)
    s.rect(zx, zy, n * e, n * e, sw=1.5)
    s.line(gx + zi * c + c, gy + zi * c + c / 2, zx - 6, zy + n * e / 2, stroke="#888", sw=1.2, dash="4 3", arrow=True)
    s.text(zx + n * e / 2, zy - 12, "a diagonal block, element by element", 14, "middle")
    s.text(zx, zy + n * e + 24, "shaded: key j ≤ query i, kept", 13)
    s.text(zx, zy + n * e + 44, "white: j > i, set to -inf before the row max", 13)
    # legend
    ly = gy + T * c + 34
    items = [(full, "j < i: every key visible, no mask needed (28 blocks)"),
             (diag, "j = i: compute, then mask j > i element by element (8 blocks)"),
             (skip, "j > i: fully masked, never loaded or computed (28 blocks)")]
    for k, (fill, what) in enumerate(items):
        s.rect(80, ly + 26 * k, 18, 18, fill, stroke="#999")
        s.text(106, ly + 14 + 26 * k, what, 14)
    s.text(560, ly + 14, "Work done: 36 of 64 blocks here; about half as Tr grows,", 14)
    s.text(560, ly + 40, "so a causal pass can approach 2× faster than a full one.", 14)
    s.text(560, ly + 66, "The inner loop of block row i simply stops at j = i.", 14)
    s.write(path)


def mma(path):
    cw, ch = 32, 24
    s = Svg(1200, 940, "mma.sync m16n8k16: which lane holds which element of A, B and C/D")
    reg_fill = ["#d7e6f5", "#f8d9b0", "#c9e4c5", "#ecd5ee"]
    s.text(600, 32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32:  D = A·B + C, one warp", 19, "middle", "bold")
    s.text(520, 56, "cell = lane (T0..T31) holding that element;  g = lane >> 2 (group),  t = lane % 4 (thread in group)",
           14, "middle", fill=MUTED)
    by = 80
    ax, ay = 60, by + 16 * ch + 50
    bx = ax + 16 * cw + 70
    # A: 16 x 16, row-major. a0,a1: (g, 2t+{0,1}); a2,a3: (g+8, ..); a4,a5: (g, 2t+8+..); a6,a7: (g+8, 2t+8+..)
    for r in range(16):
        for k in range(16):
            g, half_r = r % 8, r // 8
            t, half_k = (k % 8) // 2, k // 8
            lane = 4 * g + t
            reg = half_r + 2 * half_k  # 0: a0a1, 1: a2a3, 2: a4a5, 3: a6a7
            s.rect(ax + k * cw, ay + r * ch, cw, ch, reg_fill[reg], stroke="#fff", sw=1)
            s.text(ax + k * cw + cw / 2, ay + r * ch + ch / 2 + 4, f"T{lane}", 10.5, "middle")
    s.rect(ax, ay, 16 * cw, 16 * ch, sw=1.5)
    s.line(ax, ay + 8 * ch, ax + 16 * cw, ay + 8 * ch, stroke=INK, sw=1)
    s.line(ax + 8 * cw, ay, ax + 8 * cw, ay + 16 * ch, stroke=INK, sw=1)
    s.text(ax + 8 * cw, ay - 12, "A  (16×16, M×K, f16, row-major): 4 registers of 2 halves per lane", 14, "middle", "bold")
    # B: 16 x 8 (K x N). b0,b1: (2t+{0,1}, g); b2,b3: (2t+8+{0,1}, g)
    for k in range(16):
        for n in range(8):
            g = n
            t, half_k = (k % 8) // 2, k // 8
            lane = 4 * g + t
            s.rect(bx + n * cw, by + k * ch, cw, ch, reg_fill[half_k], stroke="#fff", sw=1)
            s.text(bx + n * cw + cw / 2, by + k * ch + ch / 2 + 4, f"T{lane}", 10.5, "middle")
    s.rect(bx, by, 8 * cw, 16 * ch, sw=1.5)
    s.line(bx, by + 8 * ch, bx + 8 * cw, by + 8 * ch, stroke=INK, sw=1)
    s.text(bx + 8 * cw + 12, by + 20, "B  (16×8, K×N, f16, \"col\":", 14, weight="bold")
    s.text(bx + 8 * cw + 12, by + 40, "a lane's two halves are", 13)
    s.text(bx + 8 * cw + 12, by + 58, "consecutive in K)", 13)
    for k, what in enumerate(["b0,b1: rows 2t, 2t+1;   col g", "b2,b3: rows 2t+8, 2t+9; col g"]):
        s.rect(bx + 8 * cw + 12, by + 80 + 26 * k, 18, 18, reg_fill[k], stroke="#999")
        s.text(bx + 8 * cw + 40, by + 94 + 26 * k, what, 13, font=MONO)
    # C/D: 16 x 8 f32. c0,c1: (g, 2t+{0,1}); c2,c3: (g+8, 2t+{0,1})
    cx, cy = bx, ay
    for r in range(16):
        for n in range(8):
            g, half_r = r % 8, r // 8
            t = n // 2
            lane = 4 * g + t
            s.rect(cx + n * cw, cy + r * ch, cw, ch, reg_fill[half_r], stroke="#fff", sw=1)
            s.text(cx + n * cw + cw / 2, cy + r * ch + ch / 2 + 4, f"T{lane}", 10.5, "middle")
    s.rect(cx, cy, 8 * cw, 16 * ch, sw=1.5)
    s.line(cx, cy + 8 * ch, cx + 8 * cw, cy + 8 * ch, stroke=INK, sw=1)
    s.text(cx + 8 * cw + 12, cy + 20, "C, D  (16×8, M×N, f32)", 14, weight="bold")
    for k, what in enumerate(["c0,c1: row g,   cols 2t, 2t+1", "c2,c3: row g+8, cols 2t, 2t+1"]):
        s.rect(cx + 8 * cw + 12, cy + 40 + 26 * k, 18, 18, reg_fill[k], stroke="#999")
        s.text(cx + 8 * cw + 40, cy + 54 + 26 * k, what, 13, font=MONO)
    s.text(cx + 8 * cw + 12, cy + 110, "one f32 register per element", 13, fill=MUTED)
    # A legend, under the title of A's block
    lx, ly = ax, 110
    s.text(lx, ly, "A, per lane (colour = 32-bit register):", 14, weight="bold")
    rows = ["a0,a1: row g,   cols 2t, 2t+1", "a2,a3: row g+8, cols 2t, 2t+1",
            "a4,a5: row g,   cols 2t+8, 2t+9", "a6,a7: row g+8, cols 2t+8, 2t+9"]
    for k, what in enumerate(rows):
        s.rect(lx, ly + 14 + 26 * k, 18, 18, reg_fill[k], stroke="#999")
        s.text(lx + 28, ly + 28 + 26 * k, what, 13, font=MONO)
    notes = [
        "Why it matters for FlashAttention: a lane's C/D elements of S = QKᵀ",
        "(rows g and g+8) are the same rows it needs as the A operand of P·V.",
        "Two adjacent 16×8 S tiles, converted to f16 pairs, are exactly one",
        "16×16 A fragment: P never leaves registers.",
        "wmma::fragment hides this mapping (it is unspecified); mma.sync exposes it.",
    ]
    for k, line in enumerate(notes):
        s.text(lx, ly + 150 + 20 * k, line, 13.5, fill=INK if k < 4 else MUTED)
    s.write(path)


def swizzle128(path):
    s = Svg(980, 430, "The 128-byte swizzle: one 8-row atom, and the start addresses of wgmma descriptors")
    s.text(490, 32, "The 128-byte swizzle (TMA writes it, wgmma reads it): one atom of 8 rows × 128 bytes", 18,
           "middle", "bold")
    cw, ch, x0, y0 = 56, 34, 90, 90
    shades = ["#d7e6f5", "#c9e4c5", "#f8d9b0", "#efe3c6", "#e6d3ef", "#f3d0cc", "#d5efe9", "#eef0f3"]
    s.text(x0 + 4 * cw, y0 - 34, "16-byte chunk position in shared memory (bytes 16p .. 16p+15 of the row)", 13, "middle")
    for p in range(8):
        s.text(x0 + p * cw + cw / 2, y0 - 10, str(p), 13, "middle", font=MONO)
    for r in range(8):
        s.text(x0 - 12, y0 + r * ch + ch / 2 + 5, f"row {r}", 13, "end", font=MONO)
        for p in range(8):
            c = p ^ r  # the logical chunk stored at position p
            s.rect(x0 + p * cw, y0 + r * ch, cw, ch, shades[c], stroke="#888")
            s.text(x0 + p * cw + cw / 2, y0 + r * ch + ch / 2 + 5, f"c{c}", 13, "middle", font=MONO)
    s.rect(x0, y0, 8 * cw, 8 * ch, sw=1.5)
    s.text(x0 + 4 * cw, y0 + 8 * ch + 22, "c = logical chunk: columns 8c .. 8c+7 of the 64-column box", 13, "middle",
           fill=MUTED)
    s.text(x0 + 4 * cw, y0 + 8 * ch + 42, "chunk c of row r is stored at position c XOR r (address bits 4-6 ^= bits 7-9)",
           13, "middle", fill=MUTED)
    lx = x0 + 8 * cw + 34
    notes = [
        ("Same colour = same logical columns:", True),
        ("a column chunk of the 8 rows lands in 8", False),
        ("different bank groups (no conflicts).", False),
        ("", False),
        ("K-major operand (Q, K), k-slice kk:", True),
        ("start = box + 32·(kk mod 4) bytes, SBO = 1024;", False),
        ("the hardware swizzles the final addresses,", False),
        ("so the start moves by plain 32-byte steps.", False),
        ("", False),
        ("MN-major operand (V), 16 keys from 16·ks:", True),
        ("start = tile + 2048·ks, SBO = 1024 (8 keys),", False),
        ("LBO = distance to the next 64-column box.", False),
        ("", False),
        ("d = 128: a row of Q, K or V is two boxes;", True),
        ("the second starts rows × 128 bytes later.", False),
    ]
    for k, (line, bold) in enumerate(notes):
        s.text(lx, y0 + 6 + 21 * k, line, 13, weight="bold" if bold else "normal")
    s.write(path)


def mbarrier_ring(path):
    s = Svg(1000, 530, "The K/V ring of lesson 09: producer, slots, full and empty mbarriers, phase parities")
    s.text(500, 32, "A ring of STAGES slots (drawn: 2) between one producer and the consumer warpgroups", 18,
           "middle", "bold")
    blue, orange, green, grey = "#d7e6f5", "#f8d9b0", "#c9e4c5", "#eef0f3"
    # producer
    s.rect(30, 120, 180, 170, blue, rx=8)
    s.text(120, 150, "producer", 16, "middle", "bold")
    for k, line in enumerate(["warpgroup 0:", "1 thread issues", "every TMA copy", "(24 registers", "per thread)"]):
        s.text(120, 176 + 20 * k, line, 13.5, "middle")
    # consumers
    s.rect(790, 120, 180, 170, green, rx=8)
    s.text(880, 150, "consumers", 16, "middle", "bold")
    for k, line in enumerate(["warpgroups 1, 2:", "64 query rows each,", "wgmma + softmax", "(240 registers", "per thread)"]):
        s.text(880, 176 + 20 * k, line, 13.5, "middle")
    # slots
    for st in range(2):
        y = 80 + st * 150
        s.rect(330, y, 340, 110, grey, rx=6)
        s.text(500, y + 20, f"slot {st}", 14, "middle", "bold")
        s.rect(345, y + 32, 150, 62, orange, stroke="#888")
        s.text(420, y + 60, f"K tile", 13, "middle")
        s.text(420, y + 80, "Bc × d, swizzled", 12, "middle", fill=MUTED)
        s.rect(505, y + 32, 150, 62, orange, stroke="#888")
        s.text(580, y + 60, f"V tile", 13, "middle")
        s.text(580, y + 80, "Bc × d, swizzled", 12, "middle", fill=MUTED)
        # barriers
        s.rect(676, y + 18, 70, 28, "#fff", rx=14)
        s.text(711, y + 37, "full", 12.5, "middle", "bold")
        s.rect(254, y + 64, 70, 28, "#fff", rx=14)
        s.text(289, y + 83, "empty", 12.5, "middle", "bold")
        s.line(210, y + 40, 340, y + 40, arrow=True)
        s.line(746, y + 32, 788, y + 32 + (140 - y) * 0.25, arrow=True)
        yb = y + 124  # the release path runs below the slot
        s.line(790, y + 96 + (140 - y) * 0.2, 740, yb, dash="5,4")
        s.line(740, yb, 300, yb, dash="5,4")
        s.line(300, yb, 290, y + 94, arrow=True, dash="5,4")
        s.line(254, y + 78, 212, y + 78 + (160 - y) * 0.2, arrow=True, dash="5,4")
    s.text(275, 108, "TMA", 12.5, "middle", fill=MUTED)
    s.text(770, 74, "wait(full, parity)", 12.5, "middle", fill=MUTED)
    s.text(520, 220, "arrive (one per consumer warp, after its wgmma reads are done)", 12.5, "middle", fill=MUTED)
    s.text(500, 378, "(K and V each have their own full and empty barrier in every slot, so S can start before V lands)",
           12.5, "middle", fill=MUTED)
    rows = [
        "fill u of a slot (u = it / STAGES):",
        "  producer: if u > 0, wait(empty, parity (u - 1) mod 2); arrive.expect_tx(full, tile bytes); TMA -> full",
        "  consumers: wait(full, parity u mod 2); wgmma reads the tile; each warp arrives on empty",
        "A phase completes when its arrivals (full: 1; empty: 8 warps) and its expected bytes are all in; it then",
        "flips the parity. Waiting for parity p returns once the most recent phase of parity p has completed.",
    ]
    for k, line in enumerate(rows):
        s.text(40, 410 + 22 * k, line, 13.5, font=MONO if k < 3 else FONT, fill=INK if k < 3 else MUTED)
    s.write(path)


def pingpong(path):
    s = Svg(1000, 480, "Ping-pong between two consumer warpgroups, and softmax overlapped with the GEMMs inside one")
    s.text(500, 30, "Two consumer warpgroups take turns on the tensor cores (schematic, not to scale)", 18,
           "middle", "bold")
    gemm0, gemm1, soft = "#d7e6f5", "#c9e4c5", "#f8d9b0"
    x0, unit = 170, 90
    rows = [("tensor cores", 60), ("warpgroup 1", 110), ("warpgroup 2", 160)]
    for name, y in rows:
        s.text(x0 - 12, y + 24, name, 14, "end", "bold")
    # tensor core row: alternating GEMM turns
    turns = [("WG1: S_j+1, P_j V_j", gemm0), ("WG2: S_j+1, P_j V_j", gemm1)] * 4
    for k, (lab, col) in enumerate(turns[:8]):
        s.rect(x0 + k * unit, 60, unit, 36, col, stroke="#888")
        s.text(x0 + k * unit + unit / 2, 83, lab.split(":")[0], 12.5, "middle")
    for k in range(8):
        y = 110 if k % 2 == 0 else 160
        other = 160 if k % 2 == 0 else 110
        s.rect(x0 + k * unit, y, unit, 36, gemm0 if k % 2 == 0 else gemm1, stroke="#888")
        s.text(x0 + k * unit + unit / 2, y + 23, "issue, wait", 12, "middle")
        s.rect(x0 + k * unit, other, unit, 36, soft, stroke="#888")
        s.text(x0 + k * unit + unit / 2, other + 23, "softmax", 12, "middle")
    s.line(x0, 215, x0 + 8 * unit, 215, arrow=True)
    s.text(x0 + 8 * unit + 6, 219, "time", 13)
    s.text(x0, 240, "Named barriers 1 and 2 pass the turn: bar.sync on my barrier before issuing, bar.arrive on the", 13.5)
    s.text(x0, 260, "other's after issuing. While one warpgroup's exponentials run, the other's GEMMs have the tensor cores.",
           13.5)
    # intra-warpgroup overlap
    s.text(40, 310, "Inside one warpgroup (step 5): one turn issues two GEMMs, waits for the first only", 15, weight="bold")
    y = 330
    items = [("issue S_j+1 = Q K_j+1ᵀ", gemm0, 2), ("issue O += P_j V_j", gemm1, 2), ("wait<1> (S_j+1 done)", "#fff", 1.6),
             ("softmax of S_j+1 (while P_j V_j runs)", soft, 3.4), ("wait<0>", "#fff", 0.9), ("rescale O, P_j+1", soft, 1.6)]
    x, u = 40, 78
    for lab, col, w in items:
        s.rect(x, y, w * u, 40, col, stroke="#888")
        s.text(x + w * u / 2, y + 25, lab, 12, "middle")
        x += w * u
    s.rect(40 + 5.6 * u, y + 50, 4.3 * u, 26, gemm1, stroke="#888")
    s.text(40 + 5.6 * u + 4.3 * u / 2, y + 68, "tensor cores: P_j V_j", 12, "middle")
    s.text(40, 440, "P_j V_j needs P_j, computed in the previous turn; the softmax of S_j+1 needs only S_j+1. So the two", 13.5)
    s.text(40, 460, "can run at once, at the cost of registers for S_j+1 and P_j together (why the consumers take 240).",
           13.5)
    s.write(path)


def backward_loop(path):
    """FlashAttention-2's backward (Algorithm 2): a block per K_j, V_j; the query tiles stream past."""
    s = Svg(1000, 720, "The backward pass of FlashAttention-2: one block per K_j, V_j, query tiles streaming past")
    s.text(500, 32, "The backward pass (Algorithm 2) of one (batch, head): the block of key tile j", 20, "middle", "bold")
    c, T = 32, 8           # block size on screen, Tr shown
    d = 2.0 * c            # head dimension on screen
    blue, orange, green, grey, red = "#d7e6f5", "#f8d9b0", "#c9e4c5", "#eef0f3", "#f3d0cc"
    j_hl, i_hl = 2, 4
    # query side: Q, dO, L and D, streamed
    qx, y0 = 70, 110
    for name, x in (("Q", qx), ("dO", qx + d + 22)):
        for i in range(T):
            fill = blue if i == i_hl else ("#ffffff" if i < j_hl else grey)
            s.rect(x, y0 + i * c, d, c, fill, stroke="#999")
        s.text(x + d / 2, y0 - 10, name + "  (N×d)", 14, "middle", "bold")
    lx = qx + 2 * d + 44
    for i in range(T):
        s.rect(lx, y0 + i * c, 20, c, blue if i == i_hl else ("#ffffff" if i < j_hl else grey), stroke="#999")
        s.rect(lx + 26, y0 + i * c, 20, c, blue if i == i_hl else ("#ffffff" if i < j_hl else grey), stroke="#999")
    s.text(lx + 23, y0 - 10, "L, D", 14, "middle", "bold")
    s.text(qx - 8, y0 + i_hl * c + c / 2 + 5, "Q_i", 13, "end", "bold")
    s.line(qx - 40, y0 + j_hl * c + 4, qx - 40, y0 + T * c - 4, arrow=True, sw=1.8)
    s.add(f'<text x="{qx - 48}" y="{y0 + (j_hl + T) * c / 2:g}" font-family="{FONT}" font-size="13" '
          f'text-anchor="middle" transform="rotate(-90 {qx - 48} {y0 + (j_hl + T) * c / 2:g})">inner loop i</text>')
    s.text(qx, y0 + T * c + 22, "white: rows before the block's first key,", 12.5, fill=MUTED)
    s.text(qx, y0 + T * c + 40, "skipped when causal", 12.5, fill=MUTED)
    # the block: K_j, V_j resident, dK_j, dV_j accumulated
    bx, by = 430, 96
    s.rect(bx - 16, by - 8, 540, 300, "#fbfbfd", stroke="#8a8fa0", rx=8, extra=' stroke-dasharray="5 3"')
    s.text(bx, by + 12, "thread block for key tile j (shared memory + registers)", 14, weight="bold")
    for k, (name, fill, note) in enumerate([("K_j, V_j", orange, "loaded once, kept for the whole loop"),
                                             ("Q_i, dO_i, L_i, D_i", blue, "one query tile per step"),
                                             ("dK_j, dV_j", green, "registers; written to HBM once, at the end")]):
        yy = by + 36 + 34 * k
        s.rect(bx, yy, 130, 24, fill, stroke="#999")
        s.text(bx + 65, yy + 17, name, 13, "middle", "bold")
        s.text(bx + 142, yy + 17, note, 13)
    steps = ["S   = scale Q_i K_jᵀ          P = exp(S - L_i)   (masked: 0)",
             "dV_j += Pᵀ dO_i",
             "dP  = dO_i V_jᵀ               dS = P ∘ (dP - D_i)",
             "dK_j += scale dSᵀ Q_i",
             "dQ_i += scale dS K_j     → added into HBM (atomics)"]
    for k, line in enumerate(steps):
        s.add(f'<text x="{bx + 4}" y="{by + 158 + 24 * k}" font-family="{MONO}" font-size="13.5" fill="{INK}" '
              f'xml:space="preserve">{line}</text>')
    # dQ in HBM, with arrows from several blocks
    gx, gy = 800, 430
    for i in range(T):
        s.rect(gx, gy + i * 22, d, 22, red if i == i_hl else grey, stroke="#999")
    s.text(gx + d / 2, gy - 10, "dQ in HBM (fp32)", 14, "middle", "bold")
    s.line(bx + 340, by + 270, gx + 4, gy + i_hl * 22 + 11, arrow=True, sw=1.6)
    for k, dy in enumerate((-60, -30)):
        s.line(gx - 150, gy + i_hl * 22 + 11 + dy, gx - 4, gy + i_hl * 22 + 11, arrow=True, sw=1.1, dash="4 3",
               stroke="#888")
    s.text(gx - 156, gy + i_hl * 22 - 52, "the other key blocks", 12.5, "end", fill=MUTED)
    s.text(gx - 156, gy + i_hl * 22 - 34, "add into the same rows", 12.5, "end", fill=MUTED)
    # the preprocessing and the loop in pseudo-code
    code = [
        "D = rowsum(dO ∘ O)                       # preprocessing: one dot product per row",
        "for j in 0 .. Tc-1:                      # parallel: one thread block per Bc keys",
        "    load K_j, V_j;  dK_j = dV_j = 0",
        "    for i in i_start .. Tr-1:            # i_start = 0, or the tile of row j·Bc when causal",
        "        load Q_i, dO_i, L_i, D_i",
        "        P = exp(scale Q_i K_jᵀ - L_i);  dV_j += Pᵀ dO_i",
        "        dS = P ∘ (dO_i V_jᵀ - D_i);  dK_j += scale dSᵀ Q_i;  dQ_i += scale dS K_j",
        "    write dK_j, dV_j",
    ]
    cy = 520
    s.rect(40, cy - 6, 700, 22 * len(code) + 18, "#f4f5f7", stroke="#ccc", rx=6)
    for k, line in enumerate(code):
        s.add(f'<text x="52" y="{cy + 16 + 22 * k}" font-family="{MONO}" font-size="12.5" fill="{INK}" '
              f'xml:space="preserve">{line}</text>')
    s.write(path)


def wgmma_descriptors(path):
    """Lesson 09: the two canonical operand layouts of wgmma over the tiles TMA writes."""
    s = Svg(1040, 620, "What a wgmma descriptor describes: a K-major and an MN-major operand in the layout TMA writes")
    s.text(520, 30, "Two wgmma operands in the same TMA layout (byte addresses before the swizzle)", 18, "middle", "bold")
    orange, grey = "#f8d9b0", "#eef0f3"
    cw = 19  # one 16-byte chunk

    def box(x, y, rows, rh, label, hl):  # hl(r, c): is chunk c of row r part of the operand?
        for r in range(rows):
            for c in range(8):
                s.rect(x + c * cw, y + r * rh, cw, rh, orange if hl(r, c) else grey, stroke="#fff", sw=0.6)
        for r in range(0, rows + 1, 8):
            s.line(x, y + r * rh, x + 8 * cw, y + r * rh, stroke="#666", sw=1.2)
        s.rect(x, y, 8 * cw, rows * rh, "none", stroke=INK, sw=1.2)
        s.text(x + 4 * cw, y + rows * rh + 16, "⋮", 14, "middle")
        s.text(x + 4 * cw, y - 10, label, 12.5, "middle", "bold")

    def dot(x, y):
        s.add(f'<circle cx="{x:g}" cy="{y:g}" r="4.5" fill="{INK}"/>')

    def notes(x, y, lines):
        for k, line in enumerate(lines):
            s.text(x, y + 20 * k, line, 12.5, fill=INK if k == 0 else MUTED)

    # K-major: Q_i or K_j, k-slice kk = 5 (box 1, bytes 32..63 of every row)
    x0, y0, rh, rows = 50, 130, 8, 24
    s.text(255, 64, "K-major: Q_i or K_j, k-slice kk = 5 (columns 80..95)", 15, "middle", "bold")
    s.text(255, 84, "rows × 16 columns: 2 chunks (32 bytes) of every row", 12.5, "middle", fill=MUTED)
    box(x0, y0, rows, rh, "box 0: columns 0-63", lambda r, c: False)
    bx = x0 + 8 * cw + 50
    box(bx, y0, rows, rh, "box 1: columns 64-127", lambda r, c: c in (2, 3))
    s.text(x0 + 8 * cw + 25, y0 + 100, "then", 12, "middle", fill=MUTED)
    dot(bx + 2 * cw, y0)
    ax = bx + 8 * cw + 10
    s.line(ax, y0, ax, y0 + 8 * rh, arrow=True, sw=1.3)
    s.text(ax + 6, y0 + 4 * rh - 2, "SBO = 1024 B", 12.5)
    s.text(ax + 6, y0 + 4 * rh + 14, "(next 8 rows)", 12.5, fill=MUTED)
    notes(x0, y0 + rows * rh + 46, ["● start = tile + (kk / 4)·rows·128 + row0·128 + 32·(kk mod 4)",
                                    "The 16 values of k lie inside one 128-byte row:",
                                    "the instruction never steps in K, so LBO is unused (1)."])

    # MN-major: V_j, keys 16 ks .. 16 ks + 15 with ks = 1, all 128 columns
    x1, rh1, rows1 = 560, 6, 32
    s.text(775, 64, "MN-major: V_j, keys 16..31 (ks = 1), all of d = 128", 15, "middle", "bold")
    s.text(775, 84, "16 keys × 128 columns: 16 whole rows of both boxes", 12.5, "middle", fill=MUTED)
    hl = lambda r, c: 16 <= r < 32
    box(x1, y0, rows1, rh1, "box 0: columns 0-63", hl)
    bx1 = x1 + 8 * cw + 50
    box(bx1, y0, rows1, rh1, "box 1: columns 64-127", hl)
    dot(x1, y0 + 16 * rh1)
    ly = y0 + 24 * rh1
    s.line(x1 + 8 * cw + 4, ly, bx1 - 4, ly, arrow=True, sw=1.3)
    s.text(x1 + 8 * cw + 25, ly - 8, "LBO", 12.5, "middle", "bold")
    ax1 = bx1 + 8 * cw + 10
    s.line(ax1, y0 + 16 * rh1, ax1, y0 + 24 * rh1, arrow=True, sw=1.3)
    s.text(ax1 + 6, y0 + 20 * rh1 - 2, "SBO = 1024 B", 12.5)
    s.text(ax1 + 6, y0 + 20 * rh1 + 14, "(next 8 keys)", 12.5, fill=MUTED)
    notes(x1, y0 + rows * rh + 46, ["● start = tile + 2048·ks (16 rows of 128 bytes)",
                                    "LBO = B_c·128 bytes, one box: from columns 0-63",
                                    "of d to 64-127 (so only d = 128 needs it)."])

    # the two canonical layouts and TMA's, as formulas
    fy = 470
    s.rect(30, fy - 22, 980, 150, "#f4f5f7", stroke="#ccc", rx=6)
    lines = [
        "K-major  (m: row of M or N, k &lt; 16):  byte = start + 128·(m mod 8) + SBO·(m / 8) + 2·k",
        "MN-major (n: column of N,   k &lt; 16):  byte = start + 2·(n mod 64) + LBO·(n / 64)",
        "                                                   + 128·(k mod 8) + SBO·(k / 8)",
        "TMA's tile (row r, column c):         byte = (c / 64)·rows·128 + 128·r + 2·(c mod 64)",
        "Then both swap 16-byte chunks: address bits 4-6 ^= bits 7-9 (every tile starts on 1024 bytes).",
    ]
    for k, line in enumerate(lines):
        s.add(f'<text x="46" y="{fy + 6 + 26 * k}" font-family="{MONO}" font-size="13" fill="{INK}" '
              f'xml:space="preserve">{line}</text>')
    s.write(path)

def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    memory_hierarchy(os.path.join(out, "memory-hierarchy.svg"))
    tiling(os.path.join(out, "tiling-loop-nest.svg"))
    causal(os.path.join(out, "causal-blocks.svg"))
    mma(os.path.join(out, "mma-m16n8k16.svg"))
    swizzle128(os.path.join(out, "swizzle-128b.svg"))
    mbarrier_ring(os.path.join(out, "mbarrier-ring.svg"))
    pingpong(os.path.join(out, "pingpong.svg"))
    backward_loop(os.path.join(out, "backward-loop.svg"))
    wgmma_descriptors(os.path.join(out, "wgmma-descriptors.svg"))


if __name__ == "__main__":
    main()
