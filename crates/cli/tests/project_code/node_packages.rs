//! A `host: node` project's definitions import what node has: a package from the project's
//! `node_modules` and a `node:` builtin, at the top of a tool's file. `duet validate` reads the
//! definitions with those packages as stand-ins (duet's engine has neither), and `duet run`
//! runs the tool in node, with the real ones.

use serde_json::Value;

use super::process::{duet, node_here, node_modules, output};
use crate::support::Scratch;

const TOOL: &str = "import { defineTool } from '@standardagents/spec';\n\
import { createHash } from 'node:crypto';\n\
import shout, { exclaim } from 'shouty';\n\
\n\
export default defineTool({\n  description: 'Shouts a digest',\n  \
args: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },\n  \
execute: async (state, args) => {\n    \
const digest = createHash('sha256').update(args.text).digest('hex').slice(0, 8);\n    \
return exclaim(shout(args.text)) + ' ' + digest;\n  },\n});\n";

fn project(host: &str) -> Scratch {
    let p = Scratch::new("ts-node-packages");
    p.write(
        "agents/agents/shouter.yaml",
        "name: shouter\nsideA: { prompt: shouter }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/shouter.yaml",
        "name: shouter\ntoolDescription: d\nmodel: m\nprompt: Shout.\ntools: [shout]\n",
    );
    p.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: shout, arguments: { text: hello } }]\n  - text: Done.\n",
    );
    p.write("agents/code.yaml", &format!("host: {host}\n"));
    p.write("agents/tools/shout.ts", TOOL);
    p.write(
        "node_modules/shouty/package.json",
        "{ \"name\": \"shouty\", \"version\": \"1.0.0\", \"main\": \"index.js\" }\n",
    );
    p.write(
        "node_modules/shouty/index.js",
        "module.exports = (s) => s.toUpperCase();\nmodule.exports.exclaim = (s) => s + '!';\n",
    );
    p
}

#[tokio::test]
async fn a_node_project_imports_packages_at_the_top_of_its_files() {
    if !node_here() {
        return;
    }
    let p = project("node");
    let db = p.root().join("duet.db").display().to_string();
    let (code, stdout, stderr) = output(duet(
        p.root(),
        &db,
        &["run", "shouter", "--session", "s1", "-m", "go", "--json"],
    ))
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let ended: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter(|e| e["type"] == "tool_ended")
        .collect();
    // sha256("hello") starts 2cf24dba.
    assert_eq!(ended.len(), 1, "{stdout}");
    assert_eq!(ended[0]["isError"], false, "{stdout}");
    assert_eq!(ended[0]["content"], "HELLO! 2cf24dba", "{stdout}");
}

#[tokio::test]
async fn the_embedded_host_refuses_the_same_imports_at_their_lines() {
    let p = project("embedded");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.arg("validate")
        .arg(p.root())
        .env("NODE_PATH", node_modules())
        .stdin(std::process::Stdio::null());
    let (code, stdout, stderr) = output(cmd).await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("agents/tools/shout.ts:2:"), "{stdout}");
    assert!(stdout.contains("ts_import"), "{stdout}");
}
