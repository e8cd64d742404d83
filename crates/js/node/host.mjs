// duet's node code host (crates/js/src/node.rs starts it): runs a Standard Agents project's
// functions for duet. It speaks newline-delimited JSON on stdin/stdout (the code-host contract's
// node JSON-RPC; crates/js/src/node/wire.rs is duet's side):
//
//   duet -> node  {"id": N, "method": "call", "params": {file, entry, args, state, thread, call, deadlineMs}}
//   node -> duet  {"id": "b-M", "method": "bridge", "params": {"call": N, "method", "params"}}
//   duet -> node  {"id": "b-M", "result": value} | {"id": "b-M", "error": {"message"}}
//   node -> duet  {"id": N, "result": value} | {"id": N, "error": {"kind": "thrown"|"load", "message", "stack"}}
//
// and besides: {"method": "ready", "params": {"node"}} once started; {"id": "p-K", "method":
// "ping"} answered {"id": "p-K", "result": null} (duet asks whether the event loop turns);
// {"method": "cancel", "params": {"call": N}} (duet stopped waiting for call N).
//
// stdout is that channel only: `console.*` and anything else written to stdout go to stderr,
// where duet makes each line a `tracing` event (console lines as JSON naming the call).
import { AsyncLocalStorage } from "node:async_hooks";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { format } from "node:util";

const config = JSON.parse(readFileSync(new URL("./config.json", import.meta.url), "utf8"));
/** The largest result sent to duet (duet reads lines up to twice this). */
const MAX_RESULT = 32 * 1024 * 1024;

// spec.js's define functions remember what made each definition here.
globalThis[Symbol.for("duet.defined")] = new WeakMap();

const channel = process.stdout;
const write = channel.write.bind(channel);
channel.write = process.stderr.write.bind(process.stderr);

function send(message) {
  write(JSON.stringify(message) + "\n");
}

/** The call whose code is running (console lines and unhandled rejections name it). */
const running = new AsyncLocalStorage();

function logger(level) {
  return (...args) => {
    const call = running.getStore();
    const line = {
      duet: "console",
      level,
      thread: call?.thread ?? null,
      call: call?.call ?? null,
      message: format(...args),
    };
    process.stderr.write(JSON.stringify(line) + "\n");
  };
}
for (const [name, level] of [["log", "info"], ["info", "info"], ["warn", "warn"], ["error", "error"], ["debug", "debug"]]) {
  console[name] = logger(level);
}

class Call {
  constructor(id, params) {
    this.id = id;
    this.thread = String(params.thread ?? "");
    this.call = String(params.call ?? "");
    /** The bridge requests waiting for duet's answer. */
    this.waits = new Set();
    /** The answers to the synchronous members (`queueTool`, `emit`), awaited before the end. */
    this.sent = [];
    this.ended = false;
    this.cancelled = false;
    /** What failed the call besides its own return: an unhandled rejection, a bridge refusal. */
    this.failure = null;
    this.failed = new Promise((resolve) => {
      this.onFailure = resolve;
    });
  }

  fail(error) {
    if (this.failure === null) {
      this.failure = error;
      this.onFailure();
    }
  }
}

const calls = new Map();
const waiting = new Map();
let bridgeIds = 0;

/** Asks duet for state's `method`: a promise of the answer. Throws when it cannot be asked. */
function ask(call, method, params) {
  if (call.ended) throw new Error(`state.${method}: the call has ended`);
  const id = `b-${++bridgeIds}`;
  const line = JSON.stringify({ id, method: "bridge", params: { call: call.id, method, params } });
  // Where the code asked, for the stack of a refusal (formatted only then).
  const site = {};
  Error.captureStackTrace(site, ask);
  const answer = new Promise((resolve, reject) => waiting.set(id, { call, resolve, reject, site }));
  call.waits.add(id);
  write(line + "\n");
  return answer;
}

function answered(message) {
  const wait = waiting.get(message.id);
  if (wait === undefined) return;
  waiting.delete(message.id);
  wait.call.waits.delete(message.id);
  if (message.error !== undefined) {
    const e = new Error(String(message.error?.message ?? "refused"));
    const frames = String(wait.site.stack ?? "");
    e.stack = `${e}${frames.slice(frames.indexOf("\n"))}`;
    wait.reject(e);
  } else {
    wait.resolve(message.result === undefined ? null : message.result);
  }
}

