//! The validate benchmark (a documented command, not a test): how long reading a project takes
//! with its `.ts` definitions evaluated (QuickJS, issue #32) against the static reading before
//! it.
//!
//! ```sh
//! cargo bench -p duet-cli --bench validate
//! BENCH_RUNS=20 cargo bench -p duet-cli --bench validate
//! ```
//!
//! zod comes from `NODE_PATH`, else `.ci/node/node_modules` (`scripts/test-servers`). Each row
//! is `BENCH_RUNS` (default 10) loads after one untimed, reported as their median and minimum:
//!
//! (a) every case of `tests/definitions/`, one load each, read statically (`duet_spec::load`,
//!     the "before") and evaluated (`duet_js::load`, what `duet validate` runs now);
//! (b) a generated project of 200 definitions (100 tools, 50 prompts, 50 agents; plus one
//!     scripted model): written as YAML literals and as literal TypeScript objects, read
//!     statically (the "before"); the literal TypeScript evaluated; and written as the Standard
//!     Agents docs show it (tools' `args` in zod, importing zod and a shared helper module;
//!     template prompts; agents spreading a shared const), evaluated. Each generated project
//!     must load without errors; and one of its zod tools alone (what loading zod costs);
//! (c) the `duet validate` process (this build's binary) on `examples/typescript/`.

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Cleanup, env, ms, scratch, write};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `NODE_PATH`'s folders, else the repository's `.ci/node/node_modules`; zod must be there.
fn node_path() -> Vec<PathBuf> {
    let mut path = duet_js::node_path_from_env();
    if path.is_empty() {
        path.push(repo().join(".ci/node/node_modules"));
    }
    assert!(
        path.iter().any(|p| p.join("zod/package.json").is_file()),
        "zod is not in {path:?}: run scripts/test-servers"
    );
    path
}

/// `runs` timings of `load` (after one untimed call): (median, min).
fn time(runs: usize, mut load: impl FnMut()) -> (Duration, Duration) {
    load();
    let mut took: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            load();
            start.elapsed()
        })
        .collect();
    took.sort();
    (took[took.len() / 2], took[0])
}

/// The definition files under `dir` (recursively): (all, `.ts`/`.js`/`.mjs`).
fn count_files(dir: &Path) -> (usize, usize) {
    let mut all = 0;
    let mut code = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            let (a, c) = count_files(&path);
            all += a;
            code += c;
            continue;
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => all += 1,
            Some("ts" | "js" | "mjs") => {
                all += 1;
                code += 1;
            }
            _ => {}
        }
    }
    (all, code)
}

/// The cases that are stopped at the evaluation's limits (a 2 s loop, a 64 MiB allocation):
/// they time the limits, not reading, and are left out.
const AT_LIMITS: &[&str] = &["ts_infinite_loop", "ts_huge_allocation"];

/// The definitions corpus: each case folder, sorted, without [`AT_LIMITS`].
fn corpus() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/definitions"))
        .expect("tests/definitions")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            p.file_name()
                .is_none_or(|n| !AT_LIMITS.iter().any(|l| n == *l))
        })
        .collect();
    cases.sort();
    cases
}

const TOOLS: usize = 100;
const PROMPTS: usize = 50;
const AGENTS: usize = 50;

/// The scripted model every generated prompt names.
const MODEL: &str = "name: bench\nprovider: scripted\nmodel: demo\nscript:\n  - text: done\n";

/// Tool `n`'s arguments as JSON Schema (what the zod form below converts to).
fn tool_schema(n: usize) -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "id": { "type": "string", "description": format!("The record id of kind {n}") },
            "limit": { "type": "integer", "minimum": 1, "maximum": 100, "default": 10 },
            "mode": { "type": "string", "enum": ["fast", "full"] },
            "filter": {
                "type": "object",
                "properties": {
                    "field": { "type": "string" },
                    "value": { "type": "string" }
                },
                "required": ["field", "value"]
            }
        },
        "required": ["id"]
    })
}

/// The 200 definitions as literal data: (path without extension, kind, value).
fn literal_definitions() -> Vec<(String, &'static str, serde_json::Value)> {
    let mut defs = Vec::new();
    for n in 0..TOOLS {
        defs.push((
            format!("agents/tools/tool_{n:03}"),
            "defineTool",
            serde_json::json!({
                "description": format!("Looks up records of kind {n}"),
                "args": tool_schema(n),
                "result": "record {{id}} (limit {{limit}})",
            }),
        ));
    }
    for n in 0..PROMPTS {
        defs.push((
            format!("agents/prompts/prompt_{n:03}"),
            "definePrompt",
            serde_json::json!({
                "name": format!("prompt_{n:03}"),
                "toolDescription": format!("Helper {n}"),
                "model": "bench",
                "prompt": format!("Be brief and kind. You are helper {n}; use your tools."),
                "tools": [format!("tool_{:03}", 2 * n), format!("tool_{:03}", 2 * n + 1)],
            }),
        ));
    }
    for n in 0..AGENTS {
        defs.push((
            format!("agents/agents/agent_{n:03}"),
            "defineAgent",
            serde_json::json!({
                "name": format!("agent_{n:03}"),
                "maxSessionTurns": 6,
                "sideA": { "prompt": format!("prompt_{n:03}") },
                "sideB": { "human": true },
            }),
        ));
    }
    defs
}

