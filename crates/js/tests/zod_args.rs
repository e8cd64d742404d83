//! A `.ts` tool's arguments checked with its own zod schema at call time ([`duet_js::ZodArgs`]):
//! zod's output (defaults, coercions) is what the tool runs with, zod's messages are what the
//! model reads, and a schema that loops is stopped without stopping the next call.

use std::path::{Path, PathBuf};
use std::time::Duration;

use duet_js::{EvalOptions, ZodArgs};
use duet_runtime::CodeSchemas;
use serde_json::json;

fn node_path() -> Vec<PathBuf> {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/node/node_modules");
    assert!(
        modules.join("zod/package.json").is_file(),
        "zod is not installed in .ci/node: run scripts/test-servers"
    );
    vec![modules]
}

fn project(tag: &str, tools: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("zod-args-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("agents/tools")).expect("scratch");
    for (name, text) in tools {
        std::fs::write(dir.join(format!("agents/tools/{name}.ts")), text).expect("write");
    }
    dir
}

fn checker(dir: &Path, deadline: Duration) -> ZodArgs {
    let loaded = duet_js::load(dir, &node_path()).expect("loads");
    assert!(loaded.is_ok(), "{:#?}", loaded.issues);
    ZodArgs::new(
        &loaded.project,
        EvalOptions {
            root: Some(dir.to_path_buf()),
            node_path: node_path(),
            deadline,
            ..EvalOptions::default()
        },
    )
    .expect("the project has zod tools")
}

const ORDER: &str = r#"
import { defineTool } from '@standardagents/spec';
import { z } from 'zod';
export default defineTool({
  description: 'Looks an order up',
  args: z.object({
    orderId: z.string().min(3),
    count: z.coerce.number().int().default(1),
    kind: z.enum(['retail', 'wholesale']).optional(),
  }),
  result: 'ok',
});
"#;

#[tokio::test]
async fn zod_decides_and_its_output_is_what_runs() {
    let dir = project("decides", &[("order", ORDER)]);
    let zod = checker(&dir, Duration::from_secs(2));
    let parsed = zod
        .parse("order", &json!({ "orderId": "A-17", "count": "4" }))
        .await
        .expect("valid");
    assert_eq!(parsed, json!({ "orderId": "A-17", "count": 4 }), "coerced");
    let parsed = zod
        .parse("order", &json!({ "orderId": "A-17" }))
        .await
        .expect("valid");
    assert_eq!(parsed["count"], json!(1), "the default filled in");
    let problems = zod
        .parse("order", &json!({ "orderId": 5, "kind": "other" }))
        .await
        .expect_err("refused");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("/orderId: ") && problems[0].contains("expected string"),
        "{problems:?}"
    );
    assert!(problems[1].starts_with("/kind: "), "{problems:?}");
    let problems = zod
        .parse("order", &json!({ "orderId": "A" }))
        .await
        .expect_err("too short");
    assert!(
        problems[0].starts_with("/orderId: ") && problems[0].contains(">=3"),
        "{problems:?}"
    );
    let problems = zod.parse("nope", &json!({})).await.expect_err("unknown");
    assert!(problems[0].contains("no zod schema"), "{problems:?}");
}

#[tokio::test]
async fn a_schema_that_loops_is_stopped_and_the_next_call_is_answered() {
    let looping = r#"
import { defineTool } from '@standardagents/spec';
import { z } from 'zod';
export default defineTool({
  description: 'Never answers',
  args: z.object({ x: z.string().refine((s) => { while (true) {} }) }),
  result: 'never',
});
"#;
    let dir = project("loops", &[("order", ORDER), ("spin", looping)]);
    let zod = checker(&dir, Duration::from_millis(300));
    let problems = zod
        .parse("spin", &json!({ "x": "y" }))
        .await
        .expect_err("stopped");
    assert!(
        problems[0].contains("could not be run") && problems[0].contains("300 ms"),
        "{problems:?}"
    );
    let parsed = zod
        .parse("order", &json!({ "orderId": "A-17" }))
        .await
        .expect("a new engine answers");
    assert_eq!(parsed["count"], json!(1));
}
