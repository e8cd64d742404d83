// The embedded code host's text helpers: UTF-8 and base64 (for bodies), `TextEncoder`,
// `TextDecoder` and `structuredClone`. Evaluated once per engine; adds what it makes to `web`.
(web) => {
  "use strict";

  function utf8Encode(input) {
    const s = String(input);
    const out = [];
    for (let i = 0; i < s.length; i++) {
      let c = s.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
        } else {
          c = 0xfffd;
        }
      } else if (c >= 0xd800 && c <= 0xdfff) {
        c = 0xfffd;
      }
      if (c < 0x80) out.push(c);
      else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
    return new Uint8Array(out);
  }

  // Decodes UTF-8; an invalid sequence is U+FFFD, or a TypeError when `fatal`.
  function utf8Decode(bytes, fatal = false) {
    let out = "";
    const bad = () => {
      if (fatal) throw new TypeError("the bytes are not valid UTF-8");
      return 0xfffd;
    };
    for (let i = 0; i < bytes.length; ) {
      const b = bytes[i];
      let c;
      let need = 0;
      let min = 0;
      if (b < 0x80) c = b;
      else if (b >= 0xc2 && b < 0xe0) { c = b & 31; need = 1; min = 0x80; }
      else if (b >= 0xe0 && b < 0xf0) { c = b & 15; need = 2; min = 0x800; }
      else if (b >= 0xf0 && b < 0xf5) { c = b & 7; need = 3; min = 0x10000; }
      else { out += String.fromCharCode(bad()); i++; continue; }
      let j = 1;
      for (; j <= need; j++) {
        const n = bytes[i + j];
        if (n === undefined || (n & 0xc0) !== 0x80) break;
        c = (c << 6) | (n & 63);
      }
      if (j <= need || c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
        out += String.fromCharCode(bad());
        // A sequence cut short skips what it had; a bad value skips its first byte.
        i += j <= need ? j : 1;
        continue;
      }
      out += String.fromCodePoint(c);
      i += need + 1;
    }
    return out;
  }

  const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  function toBase64(bytes) {
    let out = "";
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
      out += ALPHABET[(n >> 18) & 63] + ALPHABET[(n >> 12) & 63];
      out += i + 1 < bytes.length ? ALPHABET[(n >> 6) & 63] : "=";
      out += i + 2 < bytes.length ? ALPHABET[n & 63] : "=";
    }
    return out;
  }
  function fromBase64(text) {
    const clean = String(text).replace(/[\s=]/g, "");
    const out = new Uint8Array(Math.floor((clean.length * 3) / 4));
    let bits = 0;
    let value = 0;
    let at = 0;
    for (const ch of clean) {
      const v = ALPHABET.indexOf(ch === "-" ? "+" : ch === "_" ? "/" : ch);
      if (v < 0) throw new TypeError("the text is not base64");
      value = (value << 6) | v;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out[at++] = (value >> bits) & 255;
      }
    }
    return out.subarray(0, at);
  }

  // The bytes of a buffer source, copied.
  function bytesOf(source) {
    if (source instanceof ArrayBuffer) return new Uint8Array(source.slice(0));
    if (ArrayBuffer.isView(source)) {
      return new Uint8Array(source.buffer.slice(source.byteOffset, source.byteOffset + source.byteLength));
    }
    return null;
  }

  class TextEncoder {
    get encoding() { return "utf-8"; }
    encode(input = "") { return utf8Encode(input); }
  }

  class TextDecoder {
    #fatal;
    constructor(label = "utf-8", options = {}) {
      if (!/^(utf-?8|unicode-1-1-utf-8)$/i.test(String(label).trim())) {
        throw new RangeError(`TextDecoder supports utf-8 only, not \`${label}\``);
      }
      this.#fatal = Boolean(options && options.fatal);
    }
    get encoding() { return "utf-8"; }
    get fatal() { return this.#fatal; }
    decode(input) {
      if (input === undefined) return "";
      const bytes = bytesOf(input);
      if (bytes === null) throw new TypeError("TextDecoder.decode takes an ArrayBuffer or a view of one");
      const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
      return utf8Decode(bytes.subarray(start), this.#fatal);
    }
  }

  // Plain data, dates, regular expressions, maps, sets, buffers and errors, cycles kept;
  // anything else (a function, a class instance's methods) cannot be cloned.
  function structuredClone(value) {
    const seen = new Map();
    const fail = (what) => {
      const e = new Error(`${what} could not be cloned`);
      e.name = "DataCloneError";
      throw e;
    };
    function clone(v) {
      if (typeof v === "function") fail("a function");
      if (typeof v === "symbol") fail("a symbol");
      if (v === null || typeof v !== "object") return v;
      if (seen.has(v)) return seen.get(v);
      let out;
      if (Array.isArray(v)) {
        out = [];
        seen.set(v, out);
        for (let i = 0; i < v.length; i++) out[i] = clone(v[i]);
        return out;
      }
      if (v instanceof Date) out = new Date(v.getTime());
      else if (v instanceof RegExp) out = new RegExp(v.source, v.flags);
      else if (v instanceof ArrayBuffer) out = v.slice(0);
      else if (ArrayBuffer.isView(v)) out = new v.constructor(bytesOf(v).buffer);
      else if (v instanceof Map) {
        out = new Map();
        seen.set(v, out);
        for (const [k, x] of v) out.set(clone(k), clone(x));
        return out;
      } else if (v instanceof Set) {
        out = new Set();
        seen.set(v, out);
        for (const x of v) out.add(clone(x));
        return out;
      } else if (v instanceof Error) {
        out = new Error(v.message);
        out.name = v.name;
      } else {
        out = {};
        seen.set(v, out);
        for (const k of Object.keys(v)) out[k] = clone(v[k]);
        return out;
      }
      seen.set(v, out);
      return out;
    }
    return clone(value);
  }

  Object.assign(web, {
    utf8Encode, utf8Decode, toBase64, fromBase64, bytesOf, TextEncoder, TextDecoder, structuredClone,
  });
}