/// The 200 definitions as YAML files (JSON is YAML; the tools' schemas stay in flow style, as
/// people often write them).
fn write_yaml(dir: &Path) {
    write(dir, "agents/models/bench.yaml", MODEL);
    for (path, _, value) in literal_definitions() {
        let mut text = String::new();
        if let Some(fields) = value.as_object() {
            for (key, v) in fields {
                text.push_str(&format!("{key}: {v}\n"));
            }
        }
        write(dir, &format!("{path}.yaml"), &text);
    }
}

/// The 200 definitions as literal TypeScript objects (what the static reader accepts).
fn write_literal_ts(dir: &Path) {
    write(dir, "agents/models/bench.yaml", MODEL);
    for (path, define, value) in literal_definitions() {
        let body = serde_json::to_string_pretty(&value).expect("JSON");
        let text = format!(
            "import {{ {define} }} from '@standardagents/spec';\n\nexport default {define}({body});\n"
        );
        write(dir, &format!("{path}.ts"), &text);
    }
}

/// The 200 definitions as the Standard Agents docs write them: zod, imports, templates, spreads.
fn write_idiomatic_ts(dir: &Path) {
    write(dir, "agents/models/bench.yaml", MODEL);
    write(
        dir,
        "agents/lib/shared.ts",
        "export const TONE: string = 'Be brief and kind.';\n\
         export const LIMITS = { max: 100, fallback: 10 } as const;\n\
         export const MODES = ['fast', 'full'] as const;\n\
         export const SESSION = { maxSessionTurns: 6 };\n",
    );
    for n in 0..TOOLS {
        let text = format!(
            "import {{ defineTool }} from '@standardagents/spec';\n\
             import {{ z }} from 'zod';\n\
             import {{ LIMITS, MODES }} from '../lib/shared';\n\
             \n\
             export default defineTool({{\n\
             \x20 description: `Looks up records of kind {n}`,\n\
             \x20 args: z.object({{\n\
             \x20   id: z.string().describe('The record id of kind {n}'),\n\
             \x20   limit: z.number().int().min(1).max(LIMITS.max).default(LIMITS.fallback),\n\
             \x20   mode: z.enum(MODES).optional(),\n\
             \x20   filter: z.object({{ field: z.string(), value: z.string() }}).optional(),\n\
             \x20 }}),\n\
             \x20 result: 'record {{{{id}}}} (limit {{{{limit}}}})',\n\
             }});\n"
        );
        write(dir, &format!("agents/tools/tool_{n:03}.ts"), &text);
    }
    for n in 0..PROMPTS {
        let (a, b) = (2 * n, 2 * n + 1);
        let text = format!(
            "import {{ definePrompt }} from '@standardagents/spec';\n\
             import {{ TONE }} from '../lib/shared';\n\
             \n\
             export default definePrompt({{\n\
             \x20 name: 'prompt_{n:03}',\n\
             \x20 toolDescription: 'Helper {n}',\n\
             \x20 model: 'bench',\n\
             \x20 prompt: `${{TONE}} You are helper {n}; use your tools.`,\n\
             \x20 tools: ['tool_{a:03}', 'tool_{b:03}'],\n\
             }});\n"
        );
        write(dir, &format!("agents/prompts/prompt_{n:03}.ts"), &text);
    }
    for n in 0..AGENTS {
        let text = format!(
            "import {{ defineAgent }} from '@standardagents/spec';\n\
             import {{ SESSION }} from '../lib/shared';\n\
             \n\
             export default defineAgent({{\n\
             \x20 name: 'agent_{n:03}',\n\
             \x20 ...SESSION,\n\
             \x20 sideA: {{ prompt: 'prompt_{n:03}' }},\n\
             \x20 sideB: {{ human: true }},\n\
             }});\n"
        );
        write(dir, &format!("agents/agents/agent_{n:03}.ts"), &text);
    }
}

