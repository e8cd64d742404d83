//! Repository rules that no compiler checks: the crate dependency arrows of ARCHITECTURE.md
//! (and which crates may name sqlx, axum, hyper, reqwest and rmcp), no module importing another in a
//! circle, and a `//!` line opening every Rust file.

use std::path::{Path, PathBuf};

#[path = "tidy/modgraph.rs"]
mod modgraph;

/// The workspace crates each crate depends on (normal dependencies): exactly what its
/// `Cargo.toml` names, so a new arrow is a change to this table, and an arrow no longer used is
/// removed from it (the test fails on both). A row whose folder is not in `crates/` (yet) is
/// skipped, so a row can land before its crate.
const ALLOWED: &[(&str, &[&str])] = &[
    ("spec", &[]),
    ("net", &[]),
    ("runtime", &["duet-spec"]),
    ("server-store", &["duet-runtime"]),
    ("store", &["duet-runtime", "duet-server-store"]),
    ("models", &["duet-runtime", "duet-spec"]),
    ("handlers", &["duet-runtime"]),
    ("js", &["duet-runtime", "duet-spec"]),
    ("tools", &["duet-net", "duet-runtime", "duet-spec"]),
    ("a2a", &["duet-net"]),
    (
        "server",
        &[
            "duet-a2a",
            "duet-net",
            "duet-runtime",
            "duet-server-store",
            "duet-spec",
        ],
    ),
    (
        "duet",
        &[
            "duet-a2a",
            "duet-handlers",
            "duet-js",
            "duet-models",
            "duet-runtime",
            "duet-server",
            "duet-server-store",
            "duet-spec",
            "duet-store",
            "duet-tools",
        ],
    ),
    (
        "cli",
        &[
            "duet",
            "duet-js",
            "duet-runtime",
            "duet-spec",
            "duet-store",
            "duet-models",
            "duet-handlers",
            "duet-server",
            "duet-server-store",
            "duet-tools",
        ],
    ),
];

