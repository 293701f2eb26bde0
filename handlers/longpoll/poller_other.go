//go:build !linux

package longpoll

import "net"

// poller is Linux's epoll watcher (poller_linux.go); elsewhere every held
// connection keeps its goroutine blocked in Read.
type poller struct{}

func newPoller() *poller { return nil }

func socketFD(net.Conn) (int, bool) { return -1, false }

func (p *poller) arm(*held) bool { return false }
func (p *poller) disarm(*held)   {}
func (p *poller) stop()          {}
