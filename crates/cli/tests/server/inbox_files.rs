//! Files in the inbox (#34), on each backend: a question's conversation shows its messages'
//! attachments — a raster image inline, a PDF or an SVG as a download link with its type and
//! size, every name escaped — served on the session cookie to whoever may open the page, and
//! only files a message attaches; an approver attaches a file to an answer (stored under
//! `/attachments/`, carried by the answer's message; too large is a clear 413 and nothing is
//! answered; a forged post stores nothing; a refused answer leaves its file named by no message);
//! an answer over the API names attachments too. And in a real browser: the image loads, the
//! PDF is a link, a file attached through the form reaches the thread.

use duet_runtime::files::FileLimits;
use serde_json::{Value, json};

use super::inbox::{approval_of, cookie, csrf, parked_gate, plain};
use crate::browser;
use crate::harness::{self, Server};
use crate::support;

/// An 8×6 red PNG.
pub(crate) const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x06, 0x08, 0x02, 0x00, 0x00, 0x00, 0x71, 0x67, 0x48,
    0xac, 0x00, 0x00, 0x00, 0x11, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xb8, 0x60, 0x60, 0x80,
    0x15, 0x31, 0x0c, 0xa4, 0x04, 0x00, 0xd2, 0x86, 0x39, 0x01, 0x1d, 0x89, 0x4c, 0xa4, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A (tiny) PDF.
pub(crate) const PDF: &[u8] =
    b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n";

/// The files of the question's conversation: (name, declared type, bytes).
const FILES: &[(&str, &str, &[u8])] = &[
    ("chart.png", "image/png", PNG),
    ("report.pdf", "application/pdf", PDF),
    (
        "logo.svg",
        "image/svg+xml",
        b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>",
    ),
    (
        "\"><img src=x onerror=alert(1)>.txt",
        "text/plain",
        b"hello",
    ),
];

