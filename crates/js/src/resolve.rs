//! Which module an `import` names, and its code: the project's own files (never outside the
//! project), the modules duet provides (`@standardagents/spec`, the provider packages) and zod
//! from `node_modules`. Everything else is refused, and each refusal is recorded so the loader
//! can report it at the import's line.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use duet_spec::EvalErrorKind;
use rquickjs::loader::{ImportAttributes, Loader, Resolver};
use rquickjs::module::Declared;
use rquickjs::{Ctx, Module};

use crate::strip::{self, Stripped};

/// The packages a definition may import from `node_modules`.
pub(crate) const PACKAGES: &[&str] = &["zod"];
/// The modules duet provides, by name.
const SPEC: &str = "@standardagents/spec";
const PROVIDERS: &[(&str, &str, &str)] = &[
    ("@standardagents/openai", "openai", "OpenAI"),
    ("@standardagents/anthropic", "anthropic", "Anthropic"),
];
/// How a loader names the file it evaluates: `duet:agents/tools/x.ts`.
pub(crate) const TARGET: &str = "duet:";
/// Project files larger than this are not loaded (as for definitions).
const MAX_MODULE_BYTES: u64 = 4 << 20;

/// An import that could not be resolved or loaded.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    /// The module that imports it.
    pub(crate) from: String,
    /// What it imports, as written.
    pub(crate) specifier: String,
    pub(crate) kind: EvalErrorKind,
    pub(crate) message: String,
    pub(crate) hint: Option<String>,
    /// Where in `from` it is, when known (a syntax error's line and column); else the loader
    /// looks for the specifier.
    pub(crate) at: Option<(u32, u32)>,
}

/// What resolving and loading share with the evaluator, for one batch of files.
#[derive(Default)]
pub(crate) struct Modules {
    /// The project's folder on disk, canonical, for files the listing does not hold.
    pub(crate) root: Option<PathBuf>,
    /// More folders searched for packages (Node's `NODE_PATH`).
    pub(crate) node_path: Vec<PathBuf>,
    /// The listing's files by project-relative path.
    pub(crate) files: HashMap<String, String>,
    /// Each project module loaded, with its position map.
    pub(crate) stripped: HashMap<String, Stripped>,
    /// The project modules loaded (besides targets, these are helpers).
    pub(crate) loaded: BTreeSet<String>,
    /// The imports refused, in order.
    pub(crate) failures: Vec<Failure>,
    /// See [`Modules::packages`].
    pub(crate) packages: OnceCell<Vec<(&'static str, Option<PathBuf>)>>,
    /// A package other than zod is a stand-in ([`crate::EvalOptions::stub_packages`]).
    pub(crate) stub_packages: bool,
}

pub(crate) type Shared = Rc<RefCell<Modules>>;

/// The resolver half, for the engine.
pub(crate) struct Resolve(pub(crate) Shared);
/// The loader half, for the engine.
pub(crate) struct Load(pub(crate) Shared);

impl Resolver for Resolve {
    fn resolve<'js>(
        &mut self,
        _ctx: &Ctx<'js>,
        base: &str,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<String> {
        let mut m = self.0.borrow_mut();
        match m.resolve(base, name) {
            Ok(id) => Ok(id),
            Err((kind, message, hint)) => {
                m.failures.push(Failure {
                    from: base.to_owned(),
                    specifier: name.to_owned(),
                    kind,
                    message,
                    hint,
                    at: None,
                });
                Err(rquickjs::Error::new_resolving(base, name))
            }
        }
    }
}

impl Loader for Load {
    fn load<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<Module<'js, Declared>> {
        let code = self.0.borrow_mut().code(name);
        match code {
            Ok(code) => Module::declare(ctx.clone(), name, code),
            Err((kind, message, at)) => {
                self.0.borrow_mut().failures.push(Failure {
                    from: name.to_owned(),
                    specifier: String::new(),
                    kind,
                    message,
                    hint: None,
                    at,
                });
                Err(rquickjs::Error::new_loading(name))
            }
        }
    }
}

type Refusal = (EvalErrorKind, String, Option<String>);
/// A module that cannot be loaded: why, and where in it.
type Unloadable = (EvalErrorKind, String, Option<(u32, u32)>);

impl Modules {
    /// The same project's modules for another engine: nothing loaded yet.
    pub(crate) fn fresh(&self) -> Modules {
        Modules {
            root: self.root.clone(),
            node_path: self.node_path.clone(),
            files: self.files.clone(),
            stub_packages: self.stub_packages,
            ..Modules::default()
        }
    }

