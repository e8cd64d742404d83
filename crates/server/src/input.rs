//! What every inbound value must be, whichever door brings it — REST, `invoke` and the control
//! plane, the inbox's forms, A2A: text the database can hold, keys and message ids of 1–512
//! bytes without control characters, images that are images. One check per kind of value,
//! each naming the field it refused in a [`Fault`]; each door says a fault in its own shape (a
//! 400 problem, a JSON-RPC `-32602`, a rejected command). The checks run before anything is read
//! or written, so refused input stores nothing and is refused alike on SQLite and Postgres
//! (whose `text` cannot hold U+0000, and whose index entries are bounded: a 2.7 KB message id
//! used to be a retryable 503 there and a success on SQLite).

use base64::Engine;
use duet_a2a::A2aError;
use duet_runtime::ImageRef;

use crate::problem::Problem;

/// The longest thread key, context id, message id or `Idempotency-Key` accepted, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 512;

/// What kind of value a [`Fault`] is about: each has its stable problem code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Text the database cannot hold (`invalid_text`, 400).
    Text,
    /// A message with no text (`empty_text`, 422).
    EmptyText,
    /// A thread key, a session, a context id (`invalid_key`, 400).
    Key,
    /// A message id in a body (`invalid_message_id`, 400).
    MessageId,
    /// The `Idempotency-Key` header (`invalid_idempotency_key`, 400).
    IdempotencyKey,
    /// An image's media type or data (`invalid_image`, 422).
    Image,
    /// A query parameter a listing filters by (`invalid_query`, 400).
    Query,
    /// An attachment's path: not a path a thread file may have, too many, or (said by the
    /// runtime) no file of the thread (`invalid_attachment`, 422).
    Attachment,
}

/// One refused value: which field, what kind of value, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    /// The field as the door names it (`text`, `images[0].data`, `message.contextId`).
    pub field: String,
    /// What kind of value it is.
    pub kind: Kind,
    /// Why, for people (`contains U+0000 (NUL), which duet cannot store`).
    pub why: String,
}

impl Fault {
    fn new(field: &str, kind: Kind, why: impl Into<String>) -> Fault {
        Fault {
            field: field.to_owned(),
            kind,
            why: why.into(),
        }
    }

    /// The sentence a person reads: "`text` contains U+0000 …".
    pub(crate) fn sentence(&self) -> String {
        format!("`{}` {}", self.field, self.why)
    }

    /// As a JSON-RPC / A2A error: `-32602` (invalid params) naming the field.
    pub(crate) fn into_a2a(self) -> A2aError {
        A2aError::invalid_params(
            format!("Invalid params: {}", self.sentence()),
            vec![(self.field, self.why)],
        )
    }
}

impl From<Fault> for Problem {
    fn from(f: Fault) -> Problem {
        let detail = f.sentence();
        let problem = match f.kind {
            Kind::Text => Problem::bad_request("invalid_text", detail),
            Kind::EmptyText => Problem::unprocessable("empty_text", detail),
            Kind::Key => Problem::bad_request("invalid_key", detail),
            Kind::MessageId => Problem::bad_request("invalid_message_id", detail),
            Kind::IdempotencyKey => Problem::bad_request("invalid_idempotency_key", detail),
            Kind::Image => Problem::unprocessable("invalid_image", detail),
            Kind::Query => Problem::bad_request("invalid_query", detail),
            Kind::Attachment => Problem::unprocessable("invalid_attachment", detail),
        };
        problem.with("field", f.field.into())
    }
}

/// Text the database can hold: no U+0000 (Postgres `text` cannot store it; refused, never
/// stripped, so what is stored is what was sent).
pub(crate) fn text(field: &str, text: &str) -> Result<(), Fault> {
    match text.find('\0') {
        Some(at) => Err(Fault::new(
            field,
            Kind::Text,
            format!("contains U+0000 (NUL) at byte {at}, which duet cannot store"),
        )),
        None => Ok(()),
    }
}

/// A message's text: not blank, and [`text`].
pub(crate) fn message_text(field: &str, s: &str) -> Result<(), Fault> {
    if s.trim().is_empty() {
        return Err(Fault::new(field, Kind::EmptyText, "is empty"));
    }
    text(field, s)
}

/// What is wrong with `value` as a key or an id, if anything.
fn id_fault(value: &str) -> Option<&'static str> {
    if value.trim().is_empty() {
        Some("is empty")
    } else if value.chars().any(char::is_control) {
        Some("contains a control character")
    } else if value.len() > MAX_KEY_BYTES {
        Some("is longer than 512 bytes")
    } else {
        None
    }
}

/// A thread key, session or context id: 1–512 bytes, no control characters, not blank.
pub(crate) fn key(field: &str, value: &str) -> Result<(), Fault> {
    id(Kind::Key, field, value)
}

/// An id of `kind` ([`Kind::MessageId`], [`Kind::IdempotencyKey`], [`Kind::Key`]) under the
/// rules of [`key`].
pub(crate) fn id(kind: Kind, field: &str, value: &str) -> Result<(), Fault> {
    match id_fault(value) {
        Some(why) => Err(Fault::new(field, kind, why)),
        None => Ok(()),
    }
}

