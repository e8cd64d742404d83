//! Evaluating definitions never panics and always comes back, whatever the files: random bytes,
//! random ASCII TypeScript made of the tokens that matter (imports, define calls, zod, loops,
//! throws, allocations) and mutated example files, a few files a project, evaluated with a short
//! deadline and a small memory ceiling. Every issue names a file of the listing, and none says
//! the engine itself failed (a panic inside it, caught).

mod support;

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use duet_js::{EvalOptions, JsEvaluator};
use duet_spec::{Listing, Project, SourceFile};
use proptest::prelude::*;

const DEADLINE: Duration = Duration::from_millis(200);
const PATHS: &[&str] = &[
    "agents/tools/a.ts",
    "agents/tools/b.js",
    "agents/prompts/p.mjs",
    "agents/models/m.ts",
    "agents/lib/h.ts",
];

/// What the evaluator reports when its thread panicked.
const ENGINE_FAILED: &str = "the JavaScript engine failed";

fn evaluate(files: Vec<SourceFile>) {
    let paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
    let listing = Listing {
        files,
        skipped: Vec::new(),
    };
    let evaluator = JsEvaluator::new(EvalOptions {
        root: None,
        node_path: vec![support::node_modules()],
        deadline: DEADLINE,
        memory_limit: 16 << 20,
        stub_packages: false,
    });
    // Each file may run to its deadline; loading the rest is quick.
    let limit = DEADLINE * u32::try_from(paths.len()).unwrap_or(u32::MAX) + Duration::from_secs(10);
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(Project::from_listing_with(listing, Some(&evaluator)));
    });
    let loaded = match rx.recv_timeout(limit) {
        Ok(loaded) => loaded,
        Err(_) => panic!(
            "loading {paths:?} panicked or did not finish within {limit:?} ({:?})",
            started.elapsed()
        ),
    };
    for issue in &loaded.issues {
        let _ = issue.to_string();
        let file = issue.file.as_deref().unwrap_or("");
        assert!(
            paths.iter().any(|p| p == file),
            "an issue names no file of the listing: {issue:?}"
        );
        assert!(!issue.message.contains(ENGINE_FAILED), "{issue:?}");
    }
}

fn file(path: &str, bytes: Vec<u8>) -> SourceFile {
    SourceFile {
        path: path.to_owned(),
        bytes,
    }
}

/// Token soup: TypeScript-ish source in any order (mostly syntax errors, which must be reported).
fn ts_soup() -> impl Strategy<Value = String> {
    const TOKENS: &[&str] = &[
        "import { defineTool } from '@standardagents/spec';\n",
        "import { z } from 'zod';\n",
        "export default ",
        "defineTool(",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        ",",
        ":",
        ";\n",
        "...",
        "description",
        "'d'",
        "`t ${",
        "}`",
        "as const",
        ": string",
        "<T>",
        "=>",
        "\n",
    ];
    prop::collection::vec(prop::sample::select(TOKENS), 0..48).prop_map(|t| t.concat())
}