/// Crates that only their owners may name.
const OWNED: &[(&str, &[&str])] = &[
    ("sqlx", &["store"]),
    ("axum", &["a2a", "server"]),
    ("hyper", &["server"]),
    ("hyper-util", &["server"]),
    ("reqwest", &["models", "tools", "a2a", "server"]),
    ("rmcp", &["tools"]),
    ("rquickjs", &["js"]),
    ("oxc_transformer", &["js"]),
    ("oxc_codegen", &["js"]),
    ("lettre", &["server"]),
    ("opentelemetry", &["cli"]),
    ("opentelemetry_sdk", &["cli"]),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deps(manifest: &toml::Value) -> Vec<String> {
    manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn dependency_arrows_hold() {
    let mut problems = Vec::new();
    let crates = std::fs::read_dir(root().join("crates")).expect("crates/");
    let mut seen = 0;
    for entry in crates {
        let dir = entry.expect("entry").path();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        let manifest: toml::Value = toml::from_str(&text).expect("valid TOML");
        let package = manifest["package"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // The facade is `duet` itself (crates/duet); every other crate is `duet-{folder}`.
        let expected = if name == "duet" {
            "duet".to_owned()
        } else {
            format!("duet-{name}")
        };
        if package != expected {
            problems.push(format!(
                "crates/{name} is named `{package}`, not `{expected}`"
            ));
        }
        let Some((_, allowed)) = ALLOWED.iter().find(|(c, _)| *c == name) else {
            problems.push(format!(
                "crates/{name} is not in the tidy test's table: add its arrows"
            ));
            continue;
        };
        seen += 1;
        let deps = deps(&manifest);
        for unused in allowed.iter().filter(|a| !deps.iter().any(|d| d == *a)) {
            problems.push(format!(
                "{package} no longer depends on {unused}: remove it from {name}'s row in the \
                 tidy test's ALLOWED table (the table lists the arrows in use, no more)"
            ));
        }
        for dep in deps {
            if (dep == "duet" || dep.starts_with("duet-")) && !allowed.contains(&dep.as_str()) {
                problems.push(format!(
                    "{package} depends on {dep}, which ARCHITECTURE.md forbids \
                     (or add the arrow to the tidy test's ALLOWED table and ARCHITECTURE.md)"
                ));
            }
            if let Some((_, owners)) = OWNED.iter().find(|(d, _)| *d == dep)
                && !owners.contains(&name.as_str())
            {
                let owners: Vec<String> = owners.iter().map(|o| format!("duet-{o}")).collect();
                problems.push(format!(
                    "{package} names {dep}; only {} may",
                    owners.join(" and ")
                ));
            }
        }
    }
    // A row without a folder is not an error (see ALLOWED); every folder has a row.
    assert!(seen > 5, "crates/ holds the workspace's crates");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_doc_line() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    rust_files(&root().join("examples"), &mut files);
    assert!(files.len() > 10);
    let missing: Vec<String> = files
        .iter()
        .filter(|f| {
            !std::fs::read_to_string(f)
                .unwrap_or_default()
                .starts_with("//!")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` first line:\n{}",
        missing.join("\n")
    );
}

/// The runtime's ports, which must not name the engine (it depends on them, never the reverse).
const PORTS: &[&str] = &[
    "store.rs",
    "model.rs",
    "tools.rs",
    "handler.rs",
    "hooks.rs",
    "children.rs",
    "clock.rs",
    "lifecycle.rs",
    "plan.rs",
    "decide.rs",
    "transition.rs",
    "record.rs",
    "types.rs",
];

#[test]
fn no_rust_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    rust_files(&root().join("examples"), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .count();
            (lines > 800).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these by responsibility:\n{}",
        long.join("\n")
    );
}

#[test]
fn ports_do_not_import_the_engine() {
    let src = root().join("crates/runtime/src");
    let mut problems = Vec::new();
    for port in PORTS {
        let text = std::fs::read_to_string(src.join(port)).expect("a port module");
        for (i, line) in text.lines().enumerate() {
            if line.contains("crate::engine") || line.contains("Runtime") && line.contains("use ") {
                problems.push(format!("{port}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// No statement of the stores takes its `LIMIT` as a bare parameter: SQLite (3.51) reads a
/// bound `LIMIT` into the plan, and so marks the statement to be compiled again whenever it is
/// bound — every time it runs. `LIMIT CAST($n AS BIGINT)` is computed when it runs instead.
#[test]
fn no_statement_limits_by_a_bare_parameter() {
    let mut files = Vec::new();
    rust_files(&root().join("crates/store/src"), &mut files);
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        problems.extend(
            bare_limits(&text)
                .into_iter()
                .map(|line| format!("{}:{line}", f.display())),
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The lines of `text` where a `LIMIT` (any case) is followed, after any whitespace (a line
/// break, a string's `\` continuation), by a parameter (`$n`, `?`).
fn bare_limits(text: &str) -> Vec<usize> {
    let lower = text.to_ascii_lowercase();
    lower
        .match_indices("limit")
        .filter(|(at, _)| {
            let rest = &lower[at + "limit".len()..];
            let after = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '\\');
            let spaced = after.len() < rest.len();
            spaced && after.starts_with(['$', '?'])
        })
        .map(|(at, _)| lower[..at].matches('\n').count() + 1)
        .collect()
}

#[test]
fn the_limit_check_finds_a_bare_parameter_however_spaced() {
    assert_eq!(bare_limits("SELECT 1 LIMIT $3"), [1]);
    assert_eq!(bare_limits("x\n ORDER BY id limit\t?"), [2]);
    assert_eq!(bare_limits("ORDER BY id LIMIT \\\n   $2\""), [1]);
    assert!(bare_limits("LIMIT CAST($2 AS BIGINT) LIMIT 1 const LIMIT: usize").is_empty());
}

/// Tests wait on events (a channel, a `Notify`, the change feed, a child's output), not on
/// time; a sleep is allowed only where time itself is the condition, said in a
/// `tidy:allow-sleep` comment right above it.
#[test]
fn tests_do_not_sleep_to_wait() {
    let mut files = Vec::new();
    for dir in std::fs::read_dir(root().join("crates"))
        .expect("crates/")
        .flatten()
    {
        let tests = dir.path().join("tests");
        if tests.is_dir() {
            rust_files(&tests, &mut files);
        }
    }
    let mut problems = Vec::new();
    for f in &files {
        if f.ends_with("tidy.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let sleeps = line.contains("thread::sleep(") || line.contains("time::sleep(");
            let allowed = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("//"))
                .any(|l| l.contains("tidy:allow-sleep"));
            if sleeps && !allowed {
                problems.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `dir`'s Rust files as `(path under dir, text)` pairs, paths with `/`.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    files.sort();
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(dir).expect("under the folder");
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let text = std::fs::read_to_string(f).expect("a readable Rust file");
            (rel.join("/"), text)
        })
        .collect()
}

/// Each circle as the files in it and one way around it.
fn describe(crate_src: &str, circles: &[modgraph::Circle]) -> Vec<String> {
    circles
        .iter()
        .map(|c| {
            format!(
                "{crate_src}: {} modules import each other in a circle:\n    {}\n  one way \
                 around (file:line (the path) → the file it names); remove one of these \
                 imports:\n    {}",
                c.files.len(),
                c.files.join(", "),
                c.cycle.join("\n    → ")
            )
        })
        .collect()
}

/// In every crate's `src/`, no module imports another that imports it back, directly or
/// around a longer circle (the module graph read from the source: `modgraph.rs`). Data
/// modules are leaves; the modules that act on them import them, never the reverse. Edges into
/// the crate root (`lib.rs`/`main.rs`) do not count: its re-exports are the public surface,
/// and `crate::Thing` is the item's home reached through it, not the root depending on a
/// module.
#[test]
fn no_module_imports_another_in_a_circle() {
    let mut problems = Vec::new();
    let mut crates = 0;
    for entry in std::fs::read_dir(root().join("crates"))
        .expect("crates/")
        .flatten()
    {
        let src = entry.path().join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let name = entry.file_name().to_string_lossy().into_owned();
        let found = modgraph::circles(&sources(&src));
        problems.extend(describe(&format!("crates/{name}/src"), &found));
    }
    problems.sort();
    assert!(crates > 5, "crates/ holds the workspace's crates");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

fn synthetic(files: &[(&str, &str)]) -> Vec<modgraph::Circle> {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect();
    modgraph::circles(&files)
}

#[test]
fn the_circle_check_reports_a_three_module_circle() {
    let found = synthetic(&[
        (
            "lib.rs",
            "//! root\nmod a;\nmod b;\nmod c;\npub use a::A;\n",
        ),
        (
            "a.rs",
            "//! a\nuse crate::{Root as R, b::{B, self as bee}};\npub struct A(B);\n",
        ),
        ("b.rs", "//! b\npub struct B(pub crate::c::C);\n"),
        (
            "c.rs",
            "//! c\nmod inner {\n    pub fn f() -> super::super::a::A { todo!() }\n}\npub struct C;\n",
        ),
    ]);
    assert_eq!(found.len(), 1, "one circle: {found:?}");
    assert_eq!(found[0].files, ["a.rs", "b.rs", "c.rs"]);
    assert_eq!(
        found[0].cycle.len(),
        4,
        "a → b → c → a: {:?}",
        found[0].cycle
    );
    assert!(found[0].cycle[0].starts_with("a.rs:2 (crate::b::B)"));
    let message = describe("src", &found).join("\n");
    assert!(message.contains("3 modules import each other in a circle"));
}

#[test]
fn the_circle_check_counts_a_parent_naming_its_child_but_no_re_export_or_root_path() {
    let found = synthetic(&[
        (
            "lib.rs",
            "//! root\nmod app;\nmod routes;\nmod views;\npub use app::State;\n",
        ),
        (
            "app.rs",
            "//! app\npub struct State;\npub fn r() { crate::routes::api(); }\n",
        ),
        (
            "routes.rs",
            "//! routes\nmod x;\npub fn api() { x::get(); }\n",
        ),
        (
            "routes/x.rs",
            "//! x\nuse crate::app::State;\npub fn get() {}\n",
        ),
        (
            "views/mod.rs",
            "//! views\nmod inner;\npub use inner::V;\npub(crate) use self::inner::W;\npub struct Shared;\n",
        ),
        (
            "views/inner.rs",
            "//! inner\nuse super::Shared;\nuse crate::State;\npub struct V;\npub struct W;\n",
        ),
    ]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].files, ["app.rs", "routes.rs", "routes/x.rs"]);
    assert_eq!(
        found[0].cycle,
        [
            "app.rs:3 (crate::routes::api)",
            "routes.rs:3 (x::get)",
            "routes/x.rs:2 (crate::app::State)",
            "app.rs"
        ]
    );
}

#[test]
fn the_circle_check_passes_a_crate_without_one() {
    let found = synthetic(&[
        (
            "lib.rs",
            "//! root\nmod a;\nmod b;\npub use a::A;\nuse crate::b::B;\n",
        ),
        (
            "a.rs",
            "//! a\nuse crate::b::B;\nuse super::Root;\npub struct A(B);\n",
        ),
        ("b/mod.rs", "//! b\nmod c;\npub use self::c::B;\n"),
        ("b/c.rs", "//! c\npub struct B(<i32 as crate::Tr>::X);\n"),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn the_circle_check_reads_no_paths_in_comments_strings_or_tests() {
    let found = synthetic(&[
        ("lib.rs", "//! root\nmod a;\nmod b;\n"),
        (
            "a.rs",
            "//! a\nuse crate::b::B;\npub struct A<'a>(&'a B);\n",
        ),
        (
            "b.rs",
            concat!(
                "//! b, which is not crate::a::A's\n",
                "/* crate::a /* nested */ crate::a::A */\n",
                "/// [`crate::a::A`]\n",
                "pub struct B;\n",
                "const S: &str = \"crate::a::A \\\" crate::a::A\";\n",
                "const R: &str = r##\"crate::a \"# crate::a::A\"##;\n",
                "const Q: char = '\"'; const E: char = '\\''; const L: &'static str = \"\";\n",
                "fn f<'a>(x: &'a str) -> &'a str { x }\n",
                "#[cfg(test)]\nmod tests {\n    use crate::a::A;\n    fn t() { let _ = super::super::a::A; }\n}\n",
            ),
        ),
    ]);
    assert!(found.is_empty(), "{found:?}");
    let code = modgraph::code_only("let c = 'x'; let r = br##\"a\"#b\"##; // c\nx");
    assert_eq!(code.lines().count(), 2, "{code}");
    let words: Vec<&str> = code.split_whitespace().collect();
    assert_eq!(words, ["let", "c", "=", ";", "let", "r", "=", ";", "x"]);
}

/// Calls only one place may make, as (crate, the files it covers — a path prefix under `src/` —,
/// the call as written in code, the files allowed to make it: a path, or a folder ending in `/`
/// for every file under it). The engine persists through one write path: only
/// `engine/write.rs` calls the store's `commit`. The server reaches the store and its own
/// tables through its service layer alone: no route, page, A2A agent or metric calls `.store()`
/// or `.server_store()`.
const SOLE_CALLERS: &[(&str, &str, &str, &[&str])] = &[
    ("runtime", "engine", ".commit(", &["engine/write.rs"]),
    ("server", "", ".server_store()", &["service/"]),
    ("server", "", ".store()", &["service/"]),
];

/// Whether `allowed` (a path, or a folder ending in `/`) covers file `path`.
fn covers(allowed: &str, path: &str) -> bool {
    if allowed.ends_with('/') {
        path.starts_with(allowed)
    } else {
        path == allowed
    }
}

/// The files among `files` (path under `src/`, text) that make `call` outside `allowed`, with
/// the line, comments and literals left out.
fn stray_callers(
    files: &[(String, String)],
    under: &str,
    call: &str,
    allowed: &[&str],
) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        if !path.starts_with(under) || allowed.iter().any(|a| covers(a, path)) {
            continue;
        }
        let code = modgraph::code_only(text);
        for (n, line) in code.lines().enumerate() {
            if line.contains(call) {
                out.push(format!("{path}:{}", n + 1));
            }
        }
    }
    out
}

#[test]
fn sole_callers_are_the_only_callers() {
    let mut problems = Vec::new();
    for (krate, under, call, allowed) in SOLE_CALLERS {
        let files = sources(&root().join("crates").join(krate).join("src"));
        for at in stray_callers(&files, under, call, allowed) {
            problems.push(format!(
                "crates/{krate}/src/{at} calls `{call}`; only {} may",
                allowed.join(", ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_sole_caller_check_finds_a_stray_call_but_not_one_in_a_comment() {
    let files = vec![
        ("engine/write.rs".to_owned(), "store.commit(t)".to_owned()),
        (
            "engine/step.rs".to_owned(),
            "// not .commit(\nx.commit(c)".to_owned(),
        ),
        ("agent.rs".to_owned(), "x.commit(c)".to_owned()),
    ];
    let found = stray_callers(&files, "engine", ".commit(", &["engine/write.rs"]);
    assert_eq!(found, vec!["engine/step.rs:2".to_owned()]);
}

#[test]
fn the_sole_caller_check_allows_a_whole_folder_but_not_its_namesake_file() {
    let files = vec![
        ("service/threads.rs".to_owned(), "rt.store()".to_owned()),
        ("service/a/b.rs".to_owned(), "rt.store()".to_owned()),
        ("service.rs".to_owned(), "rt.store()".to_owned()),
        ("services/x.rs".to_owned(), "rt.store()".to_owned()),
        ("auth.rs".to_owned(), "x\nrt.store()".to_owned()),
        (
            "routes/threads.rs".to_owned(),
            "// .store()\nrt\n    .store()".to_owned(),
        ),
    ];
    let found = stray_callers(&files, "", ".store()", &["service/", "auth.rs"]);
    assert_eq!(
        found,
        vec![
            "service.rs:1".to_owned(),
            "services/x.rs:1".to_owned(),
            "routes/threads.rs:3".to_owned(),
        ]
    );
}

/// The repository's own text files (not build output, dependencies or git's).
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable").flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                text_files(&path, out);
            }
        } else if [
            "rs", "md", "toml", "yaml", "yml", "ts", "js", "mjs", "sh", "py",
        ]
        .iter()
        .any(|e| path.extension().is_some_and(|x| x == *e))
        {
            out.push(path);
        }
    }
}

#[test]
fn no_file_holds_a_merge_conflicts_markers() {
    let mut files = Vec::new();
    text_files(&root(), &mut files);
    assert!(files.len() > 100, "the walk found {} files", files.len());
    let marked: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            let line = text.lines().position(|l| {
                l.starts_with("<<<<<<< ") || l.starts_with(">>>>>>> ") || l == "======="
            })?;
            Some(format!("{}:{}", f.display(), line + 1))
        })
        .collect();
    assert!(marked.is_empty(), "merge conflict markers: {marked:#?}");
}