/// A value a listing filters by (an agent's name, a parent's key): no control characters, at
/// most 512 bytes (an empty one matches nothing, as before).
pub(crate) fn filter(field: &str, value: &str) -> Result<(), Fault> {
    match id_fault(value) {
        Some("is empty") | None => Ok(()),
        Some(why) => Err(Fault::new(field, Kind::Query, why)),
    }
}

/// An image: a media type `image/SUBTYPE` (RFC 6838's name characters), and data in standard
/// base64 (RFC 4648 §4, padded), which is what the model APIs take. The fields are named as the
/// door names them (`images[0].mimeType`, `message.parts[2].raw`).
pub(crate) fn image(
    (mime_field, data_field): (&str, &str),
    mime_type: &str,
    data: &str,
) -> Result<(), Fault> {
    let subtype = mime_type
        .get(..6)
        .filter(|t| t.eq_ignore_ascii_case("image/"))
        .and_then(|_| mime_type.get(6..));
    let name_char = |c: char| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c);
    if !subtype.is_some_and(|s| (1..=127).contains(&s.len()) && s.chars().all(name_char)) {
        let shown: String = mime_type.chars().take(64).collect();
        return Err(Fault::new(
            mime_field,
            Kind::Image,
            format!(
                "must be an image's media type (image/…), not `{}`",
                shown.escape_debug()
            ),
        ));
    }
    if data.is_empty() {
        return Err(Fault::new(data_field, Kind::Image, "is empty"));
    }
    if let Err(e) = base64::engine::general_purpose::STANDARD.decode(data) {
        return Err(Fault::new(
            data_field,
            Kind::Image,
            format!("is not base64 (RFC 4648, padded): {e}"),
        ));
    }
    Ok(())
}

/// Every image of `images` ([`image`]), named `{field}[i].mimeType` and `{field}[i].data`.
pub(crate) fn images(field: &str, images: &[ImageRef]) -> Result<(), Fault> {
    for (i, im) in images.iter().enumerate() {
        let at = format!("{field}[{i}]");
        image(
            (&format!("{at}.mimeType"), &format!("{at}.data")),
            &im.mime_type,
            &im.data,
        )?;
    }
    Ok(())
}

/// The most attachments one message may name.
pub(crate) const MAX_ATTACHMENTS: usize = 64;

/// Attachments a message names: at most [`MAX_ATTACHMENTS`] paths, each one a thread file may
/// have (whether the thread has it is the runtime's to say).
pub(crate) fn attachments(field: &str, paths: &[String]) -> Result<(), Fault> {
    if paths.len() > MAX_ATTACHMENTS {
        return Err(Fault::new(
            field,
            Kind::Attachment,
            format!("names {} files: at most {MAX_ATTACHMENTS}", paths.len()),
        ));
    }
    for (i, p) in paths.iter().enumerate() {
        if let Err(e) = duet_runtime::files::path::normalize(p) {
            return Err(Fault::new(
                &format!("{field}[{i}]"),
                Kind::Attachment,
                e.to_string(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_value_has_its_rules() {
        assert!(text("text", "fine\ttext\nwith \u{7} a bell").is_ok());
        let nul = text("text", "a\0b").expect_err("NUL");
        assert_eq!((nul.kind, nul.field.as_str()), (Kind::Text, "text"));
        assert_eq!(
            message_text("text", " \n").map_err(|f| f.kind),
            Err(Kind::EmptyText)
        );
        for bad in ["", "  ", "a\u{0}b", "a\u{7}b", "a\u{85}b", &"k".repeat(513)] {
            assert_eq!(
                key("key", bad).map_err(|f| f.kind),
                Err(Kind::Key),
                "{bad:?}"
            );
        }
        assert!(key("key", &"k".repeat(512)).is_ok());
        assert!(key("key", "alice/ticket-42 ünïcode").is_ok());
        assert_eq!(
            id(Kind::MessageId, "messageId", &"m".repeat(2_800)).map_err(|f| f.kind),
            Err(Kind::MessageId)
        );
    }

    #[test]
    fn an_image_is_an_image_media_type_with_base64_data() {
        let at = ("images[0].mimeType", "images[0].data");
        assert!(image(at, "image/png", "iVBORw0KGgo=").is_ok());
        assert!(image(at, "IMAGE/svg+xml", "PHN2Zy8+").is_ok());
        for mime in [
            "text/html",
            "image/",
            "image/png\0",
            "image/png; x=1",
            "imagepng",
        ] {
            let f = image(at, mime, "AAAA").expect_err(mime);
            assert_eq!(f.field, "images[0].mimeType", "{mime}");
        }
        let at = ("images[1].mimeType", "images[1].data");
        for data in ["", "not base64!", "AAA", "AA\0A", "AAAA\n", "-_-_"] {
            let f = image(at, "image/png", data).expect_err(data);
            assert_eq!(
                (f.field.as_str(), f.kind),
                ("images[1].data", Kind::Image),
                "{data}"
            );
        }
    }

    #[test]
    fn a_fault_reads_as_a_problem_and_as_an_a2a_error() {
        let f = text("message.parts[0].text", "\0").expect_err("NUL");
        let p = Problem::from(f.clone());
        assert_eq!((p.status.as_u16(), p.code), (400, "invalid_text"));
        assert_eq!(p.extra["field"], "message.parts[0].text");
        assert_eq!(f.into_a2a().code(), -32602);
    }
}
