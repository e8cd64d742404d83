"""Drives tool calls that wait for a person's decision over `duet serve`'s A2A interface with the
official Python SDK (a2a-sdk), on both bindings, against the desk of
`crates/cli/tests/server/a2a_decisions.rs` (its model calls `refund` for A1 and B2 at once, then
for C3, then closes): the task is INPUT_REQUIRED with the pending calls in a data part; words
are refused; a data part of decisions (approve A1, reject B2 with a reason) moves it on to the
next call; an edit of C3, streamed, completes it; each call got what was decided.

usage: python3 a2a_approvals_client.py BASE_URL API_KEY
Prints one line per check; exits 1 at the first that fails.
"""

import asyncio
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils import errors
from google.protobuf import json_format, struct_pb2

S = TaskState
counter = 0


def message(parts, task_id=None, context_id=None):
    global counter
    counter += 1
    m = Message(message_id=f"py-{counter}", role=Role.ROLE_USER, parts=parts)
    if task_id:
        m.task_id = task_id
    if context_id:
        m.context_id = context_id
    return m


def decisions(items):
    return [Part(data=json_format.ParseDict({"decisions": items}, struct_pb2.Value()))]


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        sys.exit(1)


async def expect_error(what, cls, coro, says=""):
    try:
        await coro
    except cls as e:
        check(what, says in str(e), str(e))
        return
    except Exception as e:  # noqa: BLE001 - the check reports what came instead
        check(what, False, f"{type(e).__name__}: {e}")
    check(what, False, "no error")


def pending(task):
    """The calls the task's status lists as waiting (its `duet.approvals` data part)."""
    for part in task.status.message.parts:
        if part.WhichOneof("content") == "data":
            data = json_format.MessageToDict(part.data)
            if data.get("kind") == "duet.approvals":
                return data["approvals"]
    return []


async def last_task(client, request):
    events = [e async for e in client.send_message(request)]
    return events[-1].task


async def run(base, binding, http):
    tag = f"[{binding}] "
    card = await A2ACardResolver(http, base, "/a2a/desk/.well-known/agent-card.json").get_agent_card()
    check(tag + "the card takes JSON", "application/json" in card.default_input_modes, str(card.default_input_modes))
    config = lambda streaming: ClientConfig(streaming=streaming, supported_protocol_bindings=[binding], httpx_client=http)
    blocking = await create_client(card, config(False))
    streaming = await create_client(card, config(True))
    context = f"desk-{binding}"

    asked = await last_task(blocking, SendMessageRequest(message=message([Part(text="refund A1 and B2")], context_id=context)))
    check(tag + "the calls wait: INPUT_REQUIRED", asked.status.state == S.TASK_STATE_INPUT_REQUIRED, str(asked.status))
    check(tag + "a text part says what is asked", "refund" in asked.status.message.parts[0].text, str(asked.status.message))
    calls = pending(asked)
    check(tag + "a data part lists both calls", [c["arguments"]["order"] for c in calls] == ["A1", "B2"], str(calls))
    check(tag + "with the tool, its description and the decisions offered",
          all(c["tool"] == "refund" and c["description"] == "Refunds an order." and c["decisions"] == ["approve", "edit", "reject"] for c in calls),
          str(calls))
    a1, b2 = calls[0]["id"], calls[1]["id"]

    await expect_error(
        tag + "words are no decision",
        errors.InvalidParamsError,
        last_task(blocking, SendMessageRequest(message=message([Part(text="approve")], asked.id))),
        "decisions",
    )

    moved = await last_task(blocking, SendMessageRequest(message=message(decisions([
        {"id": a1, "decision": "approve"},
        {"id": b2, "decision": "reject", "reason": "too much"},
    ]), asked.id)))
    check(tag + "decided, the task goes on and asks again", moved.id == asked.id and moved.status.state == S.TASK_STATE_INPUT_REQUIRED, str(moved.status))
    calls = pending(moved)
    check(tag + "about the next call", [c["arguments"]["order"] for c in calls] == ["C3"], str(calls))

    await expect_error(
        tag + "a second decision is refused",
        errors.UnsupportedOperationError,
        last_task(blocking, SendMessageRequest(message=message(decisions([{"id": a1, "decision": "reject"}]), asked.id))),
        "already decided",
    )

    events = [e async for e in streaming.send_message(SendMessageRequest(message=message(decisions([
        {"id": calls[0]["id"], "decision": "edit", "args": {"order": "C3", "amount": 30.5}},
    ]), asked.id)))]
    kinds = [e.WhichOneof("payload") for e in events]
    check(tag + "an edit, streamed: the task first", kinds[0] == "task", str(kinds))
    check(tag + "then completed", events[-1].status_update.status.state == S.TASK_STATE_COMPLETED, str(events[-1]))
    artifacts = [e.artifact_update.artifact for e in events if e.WhichOneof("payload") == "artifact_update"]
    check(tag + "with the session's result", artifacts and artifacts[0].parts[0].text == "Refunds handled.", str(artifacts))

    # What each call got, from the thread's journal (A2A shows no tool results); A1's and B2's
    # results in either order (a reject is written at once, an approval once its tool ran).
    page = (await http.get(f"{base}/threads/{context}/messages", params={"limit": 500})).json()
    results = [i["data"]["content"] for i in page["items"] if i["data"]["role"] == "tool"]
    check(tag + "A1 ran as proposed, B2 never ran (the model saw why), C3 ran as edited",
          sorted(results[:2]) == ["A person rejected this call: too much", "refunded A1: 250"]
          and results[2:] == ["refunded C3: 30.5", "closed"], str(results))


async def main():
    base, token = sys.argv[1], sys.argv[2]
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        for binding in ["JSONRPC", "HTTP+JSON"]:
            await run(base, binding, http)
    print("all checks passed")


asyncio.run(main())
