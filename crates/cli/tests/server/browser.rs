//! A real browser for the inbox tests: Debian's `chromium`, headless, driven over WebDriver by
//! `chromedriver` (both from Debian's packages, installed by `.ci/run`; nothing is downloaded at
//! run time). Without them the inbox's browser tests say so and pass, unless
//! `DUET_REQUIRE_BROWSER=1` (CI).

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// How long a page is given to show what a test waits for.
const PATIENCE: Duration = Duration::from_secs(30);

/// How long one wait's script runs before it is run again on whatever page is there then. A page
/// without script runs no observer callbacks, and a wait armed just before its form post's
/// answer arrived would see nothing; run again, it sees the page that came.
const REARM: Duration = Duration::from_secs(2);

/// A running chromedriver; browsers are sessions of it.
pub struct Driver {
    url: String,
    _process: tokio::process::Child,
    profiles: Vec<PathBuf>,
}

/// The chromedriver for a test, or `None` (the test passes, saying why) when the browser is not
/// installed and `DUET_REQUIRE_BROWSER` is not `1`.
pub async fn driver() -> Option<Driver> {
    let present =
        std::path::Path::new(CHROMEDRIVER).exists() && std::path::Path::new(CHROMIUM).exists();
    if !present {
        assert!(
            std::env::var("DUET_REQUIRE_BROWSER").map_or(true, |v| v != "1"),
            "DUET_REQUIRE_BROWSER=1 but {CHROMEDRIVER} or {CHROMIUM} is missing: run .ci/run's install step (apt-get install chromium chromium-driver)"
        );
        eprintln!(
            "SKIPPED: the inbox browser test needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)"
        );
        return None;
    }
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("addr").port()
    };
    let mut process = tokio::process::Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver starts");
    // Ready when it says so (no polling).
    let stdout = process.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    loop {
        let line = lines.next_line().await.expect("chromedriver output");
        let line = line.expect("chromedriver exited before it was ready");
        if line.contains("started successfully") {
            break;
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Some(Driver {
        url: format!("http://127.0.0.1:{port}"),
        _process: process,
        profiles: Vec::new(),
    })
}

impl Driver {
    /// A new browser (its own profile: its own cookies), `width` × `height`, with or without
    /// script.
    pub async fn browser(&mut self, width: u32, height: u32, script: bool) -> Browser {
        let profile = std::env::temp_dir().join(format!("duet-chromium-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&profile).expect("profile dir");
        let mut caps = serde_json::Map::new();
        let mut prefs = json!({});
        if !script {
            prefs = json!({"profile.managed_default_content_settings.javascript": 2});
        }
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                    format!("--user-data-dir={}", profile.display()),
                    format!("--window-size={width},{height}"),
                ],
                "prefs": prefs,
            }),
        );
        self.profiles.push(profile);
        let client = ClientBuilder::rustls()
            .expect("a TLS config")
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a chromium session");
        client
            .set_window_size(width, height)
            .await
            .expect("window size");
        client
            .update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
                Some(REARM),
                Some(PATIENCE),
                Some(Duration::ZERO),
            ))
            .await
            .expect("timeouts");
        Browser { client }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        for p in &self.profiles {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// One browser window.
pub struct Browser {
    pub client: Client,
}

impl Browser {
    /// Opens `url`.
    pub async fn open(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// The first element matching `css`, once there is one.
    pub async fn wait_for(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("waiting for `{css}`: {e}"))
    }

    /// Waits until `script` (a JS expression over the DOM) is true in the page: checked again
    /// on every change of the document (a `MutationObserver`), so nothing polls. When the page
    /// navigates away meanwhile (a form post), the check starts again on the new page.
    pub async fn wait_until(&self, script: &str) {
        let js = format!(
            "const done = arguments[arguments.length - 1];
             const check = () => {{ try {{ return !!({script}); }} catch (e) {{ return false; }} }};
             if (check()) {{ done(true); return; }}
             const seen = new MutationObserver(() => {{ if (check()) {{ seen.disconnect(); done(true); }} }});
             seen.observe(document, {{ subtree: true, childList: true, attributes: true, characterData: true }});
             window.addEventListener('pagehide', () => done(false));"
        );
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let ok = self.client.execute_async(&js, vec![]).await;
            if matches!(ok, Ok(Value::Bool(true))) {
                return;
            }
            if tokio::time::Instant::now() >= deadline
                || ok.is_err() && !navigating(&ok) && !rearmed(&ok)
            {
                let page = self.eval("document.body.innerText").await;
                panic!(
                    "waiting until `{script}` on {}: {ok:?}\nthe page says:\n{}",
                    self.url_now().await,
                    page.as_str().unwrap_or_default()
                );
            }
        }
    }

    /// The value of JS expression `script`.
    pub async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(&format!("return ({script});"), vec![])
            .await
            .expect("execute")
    }

    /// The text of the first element matching `css`, once there is one (read in the page, so
    /// a live update that replaces the element in between cannot make it stale).
    pub async fn text(&self, css: &str) -> String {
        let css_json = serde_json::to_string(css).expect("json");
        self.wait_until(&format!("document.querySelector({css_json}) !== null"))
            .await;
        let text = self
            .eval(&format!("document.querySelector({css_json}).innerText"))
            .await;
        text.as_str().unwrap_or_default().to_owned()
    }

    /// Types `keys` into the focused element (or the page).
    pub async fn keys(&self, keys: &str) {
        let el = self
            .client
            .active_element()
            .await
            .expect("the focused element");
        el.send_keys(keys).await.expect("keys");
    }

    /// Signs in at `base` with API key `token`.
    pub async fn sign_in(&self, base: &str, token: &str) {
        self.open(&format!("{base}/inbox")).await;
        let key = self.wait_for("#key").await;
        key.send_keys(token).await.expect("type the key");
        self.client
            .find(Locator::Css("form.stack button[type=submit]"))
            .await
            .expect("the sign-in button")
            .click()
            .await
            .expect("sign in");
        // The signed-in page's navigation, which the sign-in page has not: its `h1` would be
        // found before the form's post landed, and a page opened then was opened signed out.
        self.wait_for("header.top nav").await;
    }

    /// Saves a screenshot as `target/inbox-screenshots/NAME.png` (CI keeps them).
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = crate::support::repo().join("target/inbox-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("write screenshot");
    }

    async fn url_now(&self) -> String {
        self.client
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_default()
    }

    /// Ends the session.
    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}

/// Whether a wait's script ran out its time ([`REARM`]): it is run again.
fn rearmed(result: &Result<Value, fantoccini::error::CmdError>) -> bool {
    result
        .as_ref()
        .err()
        .is_some_and(|e| e.to_string().contains("script timeout"))
}

/// Whether a script failed because its page went away (it is tried again on the next one).
fn navigating(result: &Result<Value, fantoccini::error::CmdError>) -> bool {
    result.as_ref().err().is_some_and(|e| {
        let e = e.to_string();
        e.contains("unload") || e.contains("navigat") || e.contains("context")
    })
}
