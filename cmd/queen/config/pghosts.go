package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Where the PostgreSQL connection settings come from (Postgres.Source).
const (
	SourcePGVars      = "PG_HOST" // PG_HOST, PG_PORT, PG_USER, PG_PASSWORD, PG_DB
	SourcePGURL       = "PG_URL"
	SourceDatabaseURL = "DATABASE_URL"
)

// Values of target_session_attrs the broker accepts. read-write is the
// default; primary is accepted from a URL because it also refuses standbys.
const (
	TargetReadWrite = "read-write"
	TargetPrimary   = "primary"
)

// Host is one PostgreSQL server of the list the pool tries in order.
type Host struct {
	Name string // host name, IP literal (no brackets) or Unix socket directory
	Port int
}

// String is the host as PG_HOST writes it.
func (h Host) String() string {
	if strings.HasPrefix(h.Name, "/") {
		return h.Name
	}
	return net.JoinHostPort(h.Name, strconv.Itoa(h.Port))
}

// pgVarsWithURL are the variables a connection URL replaces: setting one of
// them as well is refused rather than silently ignored. PG_PASSWORD is not
// among them: it may carry the password a URL leaves out, so the secret can
// live in its own variable.
var pgVarsWithURL = []string{"PG_HOST", "PG_PORT", "PG_USER", "PG_DB"}

// postgres reads the connection variables. PG_URL, else DATABASE_URL, when
// set, is the whole connection (with PG_PASSWORD for a URL without a
// password); otherwise PG_HOST (a comma list, each entry with an optional
// :port), PG_PORT, PG_USER, PG_PASSWORD and PG_DB. The TLS variables are
// read before, because a URL's sslmode must agree with them.
func (l *loader) postgres(p *Postgres) {
	p.Port = l.port("PG_PORT", PGPortDefault)
	p.TargetSessionAttrs = TargetReadWrite
	source, raw := SourcePGVars, ""
	for _, name := range []string{SourcePGURL, SourceDatabaseURL} {
		if v, ok := l.trimmed(name); ok {
			source, raw = name, v
			break
		}
	}
	p.Source = source
	if source == SourcePGVars {
		p.Hosts = l.hostList("PG_HOST", l.pgString("PG_HOST", PGHostDefault, false), p.Port)
		p.User = l.pgString("PG_USER", PGUserDefault, false)
		p.Password = l.pgString("PG_PASSWORD", "", true)
		p.Database = l.pgString("PG_DB", PGDatabaseDefault, false)
		return
	}
	for _, name := range pgVarsWithURL {
		if _, set := l.trimmed(name); set {
			l.fail(name, "is set together with %s, which already names the server; unset one of them", source)
		}
	}
	l.connURL(source, raw, p)
}

// hostList splits a comma list of hosts, each with an optional :port
// (brackets around an IPv6 literal that has one). Unix socket directories
// take no port in the list: they use defPort.
func (l *loader) hostList(name, v string, defPort int) []Host {
	var hosts []Host
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		h, problem := parseHost(entry, defPort)
		if problem != "" {
			l.fail(name, "%s", problem)
			return []Host{{Name: PGHostDefault, Port: defPort}}
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// parseHost reads one host entry; a problem is a whole sentence that quotes
// the entry (host names are not secret).
func parseHost(entry string, defPort int) (Host, string) {
	switch {
	case entry == "":
		return Host{}, "has an empty entry in its host list"
	case strings.ContainsAny(entry, ",\x00"):
		// Only a percent-escape gets one here, and the connection string
		// would split the host at it.
		return Host{}, "host " + quote(entry) + " contains a comma or a NUL byte"
	case strings.HasPrefix(entry, "/"):
		return Host{Name: entry, Port: defPort}, ""
	case strings.Count(entry, ":") > 1 && !strings.HasPrefix(entry, "["):
		return Host{Name: entry, Port: defPort}, "" // an IPv6 literal without a port
	case strings.HasPrefix(entry, "[") && strings.HasSuffix(entry, "]"):
		return Host{Name: entry[1 : len(entry)-1], Port: defPort}, ""
	case !strings.Contains(entry, ":"):
		return Host{Name: entry, Port: defPort}, ""
	}
	host, portText, err := net.SplitHostPort(entry)
	if err != nil || host == "" {
		return Host{}, quote(entry) + " is not a host or host:port"
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return Host{}, "the port of " + quote(entry) + " is not a port number (1-65535)"
	}
	return Host{Name: host, Port: port}, ""
}

// urlParams are the query parameters a connection URL may carry. The
// others either have a variable of their own (told in the problem) or
// would change what the broker relies on.
var urlParams = map[string]string{
	"host": "", "port": "", "dbname": "", "user": "", "password": "", "sslmode": "", "target_session_attrs": "",
	"connect_timeout":  "set QUEEN_PG_CONNECT_TIMEOUT_MS instead",
	"sslrootcert":      "put the CA certificate's PEM in PG_SSL_ROOT_CERT instead",
	"application_name": "the broker names its sessions queen", "TimeZone": "the broker pins UTC",
	"timezone": "the broker pins UTC", "options": "the broker sets its own session options",
}

// connURL reads a postgres:// URL with one or more hosts
// (postgres://user:pass@h1:5432,h2:5433/db?sslmode=verify-full), as libpq
// does: host and port in the query replace those of the authority. Problems
// never quote the URL, which may hold a password.
func (l *loader) connURL(name, raw string, p *Postgres) {
	rest, ok := strings.CutPrefix(raw, "postgres://")
	if !ok {
		rest, ok = strings.CutPrefix(raw, "postgresql://")
	}
	if !ok {
		l.fail(name, "is not a postgres:// or postgresql:// URL")
		return
	}
	if strings.IndexByte(raw, 0) >= 0 {
		l.fail(name, "contains a NUL byte")
		return
	}
	authority, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, pathQuery = rest[:i], rest[i:]
	}
	path, rawQuery, _ := strings.Cut(pathQuery, "?")
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		l.fail(name, "has a malformed query string")
		return
	}
	for key, vals := range query {
		advice, known := urlParams[key]
		switch {
		case !known && strings.HasPrefix(key, "ssl"):
			l.fail(name, "parameter %s is not supported: TLS is set with PG_USE_SSL, PG_SSL_REJECT_UNAUTHORIZED and PG_SSL_ROOT_CERT", quote(key))
		case !known:
			l.fail(name, "parameter %s is not supported (accepted: host, port, dbname, user, password, sslmode, target_session_attrs)", quote(key))
		case advice != "":
			l.fail(name, "parameter %s is not supported: %s", quote(key), advice)
		case len(vals) > 1:
			l.fail(name, "parameter %s is given more than once", quote(key))
		}
	}

	userinfo, hostPart := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hostPart = authority[:i], authority[i+1:]
	}
	user, pass, hasPass := strings.Cut(userinfo, ":")
	user, err1 := url.PathUnescape(user)
	pass, err2 := url.PathUnescape(pass)
	db, err3 := url.PathUnescape(strings.TrimPrefix(path, "/"))
	if err1 != nil || err2 != nil || err3 != nil {
		l.fail(name, "has a malformed percent-escape")
		return
	}
	if v := query.Get("user"); v != "" {
		user = v
	}
	if v, ok := query["password"]; ok {
		pass, hasPass = v[0], true
	}
	if v := query.Get("dbname"); v != "" {
		db = v
	}
	p.User, p.Database, p.Password = orDefault(user, PGUserDefault), orDefault(db, PGDatabaseDefault), pass
	if envPass := l.pgString("PG_PASSWORD", "", true); envPass != "" {
		if hasPass {
			l.fail("PG_PASSWORD", "is set together with a password in %s; keep one of them", name)
		}
		p.Password = envPass
	}

	p.Hosts = l.urlHosts(name, hostPart, query)
	if v := query.Get("target_session_attrs"); v != "" {
		if v != TargetReadWrite && v != TargetPrimary {
			l.fail(name, "target_session_attrs=%s would let the broker connect to a server that refuses writes; use read-write or primary", quote(v))
		} else {
			p.TargetSessionAttrs = v
		}
	}
	l.urlSSLMode(name, query.Get("sslmode"), p)
}

