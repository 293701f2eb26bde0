package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/queenforgo/queen/proxy/apikey"
)

// subcommand runs queen-proxy keygen: a new API key, shown once, and the
// hash that is all pxdb stores.
func subcommand(args []string, stdout, stderr io.Writer) int {
	if args[0] != "keygen" {
		fmt.Fprintln(stderr, "usage: queen-proxy [keygen [-env live]]")
		return 2
	}
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := fs.String("env", "live", "the key's environment segment: qk_<env>_...")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	key, hash, err := apikey.Generate(*env)
	if err != nil {
		fmt.Fprintln(stderr, "queen-proxy keygen: "+err.Error())
		return 2
	}
	fmt.Fprintf(stdout, "key:  %s\nhash: %s\n\nStore it (the key itself is never stored; this is the only time it is shown):\n"+
		"  SELECT queen_proxy.issue_api_key('<cluster id>', '<name>', '%s', ARRAY['produce','consume','read']);\n", key, hash, hash)
	return 0
}
