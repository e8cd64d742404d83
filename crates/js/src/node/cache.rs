//! The node host's cache: a private temporary folder holding the project's code as node runs
//! it — every `.ts`/`.mts`/`.js`/`.mjs` file of the project, TypeScript stripped by
//! [`crate::strip`] — the host's own scripts (`host.mjs`, the loader hooks) and the modules duet
//! provides (`@standardagents/spec`, the provider packages). Node keeps each project file's own
//! URL (the hooks hand it the stripped text), so a stack names the file as written; [`Cache::map`]
//! turns its positions back into the author's lines and columns.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::resolve;
use crate::strip::{self, Stripped};

/// At most this many project modules are stripped; past it, a warning and the rest are left out.
const MAX_FILES: usize = 20_000;
/// Project modules larger than this are left out (as duet-js does).
const MAX_MODULE_BYTES: u64 = 4 << 20;
/// The extensions of the files that are code.
const CODE: &[&str] = &["ts", "mts", "js", "mjs"];

/// A project module in the cache: its position map and the text as written, for TypeScript.
type Mapped = Option<(Stripped, String)>;

/// The cache folder and what duet knows of what it holds. Removed when dropped.
pub(crate) struct Cache {
    /// The folder (removed on drop).
    _dir: tempfile::TempDir,
    /// The folder's canonical path.
    path: PathBuf,
    /// The project's folder, canonical.
    root: PathBuf,
    /// The project's folder as node names it in a URL (`file:///…/`).
    root_url: String,
    /// Each project module, by its project-relative path.
    files: HashMap<String, Mapped>,
}

impl Cache {
    /// Strips the project at `dir` (its root, or its `agents/` folder) into a new cache;
    /// `node_path` are the folders searched for packages after the project's own
    /// `node_modules`.
    pub(crate) fn build(dir: &Path, node_path: &[PathBuf]) -> io::Result<Cache> {
        let root = duet_spec::fs::project_root(dir).unwrap_or_else(|_| dir.to_path_buf());
        let root = std::fs::canonicalize(root)?;
        let dir = tempfile::Builder::new().prefix("duet-node-").tempdir()?;
        let path = std::fs::canonicalize(dir.path())?;
        let put = |rel: &str, text: &str| -> io::Result<()> {
            let file = path.join(rel);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(file, text)
        };
        put("host.mjs", include_str!("../../node/host.mjs"))?;
        put("hooks.mjs", include_str!("../../node/hooks.mjs"))?;
        put("register.mjs", include_str!("../../node/register.mjs"))?;
        let mut provided = serde_json::Map::new();
        for (i, (name, code)) in resolve::provided().into_iter().enumerate() {
            let file = format!("duet/{i}.mjs");
            put(&file, &code)?;
            provided.insert(name.to_owned(), file.into());
        }
        let node_path = link_node_path(&path, node_path)?;
        let mut files = HashMap::new();
        let mut found = Vec::new();
        walk(&root, "", &mut found)?;
        if found.len() > MAX_FILES {
            tracing::warn!(target: "duet::code", root = %root.display(), files = found.len(), "the project has more than {MAX_FILES} code files; the node host loads the first {MAX_FILES}");
            found.truncate(MAX_FILES);
        }
        for rel in found {
            let (code, mapped) = prepare(&root, &rel);
            put(&format!("project/{rel}"), &code)?;
            files.insert(rel, mapped);
        }
        let config = serde_json::json!({
            "root": root.to_string_lossy(),
            "project": path.join("project").to_string_lossy(),
            "provided": provided,
            "nodePath": node_path,
        });
        put("config.json", &config.to_string())?;
        let root_url = format!("file://{}/", url_path(&root.to_string_lossy()));
        Ok(Cache {
            _dir: dir,
            path,
            root,
            root_url,
            files,
        })
    }

    /// The script node runs (`host.mjs`).
    pub(crate) fn host(&self) -> PathBuf {
        self.path.join("host.mjs")
    }

    /// The script node imports first (`register.mjs`: the loader hooks).
    pub(crate) fn register(&self) -> PathBuf {
        self.path.join("register.mjs")
    }

    /// The project's folder, canonical.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `file` (project-relative) is a module of the project.
    pub(crate) fn has(&self, file: &str) -> bool {
        self.files.contains_key(file)
    }

    /// `text` (a message or a stack from node) with each project file named by its
    /// project-relative path, at the line and column the author wrote.
    pub(crate) fn map(&self, text: &str) -> String {
        let root_path = format!("{}/", self.root.to_string_lossy());
        let once = self.rewrite(text, &self.root_url, true);
        self.rewrite(&once, &root_path, false)
    }

