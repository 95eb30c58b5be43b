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
	listen, upstream, name, tokenFile, requestLog string
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, errors.New("usage: chaos-faultproxy --listen HOST:PORT --upstream http://HOST:PORT " +
				"[--name NAME] [--token-file PATH] [--request-log PATH]")
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
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	if path := os.Getenv("CHAOS_FAULTPROXY_CPUPROFILE"); path != "" { // for the bench: where the CPU goes
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "chaos-faultproxy %s listening on %s -> %s\n", cfg.name, ln.Addr(), p.upstreamStr)
	select {
	case err := <-served:
		return fail(1, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if srv.Shutdown(sctx) != nil {
		_ = srv.Close() // streams still open after the grace period are cut
	}
	p.transport.CloseIdleConnections()
	return 0
}
