// duet's node code host: module loader hooks that give node the project as duet-js reads it.
//
// - A project file (under the project's folder, outside `node_modules`) keeps its own URL, so
//   `import.meta.url`, packages and stacks see the file where it is, but its code is what duet
//   stripped into the cache (`config.project`): TypeScript without its types, always an ES module.
// - A relative import from a project file is resolved as duet-js resolves it (crates/js/src/
//   resolve.rs, `candidates`): as written, `./x.js` written for `./x.ts`, then with an extension or
//   an index added; never outside the project.
// - `@standardagents/spec` and the provider packages are duet's own (`config.provided`).
// - Everything else is node's own resolution from the importing file's folder (the project's
//   `node_modules`), then from the `NODE_PATH` folders duet was given (`config.nodePath`).
import { readFileSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const config = JSON.parse(readFileSync(new URL("./config.json", import.meta.url), "utf8"));
const ROOT_URL = pathToFileURL(config.root + "/").href;
const PROVIDED = new Map(
  Object.entries(config.provided).map(([name, file]) => [name, new URL(file, import.meta.url).href]),
);
const PROVIDED_URLS = new Set(PROVIDED.values());
const NODE_PATH_PARENTS = config.nodePath.map((dir) => pathToFileURL(path.join(dir, "_.mjs")).href);

/** The project-relative path of `url`, when it is a project file duet stripped; else null. */
function projectFile(url) {
  if (!url || !url.startsWith(ROOT_URL)) return null;
  let rel;
  try {
    rel = path.relative(config.root, fileURLToPath(url)).split(path.sep).join("/");
  } catch {
    return null;
  }
  if (rel.startsWith("../") || rel.split("/").includes("node_modules")) return null;
  return isFile(path.join(config.project, rel)) ? rel : null;
}

function isFile(p) {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/** The files a relative import may mean, in order (resolve.rs's `candidates`). */
function candidates(p) {
  const out = [p];
  if (p.endsWith(".js")) out.push(p.slice(0, -3) + ".ts");
  if (p.endsWith(".mjs")) out.push(p.slice(0, -4) + ".mts");
  for (const ext of [".ts", ".js", ".mjs", "/index.ts", "/index.js"]) out.push(p + ext);
  return out;
}

function refused(message) {
  const e = new Error(message);
  e.code = "ERR_MODULE_NOT_FOUND";
  return e;
}

async function relative(specifier, from, context, next) {
  if (specifier.startsWith("/")) {
    throw refused(`\`${specifier}\` is outside the project; code imports the project's own files by relative paths`);
  }
  const joined = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  if (joined === ".." || joined.startsWith("../")) {
    throw refused(`\`${specifier}\` (imported by ${from}) is outside the project`);
  }
  const tried = candidates(joined);
  for (const c of tried) {
    if (isFile(path.join(config.project, c))) {
      return { url: pathToFileURL(path.join(config.root, c)).href, format: "module", shortCircuit: true };
    }
  }
  // Not code duet stripped (a JSON file, say): node's own resolution finds it, if it is there.
  try {
    return await next(specifier, context);
  } catch {
    throw refused(`\`${specifier}\` (imported by ${from}) is not a file of the project (looked for ${tried.join(", ")})`);
  }
}

export async function resolve(specifier, context, next) {
  const provided = PROVIDED.get(specifier);
  if (provided) return { url: provided, format: "module", shortCircuit: true };
  // The host imports a definition by its URL: kept as it is (a file linked into the project is
  // the project's file, not its target).
  if (projectFile(specifier) !== null) return { url: specifier, format: "module", shortCircuit: true };
  const from = projectFile(context.parentURL);
  if (from === null) return next(specifier, context);
  if (specifier.startsWith("./") || specifier.startsWith("../") || specifier.startsWith("/")) {
    return relative(specifier, from, context, next);
  }
  try {
    return await next(specifier, context);
  } catch (e) {
    if (e?.code !== "ERR_MODULE_NOT_FOUND" || specifier.includes(":")) throw e;
    for (const parentURL of NODE_PATH_PARENTS) {
      try {
        return await next(specifier, { ...context, parentURL });
      } catch {
        // The next folder.
      }
    }
    throw e;
  }
}

export async function load(url, context, next) {
  const rel = projectFile(url);
  if (rel !== null) {
    const source = await readFile(path.join(config.project, rel), "utf8");
    return { format: "module", source, shortCircuit: true };
  }
  if (PROVIDED_URLS.has(url)) {
    return { format: "module", source: await readFile(new URL(url), "utf8"), shortCircuit: true };
  }
  return next(url, context);
}
