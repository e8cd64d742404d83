// Turns a definition's default export into plain data for the loader: JSON with each value
// tagged (`{ t: "obj", v: [[key, value], ...] }`), functions as `fn`, zod schemas as their JSON
// Schema, provider factories as providers, and anything JSON cannot hold named in words.
(() => {
  const defined = new WeakMap();
  Object.defineProperty(globalThis, Symbol.for("duet.defined"), { value: defined });
  const PROVIDER = Symbol.for("duet.provider");
  const MAX_VALUES = 100000;
  // Each level of a value is up to three levels of the tagged JSON, which is read with a
  // nesting limit of 128.
  const MAX_DEPTH = 40;

  function isZod(v) {
    return v !== null && typeof v === "object" && v._zod !== undefined
      && typeof v.safeParse === "function";
  }

  function schema(v) {
    if (typeof v.toJSONSchema !== "function") {
      return { t: "schemaError", v: "this zod schema has no `toJSONSchema` (zod 4's `zod` import has it)" };
    }
    try {
      const json = v.toJSONSchema({ io: "input" });
      delete json.$schema;
      return { t: "schema", v: json };
    } catch (e) {
      return { t: "schemaError", v: String(e && e.message ? e.message : e) };
    }
  }

  Object.defineProperty(globalThis, "__duetDescribe", {
    value(root) {
      let count = 0;
      const seen = new Set();
      let schemaError = null;
      function d(v, depth, path) {
        if (++count > MAX_VALUES) throw new RangeError("the definition holds more than 100000 values");
        if (depth > MAX_DEPTH) return { t: "other", v: "values nested deeper than 40" };
        if (v === undefined) return { t: "undef" };
        if (v === null) return { t: "null" };
        switch (typeof v) {
          case "boolean": return { t: "bool", v };
          case "number": return Number.isFinite(v) ? { t: "num", v } : { t: "other", v: String(v) };
          case "string": return { t: "str", v };
          case "bigint": return { t: "other", v: "a bigint" };
          case "symbol": return { t: "other", v: "a symbol" };
          case "function": {
            const p = v[PROVIDER];
            return p ? { t: "provider", type: p.type } : { t: "fn" };
          }
        }
        const p = v[PROVIDER];
        if (p) return { t: "provider", type: p.type, options: d(p.options, depth + 1, path) };
        if (v._zod === undefined && v._def !== undefined && typeof v.safeParse === "function") {
          const message = "this is a zod 3 schema; duet reads zod 4 (`npm install zod@4`, `import { z } from 'zod'`)";
          if (schemaError === null) schemaError = { path, message };
          return { t: "schemaError", v: message };
        }
        if (isZod(v)) {
          const s = schema(v);
          if (s.t === "schemaError" && schemaError === null) schemaError = { path, message: s.v };
          return s;
        }
        if (seen.has(v)) return { t: "other", v: "a reference to a value that holds it (a cycle)" };
        seen.add(v);
        try {
          if (Array.isArray(v)) return { t: "arr", v: v.map((x, i) => d(x, depth + 1, `${path}[${i}]`)) };
          const proto = Object.getPrototypeOf(v);
          if (proto !== Object.prototype && proto !== null) {
            const name = v.constructor && v.constructor.name;
            return { t: "other", v: name ? `a ${name}` : "an instance of a class" };
          }
          return {
            t: "obj",
            v: Object.keys(v).map((k) => [k, d(v[k], depth + 1, path ? `${path}.${k}` : k)]),
          };
        } finally {
          seen.delete(v);
        }
      }
      const value = d(root, 0, "");
      const define = (root !== null && (typeof root === "object" || typeof root === "function"))
        ? defined.get(root) ?? null
        : null;
      return JSON.stringify({ define, value, schemaError });
    },
  });
})();
