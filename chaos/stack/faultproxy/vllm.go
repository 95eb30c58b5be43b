package main

import (
	"strconv"
	"time"
	"unicode/utf8"
)

const (
	oomMessage = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 " +
		"has a total capacity of 79.25 GiB of which 1.06 GiB is free. Process has 78.19 GiB " +
		"memory in use."
	engineDeadMessage = "EngineCore encountered an issue. See stack trace (above) for the root cause."
	malformedEvent    = "data: {\"choices\": [{\"delta\": {\"cont\n\n"
	doneEvent         = "data: [DONE]\n\n"
)

func errorType(status int) string {
	switch status {
	case 400:
		return "BadRequestError"
	case 401:
		return "AuthenticationError"
	case 404:
		return "NotFoundError"
	case 429:
		return "RateLimitError"
	case 500:
		return "InternalServerError"
	case 502:
		return "BadGateway"
	case 503:
		return "ServiceUnavailableError"
	case 529:
		// NVIDIA Dynamo's frontend sheds overload with 529 ("busy: back off"; 503 means "unavailable: fail
		// over") and names its OpenAI error type so
		return "Overloaded"
	}
	return "APIError"
}

// vllmError is vLLM's error body, spaced as Python's json.dumps writes it.
func vllmError(status int, message string) []byte {
	b := append([]byte(`{"error": {"message": `), appendJSONString(nil, message)...)
	b = append(b, `, "type": "`...)
	b = append(b, errorType(status)...)
	b = append(b, `", "param": null, "code": `...)
	b = strconv.AppendInt(b, int64(status), 10)
	return append(b, "}}"...)
}

func defaultAbortMessage(name string) string {
	return "Injected error (fault proxy rule " + name + ")."
}

func epoch(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string (invalid UTF-8 becomes U+FFFD, as encoding/json).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
