"""A client of the official MCP Python SDK (package `mcp`) that can be asked things: it declares
elicitation and sampling, answers an elicitation by accepting with fixed content and a sampling
request with a fixed message, and reports every request it was asked and each call's result.
An elicitation whose message is "Withdraw me; tell URL" is not answered: the client POSTs to
URL that it was asked, waits, and when the server withdraws the question (it is cancelled)
records that under "withdrawn" and POSTs to URL again.

Usage: relay_client.py URL API_KEY SCRIPT_JSON

SCRIPT_JSON is a list of [tool, arguments] calls. Prints one JSON report: the listed tool names,
the requests the server asked ({method, params}), the progress it heard, and per call its
content texts and error flag.
"""

import asyncio
import json
import sys

import urllib.request

import anyio

import mcp.types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, key: str, script: list) -> dict:
    report: dict = {"asked": [], "progress": [], "calls": []}

    report["withdrawn"] = []

    async def elicit(context, params):
        report["asked"].append({"method": "elicitation/create", "params": params.model_dump(mode="json", exclude_none=True)})
        message = params.message or ""
        if message.startswith("Withdraw me; tell "):
            tell = urllib.request.Request(message.removeprefix("Withdraw me; tell "), method="POST")
            await anyio.to_thread.run_sync(urllib.request.urlopen, tell)
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                report["withdrawn"].append(message)
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(urllib.request.urlopen, tell)
                raise
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    async def sample(context, params):
        report["asked"].append({"method": "sampling/createMessage", "params": params.model_dump(mode="json", exclude_none=True)})
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="A haiku about gateways."),
            model="test-model",
            stop_reason="endTurn",
        )

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        report["progress"].append({"progress": progress, "total": total, "message": message})

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with streamable_http_client(url, http_client=http, terminate_on_close=False) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicit, sampling_callback=sample) as session:
                await session.initialize()
                listed = await session.list_tools()
                report["tools"] = [t.name for t in listed.tools]
                for name, arguments in script:
                    result = await session.call_tool(name, arguments, progress_callback=progress)
                    report["calls"].append(
                        {
                            "tool": name,
                            "is_error": bool(result.is_error),
                            "texts": [c.text for c in result.content if getattr(c, "type", None) == "text"],
                            "structured": result.structured_content,
                        }
                    )
    return report


if __name__ == "__main__":
    url, key, script = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(asyncio.run(main(url, key, script))))
