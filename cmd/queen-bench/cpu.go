package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSample is the CPU time used so far by the broker (-pid), the whole
// PostgreSQL cluster (-pg-pid: the postmaster, its live children and the
// children it reaped) and this bench; -1 where unknown. The difference of
// two samples divided by the messages of a run is the CPU each process
// spent per message, a figure that moves far less with the machine's other
// load than the rates do.
type cpuSample struct {
	broker, pg, self time.Duration
}

func (b *bench) sampleCPU() cpuSample {
	s := cpuSample{broker: ticksToDuration(cpuTicks(b.cfg.PID)), pg: ticksToDuration(clusterTicks(b.cfg.PGPID)), self: -1}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s
}

func ticksToDuration(t int64) time.Duration {
	if t < 0 {
		return -1
	}
	return time.Duration(t) * time.Second / clockTicks
}

// cpuNote is "CPU per message: broker 9.1 µs, PostgreSQL 12.0 µs, bench
// 3.2 µs" for the processes known at both ends, or "".
func cpuNote(from, to cpuSample, msgs int64) string {
	if msgs <= 0 {
		return ""
	}
	var parts []string
	add := func(name string, a, b time.Duration) {
		if a >= 0 && b >= a {
			parts = append(parts, fmt.Sprintf("%s %.1f µs", name, float64((b-a).Nanoseconds())/1e3/float64(msgs)))
		}
	}
	add("broker", from.broker, to.broker)
	add("PostgreSQL", from.pg, to.pg)
	add("bench", from.self, to.self)
	if len(parts) == 0 {
		return ""
	}
	return "CPU per message: " + strings.Join(parts, ", ")
}

// clusterTicks is the CPU of a PostgreSQL cluster in clock ticks: the
// postmaster's own and its reaped children's (cutime, cstime), plus every
// live child's, or -1.
func clusterTicks(postmaster int) int64 {
	if postmaster <= 0 {
		return -1
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(postmaster) + "/stat")
	if err != nil {
		return -1
	}
	_, total := parseStat(string(raw))
	if total < 0 {
		return -1
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile: its time is in the postmaster's cutime
		}
		if ppid, t := parseStat(string(raw)); ppid == postmaster && t >= 0 {
			total += t
		}
	}
	return total
}

// parseStat reads the parent pid and utime + stime + cutime + cstime of a
// /proc/<pid>/stat line; the command name may hold spaces, so fields count
// from its ")".
func parseStat(stat string) (ppid int, ticks int64) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, -1
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 15 {
		return 0, -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, -1
	}
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, -1
		}
		ticks += n
	}
	return ppid, ticks
}
