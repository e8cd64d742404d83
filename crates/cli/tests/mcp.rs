//! `duet mcp list` as a user runs it, against the reference MCP server `.ci/run` installs
//! (`@modelcontextprotocol/server-everything`, under `.ci/node/`): the tools by the names
//! models see, JSON output, a server that cannot start, an unknown name. Without the server
//! installed the test says so loudly and passes, unless `DUET_REQUIRE_MCP=1` (CI).

mod support;

use std::process::Command;

use support::{Scratch, repo};

fn duet(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(args)
        .output()
        .expect("duet runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mcp_list_starts_the_servers_and_prints_their_tools() {
    let js =
        repo().join(".ci/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !js.is_file() {
        assert!(
            std::env::var("DUET_REQUIRE_MCP").map_or(true, |v| v != "1"),
            "DUET_REQUIRE_MCP=1 but {} is missing: run .ci/run's install step",
            js.display()
        );
        eprintln!(
            "\n!!! SKIPPED: {} is not installed (DUET_REQUIRE_MCP=1 makes this a failure) !!!\n",
            js.display()
        );
        return;
    }
    let p = Scratch::new("mcp-list");
    p.write(
        "agents/mcp/everything.yaml",
        &format!(
            "name: everything\ncommand: node\nargs: [\"{}\", stdio]\n",
            js.display()
        ),
    );
    p.write(
        "agents/mcp/ghost.yaml",
        "name: ghost\ncommand: ./no-such-server\n",
    );
    let root = p.root().display().to_string();

    let (code, stdout, stderr) = duet(&["mcp", "list", "--project", &root]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("everything (stdio: node "), "{stdout}");
    assert!(stdout.contains("; MCP 2025-11-25): "), "{stdout}");
    let echo = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("everything__echo "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(echo.ends_with("Echoes back the input string"), "{echo}");
    assert!(stdout.contains("everything__get-sum"), "{stdout}");
    assert!(
        stdout.contains("ghost (stdio: ./no-such-server): cannot list its tools: `./no-such-server` cannot be started"),
        "{stdout}"
    );

    let (code, stdout, _) = duet(&["mcp", "list", "everything", "--json", "--project", &root]);
    assert_eq!(code, 0, "{stdout}");
    let listed: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(listed["server"], "everything");
    let tools = listed["tools"].as_array().expect("tools");
    let echo = tools.iter().find(|t| t["tool"] == "echo").expect("echo");
    assert_eq!(echo["name"], "everything__echo");
    assert_eq!(
        echo["inputSchema"]["properties"]["message"]["type"],
        "string"
    );

    let (code, _, stderr) = duet(&["mcp", "list", "nope", "--project", &root]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no MCP server `nope`"), "{stderr}");
    assert!(stderr.contains("declared: everything, ghost"), "{stderr}");
}
