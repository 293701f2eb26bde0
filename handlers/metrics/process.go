package metrics

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcessStats is a reading of the process's resource use.
type ProcessStats struct {
	CPUUserMicros   int64 // cumulative
	CPUSystemMicros int64 // cumulative
	RSSBytes        int64
	VirtualBytes    int64
}

// ReadProcess reads the process's CPU time and memory: getrusage, and
// /proc/self/statm where there is one (RSS falls back to the peak RSS).
func ReadProcess() ProcessStats {
	var st ProcessStats
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		st.CPUUserMicros = int64(ru.Utime.Sec)*1e6 + int64(ru.Utime.Usec)
		st.CPUSystemMicros = int64(ru.Stime.Sec)*1e6 + int64(ru.Stime.Usec)
		st.RSSBytes = int64(ru.Maxrss) * 1024
	}
	if raw, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(raw))
		page := int64(os.Getpagesize())
		if len(f) >= 2 {
			if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				st.VirtualBytes = v * page
			}
			if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				st.RSSBytes = v * page
			}
		}
	}
	return st
}
