// Command routegen writes gen/routes/routes.gen.go, the route → access-level table, from
// openapi/openapi.yaml. Every operation must carry an operationId and an x-queen-access of
// public, read-only, write-only, read-write or admin; otherwise routegen prints one line per
// offending operation, naming its method and path, and exits non-zero.
//
// The generated Match classifies a request exactly the way net/http.ServeMux, which serves the
// oapi-codegen handlers, routes it, so the proxy and the broker never disagree about which
// operation a request reaches. The matcher is written once, in this file: the declarations
// marked //routegen:emit are compiled and tested here and copied verbatim into the output.
//
// Usage, from the repository root (go generate ./openapi does this):
//
//	go run ./openapi/routegen [-spec openapi/openapi.yaml] [-out gen/routes/routes.gen.go]
package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/getkin/kin-openapi/openapi3"
)

func main() {
	specPath := flag.String("spec", "openapi/openapi.yaml", "OpenAPI document to read")
	outPath := flag.String("out", "gen/routes/routes.gen.go", "Go file to write")
	flag.Parse()
	if err := run(*specPath, *outPath); err != nil {
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "routegen:", line)
		}
		os.Exit(1)
	}
}

// run generates the table for the spec at specPath and writes it to outPath. Nothing is
// written when the spec has a problem.
func run(specPath, outPath string) error {
	doc, err := load(specPath)
	if err != nil {
		return err
	}
	src, err := generate(doc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(outPath, src, 0o644)
}

// load reads an OpenAPI document the way oapi-codegen does (external $refs allowed).
func load(path string) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return doc, nil
}

// accessExtension is the operation extension that holds the access level.
const accessExtension = "x-queen-access"

// accessNames maps every valid x-queen-access value to its Go constant, in the order the
// levels are listed in messages.
var accessNames = []struct {
	value Access
	name  string
}{
	{Public, "Public"},
	{ReadOnly, "ReadOnly"},
	{WriteOnly, "WriteOnly"},
	{ReadWrite, "ReadWrite"},
	{Admin, "Admin"},
}

// problem is one thing wrong with one operation.
type problem struct {
	method, path, msg string
}

// collect returns every operation of doc as a Route, sorted by path then method. It checks
// every operation and reports every problem at once, one line each: a missing operationId, a
// missing or unknown x-queen-access, a path template the matcher cannot express, a repeated
// operationId, and two operations that net/http.ServeMux could not tell apart.
func collect(doc *openapi3.T) ([]Route, error) {
	var routes []Route
	var problems []problem
	if doc.Paths != nil {
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				r, msgs := operationRoute(method, path, op)
				for _, msg := range msgs {
					problems = append(problems, problem{method, path, msg})
				}
				if len(msgs) == 0 {
					routes = append(routes, r)
				}
			}
		}
	}
	slices.SortFunc(routes, func(a, b Route) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	byID := make(map[string]Route, len(routes))
	for _, r := range routes {
		if prev, dup := byID[r.OperationID]; dup {
			problems = append(problems, problem{r.Method, r.Path,
				fmt.Sprintf("operationId %q is also used by %s %s", r.OperationID, prev.Method, prev.Path)})
			continue
		}
		byID[r.OperationID] = r
	}
	problems = append(problems, conflicts(routes)...)
	if len(problems) == 0 && len(routes) == 0 {
		return nil, errors.New("the spec has no operations")
	}
	slices.SortFunc(problems, func(a, b problem) int {
		return cmp.Or(strings.Compare(a.path, b.path), strings.Compare(a.method, b.method), strings.Compare(a.msg, b.msg))
	})
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = fmt.Errorf("%s %s: %s", p.method, p.path, p.msg)
	}
	return routes, errors.Join(errs...)
}

// operationRoute checks one operation and returns its Route, or what is wrong with it.
func operationRoute(method, path string, op *openapi3.Operation) (Route, []string) {
	var msgs []string
	if op.OperationID == "" {
		msgs = append(msgs, "operationId is missing")
	}
	want := make([]string, len(accessNames))
	for i, a := range accessNames {
		want[i] = string(a.value)
	}
	v, present := op.Extensions[accessExtension]
	access, _ := v.(string)
	switch {
	case !present:
		msgs = append(msgs, fmt.Sprintf("%s is missing; want one of %s", accessExtension, strings.Join(want, ", ")))
	case !slices.Contains(want, access):
		msgs = append(msgs, fmt.Sprintf("%s %#v is unknown; want one of %s", accessExtension, v, strings.Join(want, ", ")))
	}
	if err := checkTemplate(path); err != nil {
		msgs = append(msgs, err.Error())
	}
	class, feature, classMsgs := proxyClass(op.Extensions)
	msgs = append(msgs, classMsgs...)
	return Route{Method: method, Path: path, OperationID: op.OperationID, Access: Access(access),
		Proxy: class, Feature: feature}, msgs
}

