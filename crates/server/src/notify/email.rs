//! The email channel (issue #31): [`render`] turns a notification into the stored body of an
//! email delivery (`email/render.rs`); [`send`] sends one over SMTP with lettre — STARTTLS or
//! implicit TLS on rustls, AUTH from the URL — as a `multipart/alternative` message (text, then
//! HTML). The transport is [`Smtp`], read once from the environment: `DUET_SMTP_URL`,
//! `DUET_SMTP_FROM`, `DUET_SMTP_CA_FILE`.

mod render;

use std::time::Duration;

use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use duet_server_store::Delivery;

pub(crate) use render::render;

/// The longest one read or write on the SMTP connection may wait.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest one whole send may take: under the sender's 30 s claim, so no other process
/// claims a delivery that is still being sent.
const SEND_TIMEOUT: Duration = Duration::from_secs(25);

/// The prefix of an error retrying cannot mend (a `5xx` reply, a body that is not an email):
/// the sender gives such a delivery up at once.
pub(crate) const PERMANENT: &str = "permanent:";

/// The error of an email delivery claimed by a process without an email channel. Not
/// permanent: another process, or this one restarted with the variables set, may send it.
pub(crate) const UNCONFIGURED: &str =
    "no email channel on this server: DUET_SMTP_URL and DUET_SMTP_FROM are not set";

/// How a URL asks for TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TlsMode {
    /// `smtp://` without `tls`: none.
    None,
    /// `smtp://…?tls=opportunistic`: STARTTLS when offered.
    Opportunistic,
    /// `smtp://…?tls=required`: STARTTLS or fail.
    Required,
    /// `smtps://`: TLS from the first byte.
    Wrapper,
}

/// The SMTP server email deliveries go through, and the address they come from.
pub(crate) struct Smtp {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// The server as errors name it (`smtp://host:port`, no credentials).
    server: String,
}

impl std::fmt::Debug for Smtp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Smtp")
            .field("server", &self.server)
            .field("from", &self.from.to_string())
            .finish_non_exhaustive()
    }
}

impl Smtp {
    /// The email channel the variables `var` reads configure ([`crate::Options::env`]): `None`
    /// when `DUET_SMTP_URL` is not set; an error naming the variable when one is wrong.
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Smtp>, String> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let (url, from, ca) = (
            get("DUET_SMTP_URL"),
            get("DUET_SMTP_FROM"),
            get("DUET_SMTP_CA_FILE"),
        );
        let Some(url) = url else {
            return match (from, ca) {
                (None, None) => Ok(None),
                _ => Err(
                    "DUET_SMTP_FROM or DUET_SMTP_CA_FILE is set but DUET_SMTP_URL is not: \
                          set the SMTP server's URL (smtp://user:pass@host:587?tls=required)"
                        .to_owned(),
                ),
            };
        };
        let from = from.ok_or(
            "DUET_SMTP_URL is set but DUET_SMTP_FROM is not: set the address emails come from",
        )?;
        let from: Mailbox = from
            .parse()
            .map_err(|e| format!("DUET_SMTP_FROM `{from}` is not an email address: {e}"))?;
        // The URL is never echoed: it may hold a password.
        let parsed =
            url::Url::parse(&url).map_err(|e| format!("DUET_SMTP_URL is not a URL: {e}"))?;
        let tls = match (
            parsed.scheme(),
            parsed
                .query_pairs()
                .find(|(k, _)| k == "tls")
                .map(|(_, v)| v.into_owned())
                .as_deref(),
        ) {
            ("smtps", _) => TlsMode::Wrapper,
            ("smtp", None) => TlsMode::None,
            ("smtp", Some("required")) => TlsMode::Required,
            ("smtp", Some("opportunistic")) => TlsMode::Opportunistic,
            (scheme, tls) => {
                return Err(format!(
                    "DUET_SMTP_URL: `{scheme}://` with tls={} is not supported: use \
                     smtp://…?tls=required (STARTTLS), smtps:// (implicit TLS) or smtp:// (none)",
                    tls.unwrap_or("(none)")
                ));
            }
        };
        if parsed.password().is_some() && matches!(tls, TlsMode::None | TlsMode::Opportunistic) {
            return Err(
                "DUET_SMTP_URL has a password but does not require TLS: use \
                        ?tls=required or smtps:// so it is never sent in the clear"
                    .to_owned(),
            );
        }
        let host = parsed
            .host_str()
            .ok_or("DUET_SMTP_URL names no host")?
            .to_owned();
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(&url)
            .map_err(|e| format!("DUET_SMTP_URL: {e}"))?;
        if let Some(path) = ca {
            let params = trusting(&host, &path)?;
            builder = builder.tls(match tls {
                TlsMode::Required => Tls::Required(params),
                TlsMode::Opportunistic => Tls::Opportunistic(params),
                TlsMode::Wrapper => Tls::Wrapper(params),
                TlsMode::None => {
                    return Err("DUET_SMTP_CA_FILE is set but DUET_SMTP_URL uses no TLS".to_owned());
                }
            });
        }
        let transport = builder.timeout(Some(IO_TIMEOUT)).build();
        let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
        Ok(Some(Smtp {
            transport,
            from,
            server: format!("{}://{host}{port}", parsed.scheme()),
        }))
    }
}

