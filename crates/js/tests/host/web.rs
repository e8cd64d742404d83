//! The web pieces code gets: `fetch` through the bridge, a `$request` as a `Request`, a
//! `Response` as `$response`, and `URL`, `URLSearchParams`, `Headers`, `TextEncoder`…
//! behaving as the standards say for the common cases.

use duet_runtime::{CodeCall, CodeHost};
use serde_json::{Value, json};

use crate::support::{Recorder, call, host, run};

const ENDPOINT: &str = r#"
import { defineThreadEndpoint } from '@standardagents/spec';

export default defineThreadEndpoint(async (req: Request, state, params) => {
  const body = await req.json();
  const url = new URL(req.url);
  return Response.json(
    { got: body, q: url.searchParams.get('q'), method: req.method, agent: req.headers.get('X-Agent'), thread: state.threadId, id: params.id },
    { status: 201, headers: { 'x-made-by': 'duet' } },
  );
});
"#;

fn endpoint_call(request: Value) -> CodeCall {
    let mut c = call(
        "agents/api/items.post.ts",
        vec![json!({ "$request": request }), json!({ "id": "7" })],
    );
    c.entry = vec!["handler".to_owned()];
    // The spec's `(req, state, params)`: `state` second.
    c.state_at = 1;
    c
}

#[tokio::test]
async fn an_endpoint_takes_a_request_and_its_response_is_json() {
    let host = host(&[("agents/api/items.post.ts", ENDPOINT)], 1);
    let out = run(
        &host,
        endpoint_call(json!({
            "method": "post",
            "url": "http://localhost/threads/t-1/api/items?q=blue%20shoes",
            "headers": [["content-type", "application/json"], ["x-agent", "a1"]],
            "body": "{\"name\":\"shoe\"}"
        })),
    )
    .await
    .expect("runs");
    let response = &out["$response"];
    assert_eq!(response["status"], json!(201));
    assert_eq!(
        response["headers"],
        json!([["content-type", "application/json"], ["x-made-by", "duet"]])
    );
    let body: Value = serde_json::from_str(response["body"].as_str().expect("text")).expect("json");
    assert_eq!(
        body,
        json!({ "got": { "name": "shoe" }, "q": "blue shoes", "method": "POST", "agent": "a1", "thread": "t-1", "id": "7" })
    );
}

const BYTES: &str = r#"
export default {
  handler: async (state, req) => {
    const bytes = new Uint8Array(await req.arrayBuffer());
    return new Response(bytes.reverse(), { status: 200, headers: { 'content-type': 'application/octet-stream' } });
  },
};
"#;

#[tokio::test]
async fn binary_bodies_travel_as_base64() {
    let host = host(&[("agents/api/bytes.post.js", BYTES)], 1);
    let mut c = call(
        "agents/api/bytes.post.js",
        vec![
            json!({ "$request": { "method": "POST", "url": "http://localhost/x", "headers": [], "bodyBase64": "AAEC/w==" } }),
        ],
    );
    c.entry = vec!["handler".to_owned()];
    let out = run(&host, c).await.expect("runs");
    assert_eq!(out["$response"]["bodyBase64"], json!("/wIBAA=="));
    assert_eq!(out["$response"].get("body"), None);
}

const FETCH: &str = r#"
export default {
  execute: async () => {
    const r = await fetch('https://api.example.com/orders?id=7', {
      method: 'post',
      headers: { 'X-Key': 'k1' },
      body: JSON.stringify({ a: 1 }),
    });
    return { status: r.status, ok: r.ok, statusText: r.statusText, type: r.headers.get('Content-Type'),
      body: await r.json(), url: r.url, used: r.bodyUsed };
  },
};
"#;

#[tokio::test]
async fn fetch_goes_to_the_bridge_and_its_answer_is_a_response() {
    let host = host(&[("agents/tools/fetch.js", FETCH)], 1);
    let mut bridge = Recorder::new(|_, _| {
        Ok(json!({
            "status": 404,
            "headers": [["content-type", "application/json"]],
            "url": "https://api.example.com/orders?id=7",
            "body": "{\"error\":\"none\"}"
        }))
    });
    let out = host
        .call(call("agents/tools/fetch.js", vec![]), &mut bridge)
        .await
        .expect("runs");
    assert_eq!(
        bridge.seen,
        vec![(
            "fetch".to_owned(),
            json!({
                "url": "https://api.example.com/orders?id=7",
                "method": "POST",
                "headers": [["content-type", "text/plain;charset=UTF-8"], ["x-key", "k1"]],
                "body": "{\"a\":1}"
            })
        )]
    );
    assert_eq!(
        out,
        json!({ "status": 404, "ok": false, "statusText": "Not Found", "type": "application/json",
            "body": { "error": "none" }, "url": "https://api.example.com/orders?id=7", "used": true })
    );
}

