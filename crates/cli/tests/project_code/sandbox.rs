//! The embedded host's sandbox through a real `duet run`: one scripted model calls, step by
//! step, a tool that breaks a rule and then a tool that works — an infinite loop (stopped at its
//! `timeoutMs`), a gibibyte (stopped at the memory ceiling), `fetch` to a loopback address that
//! is not on the allowlist and to a name that resolves to one (refused before connecting: the
//! listener there sees no connection), a host not on the allowlist, `process`, `require`, a
//! host file through `state.readFile` (a path that leaves the thread's filesystem) — each the tool's error result in words, and the next call in
//! the same process answers. A tool importing a file outside the project is refused when the
//! project loads: the run does not start.

use serde_json::{Value, json};

use super::origin::Origin;
use super::process::{duet, output};
use crate::support::Scratch;

/// Each probe: its tool's name, its `execute` body, and what its error result starts with after
/// ``Failed to execute tool `NAME`: `` (`{origin}` and `{trap}` stand for the two listeners'
/// ports).
const PROBES: &[(&str, &str, &str)] = &[
    (
        "spin",
        "while (true) {}",
        "the tool's code ran longer than 500 ms and was stopped",
    ),
    (
        "hog",
        "return new Uint8Array(1 << 30).length;",
        "the tool's code needed more than 64 MiB and was stopped",
    ),
    (
        "fetch_unlisted",
        "return (await fetch('http://127.0.0.1:{trap}/')).status;",
        "TypeError: fetch to `127.0.0.1:{trap}` is refused: the project allows only \
         127.0.0.1:{origin}, localhost, shop.example.com (agents/code.yaml `fetch.allow`)",
    ),
    (
        "fetch_private",
        "return (await fetch('http://localhost:{trap}/')).status;",
        "TypeError: fetch to `localhost:{trap}` is refused: `localhost` is not a public address",
    ),
    (
        "fetch_host",
        "return (await fetch('https://elsewhere.example.org/')).status;",
        "TypeError: fetch to `elsewhere.example.org` is refused: the project allows only",
    ),
    (
        "use_process",
        "return process.env.HOME;",
        "ReferenceError: process is not defined",
    ),
    (
        "use_require",
        "return require('fs').readFileSync('/etc/hostname', 'utf8');",
        "ReferenceError: require is not defined",
    ),
    (
        "read_file",
        "return await state.readFile('../../../etc/hostname');",
        "Error: invalid path `../../../etc/hostname`: `..` would leave the directory",
    ),
];

/// The tool that works: it counts its calls in a value.
const OK: &str = "import { defineTool } from '@standardagents/spec';\n\
export default defineTool({\n  description: 'Answers',\n  args: { type: 'object', properties: {} },\n  \
execute: async (state) => {\n    const n = ((await state.getValue('n')) ?? 0) + 1;\n    \
await state.setValue('n', n);\n    return `ok ${n}`;\n  },\n});\n";

fn ports(text: &str, origin: u16, trap: u16) -> String {
    text.replace("{origin}", &origin.to_string())
        .replace("{trap}", &trap.to_string())
}