function cancel(id) {
  const call = calls.get(id);
  if (call === undefined) return;
  const why = new Error("duet stopped waiting for this call (its deadline passed or its step ended)");
  call.ended = true;
  call.cancelled = true;
  for (const b of call.waits) {
    waiting.get(b)?.reject(why);
    waiting.delete(b);
  }
  call.waits.clear();
  call.fail(why);
}

// The spec's ThreadState members and the parameters each sends (bridge.md's table).
const MEMBERS = {
  getValue: (key) => ({ key }),
  setValue: (key, value) => ({ key, value: value === undefined ? null : value }),
  env: (name) => ({ name }),
  envType: (name) => ({ name }),
  getMessages: (options) => ({ options: options ?? {} }),
  getMessage: (id) => ({ id }),
  injectMessage: (input) => ({ input }),
  queueMessage: (input) => ({ input }),
  invokeTool: (name, args) => ({ name, args }),
  scheduleEffect: (name, args, delayMs) => ({ name, args, delayMs }),
  getScheduledEffects: (name) => ({ name }),
  removeScheduledEffect: (id) => ({ id }),
  notifyParent: (content) => ({ content }),
  setStatus: (status) => ({ status }),
  stopSession: (options) => ({ options }),
  terminate: () => ({}),
  getParentThread: () => ({}),
  writeFile: (path, data, mimeType) => ({ path, data, mimeType }),
  readFile: (path) => ({ path }),
  statFile: (path) => ({ path }),
  readdirFile: (path) => ({ path }),
  unlinkFile: (path) => ({ path }),
  mkdirFile: (path) => ({ path }),
  rmdirFile: (path) => ({ path }),
  getFileStats: () => ({}),
  grepFiles: (pattern) => ({ pattern }),
  findFiles: (pattern) => ({ pattern }),
};
const SYNCHRONOUS = {
  queueTool: (name, args) => ({ name, args }),
  emit: (event, data) => ({ event, data }),
};
const POSITIONAL = [
  "setEnv", "getLogs", "loadModel", "loadPrompt", "loadAgent", "getPromptNames", "getAgentNames",
  "getModelNames", "updateMessage", "deleteMessage", "getFileThumbnail", "runCode",
];

/** Bytes cross the bridge as `{"$bytes": base64}`: a parameter that is an ArrayBuffer, a typed
 * array or a DataView is sent so, and an answer that is one is an ArrayBuffer. */
