"""OpenAI/vLLM wire format: request validation, error bodies, response and SSE chunk bytes."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from chaos.stack.sim.tokenizer import render_chat, tokenize

ERROR_TYPES = {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
               404: "NotFoundError", 413: "BadRequestError", 429: "RateLimitError",
               500: "InternalServerError", 503: "ServiceUnavailableError"}
ENGINE_DEAD_MESSAGE = "The server had an error while processing your request."


class ApiError(Exception):
    """An error answered with vLLM's nested error JSON."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.kind: str | None = None  # the error type, when not the one the status implies

    def body(self) -> bytes:
        if self.kind:
            return json.dumps({"error": {"message": self.message, "type": self.kind, "param": self.param,
                                         "code": self.status}}).encode()
        return error_body(self.status, self.message, self.param)


def error_obj(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "APIError"),
                      "param": param, "code": status}}


class DetailError(ApiError):
    """An error vLLM answers in FastAPI's plain shape, `{"detail": ...}` (a body it could not parse)."""

    def body(self) -> bytes:
        return json.dumps({"detail": self.message}).encode()


def json_error(e: json.JSONDecodeError) -> ApiError:
    """Malformed JSON, worded as vLLM 0.32 words it (pydantic's json_invalid)."""
    loc = f"body.{e.pos}"
    err = ApiError(400, f"1 validation error:\n  {{'type': 'json_invalid', 'loc': '{loc}', 'msg': 'JSON decode "
                   f"error', 'input': '<dict of 0 items>', 'ctx': {{'error': '{e.msg}'}}}}", loc)
    err.kind = "Bad Request"
    return err


def error_body(status: int, message: str, param: str | None = None) -> bytes:
    return json.dumps(error_obj(status, message, param)).encode()


@dataclass(slots=True)
class Parsed:
    """A validated generation request."""

    chat: bool
    model: str
    prompt_text: str
    tokens: list[str]
    max_tokens: int | None
    stream: bool
    include_usage: bool
    ignore_eos: bool
    continuous_usage: bool = False  # stream_options.continuous_usage_stats: the running count on every chunk


def _bad(msg: str, param: str | None = None) -> ApiError:
    return ApiError(400, msg, param)


def _num(body: dict[str, Any], key: str, lo: float | None = None, hi: float | None = None,
         integer: bool = False, lo_open: bool = False) -> Any:
    val = body.get(key)
    if val is None:
        return None
    ok_type = isinstance(val, int) if integer else isinstance(val, (int, float))
    if isinstance(val, bool) or not ok_type or (isinstance(val, float) and not math.isfinite(val)):
        raise _bad(f"{key} must be {'an integer' if integer else 'a number'}, got {val!r}"[:300], key)
    if lo is not None and (val < lo or (lo_open and val == lo)):
        raise _bad(f"{key} must be {'greater than' if lo_open else 'at least'} {lo}, got {val}.", key)
    if hi is not None and val > hi:
        raise _bad(f"{key} must be at most {hi}, got {val}.", key)
    return val


def _bool(body: dict[str, Any], key: str) -> bool:
    val = body.get(key)
    if val is None:
        return False
    if not isinstance(val, bool):
        raise _bad(f"{key} must be a boolean, got {val!r}"[:300], key)
    return val


def _prompt_text(body: dict[str, Any]) -> str:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]
    if isinstance(p, str):
        return p
    if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                                         for t in p):
        return " ".join(f"t{t}" for t in p)
    if isinstance(p, list) and len(p) > 1:
        raise _bad("Batched prompts are not supported by the simulator; send one prompt.", "prompt")
    raise _bad("prompt must be a string, a list with one string, or a list of token ids.", "prompt")


def _messages_text(body: dict[str, Any]) -> str:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _bad("messages must be a non-empty list.", "messages")
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad("each message must be an object with a string 'role'.", "messages")
        c = m.get("content")
        if c is not None and not isinstance(c, (str, list)):
            raise _bad("message content must be a string, a list of parts, or null.", "messages")
        if isinstance(c, list) and not all(isinstance(p, dict) for p in c):
            raise _bad("message content parts must be objects.", "messages")
    return render_chat(msgs)


