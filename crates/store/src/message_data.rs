//! A message's `data` column, both ways: its usage, provider data, images, attachments and
//! sender's id, written straight from their types as one JSON object (only the members it
//! has), and read back through a JSON tree.

use duet_runtime::{AttachmentRef, ImageRef, Message, Usage};
use serde::Serialize;
use serde_json::Value;

/// The members of `data`, in the order they are written.
#[derive(Serialize)]
struct Written<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    #[serde(rename = "providerData", skip_serializing_if = "Option::is_none")]
    provider_data: Option<&'a Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    images: &'a [ImageRef],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    attachments: &'a [AttachmentRef],
    #[serde(rename = "messageId", skip_serializing_if = "Option::is_none")]
    message_id: Option<&'a str>,
}

/// What `m` keeps in `data`; `None` when it has none of it.
pub(crate) fn write(m: &Message) -> Result<Option<String>, serde_json::Error> {
    if m.usage.is_none()
        && m.provider_data.is_none()
        && m.images.is_empty()
        && m.attachments.is_empty()
        && m.message_id.is_none()
    {
        return Ok(None);
    }
    serde_json::to_string(&Written {
        usage: m.usage.as_ref(),
        provider_data: m.provider_data.as_ref(),
        images: &m.images,
        attachments: &m.attachments,
        message_id: m.message_id.as_deref(),
    })
    .map(Some)
}

/// `data` as read back: its JSON tree, each member read out of it where the row's other
/// columns are (so which of a corrupt row's faults is reported stays as it was).
#[derive(Debug)]
pub(crate) struct Read(Option<Value>);

/// Why `data` cannot be read: which member, and the text.
#[derive(Debug, PartialEq)]
pub(crate) struct Unreadable {
    pub what: &'static str,
    pub text: String,
}

/// Reads `data` (none: the message has none of it); an error when it is not JSON. It is read as
/// a tree, not straight into its types: reading a type skips a member it does not know by its
/// syntax alone, and a `data` whose skipped member a tree refuses (a lone surrogate, a number
/// out of range) would have read.
pub(crate) fn read(data: Option<&str>) -> Result<Read, Unreadable> {
    data.map(|text| {
        serde_json::from_str(text).map_err(|_| Unreadable {
            what: "message data",
            text: text.to_owned(),
        })
    })
    .transpose()
    .map(Read)
}

impl Read {
    fn member(&self, name: &str) -> Option<&Value> {
        self.0.as_ref().and_then(|tree| tree.get(name))
    }

    /// Its usage; none when it has none or one of another shape.
    pub(crate) fn usage(&self) -> Option<Usage> {
        self.member("usage")
            .and_then(|u| serde_json::from_value(u.clone()).ok())
    }

    pub(crate) fn images(&self) -> Result<Vec<ImageRef>, Unreadable> {
        self.list("images", "message images")
    }

    pub(crate) fn attachments(&self) -> Result<Vec<AttachmentRef>, Unreadable> {
        self.list("attachments", "message attachments")
    }

