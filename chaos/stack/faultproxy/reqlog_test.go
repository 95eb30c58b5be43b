package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

var logFields = []string{"request_id", "t_arrival", "t_headers", "t_first_token", "t_finish", "status",
	"outcome", "output_tokens", "model", "stream", "resumed", "path", "rule", "replica", "upstream_status"}

func TestRequestLogFieldsAndOutcomes(t *testing.T) {
	mode := ""
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		switch mode {
		case "400":
			jsonUpstream(400, `{"error": {"message": "bad", "type": "BadRequestError", "param": null, "code": 400}}`)(w, r)
		case "500":
			jsonUpstream(500, `{"error": {"message": "dead", "type": "InternalServerError", "param": null, "code": 500}}`)(w, r)
		default:
			sseUpstream(4, 0)(w, r)
		}
	})
	check := func(name, outcome string, status, upstream int, tokens int) map[string]any {
		t.Helper()
		rec := f.lastLog()
		for _, k := range logFields {
			if _, ok := rec[k]; !ok {
				t.Errorf("%s: field %s missing: %v", name, k, rec)
			}
		}
		_, gaps := rec["decode_gaps"] // a stream that carried tokens: its pauses
		if len(rec) != len(logFields) && !(gaps && tokens > 0 && len(rec) == len(logFields)+1) {
			t.Errorf("%s: fields %v", name, rec)
		}
		if rec["outcome"] != outcome || rec["status"] != float64(status) || rec["output_tokens"] != float64(tokens) ||
			rec["replica"] != "replica-t" || rec["path"] != "/v1/chat/completions" || rec["model"] != "sim-model" {
			t.Errorf("%s: %v", name, rec)
		}
		if upstream == 0 && rec["upstream_status"] != nil || upstream != 0 && rec["upstream_status"] != float64(upstream) {
			t.Errorf("%s: upstream_status %v", name, rec["upstream_status"])
		}
		ta, tf := rec["t_arrival"].(float64), rec["t_finish"].(float64)
		if ta < 1e9 || tf < ta || tf-ta > 10 {
			t.Errorf("%s: times %v", name, rec)
		}
		return rec
	}
	ev, _, _ := streamOf(t, f)
	rec := check("stop", "stop", 200, 200, 4)
	th, ft := rec["t_headers"].(float64), rec["t_first_token"].(float64)
	if th < rec["t_arrival"].(float64) || ft < th || rec["t_finish"].(float64) < ft || rec["stream"] != true || len(ev) != 6 {
		t.Errorf("stop: times %v", rec)
	}
	f.addRule(map[string]any{"name": "c", "kind": "cut", "after_tokens": 2})
	streamOf(t, f)
	check("cut", "error", 200, 200, 2)
	f.addRule(map[string]any{"name": "c", "kind": "error_chunk", "after_tokens": 1})
	streamOf(t, f)
	check("error_chunk", "error", 200, 200, 1)
	f.adminCall("DELETE", "/_chaos/rules", nil)
	mode = "400"
	f.post("/v1/chat/completions", chatBody(false))
	if rec := check("4xx", "rejected", 400, 400, 0); rec["t_first_token"] != nil || rec["stream"] != false {
		t.Errorf("4xx: %v", rec)
	}
	mode = "500"
	f.post("/v1/chat/completions", chatBody(false))
	check("5xx", "error", 500, 500, 0)
	if n := len(f.logLines(5)); n != 5 {
		t.Fatalf("%d lines for 5 requests", n)
	}
}

// A client that goes away mid-stream is logged abort, with the tokens it got.
func TestRequestLogClientGone(t *testing.T) {
	f := newFixture(t, sseUpstream(200, 10*time.Millisecond))
	conn, br := rawStream(t, f)
	for seen := 0; seen < 2; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"t`) {
			seen++
		}
	}
	conn.Close()
	rec := f.lastLog()
	if rec["outcome"] != "abort" || rec["status"] != 200.0 || rec["output_tokens"].(float64) < 2 ||
		rec["output_tokens"].(float64) > 100 {
		t.Fatalf("log %v", rec)
	}
}

