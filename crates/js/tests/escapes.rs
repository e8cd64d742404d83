//! What a definition must not do, and where it is told: reach a file outside the project through
//! the host's own module names, overflow a stack with nesting, leave work queued for the next
//! file to pay for, hide a failure behind an import it caught; and a helper's syntax error at
//! the helper's own line. (An import whose bindings go unused is elided with the types, as
//! TypeScript does: the tests use what they import.)

use std::time::Duration;

use duet_js::{EvalOptions, JsEvaluator};
use duet_spec::{Code, Issue, Listing, Project, SourceFile};

fn load(files: &[(&str, String)]) -> Vec<Issue> {
    let listing = Listing {
        files: files
            .iter()
            .map(|(path, text)| SourceFile {
                path: (*path).to_owned(),
                bytes: text.clone().into_bytes(),
            })
            .collect(),
        skipped: Vec::new(),
    };
    let evaluator = JsEvaluator::new(EvalOptions {
        deadline: Duration::from_millis(300),
        ..EvalOptions::default()
    });
    Project::from_listing_with(listing, Some(&evaluator)).issues
}

fn places(issues: &[Issue]) -> Vec<(String, Code, Option<u32>)> {
    issues
        .iter()
        .map(|i| (i.file.clone().unwrap_or_default(), i.code, i.line))
        .collect()
}

const TOOL: &str = "export default defineTool({ description: 'd', result: 'r' });\n";

fn tool(imports: &str) -> String {
    format!("import {{ defineTool }} from '@standardagents/spec';\n{imports}\n{TOOL}")
}

#[test]
fn the_hosts_module_names_reach_only_project_files() {
    for (name, import) in [
        ("absolute", "import '/etc/hostname';"),
        ("host_absolute", "import 'duet:/dev/zero';"),
        ("host_climbing", "import 'duet:../../outside.ts';"),
        ("host_dynamic", "await import('duet:/dev/stdin');"),
    ] {
        let path = format!("agents/tools/{name}.ts");
        let issues = load(&[(path.as_str(), tool(import))]);
        assert_eq!(
            places(&issues),
            vec![(path.clone(), Code::TsImport, Some(2))],
            "{name}: {issues:#?}"
        );
    }
    // The same name for a file that is the project's is fine.
    let issues = load(&[
        ("agents/tools/ok.ts", tool("import 'duet:agents/lib/h.ts';")),
        ("agents/lib/h.ts", "export const h = 1;\n".into()),
    ]);
    assert!(issues.is_empty(), "{issues:#?}");
}

#[test]
fn nesting_too_deep_for_a_stack_is_an_issue_in_its_file() {
    let deep = format!(
        "export const d = {}'x'{};\n",
        "(".repeat(50_000),
        ")".repeat(50_000)
    );
    let issues = load(&[
        (
            "agents/tools/t.ts",
            tool("import { d } from '../lib/deep.ts';\nvoid d;"),
        ),
        ("agents/lib/deep.ts", deep),
    ]);
    assert_eq!(
        places(&issues),
        vec![("agents/lib/deep.ts".to_owned(), Code::TsSyntax, Some(1))],
        "{issues:#?}"
    );
}

#[test]
fn a_files_queued_work_is_its_own_and_the_next_file_is_unharmed() {
    let spins = tool(
        "let p = Promise.resolve();\nfor (let i = 0; i < 20; i++) p = p.then(() => {});\np.then(() => { while (true) {} });",
    );
    let quick = tool("for (let i = 0; i < 50; i++) await null;");
    let issues = load(&[("agents/tools/a.ts", spins), ("agents/tools/b.ts", quick)]);
    let found = places(&issues);
    assert_eq!(found.len(), 1, "{issues:#?}");
    assert_eq!(
        (found[0].0.as_str(), found[0].1),
        ("agents/tools/a.ts", Code::TsEvalLimit)
    );
}

#[test]
fn a_caught_import_does_not_hide_what_failed_after_it() {
    let issues = load(&[(
        "agents/tools/t.ts",
        tool("try { await import('lodash'); } catch {}\nwhile (true) {}"),
    )]);
    assert_eq!(
        places(&issues).into_iter().map(|p| p.1).collect::<Vec<_>>(),
        vec![Code::TsEvalLimit],
        "{issues:#?}"
    );
}

#[test]
fn a_helpers_syntax_error_is_at_its_line() {
    let helper = "export const EMPTY = '';\n\n\n\nexport const x = = 1;\n";
    let issues = load(&[
        (
            "agents/tools/t.ts",
            tool("import { x } from '../lib/h.ts';\nvoid x;"),
        ),
        ("agents/lib/h.ts", helper.to_owned()),
    ]);
    assert_eq!(
        places(&issues),
        vec![("agents/lib/h.ts".to_owned(), Code::TsSyntax, Some(5))],
        "{issues:#?}"
    );
}

#[test]
fn a_zod_3_schema_is_told_apart() {
    // What a zod 3 schema looks like to duet: `_def` and `safeParse`, no `_zod`.
    let text = "import { defineTool } from '@standardagents/spec';\nconst z3 = { _def: { typeName: 'ZodObject' }, safeParse() {} };\nexport default defineTool({ description: 'd', args: z3, result: 'r' });\n";
    let issues = load(&[("agents/tools/t.ts", text.to_owned())]);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(
        (issues[0].code, issues[0].path.as_str()),
        (Code::TsSchema, "args")
    );
    assert!(issues[0].message.contains("zod 4"), "{}", issues[0].message);
}

#[test]
fn a_module_that_failed_is_never_imported_into_the_same_engine_again() {
    // `b.js` fails to link, first as `a.js`'s import, then as a definition of its own. Asked to
    // import a failed module record again, QuickJS leaks it (and, with its assertions on,
    // aborts when the engine is freed): each failure gets a new engine, and both files are
    // told what failed.
    let b = "import { defineTool, nope } from '@standardagents/spec';\nexport default defineTool({ description: 'd', result: 'r' });\n";
    let a = tool("import b from './b.js';\nvoid b;");
    let issues = load(&[
        ("agents/tools/a.js", a),
        ("agents/tools/b.js", b.to_owned()),
    ]);
    let codes: Vec<_> = places(&issues).into_iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(
        codes,
        vec![
            ("agents/tools/a.js".to_owned(), Code::TsEvalError),
            ("agents/tools/b.js".to_owned(), Code::TsEvalError),
        ],
        "{issues:#?}"
    );
}
