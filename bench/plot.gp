# The benchmark report's plot: median ratio to unconfined per operation,
# one bar per sandbox. Called by bench/run:
#   gnuplot -e "dat='ratios.dat'; out='benchmarks.png'" bench/plot.gp
set terminal pngcairo size 1200,560 font ",10"
set output out
set datafile missing "?"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set title "Time in a job, as a ratio to unconfined (median over rounds; 1.0 = no overhead)"
set ylabel "ratio to unconfined"
set yrange [0:*]
set grid ytics
set xtics rotate by -30 scale 0 nomirror
set key top left
plot dat using 2:xtic(1) title "confine", \
     '' using 3 title "confine (audit)", \
     '' using 4 title "bubblewrap", \
     '' using 5 title "sandbox-runtime"
