//! The tagged JSON `describe.js` makes of a default export, read into duet-spec's [`JsValue`].

use duet_spec::{EvalErrorKind, Evaluated, JsValue, ProviderValue};
use serde_json::Value;

use crate::failure::error;

/// Reads what `__duetDescribe` returned; `imports` are the helpers the file loaded.
pub(crate) fn read(text: &str, imports: Vec<String>) -> Result<Evaluated, duet_spec::EvalError> {
    let json: Value = serde_json::from_str(text).map_err(|e| {
        error(
            EvalErrorKind::Thrown,
            format!("the definition's value could not be read: {e}"),
        )
    })?;
    if let Some(bad) = json.get("schemaError").filter(|v| !v.is_null()) {
        let path = bad.get("path").and_then(Value::as_str).unwrap_or("");
        let message = bad.get("message").and_then(Value::as_str).unwrap_or("");
        let mut e = error(
            EvalErrorKind::Schema,
            format!("`{path}`: zod cannot express this schema as JSON Schema: {message}"),
        );
        e.path = Some(path.to_owned());
        e.hint = Some("models are sent JSON Schema: describe the input (a date, a bigint or a custom type has none)".into());
        return Err(e);
    }
    Ok(Evaluated {
        define: json
            .get("define")
            .and_then(Value::as_str)
            .map(str::to_owned),
        value: value(json.get("value").unwrap_or(&Value::Null)),
        imports,
    })
}

fn value(tagged: &Value) -> JsValue {
    let v = tagged.get("v");
    match tagged.get("t").and_then(Value::as_str).unwrap_or("") {
        "undef" => JsValue::Undefined,
        "null" => JsValue::Null,
        "bool" => JsValue::Bool(v.and_then(Value::as_bool).unwrap_or(false)),
        "num" => JsValue::Number(v.and_then(Value::as_f64).unwrap_or(0.0)),
        "str" => JsValue::String(v.and_then(Value::as_str).unwrap_or("").to_owned()),
        "fn" => JsValue::Function,
        "schema" => JsValue::Schema(v.cloned().unwrap_or(Value::Null)),
        "arr" => JsValue::Array(
            v.and_then(Value::as_array)
                .map(|items| items.iter().map(value).collect())
                .unwrap_or_default(),
        ),
        "obj" => JsValue::Object(entries(v)),
        "provider" => JsValue::Provider(ProviderValue {
            provider_type: tagged
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            options: tagged.get("options").map(|o| match value(o) {
                JsValue::Object(entries) => entries,
                _ => Vec::new(),
            }),
        }),
        _ => JsValue::Other(v.and_then(Value::as_str).unwrap_or("a value").to_owned()),
    }
}

fn entries(v: Option<&Value>) -> Vec<(String, JsValue)> {
    v.and_then(Value::as_array)
        .map(|pairs| {
            pairs
                .iter()
                .filter_map(|p| {
                    let pair = p.as_array()?;
                    Some((pair.first()?.as_str()?.to_owned(), value(pair.get(1)?)))
                })
                .collect()
        })
        .unwrap_or_default()
}