function toWire(v) {
  if (v instanceof ArrayBuffer) return { $bytes: Buffer.from(v).toString("base64") };
  if (ArrayBuffer.isView(v)) return { $bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") };
  return v;
}
function fromWire(v) {
  if (v === null || typeof v !== "object" || Array.isArray(v) || Object.keys(v).length !== 1
    || typeof v.$bytes !== "string") return v;
  const b = Buffer.from(v.$bytes, "base64");
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
}
function wired(params) {
  const out = {};
  for (const [k, v] of Object.entries(params)) out[k] = toWire(v);
  return out;
}

/** `readFileStream`'s chunks: `{ data: ArrayBuffer, offset }`, one bridge request (1 MiB) per
 * step; a file written or removed meanwhile ends the stream with an error. */
async function* chunks(request, path, first) {
  let c = first;
  for (;;) {
    const data = fromWire(c.data);
    const size = data.byteLength;
    if (size > 0) yield { data, offset: c.offset };
    const next = c.offset + size;
    if (size === 0 || next >= c.size) return;
    c = await request("readFileChunk", { path, offset: next, updatedAt: c.updatedAt });
    if (c === null || c === undefined) throw new Error(`${path} was removed while it was read`);
  }
}

/** `state` for `call`: the snapshot's properties, a fresh `context`, the members. A child
 * thread's state (`thread` its reference id) sends `$thread` with each request. */
function makeState(call, snapshot, thread) {
  const plain = snapshot !== null && typeof snapshot === "object" && !Array.isArray(snapshot);
  const state = plain ? { ...snapshot } : {};
  state.context = {};
  const withThread = thread === null ? (p) => p : (p) => ({ ...p, $thread: thread });
  const request = (method, params) => {
    try {
      return ask(call, method, withThread(wired(params))).then(fromWire);
    } catch (e) {
      return Promise.reject(e);
    }
  };
  for (const [name, params] of Object.entries(MEMBERS)) {
    state[name] = (...args) => request(name, params(...args));
  }
  for (const name of POSITIONAL) {
    state[name] = (...args) => request(name, { args });
  }
  for (const [name, params] of Object.entries(SYNCHRONOUS)) {
    // Synchronous in the spec: sent now, in order with the rest; a refusal fails the call.
    state[name] = (...args) => {
      const answer = ask(call, name, withThread(params(...args)));
      call.sent.push(answer.then(() => undefined, (e) => call.fail(e)));
      return undefined;
    };
  }
  state.readFileStream = async (path) => {
    const first = await request("readFileChunk", { path, offset: 0 });
    return first === null || first === undefined ? null
      : { [Symbol.asyncIterator]: () => chunks(request, path, first) };
  };
  state.getChildThread = async (referenceId) => {
    const child = await request("getChildThread", { referenceId });
    return child !== null && typeof child === "object" ? makeState(call, child, referenceId) : null;
  };
  return state;
}

/** An argument as the code sees it: `{"$request": {...}}` is a `Request`. */
function argument(value) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const r = value.$request;
  if (r === null || typeof r !== "object" || Object.keys(value).length !== 1) return value;
  const method = String(r.method ?? "GET").toUpperCase();
  const init = { method, headers: new Headers(Array.isArray(r.headers) ? r.headers : []) };
  if (method !== "GET" && method !== "HEAD") {
    if (typeof r.bodyBase64 === "string") init.body = Buffer.from(r.bodyBase64, "base64");
    else if (typeof r.body === "string") init.body = r.body;
  }
  return new Request(new URL(String(r.url ?? "/"), "http://localhost/"), init);
}

function isResponse(v) {
  return v instanceof Response || (v !== null && typeof v === "object"
    && v.constructor?.name === "Response" && typeof v.arrayBuffer === "function"
    && typeof v.status === "number");
}

/** The returned value as duet takes it: a `Response` is `{"$response": {...}}`. */
async function outcome(value) {
  if (!isResponse(value)) return value;
  const bytes = Buffer.from(await value.arrayBuffer());
  const out = { status: value.status, headers: [...value.headers] };
  try {
    out.body = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    out.bodyBase64 = bytes.toString("base64");
  }
  return { $response: out };
}