// checkTemplate accepts the path templates that both Match and net/http.ServeMux handle: a
// leading "/", then literal segments and whole-segment {param}s, with an optional trailing
// slash (which, as in oapi-codegen, matches a trailing slash only).
func checkTemplate(path string) error {
	if !strings.HasPrefix(path, "/") {
		return errors.New("path template must start with /")
	}
	segs := strings.Split(path[1:], "/")
	for i, s := range segs {
		switch {
		case s == "" && i == len(segs)-1: // trailing slash
		case s == "":
			return errors.New("path template has an empty segment")
		case len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && !strings.ContainsAny(s[1:len(s)-1], "{}"):
		case strings.ContainsAny(s, "{}"):
			return fmt.Errorf("path segment %q: a parameter must be a whole segment", s)
		case strings.Contains(s, "%"):
			return fmt.Errorf("path segment %q: a literal segment cannot hold a percent-escape", s)
		}
	}
	return nil
}

// muxPattern is the net/http.ServeMux pattern that oapi-codegen's std-http server registers for
// an operation, up to parameter names: parameters become {p0}, {p1}, ... and a trailing slash
// is anchored with {$}.
func muxPattern(method, path string) string {
	segs := strings.Split(path, "/")
	n := 0
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = fmt.Sprintf("{p%d}", n)
			n++
		}
	}
	p := strings.Join(segs, "/")
	if strings.HasSuffix(p, "/") {
		p += "{$}"
	}
	return method + " " + p
}

// conflicts registers every route on a net/http.ServeMux, as the broker does, and reports the
// routes it refuses: two templates that no request can tell apart (/a/{x} and /a/{y}) or where
// neither is more specific (/a/{x}/c and /a/b/{y}). Match relies on there being none.
func conflicts(routes []Route) []problem {
	var out []problem
	mux := http.NewServeMux()
	for i, r := range routes {
		msg := register(mux, r)
		if msg == "" {
			continue
		}
		for _, prev := range routes[:i] {
			pair := http.NewServeMux()
			if register(pair, prev) == "" && register(pair, r) != "" {
				msg = fmt.Sprintf("conflicts with %s %s: net/http.ServeMux cannot tell them apart", prev.Method, prev.Path)
				break
			}
		}
		out = append(out, problem{r.Method, r.Path, msg})
	}
	return out
}

// register adds r to mux and returns why ServeMux refused it, if it did.
func register(mux *http.ServeMux, r Route) (refused string) {
	defer func() {
		if v := recover(); v != nil {
			refused = fmt.Sprint(v)
		}
	}()
	mux.Handle(muxPattern(r.Method, r.Path), http.NotFoundHandler())
	return ""
}

// generate returns the gofmt-ed source of package routes for doc.
func generate(doc *openapi3.T) ([]byte, error) {
	routes, err := collect(doc)
	if err != nil {
		return nil, err
	}
	runtime, err := emitted()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := outputTemplate.Execute(&buf, struct {
		Runtime string
		Routes  []Route
	}{runtime, routes}); err != nil {
		return nil, err
	}
	src, err := format.Source(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format generated code: %w", err)
	}
	return src, nil
}

var outputTemplate = template.Must(template.New("routes").Funcs(template.FuncMap{
	"accessName": func(a Access) string {
		for _, n := range accessNames {
			if n.value == a {
				return n.name
			}
		}
		panic("unknown access " + string(a)) // collect let it through: a bug here
	},
	"proxyName": proxyClassName,
}).Parse(`// Code generated by openapi/routegen; DO NOT EDIT.

// Package routes is the route table of the OpenAPI spec (openapi/openapi.yaml): every
// operation with the access level (x-queen-access) it requires, its class at the proxy
// (x-queen-proxy, x-queen-feature), and Match, which tells the operation a request reaches.
package routes

import "strings"

// All lists every operation of the spec, sorted by path, then method. Match works on its own
// copy, made at init: changing All does not change Match.
var All = []Route{
{{- range .Routes}}
	{Method: {{printf "%q" .Method}}, Path: {{printf "%q" .Path}}, OperationID: {{printf "%q" .OperationID}}, Access: {{accessName .Access}}
		{{- with .Proxy}}, Proxy: {{proxyName .}}{{end}}{{with .Feature}}, Feature: {{printf "%q" .}}{{end}}},
{{- end}}
}

var compiled = newTable(All)

// Match returns the operation that a request with this method and path reaches, chosen the
// way net/http.ServeMux routes requests to the oapi-codegen handlers:
//
//   - path is the raw, still-escaped path, r.URL.EscapedPath(), without the query. It is split
//     at "/", so an escaped slash (%2F) stays inside its segment; each segment is then
//     percent-decoded before it is compared with a literal segment ("/api/v1/p%75sh" is push).
//   - A {param} segment matches any one non-empty segment, except one that decodes to "/".
//   - Methods are case-sensitive. Only the operations of the method take part, and for HEAD
//     the GET operations when no HEAD operation matches.
//   - When several operations match, the one with a literal segment where the others have a
//     parameter, leftmost first, wins: "/consumer-groups/lagging" beats
//     "/consumer-groups/{group}".
//   - "/api/v1/push/" does not match "/api/v1/push". Paths are not cleaned: "//", "." and ".."
//     segments are compared like any other (ServeMux answers such paths with a redirect).
//
// ok is false when no operation matches. Match allocates nothing.
func Match(method, path string) (route Route, ok bool) {
	return compiled.match(method, path)
}

{{.Runtime}}`))

