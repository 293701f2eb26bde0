package main

import (
	"fmt"
	"slices"
	"strings"
)

// The operation extensions that give an operation its class at the proxy (cmd/queen-proxy,
// docs/proxy.md): what an API key's scopes must hold to reach it, and for a gated class, the
// plan feature it needs. An operation without x-queen-proxy is generated as Unclassified, which
// the proxy refuses like Blocked; the test TestSpecOperationsHaveProxyClass fails until it is
// classified.
const (
	proxyExtension   = "x-queen-proxy"
	featureExtension = "x-queen-feature"
)

// proxyClassNames maps every valid x-queen-proxy value to its Go constant.
var proxyClassNames = []struct {
	value ProxyClass
	name  string
}{
	{ProxyProduce, "ProxyProduce"},
	{ProxyConsume, "ProxyConsume"},
	{ProxyQueueAdmin, "ProxyQueueAdmin"},
	{ProxyRead, "ProxyRead"},
	{ProxyGatedRead, "ProxyGatedRead"},
	{ProxyGatedGrow, "ProxyGatedGrow"},
	{ProxyGatedOpen, "ProxyGatedOpen"},
	{ProxyGatedMixed, "ProxyGatedMixed"},
	{ProxyOperator, "ProxyOperator"},
	{ProxyBlocked, "ProxyBlocked"},
}

// features are the plan features a gated class may name (the keys of plans.features).
var features = []string{"streams", "traces", "kv", "timers", "ephemeral"}

// proxyClass reads an operation's x-queen-proxy and x-queen-feature and says what is wrong
// with them. Both are optional for generation; a present one must be valid, and a feature
// goes with a gated class and only with one.
func proxyClass(ext map[string]any) (ProxyClass, string, []string) {
	var msgs []string
	var want []string
	for _, c := range proxyClassNames {
		want = append(want, string(c.value))
	}
	var class ProxyClass
	if v, ok := ext[proxyExtension]; ok {
		s, _ := v.(string)
		if !slices.Contains(want, s) {
			msgs = append(msgs, fmt.Sprintf("%s %#v is unknown; want one of %s", proxyExtension, v, strings.Join(want, ", ")))
		} else {
			class = ProxyClass(s)
		}
	}
	var feature string
	v, hasFeature := ext[featureExtension]
	if hasFeature {
		s, _ := v.(string)
		if !slices.Contains(features, s) {
			msgs = append(msgs, fmt.Sprintf("%s %#v is unknown; want one of %s", featureExtension, v, strings.Join(features, ", ")))
		}
		feature = s
	}
	switch {
	case class.Gated() && !hasFeature:
		msgs = append(msgs, fmt.Sprintf("%s %s needs %s", proxyExtension, class, featureExtension))
	case hasFeature && class != Unclassified && !class.Gated():
		msgs = append(msgs, fmt.Sprintf("%s goes only with a gated %s, not %s", featureExtension, proxyExtension, class))
	}
	return class, feature, msgs
}

// proxyClassName returns the Go constant of c, for the template.
func proxyClassName(c ProxyClass) string {
	for _, n := range proxyClassNames {
		if n.value == c {
			return n.name
		}
	}
	panic("unknown proxy class " + string(c)) // collect let it through: a bug here
}

// ProxyClass is an operation's class at the proxy: its x-queen-proxy in the spec.
//
//routegen:emit
type ProxyClass string

// The proxy classes, valued as in the spec. Unclassified is an operation without
// x-queen-proxy: the proxy refuses it like Blocked.
//
//routegen:emit
const (
	Unclassified    ProxyClass = ""
	ProxyProduce    ProxyClass = "produce"
	ProxyConsume    ProxyClass = "consume"
	ProxyQueueAdmin ProxyClass = "queue-admin"
	ProxyRead       ProxyClass = "read"
	ProxyGatedRead  ProxyClass = "gated-read"
	ProxyGatedGrow  ProxyClass = "gated-grow"
	ProxyGatedOpen  ProxyClass = "gated-open"
	ProxyGatedMixed ProxyClass = "gated-mixed"
	ProxyOperator   ProxyClass = "operator"
	ProxyBlocked    ProxyClass = "blocked"
)

// Gated reports whether the class needs a plan feature (Route.Feature).
//
//routegen:emit
func (c ProxyClass) Gated() bool {
	return strings.HasPrefix(string(c), "gated-")
}