    /// A stack from node as [`Cache::map`] gives it, without the frames of duet's own host or
    /// node's internals (its module loader's, for a failed import).
    pub(crate) fn stack(&self, text: &str) -> String {
        let own = self.path.to_string_lossy();
        let own_url = url_path(&own);
        self.map(text)
            .lines()
            .filter(|l| {
                !l.contains(&*own) && !l.contains(&own_url) && !l.contains("node:internal/")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn rewrite(&self, text: &str, prefix: &str, url: bool) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            out.push_str(&rest[..at]);
            let after = &rest[at + prefix.len()..];
            let end = after
                .find(|c: char| c.is_whitespace() || matches!(c, ':' | ')' | '\'' | '"' | ','))
                .unwrap_or(after.len());
            let written = &after[..end];
            let rel = if url {
                percent_decode(written)
            } else {
                written.to_owned()
            };
            let Some(mapped) = self.files.get(&rel) else {
                out.push_str(&rest[at..at + prefix.len() + end]);
                rest = &after[end..];
                continue;
            };
            out.push_str(&rel);
            rest = &after[end..];
            if let Some((line, column, len)) = position(rest) {
                let (line, column) = match mapped {
                    Some((stripped, source)) => original(stripped, source, line, column),
                    None => (line, column),
                };
                out.push_str(&format!(":{line}:{column}"));
                rest = &rest[len..];
            }
        }
        out.push_str(rest);
        out
    }
}

/// The code node runs for the project file `rel`, and its position map: the TypeScript
/// stripped, JavaScript as written, and for a file duet cannot strip or read, a module that
/// throws why (its import fails, and the call with it).
fn prepare(root: &Path, rel: &str) -> (String, Mapped) {
    let text = match std::fs::read_to_string(root.join(rel)) {
        Ok(t) => t,
        Err(e) => return (throwing(&format!("{rel}: cannot be read: {e}")), None),
    };
    if !(rel.ends_with(".ts") || rel.ends_with(".mts")) {
        return (text, None);
    }
    match strip::strip(rel, &text) {
        Ok(stripped) => (stripped.code.clone(), Some((stripped, text))),
        Err((message, at)) => {
            let at = at.map_or(String::new(), |(l, c)| format!(":{l}:{c}"));
            (throwing(&format!("{rel}{at}: {message}")), None)
        }
    }
}

fn throwing(message: &str) -> String {
    let literal = serde_json::Value::from(message).to_string();
    format!("throw new SyntaxError({literal});\n")
}

/// The project's code files under `root/rel`, project-relative, `/`-separated: dot entries and
/// `node_modules` skipped, a link to a file followed, a link to a folder not.
fn walk(root: &Path, rel: &str, out: &mut Vec<String>) -> io::Result<()> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let mut entries: Vec<_> = std::fs::read_dir(&dir)?.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() > MAX_FILES {
            return Ok(());
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            // A folder that cannot be listed is left out, not the project.
            let _ = walk(root, &path, out);
            continue;
        }
        let is_code = Path::new(&name)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| CODE.contains(&e));
        let small_file = std::fs::metadata(entry.path())
            .is_ok_and(|m| m.is_file() && m.len() <= MAX_MODULE_BYTES);
        if is_code && small_file {
            out.push(path);
        }
    }
    Ok(())
}

/// For each `NODE_PATH` folder, a folder of the cache whose `node_modules` links to it: node
/// resolves a package from a file there as from a file beside that folder. (Node's ES module
/// resolution does not read `NODE_PATH`.) Unix only; elsewhere the list is empty.
#[cfg(unix)]
fn link_node_path(cache: &Path, node_path: &[PathBuf]) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for (i, dir) in node_path.iter().enumerate() {
        let Ok(target) = std::fs::canonicalize(dir) else {
            continue;
        };
        let parent = cache.join("paths").join(i.to_string());
        std::fs::create_dir_all(&parent)?;
        std::os::unix::fs::symlink(target, parent.join("node_modules"))?;
        out.push(parent.to_string_lossy().into_owned());
    }
    Ok(out)
}

#[cfg(not(unix))]
fn link_node_path(_: &Path, _: &[PathBuf]) -> io::Result<Vec<String>> {
    Ok(Vec::new())
}

/// `:LINE:COLUMN` at the start of `text`: the numbers and the length it takes.
fn position(text: &str) -> Option<(u32, u32, usize)> {
    let number = |s: &str| {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let n = s.get(..digits)?.parse::<u32>().ok()?;
        Some((n, digits))
    };
    let rest = text.strip_prefix(':')?;
    let (line, a) = number(rest)?;
    let rest = rest[a..].strip_prefix(':')?;
    let (column, b) = number(rest)?;
    Some((line, column, 1 + a + 1 + b))
}

