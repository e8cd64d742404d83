// A Standard Agents provider package as duet provides it: a factory that maps to duet's own
// `__TYPE__` provider. `provider: __NAME__` is the built-in provider; `provider: __NAME__({ baseUrl,
// apiKey: providerEnv("VAR"), timeout, headers, maxAttempts })` a provider of the model's own.
const PROVIDER = Symbol.for("duet.provider");
const PROVIDER_VALUE = Symbol.for("duet.providerValue");

function options(config) {
  if (config === undefined) return {};
  if (config === null || typeof config !== "object") {
    throw new TypeError("__NAME__() takes an options object");
  }
  const out = {};
  for (const [key, value] of Object.entries(config)) {
    switch (key) {
      case "apiKey":
        if (value != null && value[PROVIDER_VALUE] === "env") {
          out.apiKeyEnv = value.name;
        } else if (value != null) {
          throw new TypeError(
            "__NAME__({ apiKey }) takes providerEnv(\"VARIABLE\"): a key is never written into a definition",
          );
        }
        break;
      case "baseUrl":
      case "baseURL":
        out.baseUrl = value != null && value[PROVIDER_VALUE] === "const" ? value.value : value;
        break;
      case "timeout":
        out.timeoutMs = value;
        break;
      default:
        out[key] = value;
    }
  }
  return out;
}

export function __NAME__(config) {
  return { [PROVIDER]: { type: "__TYPE__", options: options(config) } };
}
Object.defineProperty(__NAME__, PROVIDER, { value: { type: "__TYPE__" } });
export const create__CAP__ = __NAME__;
export default __NAME__;
