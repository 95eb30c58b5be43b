package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as chaos-faultproxy when this variable is set.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("FAULTPROXY_TEST_MAIN"); ok {
		os.Exit(run(strings.Fields(args)))
	}
	os.Exit(m.Run())
}

func command(args string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "FAULTPROXY_TEST_MAIN="+args, "CHAOS_PROXY_TOKEN="), env...)
	return cmd
}

func TestBadFlagsExit2(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	_ = os.WriteFile(tok, []byte("abc\nsecond line\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, []byte("\n"), 0o600)
	up := " --upstream http://127.0.0.1:9"
	for _, args := range []string{
		"--listen 127.0.0.1:0",
		"--upstream http://127.0.0.1:9 --token-file " + tok,
		"--listen nope" + up + " --token-file " + tok,
		"--listen 127.0.0.1:0 --upstream ftp://x:1 --token-file " + tok,
		"--listen 127.0.0.1:0 --upstream http://x:1/v1 --token-file " + tok,
		"--listen 127.0.0.1:0" + up + " --bogus --token-file " + tok,
		"--listen 127.0.0.1:0" + up,
		"--listen 127.0.0.1:0" + up + " --token-file " + filepath.Join(dir, "missing"),
		"--listen 127.0.0.1:0" + up + " --token-file " + empty,
		"--listen 127.0.0.1:0" + up + " --token-file " + tok + " --request-log " + filepath.Join(dir, "no/such/dir/x.jsonl"),
		"--listen 127.0.0.1:0" + up + " --token-file " + tok + " --mirror-refusal",
		"--listen 127.0.0.1:0" + up + " --token-file " + tok + " --admin-listen nope --mirror-refusal",
	} {
		var stderr bytes.Buffer
		cmd := command(args)
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: %v, stderr %q", args, err, stderr.String())
		}
	}
}

func TestServeAndSIGTERM(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	f := newFixture(t, sseUpstream(2, 0))
	cmd := command("--listen "+addr+" --upstream "+f.up.URL+" --name rep-x", "CHAOS_PROXY_TOKEN=envtok")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	want := "chaos-faultproxy rep-x listening on " + addr + " -> " + f.up.URL + "\n"
	if err != nil || line != want {
		t.Fatalf("ready line %q, want %q (%v)", line, want, err)
	}
	f2 := &fixture{t: t, client: f.client, base: "http://" + addr}
	if code, out := f2.adminRaw("GET", "/_chaos/rules", nil, "Bearer envtok"); code != 200 {
		t.Fatalf("token from the environment: %d %v", code, out)
	}
	if resp, b := f2.post("/v1/chat/completions", chatBody(true)); resp.StatusCode != 200 || !strings.HasSuffix(string(b), "[DONE]\n\n") {
		t.Fatalf("proxying: %d %q", resp.StatusCode, b)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}
