// @standardagents/spec as duet provides it (the package is not published on npm): the define
// functions, the handler brand and the provider-value helpers. A define function returns what it
// is given and remembers which function made it, so the loader knows a `defineTool` from a
// `defineAgent` whatever the file does with the value before exporting it.
const defined = globalThis[Symbol.for("duet.defined")];

function define(fn, def) {
  if (def === null || (typeof def !== "object" && typeof def !== "function")) {
    throw new TypeError(`${fn} takes an object, not ${def === null ? "null" : typeof def}`);
  }
  defined.set(def, fn);
  return def;
}

export const HANDLER_SYMBOL = Symbol.for("standardagents.handler");

export const defineAgent = (def) => define("defineAgent", def);
export const definePrompt = (def) => define("definePrompt", def);
export const defineTool = (def) => define("defineTool", def);
export const defineHook = (def) => define("defineHook", def);
export const defineModel = (def) => define("defineModel", def);
export const defineProvider = (def) => define("defineProvider", def);
export const defineMcpServer = (def) => define("defineMcpServer", def);
export const defineRemoteAgent = (def) => define("defineRemoteAgent", def);
export const defineNotification = (def) => define("defineNotification", def);

export function defineHandler(def) {
  define("defineHandler", def);
  Object.defineProperty(def, HANDLER_SYMBOL, { value: true, enumerable: false });
  return def;
}

export function isHandler(value) {
  return value != null && value[HANDLER_SYMBOL] === true;
}

// `defineEffect({ description, args, handler })`, or the spec's positional
// `defineEffect(description, argsSchema?, handler)`.
export function defineEffect(description, args, handler) {
  if (typeof description === "object" && description !== null) {
    return define("defineEffect", description);
  }
  const def = handler === undefined
    ? { description, handler: args }
    : { description, args, handler };
  return define("defineEffect", def);
}

export function defineThreadEndpoint(handler) {
  if (typeof handler !== "function") {
    throw new TypeError("defineThreadEndpoint takes a function `(req, state, params) => Response`");
  }
  return define("defineThreadEndpoint", { handler });
}

const PROVIDER_VALUE = Symbol.for("duet.providerValue");
export const providerEnv = (name) => ({ [PROVIDER_VALUE]: "env", name });
export const providerConst = (value) => ({ [PROVIDER_VALUE]: "const", value });
export const providerValue = providerConst;

// The reasoning level (0-100) a provider's named levels map to: the nearest level named.
export function mapReasoningLevel(level, levels) {
  if (levels == null || typeof level !== "number") return undefined;
  let best;
  for (const key of Object.keys(levels)) {
    const at = Number(key);
    if (levels[key] == null || Number.isNaN(at)) continue;
    if (best === undefined || Math.abs(at - level) < Math.abs(best - level)) best = at;
  }
  return best === undefined ? undefined : levels[best];
}

export const isPacked = () => false;
export const belongsToPackage = () => false;
export const isVisibleInNamespace = () => true;
export const validateAgentDefinition = (def) => def;
