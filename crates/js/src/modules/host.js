// The embedded code host's glue, evaluated once per engine after text.js, url.js and fetch.js:
// installs the globals code may use (`fetch`, `Request`, `Response`, `Headers`, `URL`,
// `URLSearchParams`, `TextEncoder`, `TextDecoder`, `structuredClone`, `console`) and returns
// `run`, which calls one definition's function with a fresh `state`.
//
// `bridge(token, member, paramsJson)` is the host's: it answers synchronously with the runtime's
// JSON answer, or throws an Error with the runtime's message; `token` names the call a `state`
// was made for, so a `state` kept past its call is refused. `log(level, message)` is `console`'s.
(web, bridge, log) => {
  "use strict";
  const { Request, Response, made, madeRequest, bodyOf, toBase64, fromBase64 } = web;
  // The builtins the glue uses, as they are now: an engine's context outlives a call, and code
  // that replaces `JSON.stringify` or `Object.keys` must not change what reaches the runtime.
  const { parse, stringify } = JSON;
  const { keys, assign, create, defineProperty, freeze, entries } = Object;
  const { isArray } = Array;
  const { apply } = Reflect;
  const P = Promise;
  // The call running now: `fetch` and `console` are global, so they act for it.
  let current = -1;

  const messageOf = (e) => (e !== null && typeof e === "object" && "message" in e ? String(e.message) : String(e));

  // Bytes cross the bridge as `{"$bytes": base64}`: a parameter that is an ArrayBuffer, a typed
  // array or a DataView is sent so, and an answer that is one is an ArrayBuffer.
  const AB = ArrayBuffer;
  const U8 = Uint8Array;
  const { isView } = ArrayBuffer;
  function toWire(v) {
    if (v instanceof AB) return { $bytes: toBase64(new U8(v)) };
    if (isView(v)) return { $bytes: toBase64(new U8(v.buffer, v.byteOffset, v.byteLength)) };
    return v;
  }
  function fromWire(v) {
    if (v === null || typeof v !== "object" || isArray(v) || keys(v).length !== 1 || typeof v.$bytes !== "string") {
      return v;
    }
    const b = fromBase64(v.$bytes);
    return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b.buffer
      : b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  }

  // Every `undefined` parameter is sent as null (JSON has no undefined).
  function send(token, member, params, thread) {
    for (const k of keys(params)) params[k] = params[k] === undefined ? null : toWire(params[k]);
    if (thread !== undefined) params.$thread = thread;
    return fromWire(parse(bridge(token, member, stringify(params))));
  }

  // A member answered by a promise: rejected with `new Error(message)` when the runtime refuses.
  function later(token, member, params, thread) {
    return new P((resolve, reject) => {
      let answer;
      try {
        answer = send(token, member, params, thread);
      } catch (e) {
        reject(e instanceof TypeError ? e : new Error(messageOf(e)));
        return;
      }
      resolve(answer);
    });
  }

  // The spec's synchronous members: the runtime's refusal is thrown.
  function now(token, member, params, thread) {
    try {
      send(token, member, params, thread);
    } catch (e) {
      throw e instanceof TypeError ? e : new Error(messageOf(e));
    }
  }

  const PARAMS = {
    getValue: (key) => ({ key }),
    setValue: (key, value) => ({ key, value }),
    env: (name) => ({ name }),
    envType: (name) => ({ name }),
    getMessages: (options) => ({ options: options === undefined ? {} : options }),
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
  const SYNC = {
    queueTool: (name, args) => ({ name, args }),
    emit: (event, data) => ({ event, data }),
  };
  const POSITIONAL = [
    "setEnv", "getLogs", "loadModel", "loadPrompt", "loadAgent", "getPromptNames", "getAgentNames",
    "getModelNames", "updateMessage", "deleteMessage", "getFileThumbnail", "runCode",
  ];

  // The spec's ThreadState for one call: the runtime's snapshot, a fresh `context`, and methods
  // that ask the runtime. The methods live on one shared prototype and are made for a state the
  // first time it reads them (most calls use few of some forty), bound to it, so
  // `const { getValue } = state` works too. A child's methods name it (`$thread`).
  const CALL = Symbol("duet.call");
  const methods = {};
  function method(member, make) {
    defineProperty(methods, member, {
      get() {
        const f = make(this[CALL]);
        defineProperty(this, member, { value: f, writable: true, configurable: true });
        return f;
      },
      set(value) {
        defineProperty(this, member, { value, writable: true, configurable: true, enumerable: true });
      },
    });
  }
  for (const [member, params] of entries(PARAMS)) {
    method(member, ({ token, thread }) => (...a) => later(token, member, params(...a), thread));
  }
  for (const [member, params] of entries(SYNC)) {
    method(member, ({ token, thread }) => (...a) => now(token, member, params(...a), thread));
  }
  for (const member of POSITIONAL) {
    method(member, ({ token, thread }) => (...args) => later(token, member, { args }, thread));
  }
  // `readFileStream(path)`: null when nothing is there, else an async iterable of
  // `{ data: ArrayBuffer, offset }`, read through the bridge one chunk (1 MiB) per step, never
  // the whole file at once. A file written or removed meanwhile ends the stream with an error.
  async function* chunks(token, path, thread, first) {
    let c = first;
    for (;;) {
      const data = fromWire(c.data);
      const size = data.byteLength;
      if (size > 0) yield { data, offset: c.offset };
      const next = c.offset + size;
      if (size === 0 || next >= c.size) return;
      c = await later(token, "readFileChunk", { path, offset: next, updatedAt: c.updatedAt }, thread);
      if (c === null || c === undefined) throw new Error(`${path} was removed while it was read`);
    }
  }
  method("readFileStream", ({ token, thread }) => (path) =>
    later(token, "readFileChunk", { path, offset: 0 }, thread).then((first) =>
      first === null || first === undefined ? null
        : { [Symbol.asyncIterator]: () => chunks(token, path, thread, first) }));
  method("getChildThread", ({ token, thread }) => (referenceId) =>
    later(token, "getChildThread", { referenceId }, thread).then((child) =>
      child === null || child === undefined ? null : makeState(token, child, String(referenceId))));
  freeze(methods);

  function makeState(token, snapshot, thread) {
    const state = create(methods);
    defineProperty(state, CALL, { value: freeze({ token, thread }) });
    if (snapshot !== null && typeof snapshot === "object") assign(state, snapshot);
    state.context = {};
    return state;
  }

  async function fetch(input, init) {
    const request = new Request(input, init);
    const params = { url: request.url, method: request.method, headers: [...request.headers] };
    const body = bodyOf(request);
    if (body !== null && body.text !== undefined) params.body = body.text;
    if (body !== null && body.bytes !== undefined) params.bodyBase64 = toBase64(body.bytes);
    let answer;
    try {
      answer = parse(bridge(current, "fetch", stringify(params)));
    } catch (e) {
      throw new TypeError(messageOf(e));
    }
    const answered = typeof answer.bodyBase64 === "string" ? { bytes: fromBase64(answer.bodyBase64) }
      : typeof answer.body === "string" ? { text: answer.body } : null;
    return made(answered, Number(answer.status), undefined, answer.headers ?? [], String(answer.url ?? request.url));
  }

  function inspect(v) {
    if (typeof v === "string") return v;
    if (v instanceof Error) return v.stack ? `${String(v)}\n${v.stack}`.trimEnd() : String(v);
    if (typeof v === "function") return `[Function ${v.name || "(anonymous)"}]`;
    if (typeof v === "bigint") return `${v}n`;
    if (typeof v === "symbol" || v === undefined) return String(v);
    try {
      return stringify(v) ?? String(v);
    } catch {
      return String(v);
    }
  }
  // `console.log("%s has %d", a, b)`, as Node formats it (`%s %d %i %f %j %o %O %%`).
  function format(args) {
    if (typeof args[0] !== "string" || !args[0].includes("%")) return args.map(inspect).join(" ");
    let i = 1;
    const head = args[0].replace(/%([sdifjoO%])/g, (whole, k) => {
      if (k === "%") return "%";
      if (i >= args.length) return whole;
      const a = args[i++];
      if (k === "s") return typeof a === "string" ? a : inspect(a);
      if (k === "d" || k === "i") return typeof a === "bigint" ? `${a}n` : String(k === "i" ? parseInt(a) : Number(a));
      if (k === "f") return String(parseFloat(a));
      return inspect(a);
    });
    return [head, ...args.slice(i).map(inspect)].join(" ");
  }
  const console = {};
  for (const [name, level] of [["log", "info"], ["info", "info"], ["warn", "warn"], ["error", "error"], ["debug", "debug"], ["trace", "debug"]]) {
    console[name] = (...args) => log(level, format(args));
  }

  for (const c of [web.Headers, web.Request, web.Response, web.URL, web.URLSearchParams, web.TextEncoder, web.TextDecoder]) {
    freeze(c.prototype);
    freeze(c);
  }
  const globals = {
    fetch, Request, Response, Headers: web.Headers, URL: web.URL, URLSearchParams: web.URLSearchParams,
    TextEncoder: web.TextEncoder, TextDecoder: web.TextDecoder, structuredClone: web.structuredClone,
    console: freeze(console),
  };
  for (const [name, value] of entries(globals)) {
    defineProperty(globalThis, name, { value, writable: false, configurable: false, enumerable: false });
  }
  // spec.js records which define function made a value (describe.js's registry, for the loader).
  defineProperty(globalThis, Symbol.for("duet.defined"), { value: new WeakMap() });

  // `{"$request": {...}}` is a Request; anything else is as JSON made it.
  function argument(a) {
    if (a === null || typeof a !== "object" || isArray(a) || keys(a).length !== 1 || !("$request" in a)) return a;
    const r = a.$request ?? {};
    const body = typeof r.bodyBase64 === "string" ? { bytes: fromBase64(r.bodyBase64) }
      : typeof r.body === "string" ? { text: r.body } : null;
    return madeRequest(r.method ?? "GET", String(r.url), r.headers ?? [], body);
  }

  // The result as JSON text: `undefined` is `{"$undefined":true}` (a hook that returns nothing
  // keeps what it was given, where `null` means something), a Response is
  // `{"$response": ...}`, and what JSON cannot hold (a function, a BigInt, a cycle) is an error
  // saying where.
  function resultJson(v) {
    if (v === undefined) return '{"$undefined":true}';
    if (v instanceof Response) {
      const body = bodyOf(v);
      const out = { status: v.status, headers: [...v.headers] };
      if (body !== null && body.bytes !== undefined) out.bodyBase64 = toBase64(body.bytes);
      else out.body = body === null ? "" : body.text;
      return stringify({ $response: out });
    }
    const paths = new WeakMap();
    try {
      return stringify(v, function (key, value) {
        const parent = paths.get(this);
        const at = parent === undefined ? "the result" : isArray(this) ? `${parent}[${key}]` : `${parent}.${key}`;
        if (typeof value === "function") throw new TypeError(`${at} is a function, which JSON cannot hold`);
        if (typeof value === "bigint") throw new TypeError(`${at} is a BigInt, which JSON cannot hold`);
        if (value !== null && typeof value === "object") paths.set(value, at);
        return value;
      }) ?? "null";
    } catch (e) {
      if (e instanceof TypeError && /circular|cycle/i.test(e.message)) {
        throw new TypeError("the result refers to itself (a cycle), which JSON cannot hold");
      }
      throw e;
    }
  }

  function failure(e) {
    let message;
    try {
      message = String(e);
    } catch {
      message = "a value that cannot be shown";
    }
    const stack = e !== null && typeof e === "object" && typeof e.stack === "string" ? e.stack : "";
    // A thrown object's own properties (a prefilter hook blocks with `{ block: true }`).
    let details = null;
    if (e !== null && typeof e === "object") {
      try {
        const own = {};
        for (const k of Object.keys(e)) own[k] = e[k];
        const text = JSON.stringify(own);
        if (text !== "{}") details = text;
      } catch {
        details = null;
      }
    }
    return { message, stack, details };
  }

  // Calls `entry` of module `ns`'s default export with `state` at `stateAt` among the arguments
  // (`fn(state, ...args)`; a thread endpoint's `(req, state, params)`); what it comes to is
  // put on the box this returns: `ok` (JSON text), `thrown` ({ message, stack }) or `load`.
  return function run(token, ns, file, entryJson, argsJson, stateJson, stateAt) {
    const box = { done: false };
    const settle = (key, value) => {
      box[key] = value;
      box.done = true;
    };
    current = token;
    const entry = parse(entryJson);
    let holder;
    let fn = ns.default;
    if (fn === undefined) {
      settle("load", `${file} has no default export`);
      return box;
    }
    for (const key of entry) {
      holder = fn;
      fn = fn === null || fn === undefined ? undefined : fn[key];
    }
    if (typeof fn !== "function") {
      settle("load", `\`${entry.join(".")}\` is not a function in ${file}'s default export`);
      return box;
    }
    let result;
    try {
      const state = makeState(token, parse(stateJson), undefined);
      const args = parse(argsJson).map(argument);
      const at = stateAt > 0 && stateAt <= args.length ? stateAt : 0;
      // Indexed, not `slice`: code may have patched the prototypes in this warm context.
      const all = [];
      for (let i = 0; i <= args.length; i++) {
        if (i === at) all[all.length] = state;
        if (i < args.length) all[all.length] = args[i];
      }
      result = P.resolve(apply(fn, holder, all));
    } catch (e) {
      result = P.reject(e);
    }
    result.then(
      (v) => {
        try {
          settle("ok", resultJson(v));
        } catch (e) {
          settle("thrown", failure(e));
        }
      },
      (e) => settle("thrown", failure(e)),
    );
    return box;
  };
}