    fn list<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        what: &'static str,
    ) -> Result<Vec<T>, Unreadable> {
        match self.member(name) {
            Some(v) => serde_json::from_value(v.clone()).map_err(|_| Unreadable {
                what,
                text: v.to_string(),
            }),
            None => Ok(Vec::new()),
        }
    }

    /// Its sender's id; none when it has none or one that is not a string.
    pub(crate) fn message_id(&self) -> Option<String> {
        self.member("messageId")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    /// Its provider data, taken out of it.
    pub(crate) fn provider_data(&mut self) -> Option<Value> {
        self.0
            .as_mut()
            .and_then(|tree| tree.get_mut("providerData"))
            .map(Value::take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message() -> Message {
        Message::text(3, 1, duet_runtime::Role::Assistant, None, "hi".into(), 0)
    }

    /// What `data` was written as before it was written straight: a JSON tree of the members
    /// the message has, in this order.
    fn as_tree(m: &Message) -> Option<String> {
        let mut data = serde_json::Map::new();
        if let Some(u) = &m.usage {
            data.insert("usage".into(), json!(u));
        }
        if let Some(p) = &m.provider_data {
            data.insert("providerData".into(), p.clone());
        }
        if !m.images.is_empty() {
            data.insert("images".into(), json!(m.images));
        }
        if !m.attachments.is_empty() {
            data.insert("attachments".into(), json!(m.attachments));
        }
        if let Some(id) = &m.message_id {
            data.insert("messageId".into(), json!(id));
        }
        (!data.is_empty()).then(|| Value::Object(data).to_string())
    }

    fn messages() -> Vec<Message> {
        let usage = Usage {
            input_tokens: 12,
            output_tokens: 3,
            cached_tokens: 0,
            reasoning_tokens: 1,
        };
        let image = ImageRef {
            mime_type: "image/png".into(),
            data: "iVBOR\"w0\\n".into(),
        };
        let file = AttachmentRef {
            path: "/in/a b.pdf".into(),
            name: "a b.pdf".into(),
            mime_type: "application/pdf".into(),
            size: 7,
            width: None,
            height: Some(4),
            description: Some("the \"plan\"".into()),
        };
        let with = |f: &dyn Fn(&mut Message)| {
            let mut m = message();
            f(&mut m);
            m
        };
        vec![
            message(),
            with(&|m| m.usage = Some(usage)),
            with(&|m| m.provider_data = Some(json!({"z": [1, {"b": null, "a": "é"}], "a": 1.5}))),
            with(&|m| m.provider_data = Some(Value::Null)),
            with(&|m| m.images = vec![image.clone(), image.clone()]),
            with(&|m| m.attachments = vec![file.clone()]),
            with(&|m| m.message_id = Some("m-1\u{7f}\"".into())),
            with(&|m| {
                m.usage = Some(usage);
                m.provider_data = Some(json!("opaque"));
                m.images = vec![image.clone()];
                m.attachments = vec![file.clone()];
                m.message_id = Some("m-2".into());
            }),
        ]
    }

    #[test]
    fn data_is_written_as_its_json_tree_was() {
        for m in messages() {
            assert_eq!(write(&m).expect("writes"), as_tree(&m), "{m:?}");
        }
    }

    #[test]
    fn what_is_written_reads_back() {
        for m in messages() {
            let Some(text) = write(&m).expect("writes") else {
                continue;
            };
            let mut read = read(Some(&text)).expect("reads");
            assert_eq!(
                (
                    read.usage(),
                    read.images().expect("images"),
                    read.attachments().expect("attachments"),
                    read.message_id(),
                    read.provider_data()
                ),
                (
                    m.usage,
                    m.images,
                    m.attachments,
                    m.message_id,
                    m.provider_data
                ),
                "{text}"
            );
        }
    }

    /// A member of another shape: `usage` and `messageId` read as none, `images` and
    /// `attachments` are corrupt, and so is a `data` that is not JSON.
    #[test]
    fn odd_data_reads_as_it_always_did() {
        let read_ok = |text: &str| read(Some(text)).expect("JSON");
        assert_eq!(
            read_ok(r#"{"usage": {"inputTokens": "many"}}"#).usage(),
            None
        );
        assert_eq!(read_ok(r#"{"messageId": 7}"#).message_id(), None);
        assert_eq!(
            read_ok(r#"{"providerData": null}"#).provider_data(),
            Some(Value::Null)
        );
        assert_eq!(read_ok("[]").images(), Ok(vec![]));
        assert_eq!(
            read_ok(r#"{"images": null}"#).images().map_err(|e| e.what),
            Err("message images")
        );
        assert_eq!(
            read_ok(r#"{"attachments": {"path": "x"}}"#)
                .attachments()
                .map_err(|e| e.what),
            Err("message attachments")
        );
        for bad in ["{", r#"{"x": "\ud800"}"#, r#"{"x": 1e400}"#] {
            assert_eq!(
                read(Some(bad)).map(|_| ()).map_err(|e| e.what),
                Err("message data"),
                "{bad}"
            );
        }
        assert!(read(None).expect("none").usage().is_none());
    }
}