/// Thread `key` of `question_gate`, its files uploaded first and named by its first message:
/// the question it parks on, as an approval id.
async fn question_with_files(server: &Server, token: &str, key: &str) -> String {
    let mut paths = Vec::new();
    for (name, mime, bytes) in FILES {
        let path = format!("/attachments/{name}");
        let resp = server
            .req(
                reqwest::Method::POST,
                &format!(
                    "/threads/{}/files?agent=question_gate&path={}",
                    harness::seg(key),
                    harness::seg(&path)
                ),
                token,
            )
            .header("content-type", *mime)
            .body(bytes.to_vec())
            .send()
            .await
            .expect("upload");
        assert_eq!(
            resp.status(),
            201,
            "{name}: {}",
            resp.text().await.unwrap_or_default()
        );
        paths.push(path);
    }
    let (status, body) = server
        .post(
            &format!("/threads/{}/messages?wait=true", harness::seg(key)),
            token,
            json!({"text": "Rotate the keys? The numbers are attached.", "attachments": paths}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    approval_of(server, token, key).await
}

/// `GET path` with the session cookie: (status, content type, bytes).
async fn fetch(server: &Server, session: &str, path: &str) -> (u16, String, Vec<u8>) {
    let resp = plain()
        .get(format!("{}{path}", server.base))
        .header("cookie", session)
        .send()
        .await
        .expect("get");
    let status = resp.status().as_u16();
    let mime = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, mime, resp.bytes().await.expect("body").to_vec())
}

/// The value of the first `attr="…"` after `from` in `html`.
fn attr_after(html: &str, from: &str, attr: &str) -> String {
    let at = html
        .find(from)
        .unwrap_or_else(|| panic!("no `{from}` in {html}"));
    let rest = &html[at..];
    let start = rest.find(&format!("{attr}=\"")).expect("the attribute") + attr.len() + 2;
    let len = rest[start..].find('"').expect("its end");
    rest[start..start + len].replace("&amp;", "&")
}

/// The link of the anchor whose `download` attribute is `name` (escaped as in the page).
fn link(html: &str, name: &str) -> String {
    let at = html
        .find(&format!("download=\"{name}\""))
        .unwrap_or_else(|| panic!("no link to `{name}` in {html}"));
    let start = html[..at].rfind("href=\"").expect("its href") + 6;
    let len = html[start..].find('"').expect("its end");
    html[start..start + len].replace("&amp;", "&")
}

#[tokio::test]
async fn a_questions_attachments_show_an_image_inline_and_the_rest_as_links_escaped() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let approval = question_with_files(&server, &alice, "files-1").await;
        let session = cookie(&server, &alice).await;
        let (status, _, html) = fetch(&server, &session, &format!("/inbox/items/{approval}")).await;
        let html = String::from_utf8(html).expect("html");
        assert_eq!(status, 200, "{html}");

        // The image inline, from the inbox's own route (the CSP's `img-src 'self'`).
        let img = attr_after(&html, "<img ", "src");
        assert!(
            img.starts_with("/inbox/items/") && img.ends_with("/attachments/chart.png"),
            "{img}"
        );
        assert_eq!(
            html.matches("<img ").count(),
            1,
            "only the PNG is inline: {html}"
        );
        let (status, mime, bytes) = fetch(&server, &session, &img).await;
        assert_eq!((status, mime.as_str()), (200, "image/png"));
        assert_eq!(bytes, PNG);

        // The PDF and the SVG are download links with their type and size.
        for (name, mime) in [
            ("report.pdf", "application/pdf"),
            ("logo.svg", "image/svg+xml"),
        ] {
            let href = link(&html, name);
            assert!(href.ends_with(&format!("/attachments/{name}")), "{href}");
            assert!(
                html.contains(&format!("{name}</a><span class=\"file-meta\"> — {mime}, ")),
                "{name}: {html}"
            );
            let (status, served, _) = fetch(&server, &session, &href).await;
            assert_eq!((status, served.as_str()), (200, mime), "{name}");
        }
        assert!(
            html.contains(&format!("— application/pdf, {} B", PDF.len())),
            "{html}"
        );

        // A name with markup is text: escaped in the page, percent-encoded in its link.
        assert!(!html.contains("<img src=x"), "{html}");
        assert!(
            html.contains(">&quot;&gt;&lt;img src=x onerror=alert(1)&gt;.txt</a>"),
            "{html}"
        );
        let href = link(&html, "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;.txt");
        assert!(
            href.ends_with("/attachments/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.txt"),
            "{href}"
        );
        let (status, _, bytes) = fetch(&server, &session, &href).await;
        assert_eq!((status, bytes.as_slice()), (200, &b"hello"[..]));

        // Only what a message attaches is served, only to whoever may open the page, and
        // only with a session.
        let stray = server
            .req(
                reqwest::Method::POST,
                "/threads/files-1/files?path=/notes/private.txt",
                &alice,
            )
            .body("not attached")
            .send()
            .await
            .expect("upload");
        assert_eq!(stray.status(), 201);
        let base = img.trim_end_matches("/attachments/chart.png");
        let (status, _, _) = fetch(&server, &session, &format!("{base}/notes/private.txt")).await;
        assert_eq!(status, 404, "a file no message attaches");
        let (status, _, _) = fetch(
            &server,
            &session,
            &format!("{base}/attachments/../notes/private.txt"),
        )
        .await;
        assert!(status == 404 || status == 400, "{status}");
        let bobs = cookie(&server, &bob).await;
        assert_eq!(
            fetch(&server, &bobs, &img).await.0,
            404,
            "another principal"
        );
        let resp = plain()
            .get(format!("{}{img}", server.base))
            .send()
            .await
            .expect("get");
        assert_eq!(resp.status(), 303, "no session: to the sign-in page");
        server.stop().await;
    }
}