/// Asserts the generated project loads with no error and all 200 definitions.
fn check(what: &str, loaded: &duet_spec::Loaded) {
    let errors: Vec<String> = loaded
        .issues
        .iter()
        .filter(|i| i.severity == duet_spec::Severity::Error)
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "{what}:\n{}", errors.join("\n"));
    let p = &loaded.project;
    assert_eq!(
        (p.tools.len(), p.prompts.len(), p.agents.len()),
        (TOOLS, PROMPTS, AGENTS),
        "{what}"
    );
}

struct Row {
    workload: String,
    reader: &'static str,
    took: (Duration, Duration),
}

fn main() {
    let _cleanup = Cleanup;
    let runs = env("BENCH_RUNS", 10);
    let node_path = node_path();
    let mut rows = Vec::new();

    // (a) the definitions corpus.
    let cases = corpus();
    let (files, code) = cases
        .iter()
        .map(|c| count_files(c))
        .fold((0, 0), |(a, c), (x, y)| (a + x, c + y));
    let workload = format!(
        "tests/definitions: {} cases, {files} files ({code} .ts/.js), one pass",
        cases.len()
    );
    let static_pass = || {
        for case in &cases {
            let _ = duet_spec::load(case).expect("a case loads");
        }
    };
    rows.push(Row {
        workload: workload.clone(),
        reader: "static (before)",
        took: time(runs, static_pass),
    });
    let evaluated_pass = || {
        for case in &cases {
            let _ = duet_js::load(case, &node_path).expect("a case loads");
        }
    };
    rows.push(Row {
        workload,
        reader: "evaluated",
        took: time(runs, evaluated_pass),
    });

    // (b) the generated 200-definition project, three ways.
    let yaml = scratch();
    write_yaml(&yaml);
    let literal = scratch();
    write_literal_ts(&literal);
    let idiomatic = scratch();
    write_idiomatic_ts(&idiomatic);
    check("YAML", &duet_spec::load(&yaml).expect("loads"));
    check("literal TS", &duet_spec::load(&literal).expect("loads"));
    check(
        "literal TS, evaluated",
        &duet_js::load(&literal, &node_path).expect("loads"),
    );
    check(
        "idiomatic TS",
        &duet_js::load(&idiomatic, &node_path).expect("loads"),
    );
    // One zod tool alone: what loading zod costs a project, once.
    let one = scratch();
    write_idiomatic_ts(&one);
    for kind in ["agents", "prompts"] {
        std::fs::remove_dir_all(one.join("agents").join(kind)).expect("rm");
    }
    for n in 1..TOOLS {
        std::fs::remove_file(one.join(format!("agents/tools/tool_{n:03}.ts"))).expect("rm");
    }
    let loaded = duet_js::load(&one, &node_path).expect("loads");
    assert!(loaded.is_ok(), "{:?}", loaded.issues);
    rows.push(Row {
        workload: "1 zod tool alone (zod loaded once)".to_owned(),
        reader: "evaluated",
        took: time(runs, || {
            let _ = duet_js::load(&one, &node_path).expect("loads");
        }),
    });
    let generated: [(&str, &Path, &'static str, bool); 4] = [
        (
            "200 definitions, YAML literals",
            &yaml,
            "static (before)",
            false,
        ),
        (
            "200 definitions, literal TS",
            &literal,
            "static (before)",
            false,
        ),
        ("200 definitions, literal TS", &literal, "evaluated", true),
        (
            "200 definitions, TS as the docs write it (100 zod tools)",
            &idiomatic,
            "evaluated",
            true,
        ),
    ];
    for (workload, dir, reader, evaluated) in generated {
        let took = if evaluated {
            time(runs, || {
                let _ = duet_js::load(dir, &node_path).expect("loads");
            })
        } else {
            time(runs, || {
                let _ = duet_spec::load(dir).expect("loads");
            })
        };
        rows.push(Row {
            workload: workload.to_owned(),
            reader,
            took,
        });
    }

    let profile = if cfg!(debug_assertions) {
        "a debug build"
    } else {
        "a release build"
    };
    // What a user waits for: the `duet validate` process on the docs-shaped example.
    let example = repo().join("examples/typescript");
    rows.push(Row {
        workload: "`duet validate examples/typescript` (a process, 10 files)".to_owned(),
        reader: "evaluated",
        took: time(runs, || {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_duet"))
                .arg("validate")
                .arg(&example)
                .env(
                    "NODE_PATH",
                    std::env::join_paths(&node_path).expect("a NODE_PATH"),
                )
                .output()
                .expect("duet runs");
            assert!(out.status.success(), "{out:?}");
        }),
    });

    println!("validate: {runs} runs each after one untimed (median, min), {profile}");
    println!();
    println!("| workload | read | median (ms) | min (ms) |");
    println!("|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {:.1} | {:.1} |",
            row.workload,
            row.reader,
            ms(row.took.0),
            ms(row.took.1)
        );
    }
}
