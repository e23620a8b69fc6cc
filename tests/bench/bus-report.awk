# bus-report.awk - turns the CSV files that tests/bench/run-bus collects from
# bus-bench (one row per boot) into results.md: the conditions, then one
# table per benchmark with the median over the boots and, since boot-to-boot
# spread under TCG is large, brokerd's advantage boot by boot (the other
# bus's figure over brokerd's for latencies, brokerd's over the other's for
# rates). Also writes the plot data (rtt-p50.dat, fanout-SIZE.dat, a header
# line of bus names for gnuplot's columnhead) to outdir.
#
# awk -F, -v env=ENV.txt -v outdir=DIR -f bus-report.awk rtt.csv fanout.csv ctrl.csv mem.csv boot-*.log

function median(s, n,    a, i, j, t, k) {
	n = split(s, a, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	if (n == 0)
		return ""
	k = int((n + 1) / 2)
	return n % 2 ? a[k] : (a[k] + a[k + 1]) / 2
}
function add(list, item) { return index(" " list " ", " " item " ") ? list : (list == "" ? item : list " " item) }
# the median of column c of table t at key over the boots where it was ok
function med(t, key, c,    b, s) {
	s = ""
	for (b = 1; b <= boots; b++)
		if (status[t, key, b] == "ok")
			s = s " " val[t, key, b, c]
	return s == "" ? "" : median(s)
}
# "ok" when the row was ok in some boot (the medians use those boots, the
# per-boot columns show "-" for the others), else the first boot's status
function state(t, key,    b, first) {
	first = ""
	for (b = 1; b <= boots; b++) {
		if (status[t, key, b] == "ok")
			return "ok"
		if (first == "" && status[t, key, b] != "")
			first = status[t, key, b]
	}
	return first == "" ? "missing" : first
}
# per boot: x / brokerd (dir 1) or brokerd / x (dir -1) of column c
function ratios(t, key, bkey, c, dir,    b, s, x, y) {
	s = ""
	for (b = 1; b <= boots; b++) {
		x = val[t, key, b, c] + 0; y = val[t, bkey, b, c] + 0
		if (status[t, key, b] != "ok" || status[t, bkey, b] != "ok" || x == 0 || y == 0)
			r = "-"
		else
			r = sprintf("%.2f", dir > 0 ? x / y : y / x)
		s = s (b > 1 ? " / " : "") r
	}
	return s
}
function fmt(x) { return x == "" ? "" : (x + 0 >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x)) }

