"""An MCP server of the official MCP Python SDK (package `mcp`) over stdio, for workbench's
tests of local (stdio) MCP servers: workbench starts it as a confined child and speaks MCP on
its stdin and stdout through the SDK's own stdio transport (`MCPServer.run("stdio")`).

Tools:
  * echo(text)            {"text": text, "pid": the server's pid}
  * secret_digest(name)   {"set": bool, "sha256": hex digest of the environment variable
                          `name`} - proves a value reached the process without returning it;
                          also writes the value to stderr, which workbench must scrub
  * environment()         {"names": sorted names of every environment variable it got}
  * crash(code)           exits the process at once with status `code`
  * spawn_sleeper()       starts a grandchild (`sleep 3600`) in the server's process group and
                          one that leaves it (new session), then answers their pids

Usage: .venv/bin/python server/tests/mcp_sdk/stdio_server.py [--noise]
  --noise   writes a non-JSON line to stdout before serving (a misbehaving server)
"""

import hashlib
import os
import subprocess
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="stdio-test-server", version="1.0.0")


@server.tool(description="Echo the text, with the server's pid.")
def echo(text: str) -> dict:
    return {"text": text, "pid": os.getpid()}


@server.tool(description="Whether an environment variable is set, and its SHA-256.")
def secret_digest(name: str) -> dict:
    value = os.environ.get(name)
    if value is not None:
        print(f"the value of {name} is {value}", file=sys.stderr, flush=True)
    return {
        "set": value is not None,
        "sha256": hashlib.sha256(value.encode()).hexdigest() if value is not None else None,
    }


@server.tool(description="The names of every environment variable the process got.")
def environment() -> dict:
    return {"names": sorted(os.environ)}


@server.tool(description="Exit the process at once with the given status.")
def crash(code: int = 3) -> dict:
    print(f"crashing with status {code}", file=sys.stderr, flush=True)
    os._exit(code)


@server.tool(description="Start two long-lived grandchildren; answer their pids.")
def spawn_sleeper() -> dict:
    kept = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    escaped = subprocess.Popen(
        ["sleep", "3601"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
    )
    return {"in_group": kept.pid, "new_session": escaped.pid}


if __name__ == "__main__":
    if "--noise" in sys.argv[1:]:
        print("starting up... (this line is not JSON-RPC)", flush=True)
    server.run("stdio")
