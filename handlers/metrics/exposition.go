package metrics

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
)

// Exposition writes the Prometheus text format, version 0.0.4: per family a
// HELP and a TYPE line, then its samples. Label values and help texts are
// escaped as the format requires.
type Exposition struct {
	w   *bufio.Writer
	err error
}

// ContentType is the exposition's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// NewExposition writes to w; call Flush at the end.
func NewExposition(w io.Writer) *Exposition { return &Exposition{w: bufio.NewWriter(w)} }

// Family starts a metric family. typ is counter or gauge.
func (e *Exposition) Family(name, typ, help string) {
	e.write("# HELP ", name, " ", helpEscaper.Replace(help), "\n# TYPE ", name, " ", typ, "\n")
}

// Sample writes one sample of name; labels are name/value pairs.
func (e *Exposition) Sample(name string, value float64, labels ...string) {
	e.write(name)
	if len(labels) > 0 {
		e.write("{")
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				e.write(",")
			}
			e.write(labels[i], `="`, labelEscaper.Replace(labels[i+1]), `"`)
		}
		e.write("}")
	}
	e.write(" ", formatValue(value), "\n")
}

// Flush writes what is buffered and returns the first error.
func (e *Exposition) Flush() error {
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.err
}

func (e *Exposition) write(parts ...string) {
	for _, p := range parts {
		if e.err != nil {
			return
		}
		_, e.err = e.w.WriteString(p)
	}
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
