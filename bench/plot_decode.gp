# bench/plot_decode.gp: the bandwidth chart of a decode sweep (make bench-decode).
#   gnuplot -e "dir='build/decode-plot/X'; out='docs/results/X-bandwidth.svg'" bench/plot_decode.gp
# dir holds what bench/decode_summary.py wrote: meta.gp (copy, npanels, panel titles) and
# p<panel>-<method>.dat ("N_kv GB/s" lines). One panel per B H_kv: GB/s of K and V read against
# the KV length for lesson 12, its -DFD_SPLITS=1 build and PyTorch's SDPA backends, with the
# device-to-device copy of 1 GiB of the same run drawn as the roofline (and 90% of it, the
# target), and the copies of as many bytes as each shape's K and V (read + write GB/s).
load dir.'/meta.gp'
cols = (npanels > 2) ? 2 : npanels
rows = (npanels + cols - 1) / cols
set terminal svg size 600 * cols, 440 * rows + 40 dynamic font "sans,11" background "white"
set output out
set datafile missing "nan"
set logscale x 2
set xtics ("4k" 4096, "8k" 8192, "16k" 16384, "32k" 32768, "64k" 65536, "128k" 131072)
set xrange [3000:180000]
set yrange [0:copy * 1.15]
set grid ytics lc rgb "#dddddd"
set key below maxrows 3 font ",9" samplen 2
set xlabel "KV length (keys per sequence)"
set ylabel "K and V read, GB/s"
set multiplot layout rows, cols title sprintf("Decoding on the %s: %s", gpu, what) font ",13"
do for [i = 0:npanels - 1] {
    set title value(sprintf("panel%d", i))
    plot copy w l lw 2 lc rgb "#000000" dt 1 title sprintf("device-to-device copy, %.0f GB/s", copy), \
         0.9 * copy w l lw 1 lc rgb "#888888" dt 2 title "90% of the copy", \
         sprintf("%s/p%d-12-flash-decoding.dat", dir, i) u 1:2 w lp lw 2 pt 7 lc rgb "#d62728" title "lesson 12", \
         sprintf("%s/p%d-12-flash-decoding-splits1.dat", dir, i) u 1:2 w lp lw 1 pt 6 lc rgb "#ff9896" title "lesson 12, FD\\_SPLITS=1", \
         sprintf("%s/p%d-torch-flash.dat", dir, i) u 1:2 w lp lw 1 pt 5 lc rgb "#1f77b4" title "SDPA flash", \
         sprintf("%s/p%d-torch-cudnn.dat", dir, i) u 1:2 w lp lw 1 pt 9 lc rgb "#2ca02c" title "SDPA cuDNN", \
         sprintf("%s/p%d-torch-efficient.dat", dir, i) u 1:2 w lp lw 1 pt 11 lc rgb "#9467bd" title "SDPA efficient", \
         sprintf("%s/p%d-read-same.dat", dir, i) u 1:2 w lp lw 1 dt 3 pt 2 lc rgb "#555555" title "read of the same bytes"
}
unset multiplot
