package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// The checks of parseArgs: the bench only talks to a broker and a PostgreSQL
// on this machine, and every numeric flag has a sane range.

func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("want an http or https URL, got %q", raw)
	}
	return checkLoopbackHost(u.Hostname())
}

// checkLoopbackPG accepts a URL or keyword/value string whose host is a
// loopback address or a Unix socket directory.
func checkLoopbackPG(raw string) error {
	host := ""
	if strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://") {
		u, err := url.Parse(raw)
		if err != nil {
			return errors.New("not a valid URL")
		}
		host = u.Hostname()
		if host == "" {
			host = u.Query().Get("host")
		}
	} else {
		for _, field := range strings.Fields(raw) {
			if v, ok := strings.CutPrefix(field, "host="); ok {
				host = strings.Trim(v, `'`)
			}
		}
	}
	if strings.HasPrefix(host, "/") {
		return nil
	}
	return checkLoopbackHost(host)
}

func checkLoopbackHost(host string) error {
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("host %q is not a loopback address; the bench only drives local targets", host)
}

func checkRange(name string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s: must be in [%d, %d], got %d", name, lo, hi, v)
	}
	return nil
}

func checkDuration(name string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return fmt.Errorf("%s: must be in [%s, %s], got %s", name, lo, hi, d)
	}
	return nil
}