def parse_request(body: Any, chat: bool, model_names: tuple[str, ...], max_model_len: int) -> Parsed:
    """Validate a decoded JSON body as vLLM does; raise ApiError with vLLM's status."""
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _bad("model must be a string.", "model")
    if model is not None and model not in model_names:
        raise ApiError(404, f"The model `{model}` does not exist. Valid aliases: {', '.join(model_names)}.", "model")
    text = _messages_text(body) if chat else _prompt_text(body)
    _num(body, "temperature", 0.0)
    _num(body, "top_p", 0.0, 1.0, lo_open=True)
    _num(body, "top_k", -1, integer=True)
    _num(body, "min_p", 0.0, 1.0)
    _num(body, "presence_penalty", -2.0, 2.0)
    _num(body, "frequency_penalty", -2.0, 2.0)
    _num(body, "repetition_penalty", 0.0, lo_open=True)
    _num(body, "seed", -(2**63), 2**64 - 1, integer=True)
    _num(body, "min_tokens", 0, integer=True)
    n = _num(body, "n", 1, integer=True)
    if n is not None and n > 1:
        raise _bad("n > 1 is not supported by the simulator.", "n")
    stop = body.get("stop")
    if stop is not None and not (isinstance(stop, str) or (
            isinstance(stop, list) and all(isinstance(s, str) for s in stop))):
        raise _bad("stop must be a string or a list of strings.", "stop")
    if chat:
        _bool(body, "logprobs")
        _num(body, "top_logprobs", 0, 20, integer=True)
    else:
        _num(body, "logprobs", 0, 20, integer=True)
        _bool(body, "echo")
    max_tokens = _num(body, "max_completion_tokens" if chat and body.get("max_completion_tokens")
                      is not None else "max_tokens", 1, integer=True)
    if max_tokens is None and not chat:
        max_tokens = 16
    if max_tokens is not None and max_model_len and max_tokens > max_model_len:  # vLLM 0.32; only the sum is clamped
        raise _bad(f"max_tokens={max_tokens} cannot be greater than max_model_len={max_model_len}. Please request "
                   f"fewer output tokens. (parameter=max_tokens, value={max_tokens})", "max_tokens")
    stream = _bool(body, "stream")
    opts = body.get("stream_options")
    include_usage = continuous = False
    if opts is not None:
        if not isinstance(opts, dict):
            raise _bad("stream_options must be an object.", "stream_options")
        if not stream:
            raise _bad("Stream options can only be defined when `stream=True`.", "stream_options")
        include_usage = _bool(opts, "include_usage")
        continuous = include_usage and _bool(opts, "continuous_usage_stats")  # vLLM: only with include_usage
    ignore_eos = _bool(body, "ignore_eos")
    tokens = tokenize(text)
    if not tokens:
        raise _bad("The decoder prompt cannot be empty", "prompt")
    if len(tokens) >= max_model_len:
        raise ApiError(400, f"This model's maximum context length is {max_model_len} tokens. However, your "
                       f"prompt contains at least {len(tokens)} input tokens, which exceeds this limit even "
                       "without any output tokens. Please reduce the length of the input prompt. "
                       f"(parameter=input_tokens, value={len(tokens)})", "input_tokens")
    return Parsed(chat, model or model_names[0], text, tokens, max_tokens, stream, include_usage,
                  ignore_eos, continuous)


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion,
            "completion_tokens": completion, "prompt_tokens_details": None}


def full_response(chat: bool, rid: str, created: int, model: str, text: str, finish: str,
                  prompt_tokens: int, completion_tokens: int) -> bytes:
    """Non-streaming body of a finished request."""
    if chat:
        choice: dict[str, Any] = {
            "index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                    "annotations": None, "audio": None, "function_call": None,
                                    "tool_calls": [], "reasoning_content": None},
            "logprobs": None, "finish_reason": finish, "stop_reason": None}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                  "stop_reason": None, "prompt_logprobs": None}
        obj = "text_completion"
    return json.dumps({"id": rid, "object": obj, "created": created, "model": model,
                       "choices": [choice], "usage": usage(prompt_tokens, completion_tokens),
                       "service_tier": None, "system_fingerprint": None, "prompt_logprobs": None,
                       "kv_transfer_params": None}).encode()


class ChunkFormat:
    """Pre-encoded SSE event bytes for one streaming request."""

    __slots__ = ("head", "mid", "role", "usage_head", "chat", "prompt")

    def __init__(self, chat: bool, rid: str, created: int, model: str, prompt: int | None = None) -> None:
        self.chat = chat
        self.prompt = prompt  # set: continuous usage stats, each chunk states the running count as vLLM does
        obj = "chat.completion.chunk" if chat else "text_completion"
        base = (f'data: {{"id":"{rid}","object":"{obj}","created":{created},'
                f'"model":{json.dumps(model)},"choices":').encode()
        self.usage_head = base + b'[],"usage":'
        if chat:
            self.head = base + b'[{"index":0,"delta":{"content":'
            self.mid = b'},"logprobs":null,"finish_reason":'
            self.role = (base + b'[{"index":0,"delta":{"role":"assistant","content":""},'
                         b'"logprobs":null,"finish_reason":null}]' + self._usage_tail(0) + b'}\n\n')
        else:
            self.head = base + b'[{"index":0,"text":'
            self.mid = b',"logprobs":null,"finish_reason":'
            self.role = b""

    def _usage_tail(self, completion: int) -> bytes:
        if self.prompt is None:
            return b""
        return b',"usage":' + json.dumps(usage(self.prompt, completion), separators=(",", ":")).encode()

    def token(self, enc_tok: bytes, finish: bytes = b"null", count: int = 0) -> bytes:
        """One content chunk; `count` (the output tokens so far) is stated only under continuous usage."""
        if self.prompt is None:
            return b"".join((self.head, enc_tok, self.mid, finish, b',"stop_reason":null}]}\n\n'))
        return b"".join((self.head, enc_tok, self.mid, finish, b',"stop_reason":null}]', self._usage_tail(count),
                         b'}\n\n'))

    def usage(self, prompt: int, completion: int) -> bytes:
        return self.usage_head + json.dumps(usage(prompt, completion), separators=(",", ":")).encode() + b"}\n\n"


DONE = b"data: [DONE]\n\n"


def error_event(status: int, message: str) -> bytes:
    return b"data: " + error_body(status, message) + b"\n\n"


def frame(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-transfer frame."""
    return b"%x\r\n%b\r\n" % (len(data), data)
