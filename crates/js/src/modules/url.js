// The embedded code host's `URL` and `URLSearchParams`: the WHATWG URL standard's parsing for
// the common cases (special schemes with a host, relative references against a base, dot
// segments, percent-encoding, default ports), enough for an endpoint's
// `new URL(req.url).searchParams.get(...)` and a tool's `fetch` URL. International domain names
// are kept as written (the runtime's HTTP client converts them). Needs text.js first.
(web) => {
  "use strict";
  const { utf8Encode, utf8Decode } = web;
  const SPECIAL = { "http:": "80", "https:": "443", "ws:": "80", "wss:": "443", "ftp:": "21", "file:": "" };
  const HEX = "0123456789ABCDEF";

  // Percent-encodes the code points `keep` does not accept (and every non-ASCII one).
  function encode(text, keep) {
    let out = "";
    for (const ch of text) {
      const c = ch.codePointAt(0);
      if (c > 0x20 && c < 0x7f && keep(ch)) {
        out += ch;
        continue;
      }
      for (const b of utf8Encode(ch)) out += "%" + HEX[b >> 4] + HEX[b & 15];
    }
    return out;
  }
  const inPath = (ch) => !"\"#<>?`{}".includes(ch);
  const inQuery = (special) => (ch) => !"\"#<>".includes(ch) && !(special && ch === "'");
  const inFragment = (ch) => !"\"<>`".includes(ch);
  const inUserinfo = (ch) => !"\"#<>?`{}/:;=@[\\]^|".includes(ch);

  function percentDecode(text) {
    const bytes = utf8Encode(text);
    const out = [];
    for (let i = 0; i < bytes.length; i++) {
      const hex = bytes[i] === 37 && i + 2 < bytes.length
        ? String.fromCharCode(bytes[i + 1], bytes[i + 2]) : "";
      if (/^[0-9a-fA-F]{2}$/.test(hex)) {
        out.push(parseInt(hex, 16));
        i += 2;
      } else {
        out.push(bytes[i]);
      }
    }
    return utf8Decode(new Uint8Array(out));
  }

  function invalid(input) {
    return new TypeError(`Invalid URL: \`${input}\``);
  }

  // `{ host, port, username, password }` of an authority, or null when it is not one.
  function authority(text, scheme) {
    let userinfo = "";
    const at = text.lastIndexOf("@");
    if (at >= 0) {
      userinfo = text.slice(0, at);
      text = text.slice(at + 1);
    }
    const colon = userinfo.indexOf(":");
    const username = encode(colon < 0 ? userinfo : userinfo.slice(0, colon), inUserinfo);
    const password = colon < 0 ? "" : encode(userinfo.slice(colon + 1), inUserinfo);
    let host = text;
    let port = "";
    const close = text.lastIndexOf("]");
    const portAt = text.lastIndexOf(":");
    if (portAt > close) {
      host = text.slice(0, portAt);
      port = text.slice(portAt + 1);
      if (!/^[0-9]*$/.test(port) || (port !== "" && Number(port) > 65535)) return null;
      if (port !== "") port = String(Number(port));
      if (port === SPECIAL[scheme]) port = "";
    }
    if (host.startsWith("[")) {
      if (!/^\[[0-9a-fA-F:.]+\]$/.test(host)) return null;
      host = host.toLowerCase();
    } else if (scheme in SPECIAL) {
      host = percentDecode(host).toLowerCase();
      if (/[\u0000-\u0020#%/:<>?@[\\\]^|\u007f]/.test(host)) return null;
      if (host === "" && scheme !== "file:") return null;
    } else if (/[\u0000-\u0020#/<>?@[\\\]^|]/.test(host)) {
      return null;
    }
    return { host, port, username, password };
  }

  // The path's segments with `.` and `..` resolved.
  function normalizePath(path) {
    const out = [];
    const segments = path.split("/");
    segments.forEach((segment, i) => {
      const s = segment.toLowerCase();
      const last = i === segments.length - 1;
      if (s === ".." || s === ".%2e" || s === "%2e." || s === "%2e%2e") {
        if (out.length > 1) out.pop();
        if (last) out.push("");
      } else if (s === "." || s === "%2e") {
        if (last) out.push("");
      } else {
        out.push(segment);
      }
    });
    return out.join("/");
  }

  // A URL record `{ scheme, username, password, host, port, path, query, fragment, opaque }`,
  // or throws a TypeError.
  function parse(input, base) {
    const text = String(input).replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "").replace(/[\t\n\r]/g, "");
    let rest = text;
    let fragment = null;
    let query = null;
    const hash = rest.indexOf("#");
    if (hash >= 0) {
      fragment = encode(rest.slice(hash + 1), inFragment);
      rest = rest.slice(0, hash);
    }
    const schemeMatch = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(rest);
    const record = { scheme: "", username: "", password: "", host: null, port: "", path: "", query: null, fragment, opaque: false };
    const takeQuery = (special) => {
      const q = rest.indexOf("?");
      if (q >= 0) {
        query = encode(rest.slice(q + 1), inQuery(special));
        rest = rest.slice(0, q);
      }
    };
    if (schemeMatch) {
      record.scheme = schemeMatch[1].toLowerCase() + ":";
      rest = rest.slice(schemeMatch[0].length);
      const special = record.scheme in SPECIAL;
      takeQuery(special);
      if (special) rest = rest.replace(/\\/g, "/");
      if (record.scheme === "file:" && !rest.startsWith("//")) {
        Object.assign(record, { host: "", path: normalizePath(encode(rest.startsWith("/") ? rest : "/" + rest, inPath)) });
      } else if (special || rest.startsWith("//")) {
        rest = special && record.scheme !== "file:" ? rest.replace(/^\/*/, "") : rest.slice(2);
        const end = rest.search(/\//);
        const auth = authority(end < 0 ? rest : rest.slice(0, end), record.scheme);
        if (auth === null) throw invalid(input);
        Object.assign(record, auth);
        rest = end < 0 ? "" : rest.slice(end);
        record.path = normalizePath(encode(rest || (special ? "/" : ""), inPath));
      } else {
        record.opaque = !rest.startsWith("/");
        record.path = record.opaque ? encode(rest, () => true) : normalizePath(encode(rest, inPath));
      }
      record.query = query;
      return record;
    }
    if (base === undefined) throw invalid(input);
    const b = base instanceof URL ? parse(base.href) : parse(base);
    const special = b.scheme in SPECIAL;
    takeQuery(special);
    if (special) rest = rest.replace(/\\/g, "/");
    const out = { ...b, fragment, query };
    if (b.opaque) {
      if (text.startsWith("#")) return { ...b, fragment };
      throw invalid(input);
    }
    if (rest.startsWith("//")) {
      const tail = rest.slice(2);
      const end = tail.search(/\//);
      const auth = authority(end < 0 ? tail : tail.slice(0, end), b.scheme);
      if (auth === null) throw invalid(input);
      Object.assign(out, auth);
      out.path = normalizePath(encode(end < 0 ? "/" : tail.slice(end), inPath));
    } else if (rest.startsWith("/")) {
      out.path = normalizePath(encode(rest, inPath));
    } else if (rest === "") {
      out.path = b.path;
      if (query === null) out.query = b.query;
    } else {
      const dir = b.path.slice(0, b.path.lastIndexOf("/") + 1) || "/";
      out.path = normalizePath(encode(dir + rest, inPath));
    }
    return out;
  }

  function serialize(r, withFragment = true) {
    let out = r.scheme;
    if (r.host !== null) {
      out += "//";
      if (r.username !== "" || r.password !== "") {
        out += r.username + (r.password !== "" ? ":" + r.password : "") + "@";
      }
      out += r.host + (r.port !== "" ? ":" + r.port : "");
    }
    out += r.path;
    if (r.query !== null) out += "?" + r.query;
    if (withFragment && r.fragment !== null) out += "#" + r.fragment;
    return out;
  }

  // application/x-www-form-urlencoded
  const formKeep = (ch) => /[A-Za-z0-9*\-._]/.test(ch);
  const formEncode = (text) => encode(String(text), formKeep).replace(/%20/g, "+");
  const formDecode = (text) => percentDecode(text.replace(/\+/g, " "));
  function formParse(text) {
    const out = [];
    for (const part of text.split("&")) {
      if (part === "") continue;
      const eq = part.indexOf("=");
      out.push(eq < 0 ? [formDecode(part), ""] : [formDecode(part.slice(0, eq)), formDecode(part.slice(eq + 1))]);
    }
    return out;
  }

  const owners = new WeakMap();

  class URLSearchParams {
    #list = [];
    constructor(init = "") {
      if (init instanceof URLSearchParams) {
        this.#list = [...init];
      } else if (init !== null && typeof init === "object") {
        if (typeof init[Symbol.iterator] === "function") {
          for (const pair of init) {
            const p = [...pair];
            if (p.length !== 2) throw new TypeError("each pair of a URLSearchParams init has a name and a value");
            this.#list.push([String(p[0]), String(p[1])]);
          }
        } else {
          for (const k of Object.keys(init)) this.#list.push([k, String(init[k])]);
        }
      } else {
        const text = String(init);
        this.#list = formParse(text.startsWith("?") ? text.slice(1) : text);
      }
    }
    #update() {
      const url = owners.get(this);
      if (url) url.search = this.toString();
    }
    static _replace(params, text) {
      params.#list = formParse(text);
    }
    get size() { return this.#list.length; }
    append(name, value) { this.#list.push([String(name), String(value)]); this.#update(); }
    delete(name, value) {
      name = String(name);
      this.#list = this.#list.filter(([k, v]) => k !== name || (value !== undefined && v !== String(value)));
      this.#update();
    }
    get(name) {
      const found = this.#list.find(([k]) => k === String(name));
      return found ? found[1] : null;
    }
    getAll(name) { return this.#list.filter(([k]) => k === String(name)).map(([, v]) => v); }
    has(name, value) {
      return this.#list.some(([k, v]) => k === String(name) && (value === undefined || v === String(value)));
    }
    set(name, value) {
      name = String(name);
      const i = this.#list.findIndex(([k]) => k === name);
      if (i < 0) this.#list.push([name, String(value)]);
      else {
        this.#list[i] = [name, String(value)];
        this.#list = this.#list.filter(([k], j) => k !== name || j === i);
      }
      this.#update();
    }
    sort() {
      this.#list = this.#list.map((p, i) => [p, i]).sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1])).map(([p]) => p);
      this.#update();
    }
    forEach(callback, thisArg) { for (const [k, v] of this.#list) callback.call(thisArg, v, k, this); }
    *entries() { for (const [k, v] of this.#list) yield [k, v]; }
    *keys() { for (const [k] of this.#list) yield k; }
    *values() { for (const [, v] of this.#list) yield v; }
    [Symbol.iterator]() { return this.entries(); }
    toString() { return this.#list.map(([k, v]) => formEncode(k) + "=" + formEncode(v)).join("&"); }
    get [Symbol.toStringTag]() { return "URLSearchParams"; }
  }
  const replaceParams = URLSearchParams._replace;
  delete URLSearchParams._replace;

  class URL {
    #r;
    #params;
    constructor(url, base) {
      this.#r = parse(url, base === undefined ? undefined : String(base instanceof URL ? base.href : base));
      this.#params = new URLSearchParams(this.#r.query ?? "");
      owners.set(this.#params, this);
    }
    static canParse(url, base) {
      try { parse(url, base === undefined ? undefined : String(base)); return true; } catch { return false; }
    }
    static parse(url, base) {
      try { return new URL(url, base); } catch { return null; }
    }
    get href() { return serialize(this.#r); }
    set href(value) {
      this.#r = parse(value);
      replaceParams(this.#params, this.#r.query ?? "");
    }
    get origin() {
      const r = this.#r;
      if (!(r.scheme in SPECIAL) || r.scheme === "file:") return "null";
      return r.scheme + "//" + r.host + (r.port !== "" ? ":" + r.port : "");
    }
    get protocol() { return this.#r.scheme; }
    set protocol(value) {
      const scheme = String(value).replace(/:.*$/, "").toLowerCase() + ":";
      if (/^[a-z][a-z0-9+.-]*:$/.test(scheme) && (scheme in SPECIAL) === (this.#r.scheme in SPECIAL)) {
        this.#r.scheme = scheme;
        if (this.#r.port === SPECIAL[scheme]) this.#r.port = "";
      }
    }
    get username() { return this.#r.username; }
    set username(value) { if (this.#r.host) this.#r.username = encode(String(value), inUserinfo); }
    get password() { return this.#r.password; }
    set password(value) { if (this.#r.host) this.#r.password = encode(String(value), inUserinfo); }
    get host() { return (this.#r.host ?? "") + (this.#r.port !== "" ? ":" + this.#r.port : ""); }
    set host(value) {
      if (this.#r.opaque) return;
      const auth = authority(String(value).replace(/[/?#].*$/, ""), this.#r.scheme);
      if (auth !== null) Object.assign(this.#r, { host: auth.host, port: auth.port });
    }
    get hostname() { return this.#r.host ?? ""; }
    set hostname(value) {
      if (this.#r.opaque) return;
      const auth = authority(String(value).replace(/[:/?#].*$/, ""), this.#r.scheme);
      if (auth !== null) this.#r.host = auth.host;
    }
    get port() { return this.#r.port; }
    set port(value) {
      const port = String(value).replace(/[^0-9].*$/, "");
      if (this.#r.host === null || this.#r.scheme === "file:") return;
      if (port === "") this.#r.port = "";
      else if (Number(port) <= 65535) this.#r.port = String(Number(port)) === SPECIAL[this.#r.scheme] ? "" : String(Number(port));
    }
    get pathname() { return this.#r.path; }
    set pathname(value) {
      if (this.#r.opaque) return;
      let path = String(value);
      if (this.#r.scheme in SPECIAL) path = path.replace(/\\/g, "/");
      if (!path.startsWith("/")) path = "/" + path;
      this.#r.path = normalizePath(encode(path, inPath));
    }
    get search() { return this.#r.query ? "?" + this.#r.query : ""; }
    set search(value) {
      let q = String(value);
      if (q.startsWith("?")) q = q.slice(1);
      this.#r.query = q === "" ? null : encode(q, inQuery(this.#r.scheme in SPECIAL));
      replaceParams(this.#params, q);
    }
    get searchParams() { return this.#params; }
    get hash() { return this.#r.fragment ? "#" + this.#r.fragment : ""; }
    set hash(value) {
      let f = String(value);
      if (f.startsWith("#")) f = f.slice(1);
      this.#r.fragment = f === "" ? null : encode(f, inFragment);
    }
    toString() { return this.href; }
    toJSON() { return this.href; }
    get [Symbol.toStringTag]() { return "URL"; }
  }

  Object.assign(web, { URL, URLSearchParams, formParse });
}
