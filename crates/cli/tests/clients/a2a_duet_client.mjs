// Drives `duet serve`'s A2A interface with the official JS SDK (@a2a-js/sdk), on both
// bindings: send (the approval gate asks, the answer with its taskId completes it), stream,
// get, cancel. usage: node a2a_duet_client.mjs BASE_URL API_KEY NODE_MODULES
// Prints one line per check; exits 1 at the first that fails.

const [base, token, modules] = process.argv.slice(2);
const sdk = await import(`${modules}/@a2a-js/sdk/dist/index.js`);
const client = await import(`${modules}/@a2a-js/sdk/dist/client/index.js`);
const { Role, TaskState } = sdk;
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } = client;

const authed = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

function check(what, ok, detail = "") {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${!ok && detail ? `: ${detail}` : ""}`);
  if (!ok) process.exit(1);
}

let n = 0;
const message = (text, taskId) => ({
  messageId: `js-${++n}`,
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text } }],
  ...(taskId ? { taskId } : {}),
});

const show = (x) => JSON.stringify(x, (_, v) => (typeof v === "bigint" ? String(v) : v));
const asTask = (result) => (result && result.id && result.status ? result : result?.payload?.value ?? result);

for (const binding of ["JSONRPC", "HTTP+JSON"]) {
  const tag = `[${binding}]`;
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: authed }), new RestTransportFactory({ fetchImpl: authed })],
      preferredTransports: [binding],
    }),
  );
  const a2a = await factory.createFromUrl(`${base}/a2a/question_gate/.well-known/agent-card.json`, "");

  const asked = asTask(await a2a.sendMessage({ message: message("Rotate the keys tonight?") }));
  check(`${tag} send: the gate asks`, asked.status.state === TaskState.TASK_STATE_INPUT_REQUIRED, show(asked.status));
  const done = asTask(await a2a.sendMessage({ message: message("approved", asked.id) }));
  check(`${tag} the answer completes the task`, done.id === asked.id && done.status.state === TaskState.TASK_STATE_COMPLETED, show(done.status));
  const result = done.artifacts?.[0]?.parts?.[0]?.content;
  check(`${tag} the decision is an artifact`, result?.$case === "text" && result.value === "approved", show(done.artifacts));

  const got = await a2a.getTask({ id: asked.id, historyLength: 1 });
  check(`${tag} get`, got.id === asked.id && got.history.length === 1, show(got.history));

  const events = [];
  for await (const e of a2a.sendMessageStream({ message: message("Ship the release?") })) events.push(e);
  const cases = events.map((e) => e.payload?.$case);
  check(`${tag} stream: the task first`, cases[0] === "task", show(cases));
  const last = events.at(-1).payload;
  check(`${tag} stream: ends asking`, last.$case === "statusUpdate" && last.value.status.state === TaskState.TASK_STATE_INPUT_REQUIRED, show(last));

  const canceled = await a2a.cancelTask({ id: events[0].payload.value.id });
  check(`${tag} cancel`, canceled.status.state === TaskState.TASK_STATE_CANCELED, show(canceled.status));
  let refused = false;
  try {
    await a2a.getTask({ id: "no-such-task" });
  } catch (e) {
    refused = true;
  }
  check(`${tag} an unknown task is an error`, refused);
}
console.log("all checks passed");
