# bus-plots.gp - the plots of tests/bench/run-bus from the data files that
# bus-report.awk writes: round-trip p50 by payload size, and delivered
# signals per second by subscriber count at each signal size; one line per
# bus (a bus that cannot carry a size has no point there), and on the
# fan-out plots the floor, the shared-memory ring (shm-ring), dashed.
# gnuplot -e "dir='build/bench/...'" bus-plots.gp

set terminal pngcairo size 900,560 noenhanced
set key outside right top
set grid
set logscale xy
set datafile missing "NaN"
set style data linespoints
# lines in a data file (its header counts one): a table a partial run
# (run-bus --fanout-only) did not make has no plot
lines(f) = int(system("cat '".f."' 2>/dev/null | wc -l"))

if (lines(dir."/rtt-p50.dat") > 1) {
	set output dir."/rtt-p50.png"
	set title "Method call round trip, p50 (median over boots)"
	set xlabel "payload bytes"
	set ylabel "µs"
	set xtics ("64" 64, "1 KiB" 1024, "16 KiB" 16384, "1 MiB" 1048576)
	plot for [c=2:6] dir."/rtt-p50.dat" using 1:c title columnhead(c) lw 2
}

set xtics auto
set xtics ("1" 1, "4" 4, "16" 16, "64" 64, "200" 200)
set xlabel "subscribers"
set ylabel "delivered signals per second"
do for [s in "64 1024 16384"] {
	if (lines(dir."/fanout-".s.".dat") <= 1) { continue }
	set output dir."/fanout-".s.".png"
	set title "Signal fan-out, ".s." B signals (median over boots)"
	f = dir."/fanout-".s.".dat"
	hdr = system("head -n1 '".f."'")
	# every row of the table, the floor among them; a data file without it plots as before
	plot for [c=2:words(hdr)] f using 1:c title columnhead(c) lw 2 dt 1 + (word(hdr, c) eq "shm-ring")
}
