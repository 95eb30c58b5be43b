package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(32 << 10)
	}
	return c, err
}

// A client that stops reading stops the upstream too: the proxy never buffers the stream.
func TestBackpressure(t *testing.T) {
	const events, size = 48 << 10, 1 << 10 // 48 MiB in 1 KiB events
	var written atomic.Int64
	payload := `data: {"choices":[{"delta":{"content":"` + strings.Repeat("x", size-40) + `"}}]}` + "\n\n"
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < events; i++ {
			n, err := io.WriteString(w, payload)
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
			written.Add(int64(n))
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	up.Listener = smallBufListener{up.Listener}
	up.Start()
	defer up.Close()
	f := &fixture{t: t, client: http.DefaultClient}
	f.startProxy(up.URL)

	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(32 << 10)
	body := chatBody(true)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// the client reads nothing: the upstream must come to a stop long before the end
	total := int64(events * len(payload))
	var w1 int64
	for still, deadline := 0, time.Now().Add(10*time.Second); still < 3; {
		time.Sleep(100 * time.Millisecond)
		w := written.Load()
		if w == w1 {
			still++
		} else {
			still, w1 = 0, w
		}
		if w1 > total/3 || time.Now().After(deadline) {
			t.Fatalf("upstream wrote %d of %d bytes while the client read nothing", w1, total)
		}
	}
	t.Logf("held in flight while the client did not read: %d KiB", w1>>10)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, &tailKeeper{r: resp.Body})
	if err != nil || n != total+int64(len("data: [DONE]\n\n")) {
		t.Fatalf("read %d bytes: %v", n, err)
	}
}

type tailKeeper struct {
	r    io.Reader
	tail []byte
}

func (k *tailKeeper) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	k.tail = append(k.tail, p[:n]...)
	if len(k.tail) > 64 {
		k.tail = k.tail[len(k.tail)-64:]
	}
	if err == io.EOF && !bytes.HasSuffix(k.tail, []byte("data: [DONE]\n\n")) {
		return n, fmt.Errorf("stream ended without [DONE]: %q", k.tail)
	}
	return n, err
}
