//! What loading makes of evaluated values, pinned per case: each case of `tests/definitions/`
//! with a `pinned/` folder holds, per definition, what it must load as —
//!
//! - `pinned/tools/NAME.json`: the tool's `args`, the JSON Schema its model receives, for a zod
//!   schema (the tool is then marked zod-typed, so calls are checked with zod's own `safeParse`);
//! - `pinned/prompts/NAME.json`: the prompt's `requiredSchema`;
//! - `pinned/models/NAME.json`: `{ "provider": ..., "inlineProvider": ... }`, the provider a
//!   provider package's factory made (`inlineProvider` absent for the factory itself).
//!
//! The schemas were written by zod itself in Node (`z.toJSONSchema(schema, { io: "input" })`,
//! `$schema` dropped), not by duet.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::{corpus_dir, load_case};

/// The `(name, pinned JSON)` files of `dir`, sorted; none when it does not exist.
fn pinned(dir: &Path) -> Vec<(String, Value)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let name = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .expect("a file name");
            let text = std::fs::read_to_string(f).expect("readable");
            let json =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            (name, json)
        })
        .collect()
}

fn missing(case: &Path, what: &str, issues: &[duet_spec::Issue]) -> String {
    format!("{}: no {what}: {issues:#?}", case.display())
}

#[test]
fn evaluated_definitions_load_as_pinned() {
    let mut checked = 0;
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/definitions exists")
        .map(|e| e.expect("readable").path())
        .filter(|p| p.join("pinned").is_dir())
        .collect();
    cases.sort();
    for case in &cases {
        let loaded = load_case(case);
        let project = &loaded.project;
        let at = |what: &str, name: &str| format!("{}: {what} `{name}`", case.display());
        for (name, expected) in pinned(&case.join("pinned/tools")) {
            let tool = project.tools.get(&name);
            let tool = tool.unwrap_or_else(|| panic!("{}", missing(case, &name, &loaded.issues)));
            assert_eq!(
                tool.def.args.as_ref(),
                Some(&expected),
                "{}",
                at("args", &name)
            );
            assert!(tool.def.args_zod, "{}", at("zod-typed", &name));
            checked += 1;
        }
        for (name, expected) in pinned(&case.join("pinned/prompts")) {
            let prompt = project.prompts.get(&name);
            let prompt =
                prompt.unwrap_or_else(|| panic!("{}", missing(case, &name, &loaded.issues)));
            assert_eq!(
                prompt.def.required_schema.as_ref(),
                Some(&expected),
                "{}",
                at("requiredSchema", &name)
            );
            checked += 1;
        }
        for (name, expected) in pinned(&case.join("pinned/models")) {
            let model = project.models.get(&name);
            let model = model.unwrap_or_else(|| panic!("{}", missing(case, &name, &loaded.issues)));
            let mut actual = json!({ "provider": model.def.provider });
            if let Some(own) = &model.def.inline_provider {
                actual["inlineProvider"] = serde_json::to_value(own).expect("serializable");
                // The provider the model names is there for the runtime to find.
                assert_eq!(
                    project.providers.get(&own.name).map(|p| &p.def),
                    Some(own),
                    "{}",
                    at("the provider of", &name)
                );
            }
            assert_eq!(actual, expected, "{}", at("the provider of", &name));
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} pinned values checked");
}
