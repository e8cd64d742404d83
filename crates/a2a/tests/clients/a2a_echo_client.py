"""Drives the a2a_echo example with the official Python SDK (a2a-sdk), on both bindings.

usage: python3 a2a_echo_client.py BASE_URL
Prints one line per check; exits 1 at the first that fails.
"""

import asyncio
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils import errors

BINDINGS = ["JSONRPC", "HTTP+JSON"]
counter = 0


def message(text, task_id=None):
    global counter
    counter += 1
    m = Message(message_id=f"py-{counter}", role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        m.task_id = task_id
    return m


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        sys.exit(1)


async def expect_error(what, cls, coro):
    try:
        await coro
    except cls:
        check(what, True)
        return
    except Exception as e:  # noqa: BLE001 - the check reports what came instead
        check(what, False, f"{type(e).__name__}: {e}")
    check(what, False, "no error")


async def events(client, request):
    return [e async for e in client.send_message(request)]


async def run(base, binding, http):
    tag = f"[{binding}] "
    card = await A2ACardResolver(http, base).get_agent_card()
    check(tag + "card resolved", card.name == "echo" and card.capabilities.streaming)
    blocking = await create_client(
        card, ClientConfig(streaming=False, supported_protocol_bindings=[binding], httpx_client=http)
    )
    streaming = await create_client(
        card, ClientConfig(streaming=True, supported_protocol_bindings=[binding], httpx_client=http)
    )

    got = await events(blocking, SendMessageRequest(message=message("hello")))
    task = got[-1].task
    check(tag + "blocking send completes", task.status.state == TaskState.TASK_STATE_COMPLETED, str(got))
    check(tag + "the echo is an artifact", task.artifacts[0].parts[0].text == "hello", str(task))

    held = (await events(blocking, SendMessageRequest(message=message("hold on")))) [-1].task
    check(tag + "hold waits for input", held.status.state == TaskState.TASK_STATE_INPUT_REQUIRED)
    again = (await events(blocking, SendMessageRequest(message=message("done", held.id))))[-1].task
    check(tag + "the same taskId continues it", again.id == held.id and again.status.state == TaskState.TASK_STATE_COMPLETED)
    fetched = await blocking.get_task(GetTaskRequest(id=held.id, history_length=1))
    check(tag + "get with historyLength", len(fetched.history) == 1 and fetched.history[0].parts[0].text == "done", str(fetched))
    await expect_error(
        tag + "a terminal task takes no message",
        errors.UnsupportedOperationError,
        events(blocking, SendMessageRequest(message=message("more", held.id))),
    )

    quick = (await events(blocking, SendMessageRequest(
        message=message("hold it"), configuration=SendMessageConfiguration(return_immediately=True)
    )))[-1].task
    canceled = await blocking.cancel_task(CancelTaskRequest(id=quick.id))
    check(tag + "cancel", canceled.status.state == TaskState.TASK_STATE_CANCELED)
    await expect_error(tag + "cancel twice", errors.TaskNotCancelableError, blocking.cancel_task(CancelTaskRequest(id=quick.id)))

    stream = await events(streaming, SendMessageRequest(message=message("one two three")))
    kinds = [e.WhichOneof("payload") for e in stream]
    check(tag + "stream opens with the task", kinds[0] == "task", str(kinds))
    text = "".join(e.artifact_update.artifact.parts[0].text for e in stream if e.HasField("artifact_update"))
    check(tag + "stream carries the chunks", text == "one two three", text)
    check(tag + "stream ends completed", stream[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, str(kinds))

    await expect_error(tag + "unknown task", errors.TaskNotFoundError, blocking.get_task(GetTaskRequest(id="no-such-task")))
    await expect_error(tag + "unsupported operation", errors.UnsupportedOperationError, blocking.list_tasks(ListTasksRequest()))
    await expect_error(
        tag + "push not supported",
        errors.PushNotificationNotSupportedError,
        blocking.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url="http://127.0.0.1:9/hook")
        ),
    )


async def main():
    base = sys.argv[1]
    async with httpx.AsyncClient(timeout=30) as http:
        for binding in BINDINGS:
            await run(base, binding, http)
    print("all checks passed")


asyncio.run(main())
