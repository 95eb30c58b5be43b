package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// freeAddr: a loopback address nothing listens on (bound, then released).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// upstreamAt serves h on addr until the returned stop is called (which closes its connections too).
func upstreamAt(t *testing.T, addr string, h http.Handler) (stop func()) {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port was ours a moment ago: rebinding it can race a TIME_WAIT
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { _ = srv.Close() }) }
	t.Cleanup(stop)
	return stop
}

// dialOutcome: "accepted", "refused" or the error.
func dialOutcome(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		return "accepted"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "refused"
	}
	return err.Error()
}

// waitDial polls until a connect to addr has the wanted outcome; the last outcome otherwise.
func waitDial(addr, want string, within time.Duration) string {
	end := time.Now().Add(within)
	for {
		got := dialOutcome(addr)
		if got == want || time.Now().After(end) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type lockedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *lockedLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// gatedProxy runs a proxy with --mirror-refusal's gate in this process, in front of upstream (HOST:PORT).
func gatedProxy(t *testing.T, upstream string) (*gate, string, *lockedLog) {
	t.Helper()
	u, _ := url.Parse("http://" + upstream)
	p := &proxy{name: "replica-g", upstream: u, upstreamStr: "http://" + upstream, token: testToken,
		transport: newTransport(), log: &requestLog{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedLog{}
	fatal := make(chan error, 2)
	g := newGate(newServer(p), upstream, logs.logf, fatal)
	g.rebind = 100 * time.Millisecond
	p.gate = g
	g.serve(ln)
	t.Cleanup(func() {
		g.stop()
		_ = g.srv.Close()
		p.transport.CloseIdleConnections()
		select {
		case err := <-fatal:
			t.Errorf("the gate reported a fatal accept error: %v", err)
		default:
		}
	})
	return g, ln.Addr().String(), logs
}

func postTo(client *http.Client, addr string) (int, error) {
	resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(false)))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestRefusedDialIsOnlyAConnectThatNeverHappened(t *testing.T) {
	tr := newTransport()
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+freeAddr(t)+"/health", nil)
	_, err := tr.RoundTrip(req)
	if !refusedDial(err) {
		t.Fatalf("a refused connect: %v (%T)", err, err)
	}
	for _, e := range []error{
		&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ETIMEDOUT)},
		&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNREFUSED)},
		context.DeadlineExceeded, errors.New("EOF"),
	} {
		if refusedDial(e) {
			t.Errorf("%v counted as a refused connect", e)
		}
	}
	if !refusedDial(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}) {
		t.Error("no route to the upstream: nothing was sent either")
	}
}

