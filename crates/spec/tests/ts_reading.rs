//! The two readings of a `.ts` definition. Without an evaluator (`duet_spec::load`), a file is
//! read statically and what would need evaluation is `ts_not_static` where it is written. With
//! one, the evaluator's failures become issues where they happened: a helper that threw is the
//! helper's issue, at its line, and the helper is no stray file.

use std::path::{Path, PathBuf};

use duet_spec::{
    Code, EvalError, EvalErrorKind, Evaluated, Evaluator, Issue, Listing, Project, SourceFile,
};

fn scratch(tag: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "spec-ts-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("scratch folder");
        std::fs::write(path, text).expect("write");
    }
    dir
}

fn places(issues: &[Issue]) -> Vec<String> {
    issues
        .iter()
        .map(|i| {
            format!(
                "{}:{}:{} {} {}",
                i.file.as_deref().unwrap_or("-"),
                i.line.unwrap_or(0),
                i.column.unwrap_or(0),
                i.code,
                i.path
            )
        })
        .collect()
}

#[test]
fn static_reading_reports_what_needs_evaluation_where_it_is_written() {
    let dir = scratch(
        "static",
        &[
            (
                "agents/prompts/base.ts",
                "import { definePrompt } from '@standardagents/spec';\nconst base = 'chat';\nexport default definePrompt({\n  name: base,\n  toolDescription: `Hi ${base}`,\n  model: 'm',\n  prompt: 'p',\n  tools: [...shared],\n});\n",
            ),
            (
                "agents/models/m.yaml",
                "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: hi\n",
            ),
        ],
    );
    let loaded = duet_spec::load(&dir).expect("loads");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        places(&loaded.issues),
        [
            "agents/prompts/base.ts:4:9 ts_not_static name",
            "agents/prompts/base.ts:5:20 ts_not_static toolDescription",
            "agents/prompts/base.ts:8:11 ts_not_static tools[0]",
        ]
    );
    assert!(
        loaded
            .issues
            .iter()
            .all(|i| i.hint.as_deref() == Some("write the value out as a literal")),
        "{:?}",
        loaded.issues
    );
}

/// An evaluator whose every target threw in `agents/lib/config.ts`, line 7.
struct HelperThrows;

impl Evaluator for HelperThrows {
    fn evaluate(
        &self,
        _files: &[SourceFile],
        targets: &[&str],
    ) -> Vec<Result<Evaluated, EvalError>> {
        targets
            .iter()
            .map(|_| {
                Err(EvalError {
                    kind: EvalErrorKind::Thrown,
                    message: "evaluating the file threw: no endpoint".into(),
                    file: Some("agents/lib/config.ts".into()),
                    at: Some((7, 11)),
                    path: None,
                    hint: None,
                })
            })
            .collect()
    }
}

#[test]
fn a_helper_that_threw_has_the_issue_at_its_line() {
    let file = |path: &str, text: &str| SourceFile {
        path: path.into(),
        bytes: text.into(),
    };
    let listing = Listing {
        files: vec![
            file(
                "agents/tools/parcel.ts",
                "import { endpoint } from '../lib/config';\nexport default defineTool({ description: 'd', http: { url: endpoint('us') } });\n",
            ),
            file(
                "agents/lib/config.ts",
                "export function endpoint(r) { throw new Error('no endpoint'); }\n",
            ),
        ],
        skipped: Vec::new(),
    };
    let loaded = Project::from_listing_with(listing, Some(&HelperThrows));
    assert_eq!(
        places(&loaded.issues),
        ["agents/lib/config.ts:7:11 ts_eval_error "],
        "{:?}",
        loaded.issues
    );
    assert_eq!(loaded.issues[0].code, Code::TsEvalError);
}
