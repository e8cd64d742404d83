//! A real SMTP server on loopback for the email tests: `smtp_server.py` (Python's `aiosmtpd`,
//! which scripts/test-servers installs) with STARTTLS on a certificate for 127.0.0.1 signed by a
//! CA made here per server, and AUTH as [`USER`]; the messages it received, as Python's `email`
//! package parsed them (an independent MIME reader), each awaitable as it arrives (the server
//! says so on its stdout). Stopped when dropped.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

/// The only user the server admits.
pub const USER: &str = "duet-mailer";
/// [`USER`]'s password (characters a URL must percent-encode, on purpose).
pub const PASSWORD: &str = "s3cr3t/p@ss word";

/// A running `smtp_server.py` and the files it works with.
pub struct SmtpServer {
    child: tokio::process::Child,
    port: u16,
    ca_file: PathBuf,
    maildir: PathBuf,
    /// The numbers of the messages written, as the server announces them.
    arrived: tokio::sync::Mutex<mpsc::UnboundedReceiver<u64>>,
}

/// One message the server accepted.
#[derive(Debug)]
pub struct Received {
    /// The bytes received, as text.
    pub raw: String,
    /// `{mailFrom, rcptTos, authenticated, tls, contentType, headers: [[name, value]], parts:
    /// [{contentType, charset, text}]}`.
    pub parsed: Value,
}

impl Received {
    /// The value of header `name` (the first, case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.parsed["headers"].as_array()?.iter().find_map(|h| {
            (h[0].as_str()?.eq_ignore_ascii_case(name))
                .then(|| h[1].as_str())
                .flatten()
        })
    }

    /// The leaf parts' content types, in order.
    pub fn part_types(&self) -> Vec<String> {
        self.parsed["parts"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter_map(|p| p["contentType"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The decoded text of the first part of type `content_type`.
    pub fn part(&self, content_type: &str) -> Option<&str> {
        self.parsed["parts"]
            .as_array()?
            .iter()
            .find(|p| p["contentType"] == content_type)?["text"]
            .as_str()
    }
}

/// Whether the test may go on without the server: `false` with a loud note when `aiosmtpd` is
/// missing, a failure instead when `DUET_REQUIRE_SMTP=1` (CI).
pub async fn available() -> bool {
    let probe = tokio::process::Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await;
    if probe.is_ok_and(|s| s.success()) {
        return true;
    }
    assert!(
        std::env::var("DUET_REQUIRE_SMTP").map_or(true, |v| v != "1"),
        "DUET_REQUIRE_SMTP=1 but Python's aiosmtpd is missing: run scripts/test-servers"
    );
    eprintln!(
        "\n!!! SKIPPED: the email tests need Python's aiosmtpd (scripts/test-servers installs it; \
         DUET_REQUIRE_SMTP=1 makes this a failure) !!!\n"
    );
    false
}

/// A CA, and a certificate for 127.0.0.1 and localhost it signed, with its key: PEM texts.
fn certificates() -> (String, String, String) {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "duet test CA");
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = rcgen::Issuer::new(ca, ca_key);

    let mut leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".into()])
        .expect("leaf params");
    leaf.distinguished_name
        .push(rcgen::DnType::CommonName, "duet test SMTP");
    leaf.use_authority_key_identifier_extension = true;
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let leaf_cert = leaf
        .signed_by(&leaf_key, &issuer)
        .expect("leaf certificate");
    (ca_cert.pem(), leaf_cert.pem(), leaf_key.serialize_pem())
}

impl SmtpServer {
    /// Starts a server on a free loopback port, or `None` when [`available`] says to skip.
    pub async fn start() -> Option<SmtpServer> {
        if !available().await {
            return None;
        }
        let dir = duet_runtime::testing::Scratch::new("smtp");
        let (ca, cert, key) = certificates();
        dir.write("ca.pem", &ca);
        dir.write("cert.pem", &cert);
        dir.write("key.pem", &key);
        let maildir = dir.root().join("mail");
        std::fs::create_dir_all(&maildir).expect("maildir");
        let script = duet_runtime::testing::repo().join("crates/cli/tests/support/smtp_server.py");
        let mut child = tokio::process::Command::new("python3")
            .arg(script)
            .arg("0")
            .arg(dir.root().join("cert.pem"))
            .arg(dir.root().join("key.pem"))
            .args([USER, PASSWORD])
            .arg(&maildir)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs smtp_server.py");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        tokio::time::timeout(Duration::from_secs(30), lines.read_line(&mut first))
            .await
            .expect("smtp_server.py says its port within 30 s")
            .expect("read its stdout");
        let port = first
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("smtp_server.py's first line: {first:?}"));
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut line = String::new();
            while lines.read_line(&mut line).await.is_ok_and(|n| n > 0) {
                if let Some(n) = line
                    .trim()
                    .strip_prefix("MESSAGE ")
                    .and_then(|n| n.parse().ok())
                {
                    let _ = tx.send(n);
                }
                line.clear();
            }
        });
        Some(SmtpServer {
            child,
            port,
            ca_file: dir.root().join("ca.pem"),
            maildir,
            arrived: tokio::sync::Mutex::new(rx),
        })
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL `DUET_SMTP_URL` takes for it: STARTTLS required, AUTH as `user` with
    /// `password` (percent-encoded).
    pub fn url(&self, user: &str, password: &str) -> String {
        format!(
            "smtp://{}:{}@127.0.0.1:{}?tls=required",
            encode(user),
            encode(password),
            self.port
        )
    }

    /// The PEM file of the CA that signed its certificate (for `DUET_SMTP_CA_FILE`).
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The next message it accepts (waits for it, at most `within`: a hung test, not a timing
    /// assertion).
    pub async fn next_message(&self, within: Duration) -> Received {
        let mut arrived = self.arrived.lock().await;
        let n = tokio::time::timeout(within, arrived.recv())
            .await
            .expect("a message at the SMTP server in time")
            .expect("smtp_server.py runs");
        self.read(n, &self.maildir.join(format!("{n}.json")))
    }

    /// Message `n`, its parsed form read from `json`.
    fn read(&self, n: u64, json: &Path) -> Received {
        Received {
            raw: std::fs::read_to_string(self.maildir.join(format!("{n}.eml"))).expect("eml"),
            parsed: serde_json::from_str(&std::fs::read_to_string(json).expect("json"))
                .expect("parsed JSON"),
        }
    }

    /// Every message it accepted so far, oldest first.
    pub fn messages(&self) -> Vec<Received> {
        let mut numbered: Vec<(u64, PathBuf)> = std::fs::read_dir(&self.maildir)
            .expect("maildir")
            .filter_map(|e| {
                let path = e.ok()?.path();
                let n = path
                    .file_name()?
                    .to_str()?
                    .strip_suffix(".json")?
                    .parse()
                    .ok()?;
                Some((n, path))
            })
            .collect();
        numbered.sort();
        numbered
            .into_iter()
            .map(|(n, json)| self.read(n, &json))
            .collect()
    }
}

/// `s` percent-encoded for a URL's user or password.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
