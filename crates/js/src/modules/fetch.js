// The embedded code host's Fetch API classes: `Headers`, `Request` and `Response`, bodies held
// whole (text or bytes; no streams). `fetch` itself is host.js's. Needs text.js and url.js.
(web) => {
  "use strict";
  const { utf8Encode, utf8Decode, bytesOf, URL, URLSearchParams } = web;

  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  function headerName(name) {
    const n = String(name);
    if (!TOKEN.test(n)) throw new TypeError(`\`${n}\` is not a valid header name`);
    return n.toLowerCase();
  }
  function headerValue(value) {
    const v = String(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
    if (/[\0\r\n]/.test(v)) throw new TypeError("a header value may not hold NUL, CR or LF");
    return v;
  }

  class Headers {
    #list = [];
    constructor(init) {
      if (init === undefined || init === null) return;
      if (init instanceof Headers) {
        for (const [k, v] of init.#list) this.#list.push([k, v]);
      } else if (typeof init[Symbol.iterator] === "function") {
        for (const pair of init) {
          const p = [...pair];
          if (p.length !== 2) throw new TypeError("each header is a [name, value] pair");
          this.append(p[0], p[1]);
        }
      } else if (typeof init === "object") {
        for (const k of Object.keys(init)) this.append(k, init[k]);
      } else {
        throw new TypeError("Headers takes an object, an array of pairs or a Headers");
      }
    }
    append(name, value) { this.#list.push([headerName(name), headerValue(value)]); }
    set(name, value) {
      const n = headerName(name);
      const v = headerValue(value);
      const i = this.#list.findIndex(([k]) => k === n);
      if (i < 0) this.#list.push([n, v]);
      else {
        this.#list[i] = [n, v];
        this.#list = this.#list.filter(([k], j) => k !== n || j === i);
      }
    }
    get(name) {
      const n = headerName(name);
      const values = this.#list.filter(([k]) => k === n).map(([, v]) => v);
      return values.length === 0 ? null : values.join(", ");
    }
    getSetCookie() { return this.#list.filter(([k]) => k === "set-cookie").map(([, v]) => v); }
    has(name) {
      const n = headerName(name);
      return this.#list.some(([k]) => k === n);
    }
    delete(name) {
      const n = headerName(name);
      this.#list = this.#list.filter(([k]) => k !== n);
    }
    // Sorted by name, values of one name combined (`set-cookie` kept apart), as the standard
    // iterates.
    *entries() {
      const names = [...new Set(this.#list.map(([k]) => k))].sort();
      for (const n of names) {
        if (n === "set-cookie") {
          for (const v of this.getSetCookie()) yield [n, v];
        } else {
          yield [n, this.get(n)];
        }
      }
    }
    *keys() { for (const [k] of this.entries()) yield k; }
    *values() { for (const [, v] of this.entries()) yield v; }
    forEach(callback, thisArg) { for (const [k, v] of this.entries()) callback.call(thisArg, v, k, this); }
    [Symbol.iterator]() { return this.entries(); }
    get [Symbol.toStringTag]() { return "Headers"; }
  }

  // A body: `{ text }` or `{ bytes }`, and the content type it implies.
  function makeBody(body) {
    if (body === undefined || body === null) return { body: null, type: null };
    if (typeof body === "string") return { body: { text: body }, type: "text/plain;charset=UTF-8" };
    if (body instanceof URLSearchParams) {
      return { body: { text: body.toString() }, type: "application/x-www-form-urlencoded;charset=UTF-8" };
    }
    const bytes = bytesOf(body);
    if (bytes !== null) return { body: { bytes }, type: null };
    if (typeof body === "object" && typeof body.getReader === "function") {
      throw new TypeError("streamed bodies are not supported here: pass a string, bytes or URLSearchParams");
    }
    return { body: { text: String(body) }, type: "text/plain;charset=UTF-8" };
  }

  const bodies = new WeakMap();
  const used = new WeakSet();
  function consume(owner) {
    if (used.has(owner)) return Promise.reject(new TypeError("the body has already been read"));
    used.add(owner);
    return Promise.resolve(bodies.get(owner));
  }
  const textOf = (b) => (b === null ? "" : b.text !== undefined ? b.text : utf8Decode(b.bytes));
  const bytesOfBody = (b) => (b === null ? new Uint8Array(0) : b.bytes !== undefined ? b.bytes.slice() : utf8Encode(b.text));

  // The methods `Request` and `Response` share.
  const BodyMixin = {
    get bodyUsed() { return used.has(this); },
    text() { return consume(this).then(textOf); },
    json() { return consume(this).then((b) => JSON.parse(textOf(b))); },
    arrayBuffer() { return consume(this).then((b) => bytesOfBody(b).buffer); },
    bytes() { return consume(this).then(bytesOfBody); },
  };
  function mixBody(cls) {
    for (const key of Object.getOwnPropertyNames(BodyMixin)) {
      Object.defineProperty(cls.prototype, key, Object.getOwnPropertyDescriptor(BodyMixin, key));
    }
  }

  const METHODS = ["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH"];

  class Request {
    #method;
    #url;
    #headers;
    constructor(input, init = {}) {
      init = init ?? {};
      let body = null;
      if (input instanceof Request) {
        this.#method = input.method;
        this.#url = input.url;
        this.#headers = new Headers(input.headers);
        body = bodies.get(input);
      } else {
        this.#url = new URL(String(input)).href;
        this.#method = "GET";
        this.#headers = new Headers();
      }
      if (init.method !== undefined) {
        const m = String(init.method);
        this.#method = METHODS.includes(m.toUpperCase()) ? m.toUpperCase() : m;
        if (!TOKEN.test(m)) throw new TypeError(`\`${m}\` is not a valid method`);
      }
      if (init.headers !== undefined) this.#headers = new Headers(init.headers);
      if (init.body !== undefined && init.body !== null) {
        if (this.#method === "GET" || this.#method === "HEAD") {
          throw new TypeError("a GET or HEAD request cannot have a body");
        }
        const made = makeBody(init.body);
        body = made.body;
        if (made.type && !this.#headers.has("content-type")) this.#headers.set("content-type", made.type);
      }
      bodies.set(this, body);
    }
    get method() { return this.#method; }
    get url() { return this.#url; }
    get headers() { return this.#headers; }
    clone() {
      if (used.has(this)) throw new TypeError("the body has already been read");
      return new Request(this);
    }
    get [Symbol.toStringTag]() { return "Request"; }
  }
  mixBody(Request);

  const REASONS = {
    200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 301: "Moved Permanently",
    302: "Found", 303: "See Other", 304: "Not Modified", 307: "Temporary Redirect",
    308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 410: "Gone",
    413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content",
    429: "Too Many Requests", 500: "Internal Server Error", 501: "Not Implemented",
    502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
  };

  const urls = new WeakMap();

  class Response {
    #status;
    #statusText;
    #headers;
    constructor(body = null, init = {}) {
      init = init ?? {};
      const status = init.status === undefined ? 200 : Number(init.status);
      if (!Number.isInteger(status) || status < 200 || status > 599) {
        throw new RangeError(`\`${init.status}\` is not a status a Response can have (200 to 599)`);
      }
      this.#status = status;
      this.#statusText = init.statusText === undefined ? "" : String(init.statusText);
      this.#headers = new Headers(init.headers);
      const made = makeBody(body);
      if (made.body !== null && [204, 205, 304].includes(status)) {
        throw new TypeError(`a ${status} response cannot have a body`);
      }
      if (made.type && !this.#headers.has("content-type")) this.#headers.set("content-type", made.type);
      bodies.set(this, made.body);
    }
    static json(data, init = {}) {
      const text = JSON.stringify(data);
      if (text === undefined) throw new TypeError("Response.json takes a value JSON can hold");
      const headers = new Headers(init && init.headers);
      if (!headers.has("content-type")) headers.set("content-type", "application/json");
      return new Response(text, { ...init, headers });
    }
    static redirect(url, status = 302) {
      if (![301, 302, 303, 307, 308].includes(status)) throw new RangeError(`\`${status}\` is not a redirect status`);
      return new Response(null, { status, headers: { location: new URL(String(url)).href } });
    }
    get status() { return this.#status; }
    get statusText() { return this.#statusText; }
    get ok() { return this.#status >= 200 && this.#status < 300; }
    get headers() { return this.#headers; }
    get url() { return urls.get(this) ?? ""; }
    get redirected() { return false; }
    get type() { return urls.has(this) ? "basic" : "default"; }
    clone() {
      if (used.has(this)) throw new TypeError("the body has already been read");
      return made(bodies.get(this), this.status, this.statusText, new Headers(this.#headers), urls.get(this));
    }
    get [Symbol.toStringTag]() { return "Response"; }
  }
  mixBody(Response);

  // A response as an answer makes it: any status, the url it came from.
  function made(body, status, statusText, headers, url) {
    const r = new Response(null, { status: 200, headers });
    // The status an answer has may be one a constructor refuses (a 1xx, a 204 with a body).
    Object.defineProperty(r, "status", { value: status });
    Object.defineProperty(r, "statusText", { value: statusText ?? REASONS[status] ?? "" });
    Object.defineProperty(r, "ok", { value: status >= 200 && status < 300 });
    bodies.set(r, body);
    if (url !== undefined) urls.set(r, url);
    return r;
  }

  // A request as the runtime hands it in: any method, a body on any method.
  function madeRequest(method, url, headers, body) {
    const r = new Request(url, { headers });
    const m = String(method);
    Object.defineProperty(r, "method", { value: METHODS.includes(m.toUpperCase()) ? m.toUpperCase() : m });
    bodies.set(r, body);
    return r;
  }

  // What a request or response holds: `{ text }`, `{ bytes }` or null.
  const bodyOf = (owner) => bodies.get(owner) ?? null;

  Object.assign(web, { Headers, Request, Response, made, madeRequest, bodyOf });
}