FNR == 1 { file = FILENAME; sub(/.*\//, "", file); sub(/\.csv$/, "", file) }
/^boot,/ { next }
/^@env,/ {
	if (!(($2) in envv)) envv[$2] = $3
	if ($2 == "vcpus") vcpus = add(vcpus, $3)
	next
}
/^@/ || /^image\// { next }
file == "rtt" || file == "ctrl" || file == "mem" || file == "fanout" {
	b = $1; if (b > boots) boots = b
	if (file == "fanout") {
		key = $3 SUBSEP $4 SUBSEP $2; st = $6; first = 7
		subs_l = add(subs_l, $3); fsize_l = add(fsize_l, $4); fbus_l = add(fbus_l, $2)
		count[file, key] = $5
	} else if (file == "mem") {
		key = $2; st = $4; first = 5; count[file, key] = $3
		mbus_l = add(mbus_l, $2)
	} else {
		key = $3 SUBSEP $2; st = $5; first = 6; count[file, key] = $4
		if (file == "rtt") { size_l = add(size_l, $3); rbus_l = add(rbus_l, $2) }
		else { cbus_l = add(cbus_l, $2); if (!seenop[$2, $3]++) oprow[$2, ++nop[$2]] = $3 }
	}
	status[file, key, b] = st
	for (c = first; c <= NF; c++)
		val[file, key, b, c - first + 1] = $c
}

END {
	while ((getline line < env) > 0) {
		conditions = conditions "- " line "\n"
		if (match(line, /accelerator [^,]+/))
			accel = add(accel, substr(line, RSTART + 12, RLENGTH - 12))
	}
	cond = sprintf("_%s vCPUs, %s, processes unpinned, %d boot(s), %s mode; counts per run in the table._\n\n",
		vcpus, accel == "" ? "accelerator unknown" : accel, boots, envv["mode"])
	printf "# bus-bench results\n\n"
	printf "Conditions: guest vCPUs %s, accelerator %s, %s; processes %s; %d boot(s), one guest at a time, every bus in each boot, one bus after the other for each parameter; figures are medians over the boots, brokerd's advantage is given boot by boot. CPU is user+system time of every process involved (clients, servers, subscribers, the broker) from /proc/PID/stat, in 10 ms ticks.\n\n", vcpus, accel, envv["mode"] " mode", envv["placement"], boots
	printf "%s\n", conditions

	n = split(size_l, sizes, " "); nb = split(rbus_l, rb, " ")
	printf "## Method call round trip\n\nEcho of an `ay` body, one caller, one server (its reply carries the same bytes back); µs.\n\n%s", cond
	printf "| size | bus | calls | min | p50 | p90 | p99 | p99.9 | max | CPU µs/call | p50 vs brokerd, per boot |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
	for (i = 1; i <= n; i++) {
		line = sizes[i]
		for (j = 1; j <= nb; j++) {
			key = sizes[i] SUBSEP rb[j]; s = state("rtt", key)
			if (s != "ok") {
				printf "| %s | %s | %s | %s | | | | | | | |\n", sizes[i], rb[j], count["rtt", key], s
				line = line " NaN"
				continue
			}
			printf "| %s | %s | %s |", sizes[i], rb[j], count["rtt", key]
			for (c = 1; c <= 7; c++)
				printf " %s |", fmt(med("rtt", key, c))
			printf " %s |\n", rb[j] == "brokerd" ? "1" : ratios("rtt", key, sizes[i] SUBSEP "brokerd", 2, 1)
			line = line " " med("rtt", key, 2)
		}
		dat = dat line "\n"
	}
	hdr = "size"; for (j = 1; j <= nb; j++) hdr = hdr " " rb[j]
	printf "%s\n%s", hdr, dat > (outdir "/rtt-p50.dat")

	ns = split(subs_l, subs, " "); nz = split(fsize_l, fz, " "); nf = split(fbus_l, fb, " ")
	printf "\n## Signal fan-out\n\nOne emitter, N subscribers; the emitter waits for every subscriber's acknowledgement every %s signals (the same window on every bus). Rate: delivered signals per second (all subscribers together); latency from emit to the subscriber's handler, µs; lost: signals emitted and never delivered, summed over the boots; context switches (voluntary and not: a wake-up each when voluntary) of the emitter per signal sent and of the subscribers per signal delivered (empty in boots from before they were counted). The row shm-ring is no bus but the floor: the same processes and window on a shared-memory broadcast ring (a memfd of 32 slots, a futex to sleep on); the last column is its rate over this row's in the same boot, how many times slower than the floor the bus is (- where a boot has no shm-ring row).\n\n%s", envv["window"], cond
	printf "| subscribers | size | bus | signals | delivered/s | latency p50 | latency p99 | lost | CPU µs/delivered | emitter csw/signal | subscriber csw/delivered | brokerd's rate / this, per boot | shm-ring's rate / this, per boot |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n"
	for (z = 1; z <= nz; z++) {
		dat = ""
		for (i = 1; i <= ns; i++) {
			line = subs[i]
			for (j = 1; j <= nf; j++) {
				key = subs[i] SUBSEP fz[z] SUBSEP fb[j]; s = state("fanout", key)
				if (s != "ok") {
					printf "| %s | %s | %s | %s | %s | | | | | | | | |\n", subs[i], fz[z], fb[j], count["fanout", key], s
					line = line " NaN"
					continue
				}
				lost = 0
				for (b = 1; b <= boots; b++) lost += val["fanout", key, b, 2]
				printf "| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", subs[i], fz[z], fb[j],
					count["fanout", key], fmt(med("fanout", key, 3)), fmt(med("fanout", key, 4)),
					fmt(med("fanout", key, 5)), lost, sprintf("%.2f", med("fanout", key, 6)),
					sprintf("%.2f", med("fanout", key, 8)), sprintf("%.2f", med("fanout", key, 9)),
					fb[j] == "brokerd" ? "1" : ratios("fanout", key, subs[i] SUBSEP fz[z] SUBSEP "brokerd", 3, -1),
					fb[j] == "shm-ring" ? "1" : ratios("fanout", key, subs[i] SUBSEP fz[z] SUBSEP "shm-ring", 3, -1)
				line = line " " med("fanout", key, 3)
			}
			dat = dat line "\n"
		}
		hdr = "subscribers"; for (j = 1; j <= nf; j++) hdr = hdr " " fb[j]
		printf "%s\n%s", hdr, dat > (outdir "/fanout-" fz[z] ".dat")
	}

	nc = split(cbus_l, cb, " ")
	printf "\n## Control plane\n\nOne connection doing the operation over and over (connect+HELLO: a new connection each time), only the operation timed (names released, subscriptions and matches removed in between, untimed). OPEN_CALL is compared with GetNameOwner, what a D-Bus client asks to reach a name.\n\n%s", cond
	printf "| operation | bus | count | per second | p50 µs | brokerd's rate / this, per boot |\n|---|---|---:|---:|---:|---|\n"
	for (o = 1; o <= nop["brokerd"]; o++)
		for (j = 1; j <= nc; j++) {
			op = oprow[cb[j], o]; key = op SUBSEP cb[j]; bkey = oprow["brokerd", o] SUBSEP "brokerd"
			s = state("ctrl", key)
			if (s != "ok") {
				printf "| %s | %s | %s | %s | | |\n", op, cb[j], count["ctrl", key], s
				continue
			}
			printf "| %s | %s | %s | %s | %s | %s |\n", op, cb[j], count["ctrl", key], fmt(med("ctrl", key, 1)),
				fmt(med("ctrl", key, 2)), cb[j] == "brokerd" ? "1" : ratios("ctrl", key, bkey, 1, -1)
		}

	nm = split(mbus_l, mb, " ")
	printf "\n## Memory per connection\n\nVmRSS of the broker process before and after opening N idle connections (after HELLO), from one client process.\n\n%s", cond
	printf "| bus | connections | VmRSS before, kB | after, kB | kB per 100 connections | per boot |\n|---|---:|---:|---:|---:|---|\n"
	for (j = 1; j <= nm; j++) {
		key = mb[j]; s = state("mem", key)
		if (s != "ok") {
			printf "| %s | %s | %s | | | |\n", mb[j], count["mem", key], s
			continue
		}
		pb = ""
		for (b = 1; b <= boots; b++)
			pb = pb (b > 1 ? " / " : "") (status["mem", key, b] == "ok" ? val["mem", key, b, 3] : "-")
		printf "| %s | %s | %s | %s | %s | %s |\n", mb[j], count["mem", key], fmt(med("mem", key, 1)),
			fmt(med("mem", key, 2)), fmt(med("mem", key, 3)), pb
	}
}
