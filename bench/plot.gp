# bench/plot.gp: the benchmark charts (SVG). Driven by bench/plot.sh, which splits the
# CSV into one whitespace-separated file per series under `datadir` (first line:
# `N "title"`) and sets:
#   kind     "time" | "memory" | "ladder"
#   datadir  folder of the series files (*.dat), drawn in name order
#   out      the SVG to write
#   heading  the chart title (GPU and shape family)
#   capmib   (memory) the GPU's memory in MiB, drawn as a line; 0 for none
#   ylab     (time) the y-axis label; "" for the forward's
# Series whose file name starts with "0-" (standard attention) are dashed and
# "2-" (PyTorch peers) dotted; the flash lessons are solid.

set terminal svg size 960,680 dynamic font "sans,13" background rgb "white"
set output out
set title heading noenhanced
set key below noenhanced width 2
set grid lc rgb "#dddddd"
set border lc rgb "#555555"

files = system("ls " . datadir . "/*.dat 2>/dev/null")
nf = words(files)
style(f) = strstrt(f, "/0-") ? 2 : strstrt(f, "/2-") ? 3 : 1
# Standard attention keeps its colours (1 fp32, 2 fp16, 3 bf16) on every chart, its
# out-of-memory points included; the other series take 4, 5, ... in file order.
fixed(f) = strstrt(f, "standard-fp32") ? 1 : strstrt(f, "standard-fp16") ? 2 : strstrt(f, "standard-bf16") ? 3 : 0
colour(i) = fixed(word(files, i)) ? fixed(word(files, i)) : 3 + i
set linetype 1 lc rgb "#d62728"
set linetype 2 lc rgb "#1f77b4"
set linetype 3 lc rgb "#9467bd"
array palette[14] = ["#2ca02c", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22", \
                     "#7f7f7f", "#000000", "#aec7e8", "#ffbb78", "#98df8a", "#c49c94", "#f7b6d2", "#9edae5"]
do for [k = 1:14] { set linetype (3 + k) lc rgb palette[k] }
set linetype cycle 17

if (kind eq "time") {
    set logscale x 2
    set logscale y
    set xlabel "sequence length N  (B = max(1, 16384/N), H*d = 2048)"
    set ylabel (ylab ne "" ? ylab : "time per forward pass (ms, median)")
    set format x "%.0f"
    plot for [i = 1:nf] word(files, i) using 1:2 with linespoints \
         lc colour(i) dt style(word(files, i)) lw 2 pt 7 ps 0.7 title columnheader(2)
}

if (kind eq "memory") {
    set logscale x 2
    set logscale y
    set xlabel "sequence length N  (B = 1, H = 32, d = 64)"
    set ylabel "device memory held by the method, inputs and outputs (MiB)"
    set format x "%.0f"
    # "oom-" series: the bytes standard attention asked for and could not get.
    isoom(f) = strstrt(f, "/0-oom-") > 0
    if (capmib > 0) {
        set arrow from graph 0, first capmib to graph 1, first capmib nohead dt 3 lc rgb "#cc0000"
        set label "GPU memory" at graph 0.02, first capmib offset 0, 0.6 tc rgb "#cc0000"
    }
    plot for [i = 1:nf] word(files, i) using 1:2 with linespoints lc colour(i) dt style(word(files, i)) \
         lw (isoom(word(files, i)) ? 1 : 2) pt (isoom(word(files, i)) ? 6 : 7) \
         ps (isoom(word(files, i)) ? 1.5 : 0.7) title columnheader(2)
}

if (kind eq "ladder") {
    # One file: label, TFLOP/s, group (1 standard, 2 flash lessons, 3 PyTorch).
    set style fill solid 0.85 border -1
    set boxwidth 0.7
    set xtics rotate by -35 left nomirror noenhanced
    set ylabel "TFLOP/s (4 B H N^2 d / time; log scale)" noenhanced
    set logscale y
    set yrange [*:*]
    set offsets 0, 0, graph 0.08, 0
    set key noautotitle
    unset key
    set linetype 11 lc rgb "#999999"
    set linetype 12 lc rgb "#1f77b4"
    set linetype 13 lc rgb "#ff7f0e"
    plot files using 0:2:($3 + 10):xtic(1) with boxes lc variable, \
         files using 0:2:(sprintf("%.1f", $2)) with labels offset 0, 0.7 font ",10"
}
