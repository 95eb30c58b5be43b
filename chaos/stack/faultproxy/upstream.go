package main

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil, // never an environment proxy between us and the replica
		DialContext:         dialer.DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     50 * time.Second, // under aiohttp's and uvicorn's keep-alive
		DisableCompression:  true,
		ReadBufferSize:      32 << 10,
		WriteBufferSize:     16 << 10,
	}
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, nil
	}
	if r.ContentLength > 0 && r.ContentLength < 1<<30 {
		b := make([]byte, r.ContentLength)
		_, err := io.ReadFull(r.Body, b)
		return b, err
	}
	return io.ReadAll(r.Body)
}

var hopHeaders = map[string]bool{"Connection": true, "Proxy-Connection": true, "Keep-Alive": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		if !hopHeaders[k] {
			dst[k] = v
		}
	}
	for _, c := range src["Connection"] {
		for _, f := range strings.Split(c, ",") {
			delete(dst, http.CanonicalHeaderKey(strings.TrimSpace(f)))
		}
	}
}

func (p *proxy) upstreamRequest(r *http.Request, body []byte) *http.Request {
	u := *p.upstream
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	h := make(http.Header, len(r.Header)+1)
	copyHeader(h, r.Header)
	delete(h, "Expect") // the body is read already
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // Go would add its own
	}
	out := &http.Request{Method: r.Method, URL: &u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Host: r.Host}
	if len(body) > 0 {
		out.ContentLength = int64(len(body))
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return out.WithContext(r.Context())
}

func newRequestID() string {
	b := make([]byte, 3, 35)
	copy(b, "fp-")
	for _, v := range [2]uint64{rand.Uint64(), rand.Uint64()} {
		for s := 60; s >= 0; s -= 4 {
			b = append(b, hexDigits[(v>>uint(s))&0xf])
		}
	}
	return string(b)
}