/// A multipart body: `fields`, then a `file` part (name, type, bytes) when given.
fn multipart(fields: &[(&str, &str)], file: Option<(&str, &str, &[u8])>) -> (String, Vec<u8>) {
    let boundary = "duetboundary7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\ncontent-disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    if let Some((name, mime, bytes)) = file {
        body.extend_from_slice(
            format!("--{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"{name}\"\r\ncontent-type: {mime}\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// The thread's messages, as the API lists them.
async fn messages(server: &Server, token: &str, key: &str) -> Vec<Value> {
    let (status, page) = server
        .get(
            &format!("/threads/{}/messages?limit=500", harness::seg(key)),
            token,
        )
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|e| e["kind"] == "message")
        .map(|e| e["data"].clone())
        .collect()
}

/// The paths of `dir` of thread `key`.
async fn listed(server: &Server, token: &str, key: &str, dir: &str) -> Vec<String> {
    let (status, page) = server
        .get(
            &format!("/threads/{}/files?dir={dir}", harness::seg(key)),
            token,
        )
        .await;
    if status == 404 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|f| f["path"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn an_approver_attaches_a_file_to_an_answer() {
    for backend in support::backends().await {
        let limits = FileLimits {
            max_file_bytes: 4096,
            ..FileLimits::default()
        };
        let server = Server::start_with_limits(&backend, limits).await;
        let alice = server.key("alice", false).await;
        let session = cookie(&server, &alice).await;
        let approval = parked_gate(&server, &alice, "gate-1", "Sign the contract?").await;
        let page = plain()
            .get(format!("{}/inbox/items/{approval}", server.base))
            .header("cookie", &session)
            .send()
            .await
            .expect("page")
            .text()
            .await
            .expect("html");
        assert!(
            page.contains("enctype=\"multipart/form-data\"")
                && page.contains("type=\"file\" name=\"file\""),
            "{page}"
        );
        let token = csrf(&page);
        let post = |fields: Vec<(&'static str, String)>, file: Option<(&'static str, Vec<u8>)>| {
            let fields: Vec<(&str, String)> = fields;
            let owned: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (kind, body) = multipart(
                &owned,
                file.as_ref()
                    .map(|(n, b)| (*n, "application/pdf", b.as_slice())),
            );
            plain()
                .post(format!("{}/inbox/items/{approval}", server.base))
                .header("cookie", &session)
                .header("origin", &server.base)
                .header("content-type", kind)
                .body(body)
                .send()
        };
        let reply = |csrf: &str, text: &str| {
            vec![
                ("csrf", csrf.to_owned()),
                ("kind", "reply".to_owned()),
                ("message_id", uuid::Uuid::now_v7().to_string()),
                ("text", text.to_owned()),
            ]
        };

        // A forged post (not the session's token) stores nothing.
        let resp = post(reply("0000", "forged"), Some(("forged.pdf", PDF.to_vec())))
            .await
            .expect("post");
        assert_eq!(resp.status(), 403);
        // Over the file limit: a clear 413, no file, nothing answered.
        let resp = post(
            reply(&token, "too big"),
            Some(("big.pdf", vec![b'x'; 5000])),
        )
        .await
        .expect("post");
        assert_eq!(resp.status(), 413);
        let html = resp.text().await.expect("html");
        assert!(html.contains("over the limit of 4096"), "{html}");
        assert_eq!(
            listed(&server, &alice, "gate-1", "/attachments").await,
            Vec::<String>::new()
        );
        assert_eq!(
            approval_of(&server, &alice, "gate-1").await,
            approval,
            "still waits"
        );

        // The answer and its file, one post (no script: a redirect back to the page).
        let resp = post(
            reply(&token, "Signed, see attached."),
            Some(("signed contract.pdf", PDF.to_vec())),
        )
        .await
        .expect("post");
        assert_eq!(
            resp.status(),
            303,
            "{}",
            resp.text().await.unwrap_or_default()
        );
        assert_eq!(
            listed(&server, &alice, "gate-1", "/attachments").await,
            ["/attachments/signed contract.pdf"]
        );
        // Stored before the redirect; in the journal once the thread took it.
        harness::until(&server, &alice, "gate-1", "idle").await;
        let said = messages(&server, &alice, "gate-1").await;
        let answer = said
            .iter()
            .find(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("Signed, see attached."))
            })
            .unwrap_or_else(|| panic!("the answer, in {said:?} ({})", backend.name()));
        assert_eq!(
            answer["attachments"][0]["path"], "/attachments/signed contract.pdf",
            "{answer}"
        );
        assert_eq!(
            answer["attachments"][0]["mimeType"], "application/pdf",
            "{answer}"
        );

        // Answered already: refused, its file stored but named by no message (a name of its
        // own: the first file is not replaced).
        let resp = post(
            reply(&token, "Again."),
            Some(("signed contract.pdf", b"%PDF-1.4 other".to_vec())),
        )
        .await
        .expect("post");
        assert_eq!(resp.status(), 409);
        assert_eq!(
            listed(&server, &alice, "gate-1", "/attachments").await,
            [
                "/attachments/signed contract-2.pdf",
                "/attachments/signed contract.pdf"
            ]
        );
        assert!(
            !messages(&server, &alice, "gate-1")
                .await
                .iter()
                .any(|m| m.to_string().contains("contract-2.pdf")),
            "no message names the refused answer's file"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn an_answer_over_the_api_names_attachments() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let approval = parked_gate(&server, &alice, "gate-2", "Proceed?").await;
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}"),
                &alice,
                json!({"text": "yes", "attachments": ["/attachments/missing.pdf"]}),
            )
            .await;
        assert_eq!(status, 422, "{body}");
        assert!(
            body.to_string().contains("/attachments/missing.pdf"),
            "{body}"
        );
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}"),
                &alice,
                json!({"decision": "approve", "attachments": ["/a"]}),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        let resp = server
            .req(
                reqwest::Method::POST,
                "/threads/gate-2/files?path=/attachments/ok.pdf",
                &alice,
            )
            .body(PDF.to_vec())
            .send()
            .await
            .expect("upload");
        assert_eq!(resp.status(), 201);
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}?wait=true"),
                &alice,
                json!({"text": "yes, see the file", "attachments": ["/attachments/ok.pdf"]}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert!(
            messages(&server, &alice, "gate-2").await.iter().any(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("yes, see the file"))
                    && m["attachments"][0]["path"] == "/attachments/ok.pdf"
            }),
            "the answer carries its file"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn in_a_browser_the_image_loads_the_pdf_is_a_link_and_an_answer_attaches_a_file() {
    let Some(mut driver) = browser::driver().await else {
        return;
    };
    let scratch = support::Scratch::new("inbox-files");
    scratch.write("approval.pdf", std::str::from_utf8(PDF).expect("text"));
    let upload = scratch.root().join("approval.pdf");
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let approval = question_with_files(&server, &alice, "files-b").await;
        let page = driver.browser(1000, 1400, true).await;
        page.sign_in(&server.base, &alice).await;
        page.open(&format!("{}/inbox/items/{approval}", server.base))
            .await;
        page.wait_until(
            "[...document.querySelectorAll('li.attachment.image img')].some(i => i.complete && i.naturalWidth > 0)",
        )
        .await;
        assert_eq!(
            page.eval("document.querySelector('li.attachment.file a[download=\"report.pdf\"]').textContent")
                .await,
            json!("report.pdf")
        );
        page.screenshot(&format!("attachments-{}", backend.name()))
            .await;

        // The approver replies with a file, through the form (sent by the page's script).
        let input = page.wait_for("#file-reply").await;
        input
            .send_keys(upload.to_str().expect("a path"))
            .await
            .expect("choose the file");
        page.wait_for("#reply")
            .await
            .send_keys("Approved; the signed form is attached.")
            .await
            .expect("type");
        page.wait_for("#send").await.click().await.expect("send");
        page.wait_until("[...document.querySelectorAll('#after li.attachment a')].some(a => a.textContent === 'approval.pdf')")
            .await;
        assert!(
            messages(&server, &alice, "files-b").await.iter().any(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("Approved; the signed form"))
                    && m["attachments"][0]["path"] == "/attachments/approval.pdf"
            }),
            "the answer carries the file"
        );
        page.close().await;
        server.stop().await;
    }
}
