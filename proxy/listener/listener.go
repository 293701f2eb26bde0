// Package listener binds the proxy's one port, plaintext or TLS, and
// serves it with HTTP/1.1 and, over TLS, HTTP/2.
package listener

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// LoadTLS reads a PEM certificate chain (leaf first) and its PEM private
// key (PKCS#1, PKCS#8 or SEC 1) and checks that they belong together. Its
// error says why the material is unusable without quoting it.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Server is the bound listener and the server on it.
type Server struct {
	HTTP *http.Server
	ln   net.Listener
	tls  bool
}

// Listen binds addr. With tlsConfig, Serve speaks TLS and offers h2 and
// http/1.1 by ALPN.
func Listen(addr string, handler http.Handler, tlsConfig *tls.Config, errorLog func(string)) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: handler, TLSConfig: tlsConfig, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
	if errorLog != nil {
		srv.ErrorLog = newLogger(errorLog)
	}
	return &Server{HTTP: srv, ln: ln, tls: tlsConfig != nil}, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// TLS reports whether the listener speaks TLS.
func (s *Server) TLS() bool { return s.tls }

// Serve serves until Shutdown or Close; those make it return nil.
func (s *Server) Serve() error {
	var err error
	if s.tls {
		// ServeTLS adds "h2" to the offered protocols.
		err = s.HTTP.ServeTLS(s.ln, "", "")
	} else {
		err = s.HTTP.Serve(s.ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