    fn resolve(&mut self, base: &str, name: &str) -> Result<String, Refusal> {
        if let Some(target) = name.strip_prefix(TARGET) {
            // The host names the file it evaluates so; code could write it too, so it is held
            // to what a relative import may reach: a file of the project.
            let path = Path::new(target);
            return normalize(path)
                .filter(|n| {
                    !path.is_absolute() && (self.files.contains_key(n) || self.on_disk(n).is_some())
                })
                .ok_or_else(|| {
                    (
                        EvalErrorKind::Import,
                        format!("`{name}` is not a file of the project"),
                        None,
                    )
                });
        }
        if name == SPEC || PROVIDERS.iter().any(|p| p.0 == name) {
            return Ok(name.to_owned());
        }
        if name.starts_with("./") || name.starts_with("../") || name.starts_with('/') {
            if Path::new(base).is_absolute() {
                return self.resolve_in_package(base, name);
            }
            return self.resolve_in_project(base, name);
        }
        let package = package_name(name);
        if !PACKAGES.contains(&package) && self.stub_packages {
            return Ok(format!("{STUB}{name}"));
        }
        if !PACKAGES.contains(&package) {
            return Err((
                EvalErrorKind::Import,
                format!(
                    "`{name}`: definitions may import the project's own files, `@standardagents/spec`, the provider packages (`@standardagents/openai`, `@standardagents/anthropic`) and `zod`"
                ),
                Some("move what the definition needs from this package into a tool's code".into()),
            ));
        }
        self.resolve_package(package, &name[package.len()..])
    }

    /// A relative import of a project file, from the project file `base`.
    fn resolve_in_project(&self, base: &str, name: &str) -> Result<String, Refusal> {
        let dir = Path::new(base).parent().unwrap_or(Path::new(""));
        let Some(joined) = normalize(&dir.join(name)) else {
            return Err((
                EvalErrorKind::Import,
                format!(
                    "`{name}` is outside the project; definitions import only the project's own files"
                ),
                None,
            ));
        };
        let candidates = candidates(&joined);
        for c in &candidates {
            if self.files.contains_key(c) || self.on_disk(c).is_some() {
                return Ok(c.clone());
            }
        }
        Err((
            EvalErrorKind::Import,
            format!(
                "`{name}` is not a file of the project (looked for {})",
                candidates.join(", ")
            ),
            None,
        ))
    }

    /// A relative import inside a package, from the package file `base` (an absolute path).
    fn resolve_in_package(&self, base: &str, name: &str) -> Result<String, Refusal> {
        let dir = Path::new(base).parent().unwrap_or(Path::new("/"));
        let joined = dir.join(name);
        let path = absolute_normal(&joined);
        let inside = self.package_roots().any(|r| path.starts_with(r));
        if inside && path.is_file() {
            return Ok(path.to_string_lossy().into_owned());
        }
        Err((
            EvalErrorKind::Import,
            format!("`{name}` (imported by `{base}`) is not a file of an installed package"),
            None,
        ))
    }

