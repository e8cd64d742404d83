"""Drives `duet serve`'s A2A interface with the official Python SDK (a2a-sdk), on both bindings:
the approval gate as a task (send -> INPUT_REQUIRED -> the answer with the same taskId ->
COMPLETED with the decision as an artifact), idempotent answers, returnImmediately, cancel,
streaming, subscribe, list with pagination, the not-found error.

usage: python3 a2a_duet_client.py BASE_URL API_KEY
Prints one line per check; exits 1 at the first that fails.
"""

import asyncio
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    AuthenticationInfo,
    TaskState,
)
from a2a.utils import errors

S = TaskState
counter = 0


def message(text, task_id=None, message_id=None):
    global counter
    counter += 1
    m = Message(message_id=message_id or f"py-{counter}", role=Role.ROLE_USER, parts=[Part(text=text)])
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


async def last_task(client, request):
    events = [e async for e in client.send_message(request)]
    return events[-1].task


async def run(base, binding, http):
    tag = f"[{binding}] "
    card = await A2ACardResolver(http, base, "/a2a/question_gate/.well-known/agent-card.json").get_agent_card()
    check(tag + "the agent's card", card.name == "question_gate" and "bearer" in card.security_schemes)
    root = await A2ACardResolver(http, base).get_agent_card()
    check(tag + "the root card is the default agent's", root.name == "question_gate")
    config = lambda streaming: ClientConfig(streaming=streaming, supported_protocol_bindings=[binding], httpx_client=http)
    blocking = await create_client(card, config(False))
    streaming = await create_client(card, config(True))

    asked = await last_task(blocking, SendMessageRequest(message=message("Rotate the keys tonight?")))
    check(tag + "the gate asks: INPUT_REQUIRED", asked.status.state == S.TASK_STATE_INPUT_REQUIRED, str(asked.status))
    check(tag + "the question is the status message", "approve" in asked.status.message.parts[0].text.lower(), str(asked.status))
    answer = message("approved", asked.id)
    done = await last_task(blocking, SendMessageRequest(message=answer))
    check(tag + "the answer with the same taskId completes it", done.id == asked.id and done.status.state == S.TASK_STATE_COMPLETED, str(done.status))
    check(tag + "the decision is an artifact", done.artifacts and done.artifacts[0].parts[0].text == "approved", str(done.artifacts))
    again = await last_task(blocking, SendMessageRequest(message=message("approved", asked.id, answer.message_id)))
    check(tag + "the same answer again changes nothing", again.status.state == S.TASK_STATE_COMPLETED and again.id == done.id)
    await expect_error(
        tag + "a new message to a completed task",
        errors.UnsupportedOperationError,
        last_task(blocking, SendMessageRequest(message=message("rejected", asked.id))),
    )
    got = await blocking.get_task(GetTaskRequest(id=asked.id, history_length=1))
    check(tag + "get with historyLength", len(got.history) == 1 and got.history[0].parts[0].text == "approved", str(got.history))

    quick = await last_task(blocking, SendMessageRequest(
        message=message("Drop the staging database?"), configuration=SendMessageConfiguration(return_immediately=True)
    ))
    check(tag + "returnImmediately answers before the task settles", quick.status.state in (S.TASK_STATE_SUBMITTED, S.TASK_STATE_WORKING, S.TASK_STATE_INPUT_REQUIRED))
    canceled = await blocking.cancel_task(CancelTaskRequest(id=quick.id))
    check(tag + "cancel", canceled.status.state == S.TASK_STATE_CANCELED, str(canceled.status))
    await expect_error(tag + "cancel twice", errors.TaskNotCancelableError, blocking.cancel_task(CancelTaskRequest(id=quick.id)))

    events = [e async for e in streaming.send_message(SendMessageRequest(message=message("Ship the release?")))]
    kinds = [e.WhichOneof("payload") for e in events]
    check(tag + "a stream opens with the task", kinds[0] == "task", str(kinds))
    check(tag + "and ends asking", events[-1].status_update.status.state == S.TASK_STATE_INPUT_REQUIRED, str(events[-1]))
    task_id = events[0].task.id

    async def follow():
        return [e async for e in streaming.subscribe(SubscribeToTaskRequest(id=task_id))]

    # The subscription's first event (the snapshot) has come before the answer is sent, so the
    # rest is the live tail.
    subscription = streaming.subscribe(SubscribeToTaskRequest(id=task_id)).__aiter__()
    first = await subscription.__anext__()
    check(tag + "subscribe: the task first", first.WhichOneof("payload") == "task" and first.task.id == task_id, str(first))
    answered = [e async for e in streaming.send_message(SendMessageRequest(message=message("approved", task_id)))]
    check(tag + "a streamed answer ends completed", answered[-1].status_update.status.state == S.TASK_STATE_COMPLETED, str(answered[-1]))
    check(tag + "with the decision as an artifact", any(e.HasField("artifact_update") for e in answered), str([e.WhichOneof("payload") for e in answered]))
    seen = [e async for e in subscription]
    check(tag + "subscribe: then the live tail to the end", seen and seen[-1].status_update.status.state == S.TASK_STATE_COMPLETED, str(seen[-1:]))
    await expect_error(tag + "subscribe to a completed task", errors.UnsupportedOperationError, follow())

    # A push notification to a webhook on loopback, with the config's auth and token.
    hook = Webhook()
    pushed = await last_task(blocking, SendMessageRequest(message=message("Reboot the cluster?")))
    config = await blocking.create_task_push_notification_config(TaskPushNotificationConfig(
        task_id=pushed.id, url=hook.url, token="tok-1",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="hook-secret"),
    ))
    check(tag + "a push config is stored", config.id != "" and config.task_id == pushed.id, str(config))
    await last_task(blocking, SendMessageRequest(message=message("approved", pushed.id)))
    got = await asyncio.wait_for(hook.completed, 30)
    check(tag + "the webhook hears the task complete", got["body"]["statusUpdate"]["taskId"] == pushed.id, str(got))
    check(tag + "with the config's Authorization and token",
          got["authorization"] == "Bearer hook-secret" and got["token"] == "tok-1" and "a2a+json" in got["type"], str(got))
    hook.close()

    ids, token, pages = [], "", 0
    while True:
        page = await blocking.list_tasks(ListTasksRequest(page_size=2, page_token=token))
        pages += 1
        ids += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    check(tag + "list pages through every task once", len(ids) == len(set(ids)) and len(ids) == page.total_size and pages > 1, f"{ids} total {page.total_size}")
    await expect_error(tag + "unknown task", errors.TaskNotFoundError, blocking.get_task(GetTaskRequest(id="no-such-task")))


class Webhook:
    """A local endpoint that records push notifications; `completed` resolves with the first
    that reports a completed task."""

    def __init__(self):
        loop = asyncio.get_running_loop()
        self.completed = loop.create_future()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                self.send_response(200)
                self.end_headers()
                state = body.get("statusUpdate", {}).get("status", {}).get("state")
                if state == "TASK_STATE_COMPLETED" and not hook.completed.done():
                    seen = {"body": body, "authorization": self.headers.get("authorization"),
                            "token": self.headers.get("x-a2a-notification-token"),
                            "type": self.headers.get("content-type")}
                    loop.call_soon_threadsafe(lambda: hook.completed.done() or hook.completed.set_result(seen))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


async def main():
    base, token = sys.argv[1], sys.argv[2]
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        for binding in ["JSONRPC", "HTTP+JSON"]:
            await run(base, binding, http)
    print("all checks passed")


asyncio.run(main())