/// A definition file put together from parts that evaluate: imports, statements that run
/// before the export (loops, throws, allocations, awaits), a define call and its properties
/// (zod schemas, provider factories, helpers, values JSON cannot hold).
fn ts_definition() -> impl Strategy<Value = String> {
    const SPEC: &str = "import { defineTool, definePrompt, defineModel, defineAgent, providerEnv } from '@standardagents/spec';\n";
    const IMPORTS: &[&str] = &[
        "import { z } from 'zod';\n",
        "import { z } from 'zod';\n",
        "import { openai } from '@standardagents/openai';\n",
        "import { openai } from '@standardagents/openai';\n",
        "import { h } from '../lib/h';\n",
        "import { h } from '../lib/h.js';\n",
        "import x from '../tools/a.js';\n",
        "import y from '../../../etc/passwd';\n",
        "import _ from 'lodash';\n",
        "import { nope } from '@standardagents/spec';\n",
        "export const h = () => 'helper';\n",
        "export function h() { throw new Error('helper'); }\n",
    ];
    const STATEMENTS: &[&str] = &[
        "while (true) {}",
        "for (;;) { try { throw 0 } catch {} }",
        "const big: string[] = []; for (;;) big.push('x'.repeat(1024))",
        "throw new Error('top')",
        "throw { toString() { throw 1 } }",
        "await new Promise(() => {})",
        "await Promise.resolve(1)",
        "let n: number = 1",
        "const k = 'k' as const",
        "function f(n: number): number { return f(n + 1) } f(0)",
        "Object.prototype.toJSON = () => { throw 1 }",
        "globalThis.__duetDescribe = null",
        "Object.defineProperty(Object.prototype, 'description', { get() { throw 2 } })",
    ];
    const DEFINES: &[&str] = &[
        "defineTool",
        "definePrompt",
        "defineModel",
        "defineAgent",
        "((d: unknown) => d)",
        "",
    ];
    const KEYS: &[&str] = &[
        "name",
        "description",
        "args",
        "result",
        "provider",
        "model",
        "prompt",
        "tools",
        "sideA",
        "execute",
        "requiredSchema",
        "[Symbol.iterator]",
        "'__proto__'",
    ];
    const VALUES: &[&str] = &[
        "'d'",
        "1",
        "-0",
        "1e309",
        "NaN",
        "undefined",
        "null",
        "`t ${1 + 1}`",
        "h()",
        "z.object({ a: z.string().optional(), b: z.enum(['x', 'y']).default('x') })",
        "z.object({ at: z.date() })",
        "z.string().transform((s) => s.length)",
        "z.lazy(() => z.string())",
        "openai",
        "openai({ apiKey: providerEnv('K'), timeout: 5 })",
        "openai({ apiKey: 'sk' })",
        "openai(42)",
        "async () => {}",
        "[...[1, 2]]",
        "{ ...{ a: 1 } }",
        "Symbol('s')",
        "10n",
        "new Map()",
        "new Date()",
        "globalThis",
        "(() => { const a: any = {}; a.a = a; return a })()",
        "JSON.parse('['.repeat(5000) + ']'.repeat(5000))",
        "Array.from({ length: 200000 }, (_, i) => i)",
        "new Proxy({}, { ownKeys() { throw 1 } })",
        "(() => { throw new Error('value') })()",
        "'x'.repeat(1 << 23)",
    ];
    let pick = |all: &'static [&'static str], n: std::ops::Range<usize>| {
        prop::collection::vec(prop::sample::select(all), n)
    };
    (
        pick(IMPORTS, 0..4),
        pick(STATEMENTS, 0..2),
        prop::sample::select(DEFINES),
        prop::collection::vec(
            (prop::sample::select(KEYS), prop::sample::select(VALUES)),
            0..6,
        ),
    )
        .prop_map(|(imports, statements, define, props)| {
            let props: Vec<String> = props.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            format!(
                "{SPEC}{}{};\nexport default {define}({{ {} }});\n",
                imports.concat(),
                statements.join(";\n"),
                props.join(", ")
            )
        })
}

fn examples() -> Vec<SourceFile> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    duet_spec::fs::read_project(&root)
        .expect("examples readable")
        .files
        .into_iter()
        .filter(|f| f.path.ends_with(".ts"))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(
        files in prop::collection::vec(
            (prop::sample::select(PATHS), prop::collection::vec(any::<u8>(), 0..512)),
            1..3,
        ),
    ) {
        evaluate(files.into_iter().map(|(p, b)| file(p, b)).collect());
    }

    #[test]
    fn random_typescript_never_panics(
        files in prop::collection::vec(
            (prop::sample::select(PATHS), prop_oneof![1 => ts_soup(), 3 => ts_definition()]),
            1..4,
        ),
    ) {
        evaluate(files.into_iter().map(|(p, s)| file(p, s.into_bytes())).collect());
    }

    #[test]
    fn mutated_examples_never_panic(
        index in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        insert in ts_soup(),
    ) {
        let files = examples();
        prop_assume!(!files.is_empty());
        let example = index.get(&files);
        let mut text = String::from_utf8_lossy(&example.bytes).into_owned();
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.insert_str(at, &insert);
        evaluate(vec![file(&example.path, text.into_bytes())]);
    }
}