// The declarations below are the generated package's types and matcher.

// Access is the access level an operation requires: its x-queen-access in the spec.
//
//routegen:emit
type Access string

// The access levels, valued as in the spec.
//
//routegen:emit
const (
	Public    Access = "public"
	ReadOnly  Access = "read-only"
	WriteOnly Access = "write-only"
	ReadWrite Access = "read-write"
	Admin     Access = "admin"
)

// Route is one operation of the spec.
//
//routegen:emit
type Route struct {
	Method      string // as in the spec, upper case: "GET"
	Path        string // the spec's template: "/api/v1/pop/queue/{queue}"
	OperationID string
	Access      Access
	Proxy       ProxyClass // x-queen-proxy: what an API key needs at the proxy
	Feature     string     // x-queen-feature: the plan feature a gated class needs
}

// table is a list of routes prepared for matching.
//
//routegen:emit
type table []entry

// entry is a route with its template split once, so that matching allocates nothing.
//
//routegen:emit
type entry struct {
	route Route
	segs  []string // the segments after the leading "/"; a trailing slash is the segment "/"
	shape string   // per segment '0' literal or '1' parameter: the smaller shape is more specific
}

// newTable prepares routes, whose templates routegen has checked, for matching.
//
//routegen:emit
func newTable(routes []Route) table {
	t := make(table, len(routes))
	for i, r := range routes {
		segs := strings.Split(strings.TrimPrefix(r.Path, "/"), "/")
		shape := make([]byte, len(segs))
		for j, s := range segs {
			shape[j] = '0'
			switch {
			case strings.HasPrefix(s, "{"):
				shape[j] = '1'
			case s == "": // only ever the last one
				segs[j] = "/"
			}
		}
		t[i] = entry{route: r, segs: segs, shape: string(shape)}
	}
	return t
}

// match returns the most specific route of method that path matches; for HEAD, when there is
// none, the most specific GET route.
//
//routegen:emit
func (t table) match(method, path string) (Route, bool) {
	i := t.lookup(method, path)
	if i < 0 && method == "HEAD" {
		i = t.lookup("GET", path)
	}
	if i < 0 {
		return Route{}, false
	}
	return t[i].route, true
}

// lookup returns the index of the most specific route of method that path matches, or -1.
// Matching routes have as many segments as path, and templates that ServeMux could not tell
// apart were refused by routegen, so comparing shapes settles every tie.
//
//routegen:emit
func (t table) lookup(method, path string) int {
	best := -1
	for i := range t {
		e := &t[i]
		if e.route.Method == method && e.matches(path) && (best < 0 || e.shape < t[best].shape) {
			best = i
		}
	}
	return best
}

// matches reports whether the raw path fits e's template, segment by segment.
//
//routegen:emit
func (e *entry) matches(path string) bool {
	for j, want := range e.segs {
		if path == "" || path[0] != '/' {
			return false
		}
		var seg string
		if path == "/" {
			seg, path = "/", "" // a trailing slash, as ServeMux sees it
		} else {
			path = path[1:]
			k := strings.IndexByte(path, '/')
			if k < 0 {
				k = len(path)
			}
			seg, path = path[:k], path[k:]
		}
		if e.shape[j] == '1' {
			if seg == "" || segmentIs(seg, "/") {
				return false
			}
		} else if !segmentIs(seg, want) {
			return false
		}
	}
	return path == ""
}

// segmentIs reports whether the raw path segment seg, percent-decoded as ServeMux decodes it
// (url.PathUnescape, or left as it is when an escape is malformed), equals lit.
//
//routegen:emit
func segmentIs(seg, lit string) bool {
	if strings.IndexByte(seg, '%') < 0 || !escapesValid(seg) {
		return seg == lit
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c == '%' {
			c = unhex(seg[i+1])<<4 | unhex(seg[i+2])
			i += 2
		}
		if n == len(lit) || lit[n] != c {
			return false
		}
		n++
	}
	return n == len(lit)
}

// escapesValid reports whether every "%" in s starts a two-hex-digit escape.
//
//routegen:emit
func escapesValid(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) || unhex(s[i+1]) > 15 || unhex(s[i+2]) > 15 {
				return false
			}
			i += 2
		}
	}
	return true
}

// unhex returns the value of the hex digit c, or 16 when c is not one.
//
//routegen:emit
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 16
}