// The line is in the file before the client can read the stream's final `data: [DONE]`.
func TestRequestLogBeforeDone(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(readAll(r), `"stream": true`) {
			jsonUpstream(200, chatJSON)(w, r)
			return
		}
		sseUpstream(3, 0)(w, r)
		w.(http.Flusher).Flush()
		<-release // the upstream answer stays open after [DONE]
	})
	defer close(release)
	resp, err := f.client.Post(f.url("/v1/chat/completions"), "application/json", strings.NewReader(chatBody(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before [DONE]: %v", err)
		}
		if strings.HasPrefix(line, "data: [DONE]") {
			break
		}
	}
	raw, _ := os.ReadFile(f.logPath) // no waiting: it must be there already
	if !strings.Contains(string(raw), `"outcome":"stop"`) {
		t.Fatalf("log when [DONE] arrived: %q", raw)
	}
	// and for a JSON answer: the line is there when the body is
	_, b := f.post("/v1/chat/completions", chatBody(false))
	raw, _ = os.ReadFile(f.logPath)
	if strings.Count(string(raw), "\n") != 2 || len(b) == 0 {
		t.Fatalf("log after a JSON answer: %q", raw)
	}
}

// Each line is one write: concurrent requests never interleave lines.
func TestRequestLogConcurrentLines(t *testing.T) {
	f := newFixture(t, sseUpstream(2, 0))
	done := make(chan struct{})
	for i := 0; i < 20; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := 0; j < 10; j++ {
				resp, err := f.client.Post(f.url("/v1/chat/completions"), "application/json", strings.NewReader(chatBody(true)))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		<-done
	}
	if lines := f.logLines(200); len(lines) != 200 {
		t.Fatalf("%d lines", len(lines))
	}
}

// decodeGaps is a line's decode_gaps: its pauses as [start, seconds], and how many went unlisted.
func decodeGaps(t *testing.T, rec map[string]any) ([][2]float64, float64) {
	t.Helper()
	g, ok := rec["decode_gaps"].(map[string]any)
	if !ok || g["min_s"] != 0.5 {
		t.Fatalf("no decode_gaps: %v", rec)
	}
	var out [][2]float64
	for _, s := range g["spans"].([]any) {
		pair := s.([]any)
		out = append(out, [2]float64{pair[0].(float64), pair[1].(float64)})
	}
	return out, g["dropped"].(float64)
}

// The upstream's pauses between tokens are logged with when they began; the proxy's own injected
// stall is not one of them; a stream the client gave up during a pause logs that pause too.
func TestRequestLogDecodeGaps(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 600*time.Millisecond))
	streamOf(t, f)
	rec := f.lastLog()
	spans, dropped := decodeGaps(t, rec)
	if len(spans) != 2 || dropped != 0 {
		t.Fatalf("two pauses of 0.6 s expected: %v", rec)
	}
	for _, s := range spans {
		if s[1] < 0.55 || s[1] > 1.5 || s[0] < rec["t_first_token"].(float64) || s[0]+s[1] > rec["t_finish"].(float64) {
			t.Errorf("pause %v in %v", s, rec)
		}
	}

	g := newFixture(t, sseUpstream(4, 0))
	g.addRule(map[string]any{"name": "s", "kind": "stall", "after_tokens": 1, "seconds": 0.8})
	_, times, _ := streamOf(t, g)
	rec = g.lastLog()
	if spans, _ := decodeGaps(t, rec); len(spans) != 0 || times[len(times)-1].Sub(times[0]) < 700*time.Millisecond {
		t.Fatalf("the proxy's own stall is no pause of the upstream's: %v", rec)
	}
	k := newFixture(t, jsonUpstream(200, `{"id":"c1","model":"sim-model","choices":[]}`))
	resp, err := k.client.Post(k.url("/v1/chat/completions"), "application/json", strings.NewReader(chatBody(false)))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if rec := k.lastLog(); rec["decode_gaps"] != nil {
		t.Fatalf("an answer without token events has no decode_gaps: %v", rec)
	}

	h := newFixture(t, sseUpstream(2, 2*time.Second))
	conn, br := rawStream(t, h)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"t1"`) {
			break
		}
	}
	time.Sleep(800 * time.Millisecond)
	conn.Close()
	rec = h.lastLog()
	if spans, _ := decodeGaps(t, rec); rec["outcome"] != "abort" || len(spans) != 1 || spans[0][1] < 0.7 || spans[0][1] > 1.9 {
		t.Fatalf("the pause the client gave up in: %v", rec)
	}
}

// rawStream sends a streaming chat request on a bare connection (a client that can walk away mid-stream).
func rawStream(t *testing.T, f *fixture) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body := chatBody(true)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return conn, bufio.NewReader(conn)
}
