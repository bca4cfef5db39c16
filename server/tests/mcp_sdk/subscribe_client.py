"""A client of the official MCP Python SDK (package `mcp`) that subscribes to resources of a
tool set and waits to hear that one was updated.

Usage: subscribe_client.py URL API_KEY SCRIPT_JSON

SCRIPT_JSON is {"subscribe": [uri, ...], "call": tool name or null, "wait_for": uri}: each URI is
subscribed to (a refusal is recorded, not fatal), the tool is called (to make the server start
sending updates), and the client waits up to 20 s for `notifications/resources/updated` about
`wait_for`, then unsubscribes from it. Prints one JSON report: whether the server said it offers
subscriptions, the URIs subscribed to, the refusals, and the updated URIs heard.
"""

import asyncio
import json
import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, key: str, script: dict) -> dict:
    report: dict = {"subscribed": [], "refused": {}, "updated": []}
    heard = anyio.Event()

    async def on_message(message) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            report["updated"].append(message.params.uri)
            if message.params.uri == script["wait_for"]:
                heard.set()

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, message_handler=on_message) as session:
                init = await session.initialize()
                resources = init.capabilities.resources
                report["offers_subscribe"] = bool(resources and resources.subscribe)
                for uri in script["subscribe"]:
                    try:
                        await session.subscribe_resource(uri)
                        report["subscribed"].append(uri)
                    except Exception as e:  # the server's refusal, as the SDK raises it
                        report["refused"][uri] = str(e)
                if script.get("call"):
                    await session.call_tool(script["call"], {})
                with anyio.move_on_after(20):
                    await heard.wait()
                await session.unsubscribe_resource(script["wait_for"])
    return report


if __name__ == "__main__":
    url, key, script = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(asyncio.run(main(url, key, script))))
