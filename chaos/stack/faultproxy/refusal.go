package main

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// With --mirror-refusal the proxy is transparent to a dead upstream: while the upstream refuses
// connections, so does the proxy's --listen port. Without it a gateway in front of the proxy sees an
// HTTP 502 (a response: a POST is never passed on to another replica) where, with no proxy, it would
// have seen a refused connect (passed on: nothing was sent). The request that finds the upstream dead
// is still answered 502 (and logged): it was sent already, and the 502 says truthfully that nothing
// reached the upstream, which a reset would not. Then the listener is closed (the kernel refuses new
// connects), idle keep-alive connections are closed (SetKeepAlivesEnabled(false); busy ones close
// after their answer), and the upstream is probed until it accepts; then the same address is bound
// again. The admin API must then be on its own listener (--admin-listen): on the data port it would
// go away with it.

// refusedDial: the upstream refused the connect, or no route to it: the request provably never left.
// A dial timeout, or a reset or EOF after the request was written, is not (the upstream may be slow,
// or may have started on it).
func refusedDial(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}

// gate owns the data listener of one http.Server.
type gate struct {
	srv      *http.Server
	upstream string        // HOST:PORT the probe dials
	every    time.Duration // probe interval while closed
	rebind   time.Duration // retry interval when the address is taken meanwhile
	logf     func(format string, args ...any)
	fatal    chan<- error // an accept error on a listener nobody closed on purpose

	mu      sync.Mutex
	addr    string       // the bound address (a --listen port 0 is bound again to the same port)
	ln      net.Listener // nil while closed
	since   time.Time    // when ln was bound: a refusal of a dial that started before it is stale
	stopped bool
	done    chan struct{}
}

func newGate(srv *http.Server, upstream string, logf func(string, ...any), fatal chan<- error) *gate {
	return &gate{srv: srv, upstream: upstream, every: 50 * time.Millisecond, rebind: time.Second, logf: logf,
		fatal: fatal, done: make(chan struct{})}
}

// serve starts serving on ln (false after stop: ln is closed).
func (g *gate) serve(ln net.Listener) bool {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		_ = ln.Close()
		return false
	}
	g.ln, g.addr, g.since = ln, ln.Addr().String(), time.Now()
	g.mu.Unlock()
	go func() {
		err := g.srv.Serve(ln)
		g.mu.Lock()
		onPurpose := g.ln != ln || g.stopped
		g.mu.Unlock()
		if !onPurpose && !errors.Is(err, http.ErrServerClosed) {
			g.fatal <- err
		}
	}()
	return true
}

// refused closes the listener (once per outage) and starts the probe; called by every request whose
// dial was refused, concurrently. `started`: when that request began; one that began before the
// listener was bound again dialled the upstream before it came back, and closes nothing.
func (g *gate) refused(err error, started time.Time) {
	g.mu.Lock()
	ln := g.ln
	if ln == nil || g.stopped || started.Before(g.since) {
		g.mu.Unlock()
		return
	}
	g.ln = nil
	g.mu.Unlock()
	_ = ln.Close() // connects from now on are refused by the kernel (and any not yet accepted are reset)
	g.srv.SetKeepAlivesEnabled(false)
	g.logf("upstream %s refused (%v): %s closed until it accepts again", g.upstream, err, g.addr)
	go g.probe()
}

// closed reports whether the listener is closed now (for health).
func (g *gate) closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ln == nil
}

// probe dials the upstream every g.every until it accepts, then binds the address again. An address
// taken meanwhile by another process is one line in the log and a retry every g.rebind, never an exit.
func (g *gate) probe() {
	t := time.NewTicker(g.every)
	defer t.Stop()
	taken := false
	for {
		select {
		case <-g.done:
			return
		case <-t.C:
		}
		c, err := net.DialTimeout("tcp", g.upstream, time.Second)
		if err != nil {
			continue
		}
		_ = c.Close()
		ln, err := net.Listen("tcp", g.addr)
		if err != nil {
			if !taken {
				g.logf("upstream %s accepts again but %s cannot be bound: %v (retrying every %v)", g.upstream, g.addr,
					err, g.rebind)
				taken = true
			}
			select {
			case <-g.done:
				return
			case <-time.After(g.rebind):
			}
			continue
		}
		g.srv.SetKeepAlivesEnabled(true)
		if g.serve(ln) {
			g.logf("upstream %s accepts again: listening on %s", g.upstream, g.addr)
		}
		return
	}
}

// stop ends probing and rebinding for good (before srv.Shutdown).
func (g *gate) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.stopped {
		g.stopped = true
		close(g.done)
	}
}