/// The author's line and character column of node's 1-based `line` and `column` (UTF-16 units)
/// in the stripped code.
fn original(stripped: &Stripped, source: &str, line: u32, column: u32) -> (u32, u32) {
    let ran = stripped
        .code
        .lines()
        .nth(usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX));
    let byte = ran.map_or(column, |text| byte_column(text, column));
    stripped.original_of_engine(line, byte, Some(source))
}

/// The 1-based byte column of the 1-based UTF-16 column `unit` of `line`.
fn byte_column(line: &str, unit: u32) -> u32 {
    let target = usize::try_from(unit.saturating_sub(1)).unwrap_or(usize::MAX);
    let mut units = 0;
    let mut bytes = 0;
    for c in line.chars() {
        if units >= target {
            break;
        }
        units += c.len_utf16();
        bytes += c.len_utf8();
    }
    u32::try_from(bytes + 1).unwrap_or(u32::MAX)
}

/// A path as node writes it in a `file:` URL (WHATWG's path percent-encode set, and `%`, `\`).
fn url_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        let plain = b > 0x20
            && b < 0x7f
            && !matches!(
                b,
                b'"' | b'#' | b'<' | b'>' | b'?' | b'`' | b'{' | b'}' | b'%' | b'\\'
            );
        if plain {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("scratch");
        std::fs::create_dir_all(dir.path().join("agents")).expect("scratch");
        for (rel, text) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("scratch");
            std::fs::write(path, text).expect("scratch");
        }
        dir
    }

    #[test]
    fn code_files_are_stripped_and_the_rest_left_out() {
        let dir = project(&[
            (
                "agents/tools/t.ts",
                "const x: number = 1;\nexport default { x };\n",
            ),
            ("agents/lib/h.js", "export const h = 1;\n"),
            ("agents/notes.md", "# notes"),
            ("node_modules/p/index.js", "export default 1;"),
            (".git/hooks/x.js", "x"),
            ("agents/tools/bad.ts", "const = ;\n"),
        ]);
        let cache = Cache::build(dir.path(), &[]).expect("built");
        assert!(cache.has("agents/tools/t.ts"));
        assert!(cache.has("agents/lib/h.js"));
        assert!(cache.has("agents/tools/bad.ts"));
        assert!(!cache.has("agents/notes.md"));
        assert!(!cache.has("node_modules/p/index.js"));
        assert!(!cache.has(".git/hooks/x.js"));
        let stripped =
            std::fs::read_to_string(cache.path.join("project/agents/tools/t.ts")).expect("written");
        assert!(!stripped.contains(": number"), "{stripped}");
        let bad = std::fs::read_to_string(cache.path.join("project/agents/tools/bad.ts"))
            .expect("written");
        assert!(
            bad.starts_with("throw new SyntaxError(\"agents/tools/bad.ts:1:"),
            "{bad}"
        );
        let config = std::fs::read_to_string(cache.path.join("config.json")).expect("written");
        assert!(config.contains("@standardagents/spec"), "{config}");
    }

    #[test]
    fn stacks_name_the_file_as_written_at_the_authors_line() {
        let text = "type T = { a: string };\n\n\nexport default {\n  execute: () => { throw new Error('x'); },\n};\n";
        let dir = project(&[("agents/tools/t.ts", text)]);
        let cache = Cache::build(dir.path(), &[]).expect("built");
        let code =
            std::fs::read_to_string(cache.path.join("project/agents/tools/t.ts")).expect("written");
        let (line, column) = code
            .lines()
            .enumerate()
            .find_map(|(i, l)| l.find("throw").map(|c| (i + 1, c + 1)))
            .expect("the throw is kept");
        let stack = format!(
            "Error: x\n    at Object.execute ({}agents/tools/t.ts:{line}:{column})\n    at {}/node_modules/p/x.js:1:2",
            cache.root_url,
            cache.root.display()
        );
        let mapped = cache.map(&stack);
        assert!(
            mapped.contains("(agents/tools/t.ts:5:20)"),
            "{mapped}\n{code}"
        );
        assert!(mapped.contains("/node_modules/p/x.js:1:2"), "{mapped}");
    }

    #[test]
    fn urls_are_encoded_as_node_encodes_them() {
        assert_eq!(url_path("/tmp/a b/#x%"), "/tmp/a%20b/%23x%25");
        assert_eq!(percent_decode("a%20b%2"), "a b%2");
        assert_eq!(position(":12:7)"), Some((12, 7, 5)));
        assert_eq!(position(":12)"), None);
        assert_eq!(byte_column("é🎉x", 4), 7);
    }
}
