package main

import (
	"strconv"
	"time"
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
