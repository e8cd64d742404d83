"""Sends a file to a duet agent over A2A with the official Python SDK (a2a-sdk), on both
bindings, and reads a file artifact back: a message with a text part and a bytes part (a CSV)
to the `filer` agent (crates/cli/tests/server/a2a_files.rs), whose session stops naming the
file; the completed task carries it as a file part (raw bytes, filename, media type), and
GetTask shows the same.

usage: python3 a2a_files_client.py BASE_URL API_KEY
Prints one line per check; exits 1 at the first that fails.
"""

import asyncio
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

CSV = b"name,qty\nbolts,40\nnuts,12\n"


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        sys.exit(1)


def files(task):
    return [p for a in task.artifacts if a.name == "files" for p in a.parts]


async def run(base, binding, http):
    tag = f"[{binding}] "
    card = await A2ACardResolver(http, base, "/a2a/filer/.well-known/agent-card.json").get_agent_card()
    check(tag + "the filer's card", card.name == "filer")
    client = await create_client(card, ClientConfig(streaming=False, supported_protocol_bindings=[binding], httpx_client=http))
    m = Message(
        message_id=f"py-file-{binding}",
        role=Role.ROLE_USER,
        parts=[Part(text="File this."), Part(raw=CSV, filename="data.csv", media_type="text/csv")],
    )
    events = [e async for e in client.send_message(SendMessageRequest(message=m))]
    task = events[-1].task
    check(tag + "the task completes", task.status.state == TaskState.TASK_STATE_COMPLETED, str(task.status))
    parts = files(task)
    check(tag + "with the file as an artifact", len(parts) == 1 and parts[0].raw == CSV, str(task.artifacts))
    check(tag + "named and typed", parts[0].filename == "data.csv" and parts[0].media_type == "text/csv", str(parts[0]))
    got = await client.get_task(GetTaskRequest(id=task.id))
    check(tag + "GetTask shows the same file", [p.raw for p in files(got)] == [CSV], str(got.artifacts))


async def main():
    base, token = sys.argv[1], sys.argv[2]
    async with httpx.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {token}"}) as http:
        for binding in ["JSONRPC", "HTTP+JSON"]:
            await run(base, binding, http)
    print("all checks passed")


asyncio.run(main())
