//! A message's `data` column, both ways: its usage, provider data, images, attachments and
//! sender's id, written as one JSON object (only the members it has) and read straight into
//! their types. A `data` the typed reading refuses (a member of another shape, a repeated one,
//! not an object) is read as it always was, through a JSON tree: the same message either way.

use duet_runtime::{AttachmentRef, ImageRef, Message, Usage};
use serde::{Deserialize, Deserializer, Serialize};
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

/// `data` as read back.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Read {
    pub usage: Option<Usage>,
    pub provider_data: Option<Value>,
    pub images: Vec<ImageRef>,
    pub attachments: Vec<AttachmentRef>,
    pub message_id: Option<String>,
}

/// The typed reading: every member of the shape it is written in.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Typed {
    usage: Option<Usage>,
    #[serde(rename = "providerData", deserialize_with = "present")]
    provider_data: Option<Value>,
    images: Vec<ImageRef>,
    attachments: Vec<AttachmentRef>,
    #[serde(rename = "messageId")]
    message_id: Option<String>,
}

/// A member that is there, `null` included (`Option<Value>` alone reads `null` as absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Why `data` cannot be read: which member, and the text.
#[derive(Debug, PartialEq)]
pub(crate) struct Unreadable {
    pub what: &'static str,
    pub text: String,
}

/// Reads `data`. The members are read as they always were: a `usage` or `messageId` of
/// another shape reads as none, `images` or `attachments` of another shape (or a `data` that
/// is not JSON) is an error.
pub(crate) fn read(data: &str) -> Result<Read, Unreadable> {
    // An object only: serde would also read a struct from an array, by position.
    if data.trim_start().starts_with('{')
        && let Ok(t) = serde_json::from_str::<Typed>(data)
    {
        return Ok(Read {
            usage: t.usage,
            provider_data: t.provider_data,
            images: t.images,
            attachments: t.attachments,
            message_id: t.message_id,
        });
    }
    read_tree(data)
}

/// [`read`] through a JSON tree: what every `data` the typed reading refuses is read by.
fn read_tree(data: &str) -> Result<Read, Unreadable> {
    let unreadable = |what, text: String| Unreadable { what, text };
    let mut tree: Value =
        serde_json::from_str(data).map_err(|_| unreadable("message data", data.to_owned()))?;
    let images = match tree.get("images") {
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|_| unreadable("message images", v.to_string()))?,
        None => Vec::new(),
    };
    let attachments = match tree.get("attachments") {
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|_| unreadable("message attachments", v.to_string()))?,
        None => Vec::new(),
    };
    Ok(Read {
        usage: tree
            .get("usage")
            .and_then(|u| serde_json::from_value(u.clone()).ok()),
        message_id: tree
            .get("messageId")
            .and_then(Value::as_str)
            .map(str::to_owned),
        images,
        attachments,
        provider_data: tree.get_mut("providerData").map(Value::take),
    })
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
            let read = read(&text).expect("reads");
            assert_eq!(read, read_tree(&text).expect("reads as a tree"), "{text}");
            assert_eq!(
                (
                    read.usage,
                    read.provider_data,
                    read.images,
                    read.attachments,
                    read.message_id
                ),
                (
                    m.usage,
                    m.provider_data,
                    m.images,
                    m.attachments,
                    m.message_id
                ),
                "{text}"
            );
        }
    }

    /// Data the typed reading refuses (or reads) is read as the JSON tree reads it, error or not.
    #[test]
    fn any_data_reads_as_the_tree_reads_it() {
        let cases = [
            r#"{"usage": null}"#,
            r#"{"usage": {"inputTokens": "many"}}"#,
            r#"{"usage": {"inputTokens": 1, "outputTokens": 2, "extra": true}}"#,
            r#"{"messageId": 7}"#,
            r#"{"messageId": null}"#,
            r#"{"messageId": "a", "messageId": "b"}"#,
            r#"{"providerData": null, "other": [1]}"#,
            r#"{"images": null}"#,
            r#"{"images": [{"mimeType": "image/png"}]}"#,
            r#"{"attachments": {"path": "x"}}"#,
            r#"{"attachments": []}"#,
            r#"[]"#,
            r#"[{"inputTokens": 1, "outputTokens": 2}, null, [], [], "m"]"#,
            r#"5"#,
            r#"{}"#,
            r#"{"usage": {"inputTokens": 1, "outputTokens": 2}} trailing"#,
            "",
        ];
        for text in cases {
            assert_eq!(read(text), read_tree(text), "{text}");
        }
        assert_eq!(
            read(r#"{"images": null}"#).map_err(|e| e.what),
            Err("message images")
        );
        assert_eq!(read("{").map_err(|e| e.what), Err("message data"));
    }
}