/// TLS parameters for `host` that trust the system's roots and the PEM certificates in the
/// file at `path`.
fn trusting(host: &str, path: &str) -> Result<TlsParameters, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("DUET_SMTP_CA_FILE `{path}` cannot be read: {e}"))?;
    if !pem
        .windows(b"-----BEGIN CERTIFICATE-----".len())
        .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    {
        return Err(format!(
            "DUET_SMTP_CA_FILE `{path}` holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ));
    }
    let cert =
        Certificate::from_pem(&pem).map_err(|e| format!("DUET_SMTP_CA_FILE `{path}`: {e}"))?;
    let domain = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    TlsParameters::builder(domain)
        .add_root_certificate(cert)
        .build_rustls()
        .map_err(|e| format!("DUET_SMTP_CA_FILE `{path}`: {e}"))
}

/// The `Message-ID` of delivery key `key`: `<{key}@duet>`, every byte outside RFC 5322's
/// `atext` and `.` written `=XX`, so one delivery's attempts share one id and a receiver can
/// drop repeats.
fn message_id(key: &str) -> String {
    let mut id = String::with_capacity(key.len() + 7);
    id.push('<');
    for b in key.bytes() {
        let atext = b.is_ascii_alphanumeric() || b"!#$%&'*+-/?^_`{|}~.".contains(&b);
        if atext {
            id.push(char::from(b));
        } else {
            id.push_str(&format!("={b:02X}"));
        }
    }
    id.push_str("@duet>");
    id
}

/// Sends email delivery `d` (its body as [`render`] wrote it) through `smtp`. `Ok` carries
/// what the server answered (JSON `{messageId, reply}`); an error's text starts with
/// [`PERMANENT`] when retrying cannot mend it (a `5xx` reply, a body that is not an email).
pub(crate) async fn send(smtp: &Smtp, d: &Delivery) -> Result<Option<String>, String> {
    let email: render::Email = serde_json::from_str(&d.body).map_err(|e| {
        format!(
            "{PERMANENT} delivery {}: the stored email is not {{to, subject, text, html}}: {e}",
            d.id
        )
    })?;
    let to: Mailbox = email
        .to
        .parse()
        .map_err(|e| format!("{PERMANENT} `{}` is not an email address: {e}", email.to))?;
    let id = message_id(&d.idempotency_key);
    let message = Message::builder()
        .from(smtp.from.clone())
        .to(to)
        .subject(email.subject)
        .message_id(Some(id.clone()))
        .raw_header(HeaderValue::new(
            HeaderName::new_from_ascii_str("X-Duet-Delivery"),
            d.id.to_string(),
        ))
        // RFC 3834: sent by a program, so no auto-reply answers it.
        .raw_header(HeaderValue::new(
            HeaderName::new_from_ascii_str("Auto-Submitted"),
            "auto-generated".to_owned(),
        ))
        .multipart(MultiPart::alternative_plain_html(email.text, email.html))
        .map_err(|e| format!("{PERMANENT} the email cannot be built: {e}"))?;
    let server = &smtp.server;
    match tokio::time::timeout(SEND_TIMEOUT, smtp.transport.send(message)).await {
        Err(_) => Err(format!(
            "{server}: not sent within {} s",
            SEND_TIMEOUT.as_secs()
        )),
        Ok(Err(e)) if e.is_permanent() => Err(format!("{PERMANENT} {server}: {e}")),
        Ok(Err(e)) => Err(format!("{server}: {e}")),
        Ok(Ok(reply)) => {
            let lines: Vec<&str> = reply.message().collect();
            let reply = format!("{} {}", reply.code(), lines.join(" "));
            Ok(Some(
                serde_json::json!({ "messageId": id, "reply": reply.trim_end() }).to_string(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Smtp, message_id};

    fn smtp(vars: &[(&str, &str)]) -> Result<Option<Smtp>, String> {
        Smtp::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn message_ids_come_from_the_delivery_key() {
        assert_eq!(message_id("n12-0"), "<n12-0@duet>");
        assert_eq!(message_id("a2a_push:7 x"), "<a2a_push=3A7=20x@duet>");
    }

    #[test]
    fn the_environment_configures_the_channel_or_says_what_is_wrong() {
        assert!(matches!(smtp(&[]), Ok(None)));
        let err = |vars: &[(&str, &str)]| smtp(vars).err().unwrap_or_default();
        assert!(err(&[("DUET_SMTP_FROM", "duet@example.com")]).contains("DUET_SMTP_URL is not"));
        assert!(
            err(&[("DUET_SMTP_URL", "smtp://127.0.0.1:2525?tls=required")])
                .contains("DUET_SMTP_FROM is not")
        );
        let from = ("DUET_SMTP_FROM", "duet@example.com");
        assert!(
            err(&[("DUET_SMTP_URL", "smtp://127.0.0.1?tls=maybe"), from]).contains("tls=maybe")
        );
        let clear = err(&[("DUET_SMTP_URL", "smtp://u:secret@127.0.0.1:2525"), from]);
        assert!(clear.contains("does not require TLS"), "{clear}");
        assert!(!clear.contains("secret"), "{clear}");
        assert!(
            err(&[
                ("DUET_SMTP_URL", "smtp://127.0.0.1"),
                ("DUET_SMTP_FROM", "not an address")
            ])
            .contains("not an email address")
        );
        let missing = err(&[
            ("DUET_SMTP_URL", "smtps://127.0.0.1"),
            from,
            ("DUET_SMTP_CA_FILE", "/no/such/ca.pem"),
        ]);
        assert!(
            missing.contains("/no/such/ca.pem` cannot be read"),
            "{missing}"
        );
        let ok = smtp(&[
            (
                "DUET_SMTP_URL",
                "smtp://u:secret@127.0.0.1:2525?tls=required",
            ),
            from,
        ]);
        let debug = format!("{ok:?}");
        assert!(debug.contains("smtp://127.0.0.1:2525"), "{debug}");
        assert!(!debug.contains("secret"), "{debug}");
    }
}
