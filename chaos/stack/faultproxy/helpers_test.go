package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const testToken = "s3cret"

type fixture struct {
	t       *testing.T
	up      *httptest.Server
	upCalls atomic.Int64
	p       *proxy
	srv     *httptest.Server
	logPath string
	client  *http.Client
	base    string // when the proxy under test is not srv
}

// newFixture starts handler as the upstream and a proxy in front of it.
func newFixture(t *testing.T, handler http.HandlerFunc) *fixture {
	t.Helper()
	f := &fixture{t: t, client: &http.Client{Timeout: 20 * time.Second}}
	f.up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.upCalls.Add(1)
		handler(w, r)
	}))
	t.Cleanup(f.up.Close)
	f.startProxy(f.up.URL)
	return f
}

func (f *fixture) startProxy(upstream string) {
	f.logPath = filepath.Join(f.t.TempDir(), "proxy.jsonl")
	rlog, err := openRequestLog(f.logPath)
	if err != nil {
		f.t.Fatal(err)
	}
	u, _ := url.Parse(upstream)
	f.p = &proxy{name: "replica-t", upstream: u, upstreamStr: upstream, token: testToken,
		transport: newTransport(), log: rlog}
	f.srv = httptest.NewServer(f.p)
	f.t.Cleanup(func() {
		f.srv.Close()
		f.p.transport.CloseIdleConnections()
		rlog.close()
	})
}

func (f *fixture) url(path string) string {
	if f.base != "" {
		return f.base + path
	}
	return f.srv.URL + path
}

func (f *fixture) post(path, body string, hdr ...string) (*http.Response, []byte) {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("POST %s: reading the body: %v", path, err)
	}
	return resp, b
}

func chatBody(stream bool) string {
	return fmt.Sprintf(`{"model": "sim-model", "messages": [{"role": "user", "content": "hi"}], "stream": %v}`, stream)
}

// adminCall sends an admin request with the token and decodes the JSON answer.
func (f *fixture) adminCall(method, path string, body any) (int, map[string]any) {
	f.t.Helper()
	return f.adminRaw(method, path, body, "Bearer "+testToken)
}

func (f *fixture) adminRaw(method, path string, body any, auth string) (int, map[string]any) {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, f.url(path), rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		f.t.Fatalf("%s %s: not JSON: %q", method, path, raw)
	}
	if bytes.Count(bytes.TrimSpace(raw), []byte("\n")) != 0 {
		f.t.Fatalf("%s %s: answer is not one line: %q", method, path, raw)
	}
	return resp.StatusCode, out
}

func (f *fixture) addRule(rule map[string]any) map[string]any {
	f.t.Helper()
	code, out := f.adminCall("POST", "/_chaos/rules", rule)
	if code != 201 {
		f.t.Fatalf("POST rule %v: %d %v", rule, code, out)
	}
	return out
}

func (f *fixture) ruleCounters(name string) (seen, matched, hits int) {
	f.t.Helper()
	code, out := f.adminCall("GET", "/_chaos/rules/"+name, nil)
	if code != 200 {
		f.t.Fatalf("GET rule %s: %d %v", name, code, out)
	}
	return int(out["seen"].(float64)), int(out["matched"].(float64)), int(out["hits"].(float64))
}

// logLines waits until the request log holds at least n lines and returns them.
func (f *fixture) logLines(n int) []map[string]any {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		raw, _ := os.ReadFile(f.logPath)
		var out []map[string]any
		for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				f.t.Fatalf("log line not JSON: %q", line)
			}
			out = append(out, m)
		}
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("request log has %d lines, want %d", len(out), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) lastLog() map[string]any {
	f.t.Helper()
	lines := f.logLines(1)
	return lines[len(lines)-1]
}

// sseUpstream answers like vLLM's chat stream: a role chunk, n token chunks (the last one with
// finish_reason "stop"), then [DONE], gap apart.
func sseUpstream(n int, gap time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(200)
		fl := w.(http.Flusher)
		fmt.Fprint(w, `data: {"id":"c1","model":"sim-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		fl.Flush()
		for i := 1; i <= n; i++ {
			if gap > 0 {
				time.Sleep(gap)
			}
			fin := "null"
			if i == n {
				fin = `"stop"`
			}
			if _, err := fmt.Fprintf(w, `data: {"id":"c1","model":"sim-model","choices":[{"index":0,"delta":{"content":"t%d"},"finish_reason":%s}]}`+"\n\n", i, fin); err != nil {
				return
			}
			fl.Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func jsonUpstream(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

const chatJSON = `{"id": "c1", "object": "chat.completion", "model": "sim-model", "choices": [{"index": 0, "message": {"role": "assistant", "content": "t1 t2 t3"}, "finish_reason": "length"}], "usage": {"prompt_tokens": 3, "total_tokens": 6, "completion_tokens": 3}}`

// sseData splits an SSE body into its events' data.
func sseData(body []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if line := strings.TrimSuffix(sc.Text(), "\r"); strings.HasPrefix(line, "data: ") {
			out = append(out, strings.TrimPrefix(line, "data: "))
		}
	}
	return out
}

func tokenCount(events []string) int {
	n := 0
	for _, e := range events {
		if isTokenChunk([]byte(e)) {
			n++
		}
	}
	return n
}
