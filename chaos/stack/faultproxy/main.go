// Command chaos-faultproxy is an HTTP/SSE fault-injection reverse proxy for OpenAI-compatible
// inference servers; docs/faultproxy.md is its specification.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

var dialer = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}

type config struct {
	listen, adminListen, upstream, name, tokenFile, requestLog string
	mirrorRefusal                                              bool
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("chaos-faultproxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.listen, "listen", "", "HOST:PORT clients connect to")
	fs.StringVar(&c.upstream, "upstream", "", "the replica, http://HOST:PORT")
	fs.StringVar(&c.name, "name", "replica", "the replica's name, written in the request log")
	fs.StringVar(&c.tokenFile, "token-file", "", "file whose first line is the admin token")
	fs.StringVar(&c.requestLog, "request-log", "", "JSONL request log, appended")
	fs.StringVar(&c.adminListen, "admin-listen", "", "HOST:PORT of a listener for /_chaos/ only")
	fs.BoolVar(&c.mirrorRefusal, "mirror-refusal", false, "refuse connections while the upstream refuses them")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, errors.New("usage: chaos-faultproxy --listen HOST:PORT --upstream http://HOST:PORT " +
				"[--name NAME] [--token-file PATH] [--request-log PATH] [--admin-listen HOST:PORT] [--mirror-refusal]")
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.listen == "" {
		return c, errors.New("--listen HOST:PORT is required")
	}
	if _, _, err := net.SplitHostPort(c.listen); err != nil {
		return c, fmt.Errorf("--listen: expected HOST:PORT, got %q", c.listen)
	}
	if c.adminListen != "" {
		if _, _, err := net.SplitHostPort(c.adminListen); err != nil {
			return c, fmt.Errorf("--admin-listen: expected HOST:PORT, got %q", c.adminListen)
		}
	}
	if c.mirrorRefusal && c.adminListen == "" {
		// the admin API and the request log would be closed with the data port for the whole outage
		return c, errors.New("--mirror-refusal needs --admin-listen HOST:PORT (the admin API must stay reachable)")
	}
	if c.upstream == "" {
		return c, errors.New("--upstream http://HOST:PORT is required")
	}
	u, err := url.Parse(c.upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return c, fmt.Errorf("--upstream: expected http://HOST:PORT, got %q", c.upstream)
	}
	if c.name == "" {
		return c, errors.New("--name: must not be empty")
	}
	return c, nil
}

// readToken takes the admin token from the file's first line, else $CHAOS_PROXY_TOKEN.
func readToken(path string) (string, error) {
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("--token-file: %v", err)
		}
		defer f.Close()
		line, err := bufio.NewReader(f).ReadString('\n')
		if err != nil && err != io.EOF {
			return "", fmt.Errorf("--token-file: %v", err)
		}
		if tok := strings.TrimSpace(line); tok != "" {
			return tok, nil
		}
		return "", fmt.Errorf("--token-file %s: the first line is empty", path)
	}
	if tok := strings.TrimSpace(os.Getenv("CHAOS_PROXY_TOKEN")); tok != "" {
		return tok, nil
	}
	return "", errors.New("no admin token: give --token-file PATH or set $CHAOS_PROXY_TOKEN")
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(os.Stderr, "chaos-faultproxy: %v\n", err)
		return code
	}
	cfg, err := parseFlags(args)
	if err != nil {
		return fail(2, err)
	}
	token, err := readToken(cfg.tokenFile)
	if err != nil {
		return fail(2, err)
	}
	rlog, err := openRequestLog(cfg.requestLog)
	if err != nil {
		return fail(2, fmt.Errorf("--request-log: %v", err))
	}
	defer rlog.close()
	up, _ := url.Parse(cfg.upstream)
	up.Path = ""
	p := &proxy{name: cfg.name, upstream: up, upstreamStr: strings.TrimSuffix(cfg.upstream, "/"),
		token: token, transport: newTransport(), log: rlog}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fail(1, err)
	}
	srv := newServer(p)
	var adminSrv *http.Server
	var adminLn net.Listener
	if cfg.adminListen != "" {
		if adminLn, err = net.Listen("tcp", cfg.adminListen); err != nil {
			ln.Close()
			return fail(1, fmt.Errorf("--admin-listen: %v", err))
		}
		adminSrv = newServer(http.HandlerFunc(p.adminOnly))
	}
	if path := os.Getenv("CHAOS_FAULTPROXY_CPUPROFILE"); path != "" { // for the bench: where the CPU goes
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 2)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "chaos-faultproxy %s: %s\n", cfg.name, fmt.Sprintf(format, args...))
	}
	g := newGate(srv, upstreamHostPort(up), logf, served)
	if cfg.mirrorRefusal {
		p.gate = g
	}
	g.serve(ln)
	fmt.Fprintf(os.Stderr, "chaos-faultproxy %s listening on %s -> %s\n", cfg.name, ln.Addr(), p.upstreamStr)
	if adminSrv != nil {
		go func() { served <- adminSrv.Serve(adminLn) }()
		fmt.Fprintf(os.Stderr, "chaos-faultproxy %s admin API on %s\n", cfg.name, adminLn.Addr())
	}
	select {
	case err := <-served:
		return fail(1, err)
	case <-ctx.Done():
	}
	g.stop()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range []*http.Server{srv, adminSrv} {
		if s != nil && s.Shutdown(sctx) != nil {
			_ = s.Close() // streams still open after the grace period are cut
		}
	}
	p.transport.CloseIdleConnections()
	return 0
}

func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

// upstreamHostPort: what the gate's probe dials (the scheme's port when the URL names none).
func upstreamHostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}
