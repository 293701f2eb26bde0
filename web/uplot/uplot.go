// Package uplot embeds the vendored uPlot chart library (VENDOR.txt), once,
// for the two pages that draw charts: the broker's dashboard (web) and
// queen-proxy's console (proxy/console). It imports nothing of ours, so the
// proxy may depend on it without reaching the broker's code.
package uplot

import "embed"

// Files are uPlot.esm.js, uPlot.min.css, uPlot.LICENSE.txt and VENDOR.txt,
// at the root. Both pages serve them under their assets/vendor/.
//
//go:embed uPlot.esm.js uPlot.min.css uPlot.LICENSE.txt VENDOR.txt
var Files embed.FS
