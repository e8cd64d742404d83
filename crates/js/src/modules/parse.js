// Checks a tool call's arguments with the tool's own zod `args`: `{ ok: true, data }` with
// zod's output (defaults filled in, coercions applied), or `{ ok: false, problems }`, each
// problem `/path: message` as duet reports JSON Schema's.
Object.defineProperty(globalThis, "__duetParse", {
  value(def, argsText) {
    const schema = def && def.args;
    if (!schema || typeof schema.safeParse !== "function") {
      return JSON.stringify({ ok: false, problems: ["the tool's `args` is not a zod schema"] });
    }
    const result = schema.safeParse(JSON.parse(argsText));
    if (result.success) {
      return JSON.stringify({ ok: true, data: result.data === undefined ? null : result.data });
    }
    const problems = result.error.issues.map((issue) => {
      const path = (issue.path || []).map((p) => String(p)).join("/");
      return `/${path}: ${issue.message}`;
    });
    return JSON.stringify({ ok: false, problems });
  },
});
