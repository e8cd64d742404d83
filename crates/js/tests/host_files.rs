//! The thread filesystem through both code hosts (embedded and node): a string and an
//! `ArrayBuffer` written and read back byte-equal, `statFile`, `readdirFile`, `grepFiles`,
//! `findFiles`, and `readFileStream` over a 3 MiB file read one 1 MiB chunk per bridge request.
//! Bytes cross the bridge as `{"$bytes": base64}` both ways. The bridge is a small in-memory
//! filesystem ([`files_bridge::Files`]): the runtime's side is tested in the engine's tests.

#[path = "host_files/files_bridge.rs"]
mod files_bridge;

use duet_runtime::{CodeCall, CodeHost, CodeLimits};
use files_bridge::Files;
use serde_json::{Value, json};

/// Writes, reads and lists through `state`; what it found, for the test to check.
const SCRIPT: &str = r#"
export default {
  execute: async (state) => {
    const out = {};
    const text = await state.writeFile('/notes/a.txt', 'hello\nworld\n', 'text/plain');
    out.text = text;
    const raw = new Uint8Array(256);
    for (let i = 0; i < 256; i++) raw[i] = i;
    await state.writeFile('/bin/raw.bin', raw.buffer, 'application/octet-stream');
    await state.writeFile('/bin/view.bin', new DataView(raw.buffer, 16, 16));
    const back = await state.readFile('/bin/raw.bin');
    const b = new Uint8Array(back);
    let same = back instanceof ArrayBuffer && b.length === 256;
    for (let i = 0; same && i < 256; i++) same = b[i] === i;
    out.rawBack = same;
    const view = new Uint8Array(await state.readFile('/bin/view.bin'));
    out.viewBack = Array.from(view);
    out.textBack = new TextDecoder().decode(await state.readFile('/notes/a.txt'));
    out.missing = await state.readFile('/nope');
    out.stat = await state.statFile('/bin/raw.bin');
    out.readdir = (await state.readdirFile('/bin')).entries.map((e) => e.name);
    out.grep = await state.grepFiles('wor');
    out.find = await state.findFiles('/bin/*');
    out.stats = await state.getFileStats();
    // 3 MiB (and a bit), each byte its offset's low byte.
    const size = 3 * 1024 * 1024 + 5;
    const big = new Uint8Array(size);
    for (let i = 0; i < size; i++) big[i] = i & 255;
    await state.writeFile('/big.bin', big);
    const stream = await state.readFileStream('/big.bin');
    const chunks = [];
    let ok = true;
    for await (const { data, offset } of stream) {
      const d = new Uint8Array(data);
      chunks.push([offset, d.length]);
      for (let i = 0; ok && i < d.length; i += 4093) ok = d[i] === ((offset + i) & 255);
    }
    out.chunks = chunks;
    out.streamOk = ok;
    out.noStream = await state.readFileStream('/nope');
    try {
      await state.getFileThumbnail('/bin/raw.bin');
    } catch (e) {
      out.thumbnail = String(e.message);
    }
    return out;
  },
};
"#;

fn call() -> CodeCall {
    CodeCall {
        state_at: 0,
        file: "agents/tools/files.js".into(),
        entry: vec!["execute".into()],
        args: vec![],
        state: json!({ "threadId": "t-1", "agentId": "a", "execution": null }),
        thread: "t-1".into(),
        call: "call-1".into(),
        limits: CodeLimits {
            deadline: std::time::Duration::from_secs(60),
            ..CodeLimits::default()
        },
    }
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("scratch");
    let tool = dir.path().join("agents/tools/files.js");
    std::fs::create_dir_all(tool.parent().expect("a folder")).expect("scratch");
    std::fs::write(tool, SCRIPT).expect("scratch");
    dir
}

fn check(out: &Value, files: &Files) {
    assert_eq!(out["text"]["path"], "/notes/a.txt");
    assert_eq!(out["text"]["type"], "file");
    assert_eq!(out["text"]["size"], 12);
    assert_eq!(out["rawBack"], true, "{out}");
    assert_eq!(out["viewBack"], json!((16..32).collect::<Vec<u8>>()));
    assert_eq!(out["textBack"], "hello\nworld\n");
    assert_eq!(out["missing"], Value::Null);
    assert_eq!(out["stat"]["name"], "raw.bin");
    assert_eq!(out["stat"]["size"], 256);
    assert_eq!(out["readdir"], json!(["raw.bin", "view.bin"]));
    assert_eq!(
        out["grep"],
        json!([{ "path": "/notes/a.txt", "line": 2, "text": "world" }])
    );
    assert_eq!(
        out["find"],
        json!({ "paths": ["/bin/raw.bin", "/bin/view.bin"], "truncated": false })
    );
    assert_eq!(out["stats"]["files"], 3);
    let mib = 1024 * 1024;
    assert_eq!(
        out["chunks"],
        json!([[0, mib], [mib, mib], [2 * mib, mib], [3 * mib, 5]])
    );
    assert_eq!(out["streamOk"], true);
    assert_eq!(out["noStream"], Value::Null);
    assert!(
        out["thumbnail"]
            .as_str()
            .is_some_and(|m| m.contains("getFileThumbnail") && m.contains("image library")),
        "{out}"
    );
    // Bytes went over the bridge as `$bytes`, and the stream as five chunk requests, none of
    // them the whole file.
    assert_eq!(files.bytes["/bin/raw.bin"], (0..=255).collect::<Vec<u8>>());
    assert_eq!(files.bytes["/big.bin"].len(), 3 * mib + 5);
    let chunk_reads: Vec<u64> = files
        .seen
        .iter()
        .filter(|(m, p)| m == "readFileChunk" && p["path"] == "/big.bin")
        .map(|(_, p)| p["offset"].as_u64().unwrap_or(u64::MAX))
        .collect();
    assert_eq!(
        chunk_reads,
        vec![0, mib as u64, 2 * mib as u64, 3 * mib as u64]
    );
    assert!(
        !files
            .seen
            .iter()
            .any(|(m, p)| m == "readFile" && p["path"] == "/big.bin"),
        "the stream never reads the whole file"
    );
}

#[tokio::test]
async fn the_embedded_host_writes_reads_lists_and_streams_files() {
    let dir = project();
    let host = duet_js::EmbeddedHost::new(dir.path(), vec![], duet_js::HostOptions::default())
        .expect("a host");
    let mut files = Files::default();
    let out = host.call(call(), &mut files).await.expect("runs");
    check(&out, &files);
}

#[tokio::test]
async fn the_node_host_writes_reads_lists_and_streams_files() {
    let found = std::process::Command::new(duet_js::NodeOptions::default().node)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("DUET_REQUIRE_NODE").as_deref() != Ok("1"),
            "DUET_REQUIRE_NODE=1 and there is no `node` on PATH"
        );
        eprintln!("skipped: no `node` on PATH");
        return;
    }
    let dir = project();
    let host = duet_js::NodeHost::new(dir.path(), duet_js::NodeOptions::default());
    let mut files = Files::default();
    let out = host.call(call(), &mut files).await.expect("runs");
    check(&out, &files);
}