    /// Where each of [`PACKAGES`] is installed, looked up once per batch (zod's ~70 modules
    /// each ask).
    fn packages(&self) -> &[(&'static str, Option<PathBuf>)] {
        self.packages.get_or_init(|| {
            PACKAGES
                .iter()
                .map(|p| (*p, self.find_package(p)))
                .collect()
        })
    }

    fn package_roots(&self) -> impl Iterator<Item = &PathBuf> {
        self.packages().iter().filter_map(|(_, dir)| dir.as_ref())
    }

    fn package_dir(&self, package: &str) -> Option<PathBuf> {
        self.packages()
            .iter()
            .find(|(p, _)| *p == package)
            .and_then(|(_, dir)| dir.clone())
    }

    /// `node_modules/PACKAGE` in the project's folder or one above it (as Node looks), then in
    /// the `NODE_PATH` folders: canonical, so that a relative `NODE_PATH`, one with `..` in it
    /// or a linked package (pnpm's layout) compares with the package's files' paths.
    fn find_package(&self, package: &str) -> Option<PathBuf> {
        let above = self
            .root
            .iter()
            .flat_map(|r| r.ancestors())
            .map(|d| d.join("node_modules"));
        above
            .chain(self.node_path.iter().cloned())
            .map(|d| d.join(package))
            .find(|d| d.join("package.json").is_file())
            .and_then(|d| std::fs::canonicalize(d).ok())
    }

    fn resolve_package(&self, package: &str, subpath: &str) -> Result<String, Refusal> {
        let Some(dir) = self.package_dir(package) else {
            return Err((
                EvalErrorKind::PackageMissing,
                format!(
                    "`{package}` is not installed: no `node_modules/{package}` in the project's folder or above it"
                ),
                Some(format!(
                    "run `npm install {package}` in the project's folder"
                )),
            ));
        };
        let manifest = std::fs::read_to_string(dir.join("package.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .unwrap_or_default();
        let key = format!(".{subpath}");
        let entry = match manifest.get("exports") {
            Some(exports) => export_target(exports, &key),
            None if subpath.is_empty() => manifest
                .get("module")
                .or_else(|| manifest.get("main"))
                .and_then(|v| v.as_str())
                .map(str::to_owned),
            None => Some(key.clone()),
        };
        let file = entry
            .map(|e| absolute_normal(&dir.join(e)))
            .filter(|f| f.starts_with(&dir) && f.is_file());
        file.map(|f| f.to_string_lossy().into_owned())
            .ok_or_else(|| {
                (
                    EvalErrorKind::Import,
                    format!("`{package}{subpath}`: the installed package has no ES module there"),
                    None,
                )
            })
    }

    /// A project file on disk under the root, when it is one (no link leads outside).
    fn on_disk(&self, id: &str) -> Option<PathBuf> {
        let root = self.root.as_ref()?;
        let path = std::fs::canonicalize(root.join(id)).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        (path.starts_with(root) && meta.is_file() && meta.len() <= MAX_MODULE_BYTES).then_some(path)
    }

    /// The code of module `id`.
    fn code(&mut self, id: &str) -> Result<String, Unloadable> {
        if let Some(code) = provided_code(id) {
            return Ok(code);
        }
        if let Some(name) = id.strip_prefix(STUB) {
            return Ok(stub_module(name, &self.files));
        }
        if Path::new(id).is_absolute() {
            // Only a package's own files are named by an absolute path (see `resolve`); checked
            // again here, and read only when a regular file of sane size.
            let path = Path::new(id);
            let readable = self.package_roots().any(|r| path.starts_with(r))
                && std::fs::metadata(path)
                    .is_ok_and(|m| m.is_file() && m.len() <= MAX_MODULE_BYTES);
            if !readable {
                return Err((
                    EvalErrorKind::Import,
                    format!("`{id}` is not a file of an installed package"),
                    None,
                ));
            }
            return std::fs::read_to_string(id).map_err(|e| {
                (
                    EvalErrorKind::Import,
                    format!("cannot read `{id}`: {e}"),
                    None,
                )
            });
        }
        let text = match self.files.get(id) {
            Some(t) => t.clone(),
            None => self
                .on_disk(id)
                .and_then(|p| std::fs::read_to_string(p).ok())
                .ok_or_else(|| (EvalErrorKind::Import, format!("cannot read `{id}`"), None))?,
        };
        self.loaded.insert(id.to_owned());
        let stripped = if id.ends_with(".ts") || id.ends_with(".mts") {
            strip::strip(id, &text).map_err(|(m, at)| (EvalErrorKind::Syntax, m, at))?
        } else {
            Stripped::plain(text)
        };
        let code = stripped.code.clone();
        self.stripped.insert(id.to_owned(), stripped);
        Ok(code)
    }
}

/// How a stand-in package is named to the engine.
const STUB: &str = "duet:stub:";

/// A stand-in for package `name` in a `host: node` project, read by duet's engine: every name
/// the project's files import from it (and its default) is one value that answers anything —
/// called, constructed or read, it gives itself — so a definition that imports the package
/// evaluates, and node runs the real one.
fn stub_module(name: &str, files: &HashMap<String, String>) -> String {
    let mut names: BTreeSet<String> = BTreeSet::new();
    for text in files.values() {
        names.extend(imported_names(text, name));
    }
    let mut code = String::from(
        "const stub = new Proxy(function () {}, {\n  get(_, key) {\n    if (key === Symbol.toPrimitive) return () => '';\n    if (key === 'then' || typeof key === 'symbol') return undefined;\n    return stub;\n  },\n  apply() { return stub; },\n  construct() { return stub; },\n});\nexport default stub;\n",
    );
    for n in names.iter().filter(|n| n.as_str() != "default") {
        code.push_str(&format!("export {{ stub as {n} }};\n"));
    }
    code
}

/// The names `text` imports (or re-exports) from module `module` by name: `{ a, b as c }`
/// gives `a` and `b`. A default or namespace import needs none.
fn imported_names(text: &str, module: &str) -> Vec<String> {
    let mut out = Vec::new();
    for quote in ['\'', '"'] {
        let needle = format!("{quote}{module}{quote}");
        let mut from = 0;
        while let Some(at) = text[from..].find(&needle).map(|i| i + from) {
            from = at + needle.len();
            // The statement's clause: back to its `import`/`export` keyword.
            let head = &text[..at];
            let start = head
                .rfind("import")
                .into_iter()
                .chain(head.rfind("export"))
                .max()
                .unwrap_or(0);
            let clause = &head[start..];
            let (Some(open), Some(close)) = (clause.find('{'), clause.rfind('}')) else {
                continue;
            };
            if close < open {
                continue;
            }
            for part in clause[open + 1..close].split(',') {
                let part = part.trim().trim_start_matches("type ").trim();
                let imported = part.split(" as ").next().unwrap_or("").trim();
                let valid = !imported.is_empty()
                    && imported
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '$');
                if valid {
                    out.push(imported.to_owned());
                }
            }
        }
    }
    out
}

/// The code of the module duet provides as `id` (`@standardagents/spec`, a provider package).
fn provided_code(id: &str) -> Option<String> {
    if id == SPEC {
        return Some(include_str!("modules/spec.js").to_owned());
    }
    let (_, name, cap) = PROVIDERS.iter().find(|p| p.0 == id)?;
    Some(
        include_str!("modules/provider.js")
            .replace("__NAME__", name)
            .replace("__TYPE__", name)
            .replace("__CAP__", cap),
    )
}

/// Every module duet provides, by the name code imports it by, with its code (the node host
/// writes them into its cache).
pub(crate) fn provided() -> Vec<(&'static str, String)> {
    std::iter::once(SPEC)
        .chain(PROVIDERS.iter().map(|p| p.0))
        .filter_map(|id| provided_code(id).map(|code| (id, code)))
        .collect()
}

/// `zod` of `zod/v4/core`, `@scope/pkg` of `@scope/pkg/x`.
fn package_name(name: &str) -> &str {
    let mut parts = name.splitn(3, '/');
    let first = parts.next().unwrap_or("");
    if first.starts_with('@') {
        let second = parts.next().unwrap_or("");
        &name[..(first.len() + 1 + second.len()).min(name.len())]
    } else {
        first
    }
}

/// The file a package's `exports` gives for `key` (`.`, `./v4`), under the `import` condition.
fn export_target(exports: &serde_json::Value, key: &str) -> Option<String> {
    let entry = match exports {
        serde_json::Value::Object(map) if map.keys().any(|k| k.starts_with('.')) => map.get(key)?,
        other if key == "." => other,
        _ => return None,
    };
    condition(entry)
}

fn condition(entry: &serde_json::Value) -> Option<String> {
    match entry {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(map) => ["import", "module", "default"]
            .iter()
            .find_map(|c| map.get(*c).and_then(condition)),
        serde_json::Value::Array(items) => items.iter().find_map(condition),
        _ => None,
    }
}

/// The files a relative import may mean, in order: as written, a `.js` written for a `.ts`
/// (TypeScript's ESM convention), then with an extension or an index added.
fn candidates(path: &str) -> Vec<String> {
    let mut out = vec![path.to_owned()];
    if let Some(stem) = path.strip_suffix(".js") {
        out.push(format!("{stem}.ts"));
    }
    if let Some(stem) = path.strip_suffix(".mjs") {
        out.push(format!("{stem}.mts"));
    }
    for ext in [".ts", ".js", ".mjs", "/index.ts", "/index.js"] {
        out.push(format!("{path}{ext}"));
    }
    out
}

/// `path` (relative to the project root) without `.` and `..`; `None` when it climbs out.
fn normalize(path: &Path) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// An absolute path without `.` and `..` (lexically: packages are read where they are).
fn absolute_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stand_in_exports_every_name_the_project_imports_from_it() {
        let text = "import shout, { exclaim, type Loud, whisper as w } from 'shouty';\n\
                    import { createHash } from \"node:crypto\";\n\
                    export { hush } from 'shouty';\nimport * as all from 'shouty';\n";
        let mut names = imported_names(text, "shouty");
        names.sort();
        assert_eq!(
            names,
            ["Loud", "exclaim", "hush", "whisper"].map(String::from)
        );
        assert_eq!(imported_names(text, "node:crypto"), ["createHash"]);
        let files = HashMap::from([("agents/tools/a.ts".to_owned(), text.to_owned())]);
        let code = stub_module("shouty", &files);
        assert!(code.contains("export default stub;"), "{code}");
        assert!(code.contains("export { stub as exclaim };"), "{code}");
    }

    #[test]
    fn relative_imports_stay_in_the_project() {
        let mut m = Modules::default();
        m.files.insert("agents/lib/tone.ts".into(), String::new());
        assert_eq!(
            m.resolve("agents/prompts/p.ts", "../lib/tone.js").ok(),
            Some("agents/lib/tone.ts".to_owned())
        );
        assert_eq!(
            m.resolve("agents/prompts/p.ts", "../lib/tone").ok(),
            Some("agents/lib/tone.ts".to_owned())
        );
        let (kind, message, _) = m
            .resolve("agents/prompts/p.ts", "../../../etc/passwd")
            .expect_err("outside");
        assert_eq!(kind, EvalErrorKind::Import);
        assert!(message.contains("outside the project"), "{message}");
        let (kind, _, _) = m
            .resolve("agents/prompts/p.ts", "/etc/passwd")
            .expect_err("absolute");
        assert_eq!(kind, EvalErrorKind::Import);
    }

    #[test]
    fn packages_are_named_and_only_zod_is_read() {
        assert_eq!(package_name("zod/v4/core"), "zod");
        assert_eq!(package_name("@scope/pkg/x"), "@scope/pkg");
        let mut m = Modules::default();
        let (kind, message, _) = m
            .resolve("agents/tools/t.ts", "lodash")
            .expect_err("refused");
        assert_eq!(kind, EvalErrorKind::Import);
        assert!(message.contains("`lodash`"), "{message}");
        let (kind, _, hint) = m.resolve("agents/tools/t.ts", "zod").expect_err("missing");
        assert_eq!(kind, EvalErrorKind::PackageMissing);
        assert_eq!(
            hint.as_deref(),
            Some("run `npm install zod` in the project's folder")
        );
    }

    #[test]
    fn a_package_is_found_through_a_path_that_climbs() {
        // NODE_PATH may hold `..`: the package and the files it imports are still its own.
        let dir = std::env::temp_dir().join(format!("duet-js-resolve-{}", std::process::id()));
        let zod = dir.join("node_modules/zod");
        std::fs::create_dir_all(zod.join("v4")).expect("scratch");
        std::fs::create_dir_all(dir.join("x")).expect("scratch");
        let write = |path: PathBuf, text: &str| std::fs::write(path, text).expect("scratch");
        write(
            zod.join("package.json"),
            r#"{ "exports": { ".": { "import": "./index.js" } } }"#,
        );
        write(zod.join("index.js"), "export * from './v4/index.js';");
        write(zod.join("v4/index.js"), "export const z = 1;");
        let m = Modules {
            node_path: vec![dir.join("x/../node_modules")],
            ..Modules::default()
        };
        let entry = m.resolve_package("zod", "");
        let inner = entry
            .as_ref()
            .ok()
            .map(|e| m.resolve_in_package(e, "./v4/index.js"));
        std::fs::remove_dir_all(&dir).expect("scratch");
        let entry = entry.expect("found");
        assert!(!entry.contains(".."), "{entry}");
        assert!(entry.ends_with("node_modules/zod/index.js"), "{entry}");
        let inner = inner.expect("resolved").expect("a file of the package");
        assert!(inner.ends_with("node_modules/zod/v4/index.js"), "{inner}");
    }

    #[test]
    fn an_absolute_module_is_read_only_inside_an_installed_package() {
        let mut m = Modules::default();
        let (kind, message, _) = m.code("/etc/hostname").expect_err("no package holds it");
        assert_eq!(kind, EvalErrorKind::Import);
        assert!(
            message.contains("not a file of an installed package"),
            "{message}"
        );
        assert!(m.code("/dev/zero").is_err());
    }

    #[test]
    fn exports_pick_the_import_condition() {
        let exports = serde_json::json!({
            ".": { "@zod/source": "./src/index.ts", "types": "./index.d.cts", "import": "./index.js", "require": "./index.cjs" },
            "./v4": { "import": { "types": "./v4/index.d.ts", "default": "./v4/index.js" } }
        });
        assert_eq!(export_target(&exports, ".").as_deref(), Some("./index.js"));
        assert_eq!(
            export_target(&exports, "./v4").as_deref(),
            Some("./v4/index.js")
        );
        assert_eq!(export_target(&exports, "./nope"), None);
    }
}