// The whole program: upstream killed -> the request in hand 502 (logged) -> new connects refused, the
// admin listener still answers -> upstream back -> the proxy serves again on the same port.
func TestMirrorRefusalFollowsADeadUpstream(t *testing.T) {
	upAddr, addr, admin := freeAddr(t), freeAddr(t), freeAddr(t)
	stopUp := upstreamAt(t, upAddr, jsonUpstream(200, `{"ok": true}`))
	logPath := filepath.Join(t.TempDir(), "proxy.jsonl")
	cmd := command(fmt.Sprintf("--listen %s --admin-listen %s --upstream http://%s --name rep-m --mirror-refusal "+
		"--request-log %s", addr, admin, upAddr, logPath), "CHAOS_PROXY_TOKEN=tok")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for _, want := range []string{"listening on " + addr, "admin API on " + admin} {
		if line := <-lines; !strings.Contains(line, want) {
			t.Fatalf("stderr %q, want %q", line, want)
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	f := &fixture{t: t, client: client, base: "http://" + admin}
	if code, err := postTo(client, addr); code != 200 {
		t.Fatalf("through the proxy: %d %v", code, err)
	}
	if code, _ := f.adminRaw("GET", "/v1/models", nil, ""); code != 404 {
		t.Fatalf("the admin listener proxied a request: %d", code)
	}

	stopUp()
	// the request that finds the upstream dead was sent: 502. The first may go out on the proxy's pooled
	// upstream connection before the proxy has read its close (EOF: not proof, no refusal); the next dials.
	answered := 0
	for i := 0; i < 2; i++ {
		code, err := postTo(client, addr)
		if code == 0 && errors.Is(err, syscall.ECONNREFUSED) && answered > 0 {
			break // the first one dialled already: this one was refused at connect
		}
		if code != 502 {
			t.Fatalf("request %d after the upstream died: %d %v", i+1, code, err)
		}
		answered++
	}
	if got := waitDial(addr, "refused", time.Second); got != "refused" {
		t.Fatalf("a new connect to the proxy while the upstream is dead: %s", got)
	}
	if code, out := f.adminRaw("GET", "/_chaos/health", nil, ""); code != 200 || out["refusing"] != true {
		t.Fatalf("admin health while refusing: %d %v", code, out)
	}
	if code, out := f.adminRaw("GET", "/_chaos/log", nil, "Bearer tok"); code != 200 ||
		len(out["lines"].([]any)) != 1+answered || !strings.Contains(out["lines"].([]any)[answered].(string), `"status":502`) {
		t.Fatalf("the request log while refusing: %d %v", code, out)
	}

	upstreamAt(t, upAddr, jsonUpstream(200, `{"ok": true}`))
	if got := waitDial(addr, "accepted", 2*time.Second); got != "accepted" {
		t.Fatalf("a connect after the upstream came back: %s", got)
	}
	if code, err := postTo(client, addr); code != 200 {
		t.Fatalf("through the proxy after the upstream came back: %d %v", code, err)
	}
	if code, out := f.adminRaw("GET", "/_chaos/health", nil, ""); code != 200 || out["refusing"] != false {
		t.Fatalf("admin health after: %d %v", code, out)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	var said []string
	for l := range lines {
		said = append(said, l)
	}
	if s := strings.Join(said, "\n"); !strings.Contains(s, "refused") || !strings.Contains(s, "accepts again: listening on "+addr) {
		t.Fatalf("stderr does not tell the outage: %q", s)
	}
}

// A slow upstream, or one that cuts the connection after the request went out, may have started on
// it: the proxy keeps listening (answers as always: the client's timeout, a 502).
func TestSlowOrCuttingUpstreamIsNotDead(t *testing.T) {
	cases := map[string]http.HandlerFunc{
		"slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		},
		"cut": func(w http.ResponseWriter, r *http.Request) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // a reset, not a FIN
				}
				c.Close()
			}
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			upAddr := freeAddr(t)
			upstreamAt(t, upAddr, h)
			g, addr, logs := gatedProxy(t, upAddr)
			client := &http.Client{Timeout: 300 * time.Millisecond}
			code, err := postTo(client, addr)
			if name == "cut" && code != 502 || name == "slow" && err == nil {
				t.Fatalf("answer: %d %v", code, err)
			}
			time.Sleep(150 * time.Millisecond) // three probe intervals: time enough to have closed
			if got := dialOutcome(addr); got != "accepted" || g.closed() {
				t.Fatalf("after a %s upstream the proxy refuses (%s); log %q", name, got, logs.text())
			}
		})
	}
}

// The port taken by someone else while the upstream was away: a line in the log and retries, no exit;
// once free, the proxy binds it again.
func TestAPortTakenMeanwhileIsRetriedNotFatal(t *testing.T) {
	upAddr := freeAddr(t)
	stopUp := upstreamAt(t, upAddr, jsonUpstream(200, `{"ok": true}`))
	g, addr, logs := gatedProxy(t, upAddr)
	stopUp()
	client := &http.Client{Timeout: 5 * time.Second}
	if code, err := postTo(client, addr); code != 502 {
		t.Fatalf("dead upstream: %d %v", code, err)
	}
	if got := waitDial(addr, "refused", time.Second); got != "refused" {
		t.Fatalf("connect while dead: %s", got)
	}
	squatter, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	upstreamAt(t, upAddr, jsonUpstream(200, `{"ok": true}`))
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(logs.text(), "cannot be bound") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.text(), "cannot be bound") || !g.closed() {
		t.Fatalf("log %q", logs.text())
	}
	squatter.Close()
	if got := waitDial(addr, "accepted", 2*time.Second); got != "accepted" {
		t.Fatalf("after the port was freed: %s; log %q", got, logs.text())
	}
	if code, err := postTo(client, addr); code != 200 {
		t.Fatalf("after the port was freed: %d %v", code, err)
	}
	if n := strings.Count(logs.text(), "cannot be bound"); n != 1 {
		t.Fatalf("the taken port logged %d times, want once", n)
	}
}

// Many requests in flight when the upstream dies: each is answered 502 once, the listener is closed
// once, and the proxy comes back.
func TestConcurrentRefusalsCloseOnce(t *testing.T) {
	upAddr := freeAddr(t)
	stopUp := upstreamAt(t, upAddr, jsonUpstream(200, `{"ok": true}`))
	g, addr, logs := gatedProxy(t, upAddr)
	stopUp()
	var wg sync.WaitGroup
	codes := make(chan int, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := postTo(&http.Client{Timeout: 5 * time.Second}, addr) // refused once closed: code 0
			codes <- code
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 502 && c != 0 {
			t.Fatalf("answer %d", c)
		}
	}
	if n := strings.Count(logs.text(), "closed until"); n != 1 || !g.closed() {
		t.Fatalf("closed %d times; log %q", n, logs.text())
	}
	upstreamAt(t, upAddr, jsonUpstream(200, `{"ok": true}`))
	if got := waitDial(addr, "accepted", 2*time.Second); got != "accepted" {
		t.Fatalf("after: %s", got)
	}
}
