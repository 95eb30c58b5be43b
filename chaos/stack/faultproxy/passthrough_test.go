package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPassThroughJSON(t *testing.T) {
	var got *http.Request
	var gotBody string
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, gotBody = r, string(b)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, chatJSON)
	})
	body := chatBody(false)
	resp, b := f.post("/v1/chat/completions?a=1&b=two", body, "X-Tenant", "acme", "Connection", "keep-alive")
	if resp.StatusCode != 200 || string(b) != chatJSON {
		t.Fatalf("answer changed: %d %q", resp.StatusCode, b)
	}
	if resp.Header.Get("X-Upstream") != "yes" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("response headers changed: %v", resp.Header)
	}
	if got.Method != "POST" || got.URL.Path != "/v1/chat/completions" || got.URL.RawQuery != "a=1&b=two" {
		t.Fatalf("upstream request changed: %s %s", got.Method, got.URL)
	}
	if gotBody != body || got.Header.Get("X-Tenant") != "acme" || got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("upstream body or headers changed: %q %v", gotBody, got.Header)
	}
	if rid := got.Header.Get("X-Request-Id"); !strings.HasPrefix(rid, "fp-") || len(rid) != 35 {
		t.Fatalf("generated x-request-id %q", rid)
	}
	if got.Header.Get("User-Agent") != "Go-http-client/1.1" { // the test client's, not the proxy's
		t.Fatalf("user agent %q", got.Header.Get("User-Agent"))
	}
	rec := f.lastLog()
	if rec["request_id"] != got.Header.Get("X-Request-Id") || rec["outcome"] != "length" ||
		rec["output_tokens"] != 3.0 || rec["stream"] != false {
		t.Fatalf("log %v", rec)
	}
	f.post("/v1/chat/completions", body, "X-Request-Id", "client-id-1")
	if got.Header.Get("X-Request-Id") != "client-id-1" || f.lastLog()["request_id"] != "client-id-1" {
		t.Fatalf("client x-request-id not kept: %q", got.Header.Get("X-Request-Id"))
	}
	resp, err := f.client.Get(f.url("/v1/models"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	if got.Method != "GET" || len(f.logLines(2)) != 2 {
		t.Fatal("GET not forwarded, or logged")
	}
}

// tricky SSE: CRLF line endings, comments, several events per write, events split across writes
func TestPassThroughSSEUnchanged(t *testing.T) {
	parts := []string{
		": keep-alive comment\r\n\r\n",
		"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n",
		"data: {\"choices\":[{\"delta\":{\"con",
		"tent\":\"b\"}}]}\n\nevent: x\nid: 7\ndata: {\"choices\":[{\"delta\":{\"content\":\"c\"},",
		"\"finish_reason\":\"stop\"}]}\n\n",
		"data: [DONE]\n\n",
	}
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range parts {
			_, _ = io.WriteString(w, p)
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond)
		}
	})
	resp, b := f.post("/v1/chat/completions", chatBody(true))
	if resp.StatusCode != 200 || string(b) != strings.Join(parts, "") {
		t.Fatalf("stream changed: %q", b)
	}
	rec := f.lastLog()
	if rec["outcome"] != "stop" || rec["output_tokens"] != 3.0 || rec["stream"] != true || rec["t_first_token"] == nil {
		t.Fatalf("log %v", rec)
	}
}

func TestNotJSONBodyPassesThrough(t *testing.T) {
	var gotBody string
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"error": {"message": "bad", "type": "BadRequestError", "param": null, "code": 400}}`)
	})
	f.addRule(map[string]any{"name": "m", "kind": "abort", "match": map[string]any{"model": "sim-model"}})
	resp, _ := f.post("/v1/chat/completions", "this is {not json")
	if resp.StatusCode != 400 || gotBody != "this is {not json" {
		t.Fatalf("got %d, upstream saw %q", resp.StatusCode, gotBody)
	}
	rec := f.lastLog()
	if rec["model"] != nil || rec["outcome"] != "rejected" || rec["upstream_status"] != 400.0 || rec["rule"] != nil {
		t.Fatalf("log %v", rec)
	}
	if _, matched, _ := f.ruleCounters("m"); matched != 0 {
		t.Fatal("a model rule matched a body that is not JSON")
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	f := &fixture{t: t, client: &http.Client{Timeout: 10 * time.Second}}
	f.startProxy("http://" + addr)
	resp, b := f.post("/v1/chat/completions", chatBody(false))
	want := `{"error": {"message": "fault proxy: upstream http://` + addr + ` not reachable: `
	if resp.StatusCode != 502 || !strings.HasPrefix(string(b), want) ||
		!strings.HasSuffix(string(b), `", "type": "BadGateway", "param": null, "code": 502}}`) {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
	rec := f.lastLog()
	if rec["outcome"] != "error" || rec["status"] != 502.0 || rec["upstream_status"] != nil {
		t.Fatalf("log %v", rec)
	}
}

// HTTP/1.1 keep-alive on both sides: many sequential requests reuse one client connection.
func TestKeepAlive(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 0))
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	body := chatBody(true)
	for i := 0; i < 20; i++ {
		_, _ = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Fatalf("request %d: %q", i, b)
		}
	}
}
