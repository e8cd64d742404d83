"""A small streamable-HTTP MCP server for duet's tests, on the official Python SDK (`mcp` 2.x).

It listens on 127.0.0.1 on a port the OS picks, prints `PORT <n>` once listening, and serves
at `/mcp`. Every request must carry `Authorization: Bearer test-token` (so the test sees that
the definition's headers are sent). Tools: `add` (structured result), `greet` (text) and
`fail` (raises: an `isError` result).
"""

import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("duet-test", log_level="WARNING")


class Sum(BaseModel):
    sum: int


@server.tool(description="Adds two whole numbers.")
def add(a: int, b: int) -> Sum:
    return Sum(sum=a + b)


@server.tool(description="Greets someone by name.", structured_output=False)
def greet(name: str) -> str:
    return f"Hello, {name}!"


@server.tool(description="Always fails, saying why.", structured_output=False)
def fail(reason: str) -> str:
    raise ToolError(f"failed on purpose: {reason}")


class RequireToken:
    """Refuses any HTTP request without the expected bearer token."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != b"Bearer test-token":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"missing token"})
                return
        await self.app(scope, receive, send)


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    app = RequireToken(server.streamable_http_app())
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    instance = uvicorn.Server(config)
    print(f"PORT {port}", flush=True)
    instance.run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