/// The probes' project: a prompt whose scripted model calls each probe and then `ok`.
fn project(origin: u16, trap: u16) -> Scratch {
    let p = Scratch::new("ts-sandbox");
    p.write(
        "agents/agents/probe.yaml",
        "name: probe\nsideA: { prompt: probe, maxSteps: 40 }\nsideB: { human: true }\n",
    );
    let names: Vec<&str> = PROBES.iter().map(|(name, _, _)| *name).collect();
    p.write(
        "agents/prompts/probe.yaml",
        &format!(
            "name: probe\ntoolDescription: d\nmodel: probe_model\nprompt: Probe.\ntools: [{}, ok]\n",
            names.join(", ")
        ),
    );
    let mut script = "name: probe_model\nprovider: scripted\nmodel: demo\nscript:\n".to_owned();
    for name in &names {
        script.push_str(&format!(
            "  - tool_calls: [{{ name: {name}, arguments: {{}} }}]\n  - tool_calls: [{{ name: ok, arguments: {{}} }}]\n"
        ));
    }
    script.push_str("  - text: Probed.\n");
    p.write("agents/models/probe_model.yaml", &script);
    p.write(
        "agents/code.yaml",
        &format!(
            "fetch:\n  allow:\n    - 127.0.0.1:{origin}\n    - localhost\n    - shop.example.com\n"
        ),
    );
    for (name, body, _) in PROBES {
        let limit = if *name == "spin" {
            "  timeoutMs: 500,\n"
        } else {
            ""
        };
        p.write(
            &format!("agents/tools/{name}.ts"),
            &format!(
                "import {{ defineTool }} from '@standardagents/spec';\n\
                 export default defineTool({{\n  description: 'A probe',\n  \
                 args: {{ type: 'object', properties: {{}} }},\n{limit}  \
                 execute: async (state) => {{\n    {}\n  }},\n}});\n",
                ports(body, origin, trap)
            ),
        );
    }
    p.write("agents/tools/ok.ts", OK);
    p
}

#[tokio::test]
async fn each_refusal_is_the_tools_error_and_the_next_call_works() {
    let origin = Origin::start().await;
    let origin_port: u16 = origin
        .addr
        .rsplit_once(':')
        .expect("port")
        .1
        .parse()
        .expect("port");
    // Where the refused fetches point: it must see no connection.
    // (A connection is accepted by the kernel into the backlog whether or not `accept` is
    // called; a non-blocking `accept` at the end finds it if one came.)
    let trap = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    trap.set_nonblocking(true).expect("non-blocking");
    let trap_port = trap.local_addr().expect("addr").port();
    let p = project(origin_port, trap_port);
    let db = p.root().join("duet.db").display().to_string();
    let (code, stdout, stderr) = output(duet(
        p.root(),
        &db,
        &["run", "probe", "--session", "probe", "-m", "go", "--json"],
    ))
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let ended: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter(|e| e["type"] == "tool_ended")
        .collect();
    assert_eq!(ended.len(), PROBES.len() * 2, "{stdout}");
    for (i, (name, _, says)) in PROBES.iter().enumerate() {
        let (probe, next) = (&ended[2 * i], &ended[2 * i + 1]);
        let content = probe["content"].as_str().unwrap_or_default();
        let says = format!(
            "Failed to execute tool `{name}`: {}",
            ports(says, origin_port, trap_port)
        );
        assert_eq!(probe["isError"], true, "{name}: {probe}");
        assert!(
            content.starts_with(&says),
            "{name}: `{content}` does not start with `{says}`"
        );
        assert_eq!(
            next,
            &json!({"type": "tool_ended", "id": next["id"], "isError": false, "content": format!("ok {}", i + 1)}),
            "after {name}"
        );
    }
    // Nothing reached the trap, nor the origin (no probe was granted it).
    let accepted = trap.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the trap saw a connection: {accepted:?}"
    );
    assert_eq!(origin.connections(), 0);
}

#[tokio::test]
async fn an_import_from_outside_the_project_refuses_the_run() {
    let p = Scratch::new("ts-escape");
    p.write(
        "agents/agents/escape.yaml",
        "name: escape\nsideA: { prompt: escape }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/escape.yaml",
        "name: escape\ntoolDescription: d\nmodel: m\nprompt: p\ntools: [escape]\n",
    );
    p.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: hi\n",
    );
    p.write(
        "agents/tools/escape.ts",
        "import secret from '../../../../../../etc/hostname';\n\
         export default { description: 'd', args: { type: 'object', properties: {} }, execute: async () => secret };\n",
    );
    let db = p.root().join("duet.db").display().to_string();
    let (code, stdout, stderr) = output(duet(
        p.root(),
        &db,
        &["run", "escape", "-m", "go", "--json"],
    ))
    .await;
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "agents/tools/escape.ts:1:20: error[ts_import]: `../../../../../../etc/hostname` is \
             outside the project"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("the project has errors"), "{stderr}");
    assert_eq!(stdout, "", "nothing ran");
}