// urlHosts reads the hosts of a URL: the query's host and port lists
// replace the authority's (libpq's rule), one port for all hosts or one per
// host.
func (l *loader) urlHosts(name, hostPart string, query url.Values) []Host {
	hostText, portText := hostPart, ""
	if v := query.Get("host"); v != "" {
		hostText = v
	}
	if v := query.Get("port"); v != "" {
		portText = v
	}
	if hostText == "" {
		hostText = PGHostDefault
	}
	var entries []string
	for _, e := range strings.Split(hostText, ",") {
		dec, err := url.PathUnescape(e)
		if err != nil {
			l.fail(name, "has a malformed percent-escape")
			return nil
		}
		entries = append(entries, dec)
	}
	var ports []int
	if portText != "" {
		for _, e := range strings.Split(portText, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(e))
			if err != nil || n < 1 || n > 65535 {
				l.fail(name, "port %s is not a port number (1-65535)", quote(e))
				return nil
			}
			ports = append(ports, n)
		}
		if len(ports) != 1 && len(ports) != len(entries) {
			l.fail(name, "names %d ports for %d hosts; give one port, or one per host", len(ports), len(entries))
			return nil
		}
	}
	hosts := make([]Host, 0, len(entries))
	for i, e := range entries {
		h, problem := parseHost(strings.TrimSpace(e), PGPortDefault)
		if problem != "" {
			l.fail(name, "%s", problem)
			return nil
		}
		switch len(ports) {
		case 0:
		case 1:
			h.Port = ports[0]
		default:
			h.Port = ports[i]
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// urlSSLMode maps a URL's sslmode onto the TLS variables, which stay the
// one place TLS is decided (pgtls): disable, require (encrypt, do not
// verify) and verify-full; opportunistic modes are refused (PGT-1), and so
// is verify-ca, which skips the host name check. A TLS variable that is set
// and disagrees is a problem, not a silent winner.
func (l *loader) urlSSLMode(name, mode string, p *Postgres) {
	var useSSL, reject bool
	switch mode {
	case "":
		return
	case "disable":
	case "require":
		useSSL = true
	case "verify-full":
		useSSL, reject = true, true
	case "verify-ca":
		l.fail(name, "sslmode=verify-ca is not supported: the broker always checks the host name; use verify-full")
		return
	case "allow", "prefer":
		l.fail(name, "sslmode=%s is not supported: TLS is either off or required; use disable, require or verify-full", mode)
		return
	default:
		l.fail(name, "sslmode=%s is not a libpq sslmode", quote(mode))
		return
	}
	if _, set := l.trimmed("PG_USE_SSL"); set && p.UseSSL != useSSL {
		l.fail("PG_USE_SSL", "disagrees with sslmode=%s in %s; set TLS in one place", mode, name)
	}
	if _, set := l.trimmed("PG_SSL_REJECT_UNAUTHORIZED"); set && useSSL && p.SSLRejectUnauthorized != reject {
		l.fail("PG_SSL_REJECT_UNAUTHORIZED", "disagrees with sslmode=%s in %s; set TLS in one place", mode, name)
	}
	p.UseSSL = useSSL
	if useSSL {
		p.SSLRejectUnauthorized = reject
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
