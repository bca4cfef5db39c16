"""Drives workbench's /mcp with the official MCP Python SDK (package `mcp`).

Usage: client.py URL API_KEY SCRIPT_JSON

SCRIPT_JSON is a list of [tool, arguments] calls to make after initialize and tools/list; a
step ["prompts/get", {"name", "arguments"}] gets a prompt and ["resources/read", {"uri"}] reads a
resource instead. Prints one JSON report to stdout: the negotiated server info, the listed tools
(and prompts, resources and templates when the server offers them) and each step's result. The
Rust test that runs this script asserts on the report.
"""

import asyncio
import json
import sys

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def as_json(text: str):
    """The text parsed as JSON, or the text itself when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


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
                caps = init.capabilities
                if caps.prompts is not None:
                    report["prompts"] = [p.name for p in (await session.list_prompts()).prompts]
                if caps.resources is not None:
                    report["resources"] = [str(r.uri) for r in (await session.list_resources()).resources]
                    templates = (await session.list_resource_templates()).resource_templates
                    report["templates"] = [t.uri_template for t in templates]
                for name, arguments in script:
                    if name == "prompts/get":
                        got = await session.get_prompt(arguments["name"], arguments.get("arguments"))
                        report["calls"].append({"prompt": got.model_dump(mode="json", exclude_none=True)})
                        continue
                    if name == "resources/read":
                        read = await session.read_resource(arguments["uri"])
                        report["calls"].append({"read": read.model_dump(mode="json", exclude_none=True)})
                        continue
                    result = await session.call_tool(name, arguments)
                    text = result.content[0].text if result.content else None
                    report["calls"].append(
                        {
                            "tool": name,
                            "is_error": bool(result.is_error),
                            "structured": result.structured_content,
                            "text": as_json(text) if text else None,
                        }
                    )
    return report


if __name__ == "__main__":
    url, key, script = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(asyncio.run(main(url, key, script))))
