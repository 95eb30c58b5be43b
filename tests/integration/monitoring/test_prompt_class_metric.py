"""The reference gateway counts each call's outcome by prompt-length class (the series the shipped
32k-class alert reads): an upstream that fails only long-context prompts shows up in the xl class alone."""
from __future__ import annotations

import asyncio
import json

import aiohttp
from aiohttp import web

from chaos.env.model import BreakerPolicy
from chaos.stack.gateway import GatewaySettings, Replica, serve
from chaos.stack.gateway.admin import prompt_class


def test_body_size_classes_match_the_seeds_512_8k_32k_prompts() -> None:
    # the load's prompts are 3-letter words: a token is 4 bytes
    assert prompt_class(len(json.dumps({"prompt": "abc " * 512}))) == "short"
    assert prompt_class(len(json.dumps({"prompt": "abc " * 8192}))) == "long"
    assert prompt_class(len(json.dumps({"prompt": "abc " * 32768}))) == "xl"


def test_a_failing_long_context_class_is_counted_apart_from_the_rest() -> None:
    async def upstream_handler(request: web.Request) -> web.Response:
        body = await request.read()
        if len(body) > 64 * 1024:  # this replica cannot take a 32k prompt (an OOM at prefill, say)
            return web.json_response({"error": {"message": "prefill failed", "code": 500}}, status=500)
        return web.json_response({"choices": [{"index": 0, "text": "ok", "finish_reason": "stop"}]})

    async def go() -> str:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_post("/v1/completions", upstream_handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        try:
            cfg = GatewaySettings([Replica("s", f"http://{host}:{port}")], listen="127.0.0.1:0",
                                  policy=BreakerPolicy())
            async with serve(cfg) as gw, aiohttp.ClientSession() as s:
                for words in (512, 512, 512, 8192, 32768):
                    async with s.post(f"{gw}/v1/completions", json={"model": "m", "prompt": "abc " * words}) as r:
                        await r.read()
                async with s.get(f"{gw}/metrics") as r:
                    return await r.text()
        finally:
            await runner.cleanup()

    text = asyncio.run(go())
    series = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("chaos_gateway_prompt_class_requests_total{")}
    assert series == {
        'chaos_gateway_prompt_class_requests_total{outcome="ok",pool="stable",prompt_class="short"}': 3.0,
        'chaos_gateway_prompt_class_requests_total{outcome="ok",pool="stable",prompt_class="long"}': 1.0,
        'chaos_gateway_prompt_class_requests_total{outcome="error",pool="stable",prompt_class="xl"}': 1.0,
    }, text
