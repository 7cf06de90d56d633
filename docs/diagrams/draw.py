#!/usr/bin/env python3
"""draw.py: write the course diagrams as SVG (standard library only, deterministic).

    python3 docs/diagrams/draw.py [OUTDIR]     (default: the folder of this script)

memory-hierarchy.svg   where data lives on an H100 and what FlashAttention keeps at each level
tiling-loop-nest.svg   Q_i, K_j, V_j, S_ij, O_i and the two loops of FlashAttention-2 Algorithm 1
causal-blocks.svg      which Br x Bc blocks a causal kernel computes fully, masks, or skips
mma-m16n8k16.svg       which lane holds which element of mma.sync m16n8k16 (f16 A/B, f32 C/D)

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


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    memory_hierarchy(os.path.join(out, "memory-hierarchy.svg"))
    tiling(os.path.join(out, "tiling-loop-nest.svg"))
    causal(os.path.join(out, "causal-blocks.svg"))
    mma(os.path.join(out, "mma-m16n8k16.svg"))


if __name__ == "__main__":
    main()