/** `value` as JSON text; a value JSON cannot hold is a TypeError saying so. */
function json(value) {
  let text;
  try {
    text = JSON.stringify(value, (key, v) => {
      const kind = typeof v === "function" ? "a function" : typeof v === "bigint" ? "a BigInt"
        : typeof v === "symbol" ? "a symbol" : null;
      if (kind !== null) {
        throw new TypeError(`the result holds ${kind}${key === "" ? "" : ` (at \`${key}\`)`}, which JSON cannot hold`);
      }
      return v;
    });
  } catch (e) {
    if (e instanceof TypeError && e.message.startsWith("the result holds")) throw e;
    throw new TypeError(`the result cannot be sent as JSON: ${e?.message ?? e}`);
  }
  if (text === undefined) return "null";
  if (text.length > MAX_RESULT) {
    throw new RangeError(`the result is ${Math.ceil(text.length / 1048576)} MiB of JSON; at most ${MAX_RESULT / 1048576} MiB is sent`);
  }
  return text;
}

function shown(e) {
  try {
    return String(e);
  } catch {
    return Object.prototype.toString.call(e);
  }
}

function error(call, kind, e) {
  const stack = e !== null && typeof e === "object" && typeof e.stack === "string" ? e.stack : null;
  // A thrown object's own properties (a prefilter hook blocks with `{ block: true }`).
  let details = null;
  if (e !== null && typeof e === "object" && !(e instanceof Unhandled)) {
    try {
      const own = {};
      for (const k of Object.keys(e)) own[k] = e[k];
      details = Object.keys(own).length > 0 ? JSON.parse(JSON.stringify(own)) : null;
    } catch {
      details = null;
    }
  }
  return JSON.stringify({ id: call.id, error: { kind, message: shown(e), stack, details } });
}

/** A promise the code rejected and never handled: what fails its call. */
class Unhandled {
  constructor(reason) {
    this.message = `a promise was rejected and never handled: ${shown(reason)}`;
    this.stack = reason !== null && typeof reason === "object" && typeof reason.stack === "string"
      ? reason.stack : null;
  }

  toString() {
    return this.message;
  }
}

class LoadFailure {
  constructor(error) {
    this.error = error;
  }
}

/** The function `params.entry` names in `params.file`'s default export, and its `this`. */
async function target(params) {
  const file = String(params.file);
  const entry = Array.isArray(params.entry) ? params.entry.map(String) : [];
  let module;
  try {
    module = await import(pathToFileURL(path.join(config.root, file)).href);
  } catch (e) {
    throw new LoadFailure(e);
  }
  if (module.default === undefined) {
    throw new LoadFailure(new TypeError(`${file} has no default export`));
  }
  let self = module;
  let fn = module.default;
  for (const key of entry) {
    self = fn;
    fn = fn?.[key];
  }
  if (typeof fn !== "function") {
    throw new LoadFailure(new TypeError(`\`${entry.join(".")}\` is not a function in ${file}'s default export`));
  }
  return { fn, self };
}

/** Runs the call; the reply line. */
async function settle(call, params) {
  let entry;
  try {
    entry = await target(params);
  } catch (e) {
    return error(call, "load", e instanceof LoadFailure ? e.error : e);
  }
  try {
    const state = makeState(call, params.state, null);
    const args = (Array.isArray(params.args) ? params.args : []).map(argument);
    // `state` at `stateAt` among the arguments (a thread endpoint's `(req, state, params)`).
    const at = Number.isInteger(params.stateAt) && params.stateAt > 0 && params.stateAt <= args.length
      ? params.stateAt : 0;
    const all = [...args.slice(0, at), state, ...args.slice(at)];
    const returned = (async () => entry.fn.call(entry.self, ...all))();
    const value = await Promise.race([returned, call.failed]);
    await Promise.race([Promise.all(call.sent), call.failed]);
    // A promise rejected during this turn and never handled is reported before the next.
    await new Promise((resolve) => setImmediate(resolve));
    if (call.failure !== null) return error(call, "thrown", call.failure);
    // `undefined` is `{"$undefined":true}`: a hook that returns nothing keeps what it was given,
    // where `null` means something.
    const result = value === undefined ? '{"$undefined":true}' : json(await outcome(value));
    return `{"id":${call.id},"result":${result}}`;
  } catch (e) {
    return error(call, "thrown", call.failure ?? e);
  }
}

async function run(id, params) {
  if (!Number.isSafeInteger(id) || calls.has(id)) return;
  const call = new Call(id, params);
  calls.set(id, call);
  const reply = await running.run(call, () => settle(call, params));
  call.ended = true;
  calls.delete(id);
  for (const b of call.waits) waiting.delete(b);
  if (!call.cancelled) write(reply + "\n");
}

function stray(what, e) {
  process.stderr.write(`${what}: ${e?.stack ?? shown(e)}\n`);
}

process.on("unhandledRejection", (reason) => {
  const call = running.getStore();
  if (call !== undefined && !call.ended) call.fail(new Unhandled(reason));
  else stray("a promise was rejected and never handled outside any call", reason);
});
process.on("uncaughtException", (e) => {
  const call = running.getStore();
  if (call !== undefined && !call.ended) call.fail(e);
  else stray("an exception was thrown outside any call", e);
});

const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    stray("duet sent a line that is not JSON", line.slice(0, 200));
    return;
  }
  if (message === null || typeof message !== "object") return;
  if (message.method === "call") run(message.id, message.params ?? {});
  else if (message.method === "ping") send({ id: message.id, result: null });
  else if (message.method === "cancel") cancel(message.params?.call);
  else if (typeof message.id === "string" && message.id.startsWith("b-")) answered(message);
});
// duet went away: so does the host.
input.on("close", () => process.exit(0));

send({ method: "ready", params: { node: process.version } });