/// Checks of the web classes, run in the engine: each failed check is a line of the result.
const WEB: &str = r#"
export default {
  execute: async () => {
    const failed = [];
    const eq = (what, got, want) => {
      const g = JSON.stringify(got), w = JSON.stringify(want);
      if (g !== w) failed.push(`${what}: got ${g}, want ${w}`);
    };
    const u = new URL('HTTPS://User:Pw@Example.COM:443/a/./b/../c d?x=1&y=a+b#frag');
    eq('href', u.href, 'https://User:Pw@example.com/a/c%20d?x=1&y=a+b#frag');
    eq('parts', [u.protocol, u.username, u.password, u.host, u.hostname, u.port, u.pathname, u.search, u.hash, u.origin],
      ['https:', 'User', 'Pw', 'example.com', 'example.com', '', '/a/c%20d', '?x=1&y=a+b', '#frag', 'https://example.com']);
    eq('query', [u.searchParams.get('y'), u.searchParams.get('z'), u.searchParams.has('x')], ['a b', null, true]);
    u.searchParams.append('z', 'é &');
    eq('append', u.search, '?x=1&y=a+b&z=%C3%A9+%26');
    u.search = '?k=v';
    eq('search set', [u.href, u.searchParams.get('k')], ['https://User:Pw@example.com/a/c%20d?k=v#frag', 'v']);
    eq('port', new URL('http://h:8080/').port, '8080');
    eq('relative', new URL('../x?q#h', 'http://h/a/b/c').href, 'http://h/a/x?q#h');
    eq('absolute path', new URL('/p', 'http://h:81/a/b').href, 'http://h:81/p');
    eq('scheme relative', new URL('//other/p', 'https://h/a').href, 'https://other/p');
    eq('query only', new URL('?n=1', 'http://h/a/b').href, 'http://h/a/b?n=1');
    eq('no path', new URL('http://h').href, 'http://h/');
    eq('mailto', new URL('mailto:a@b.c').pathname, 'a@b.c');
    eq('canParse', [URL.canParse('nope'), URL.canParse('/x', 'http://h')], [false, true]);
    let threw = false;
    try { new URL('/relative'); } catch (e) { threw = e instanceof TypeError; }
    eq('invalid', threw, true);
    eq('toJSON', JSON.stringify({ u: new URL('http://h/') }), '{"u":"http://h/"}');

    const p = new URLSearchParams('?a=1&b=2&a=3');
    eq('getAll', p.getAll('a'), ['1', '3']);
    p.set('a', '9');
    eq('set', p.toString(), 'a=9&b=2');
    p.delete('b');
    eq('delete', [...p], [['a', '9']]);
    eq('from object', new URLSearchParams({ x: 'a b', y: '&' }).toString(), 'x=a+b&y=%26');
    const s = new URLSearchParams('c=3&a=2&b=1&a=1');
    s.sort();
    eq('sort', s.toString(), 'a=2&a=1&b=1&c=3');

    const h = new Headers({ 'Content-Type': 'text/plain' });
    h.append('X-A', '1');
    h.append('x-a', '2');
    eq('headers', [h.get('content-type'), h.get('X-A'), h.has('x-b'), [...h]],
      ['text/plain', '1, 2', false, [['content-type', 'text/plain'], ['x-a', '1, 2']]]);
    threw = false;
    try { h.set('bad name', 'x'); } catch (e) { threw = e instanceof TypeError; }
    eq('bad header', threw, true);

    const r = new Response('hé', { status: 202, headers: [['x-y', 'z']] });
    eq('response', [r.status, r.ok, r.headers.get('content-type'), await r.text()], [202, true, 'text/plain;charset=UTF-8', 'hé']);
    threw = false;
    try { await r.text(); } catch (e) { threw = e instanceof TypeError; }
    eq('body read twice', threw, true);
    eq('json', await Response.json({ a: [1] }).json(), { a: [1] });
    eq('redirect', Response.redirect('http://h/x', 307).headers.get('location'), 'http://h/x');
    const req = new Request('http://h/p', { method: 'PUT', body: new URLSearchParams({ a: '1' }) });
    eq('request', [req.method, req.headers.get('content-type'), await req.clone().text()],
      ['PUT', 'application/x-www-form-urlencoded;charset=UTF-8', 'a=1']);
    threw = false;
    try { new Request('http://h/', { body: 'x' }); } catch (e) { threw = e instanceof TypeError; }
    eq('GET with a body', threw, true);

    const bytes = new TextEncoder().encode('aé€😀');
    eq('encode', [...bytes], [97, 195, 169, 226, 130, 172, 240, 159, 152, 128]);
    eq('decode', new TextDecoder().decode(bytes), 'aé€😀');
    eq('decode bad', new TextDecoder().decode(new Uint8Array([0x61, 0xff, 0x62])), 'a\ufffdb');
    const c = structuredClone({ d: new Date(5), m: new Map([[1, { x: 1 }]]), list: [1, 2] });
    eq('clone', [c.d.getTime(), c.m.get(1).x, c.list], [5, 1, [1, 2]]);
    return failed;
  },
};
"#;

#[tokio::test]
async fn the_web_classes_behave_as_the_standards_say() {
    let host = host(&[("agents/tools/web.js", WEB)], 1);
    let out = run(&host, call("agents/tools/web.js", vec![])).await;
    assert_eq!(out, Ok(json!([])));
}
