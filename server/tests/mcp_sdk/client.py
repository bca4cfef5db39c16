"""Drives workbench's /mcp with the official MCP Python SDK (package `mcp`).

Usage: client.py URL API_KEY SCRIPT_JSON

SCRIPT_JSON is a list of [tool, arguments] calls to make after initialize and tools/list.
Prints one JSON report to stdout: the negotiated server info, the listed tools and each call's
structured result and error flag. The Rust test that runs this script asserts on the report.
"""

import asyncio
import json
import sys

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, key: str, script: list) -> dict:
    report: dict = {"calls": []}
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with streamable_http_client(url, http_client=http, terminate_on_close=False) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                report["server"] = {"name": init.server_info.name, "version": init.server_info.version}
                report["protocol_version"] = init.protocol_version
                listed = await session.list_tools()
                report["tools"] = [
                    {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in listed.tools
                ]
                for name, arguments in script:
                    result = await session.call_tool(name, arguments)
                    text = result.content[0].text if result.content else None
                    report["calls"].append(
                        {
                            "tool": name,
                            "is_error": bool(result.is_error),
                            "structured": result.structured_content,
                            "text": json.loads(text) if text else None,
                        }
                    )
    return report


if __name__ == "__main__":
    url, key, script = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(asyncio.run(main(url, key, script))))
