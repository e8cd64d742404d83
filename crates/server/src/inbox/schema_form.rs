//! The argument editor of an `edit` decision: form fields generated from a tool's `args` JSON
//! Schema, prefilled with the proposed arguments (or, after a refused edit, with what the person
//! typed), and the arguments read back from the posted form. Objects become fieldsets, strings
//! text inputs, numbers and integers number inputs, booleans checkboxes, enums selects, arrays of
//! scalars a textarea with one item per line; anything else (`oneOf`, `$ref`, arrays of objects,
//! an object with keys its schema does not name …) is a JSON textarea for that subtree. The
//! fields carry no constraint of the schema (`minimum`, `pattern` …): the server checks the
//! arguments, and a refusal is shown at the field its JSON pointer names.
//!
//! A field's name is `arg:` and its JSON pointer; the plan is made from the schema and the
//! proposed arguments alike when the page is drawn and when the form is read, so both agree.

use maud::{Markup, html};
use serde_json::{Map, Number, Value};

use super::form::Form;

/// How deep objects nest before the rest is a JSON textarea.
const MAX_DEPTH: usize = 8;

/// The prefix of every argument field's name.
const PREFIX: &str = "arg:";

/// What an array item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scalar {
    Text,
    Number { integer: bool },
}

/// How a field is edited.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    Object(Vec<Field>),
    Text { long: bool },
    Number { integer: bool },
    Bool,
    Enum(Vec<Value>),
    List(Scalar),
    Json,
}

/// One field of the editor: an argument (or an object's property) at `pointer`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Field {
    /// Its JSON pointer in the arguments (`""`: the arguments themselves).
    pub pointer: String,
    /// The property's name (`arguments` for the root).
    pub name: String,
    /// The schema's `title`, if any.
    pub title: Option<String>,
    /// The schema's `description`, if any.
    pub description: Option<String>,
    /// Whether the parent's `required` names it.
    pub required: bool,
    /// Whether the proposed arguments have it.
    pub present: bool,
    pub kind: Kind,
}

impl Field {
    /// The form field's name.
    pub(crate) fn input_name(&self) -> String {
        format!("{PREFIX}{}", self.pointer)
    }

    fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }
}

/// The editor for arguments `proposed` under schema `args` (`None`: the tool takes no
/// arguments, so an empty object).
pub(crate) fn plan(args: Option<&Value>, proposed: &Value) -> Field {
    let empty = serde_json::json!({"type": "object", "properties": {}});
    let schema = args.unwrap_or(&empty);
    let mut root = field(schema, Some(proposed), String::new(), "arguments", true, 0);
    if !matches!(root.kind, Kind::Object(_)) {
        root.kind = Kind::Json;
    }
    root
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn str_of<'a>(schema: &'a Value, key: &str) -> Option<&'a str> {
    schema.get(key).and_then(Value::as_str)
}

fn field(
    schema: &Value,
    value: Option<&Value>,
    pointer: String,
    name: &str,
    required: bool,
    depth: usize,
) -> Field {
    let kind = kind(schema, value, &pointer, depth);
    Field {
        name: name.to_owned(),
        title: str_of(schema, "title").map(str::to_owned),
        description: str_of(schema, "description").map(str::to_owned),
        required,
        present: value.is_some(),
        pointer,
        kind,
    }
}

fn scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// How the value at `pointer` (`value`, if the arguments have it) under `schema` is edited.
fn kind(schema: &Value, value: Option<&Value>, pointer: &str, depth: usize) -> Kind {
    let fits = |ok: fn(&Value) -> bool| value.is_none_or(ok);
    let composed = ["oneOf", "anyOf", "allOf", "$ref", "not", "if"]
        .iter()
        .any(|k| schema.get(k).is_some());
    if !schema.is_object() || composed || depth > MAX_DEPTH {
        return Kind::Json;
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        let known = value.is_none_or(|v| options.contains(v));
        return if options.iter().all(scalar) && known {
            Kind::Enum(options.clone())
        } else {
            Kind::Json
        };
    }
    match str_of(schema, "type") {
        Some("string") if fits(Value::is_string) => Kind::Text {
            long: value
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains('\n') || s.chars().count() > 80),
        },
        Some(t @ ("number" | "integer")) if fits(Value::is_number) => Kind::Number {
            integer: t == "integer",
        },
        Some("boolean") if fits(Value::is_boolean) => Kind::Bool,
        Some("array") => list(schema, value).map_or(Kind::Json, Kind::List),
        Some("object") | None if schema.get("properties").is_some() => {
            object(schema, value, pointer, depth).unwrap_or(Kind::Json)
        }
        _ => Kind::Json,
    }
}

/// An array of scalars edited one item per line, if `schema`'s items are and `value` holds
/// only such items (none with a line break).
fn list(schema: &Value, value: Option<&Value>) -> Option<Scalar> {
    let items = schema.get("items")?;
    let item = match str_of(items, "type") {
        Some("string") => Scalar::Text,
        Some(t @ ("number" | "integer")) => Scalar::Number {
            integer: t == "integer",
        },
        _ => return None,
    };
    let ok = |v: &Value| match (item, v) {
        (Scalar::Text, Value::String(s)) => !s.contains('\n') && !s.trim().is_empty(),
        (Scalar::Number { .. }, Value::Number(_)) => true,
        _ => false,
    };
    match value {
        None => Some(item),
        Some(Value::Array(a)) if a.iter().all(ok) => Some(item),
        Some(_) => None,
    }
}

fn object(schema: &Value, value: Option<&Value>, pointer: &str, depth: usize) -> Option<Kind> {
    let properties = schema.get("properties")?.as_object()?;
    let object = match value {
        None => None,
        Some(Value::Object(o)) => Some(o),
        Some(_) => return None,
    };
    // Keys the schema does not name would be lost by fields: the whole object is JSON then.
    if object.is_some_and(|o| o.keys().any(|k| !properties.contains_key(k))) {
        return None;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Some(Kind::Object(
        properties
            .iter()
            .map(|(name, sub)| {
                field(
                    sub,
                    object.and_then(|o| o.get(name)),
                    format!("{pointer}/{}", escape(name)),
                    name,
                    required.contains(&name.as_str()),
                    depth + 1,
                )
            })
            .collect(),
    ))
}

/// A field the form could not be read at: its pointer and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub pointer: String,
    pub message: String,
}

/// The arguments the posted `form` holds under `root` ([`plan`]).
pub(crate) fn read(root: &Field, form: &Form) -> Result<Value, Invalid> {
    Ok(read_field(root, form)?.unwrap_or_else(|| Value::Object(Map::new())))
}

fn number(raw: &str, integer: bool) -> Value {
    let n = if integer {
        raw.parse::<i64>().ok().map(Number::from)
    } else {
        None
    };
    n.or_else(|| raw.parse::<f64>().ok().and_then(Number::from_f64))
        // Not a number: sent as typed, so the schema's refusal names this field.
        .map_or_else(|| Value::String(raw.to_owned()), Value::Number)
}

fn read_field(f: &Field, form: &Form) -> Result<Option<Value>, Invalid> {
    let name = f.input_name();
    let raw = form.get(&name).unwrap_or_default();
    let keep = f.required || f.present;
    let value = match &f.kind {
        Kind::Object(children) => {
            let mut map = Map::new();
            for c in children {
                if let Some(v) = read_field(c, form)? {
                    map.insert(c.name.clone(), v);
                }
            }
            (keep || !map.is_empty() || f.pointer.is_empty()).then_some(Value::Object(map))
        }
        Kind::Text { .. } => (keep || !raw.is_empty()).then(|| Value::String(raw.to_owned())),
        Kind::Number { integer } => {
            let raw = raw.trim();
            (!raw.is_empty()).then(|| number(raw, *integer))
        }
        Kind::Bool => {
            let on = raw == "true";
            (keep || on).then_some(Value::Bool(on))
        }
        Kind::Enum(_) if raw.is_empty() => None,
        Kind::Enum(_) => {
            Some(serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned())))
        }
        Kind::List(item) => {
            let items: Vec<Value> = raw
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(|l| match item {
                    Scalar::Text => Value::String(l.to_owned()),
                    Scalar::Number { integer } => number(l, *integer),
                })
                .collect();
            (keep || !items.is_empty()).then_some(Value::Array(items))
        }
        Kind::Json if raw.trim().is_empty() => None,
        Kind::Json => Some(serde_json::from_str(raw).map_err(|e| Invalid {
            pointer: f.pointer.clone(),
            message: format!("not JSON: {e}"),
        })?),
    };
    Ok(value)
}

/// The field a refusal at `pointer` is shown at: the deepest field whose pointer is `pointer`
/// or a parent of it (`/` and `""` are the arguments themselves).
pub(crate) fn owner(root: &Field, pointer: &str) -> String {
    let pointer = if pointer == "/" { "" } else { pointer };
    let mut at = root;
    'down: loop {
        if let Kind::Object(children) = &at.kind {
            for c in children {
                let under = pointer
                    .strip_prefix(c.pointer.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
                if under {
                    at = c;
                    continue 'down;
                }
            }
        }
        return at.pointer.clone();
    }
}

/// Where the fields' values come from.
pub(crate) enum Source<'a> {
    /// The proposed (or decided) arguments.
    Args(&'a Value),
    /// A form posted and refused: what the person typed.
    Posted(&'a Form),
}

impl Source<'_> {
    fn text(&self, f: &Field) -> String {
        match self {
            Source::Posted(form) => form.get(&f.input_name()).unwrap_or_default().to_owned(),
            Source::Args(args) => {
                let Some(v) = args.pointer(&f.pointer) else {
                    return String::new();
                };
                match (&f.kind, v) {
                    (Kind::Text { .. }, Value::String(s)) => s.clone(),
                    (Kind::List(_), Value::Array(items)) => items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    (Kind::Json, v) => serde_json::to_string_pretty(v).unwrap_or_default(),
                    (_, v) => v.to_string(),
                }
            }
        }
    }

    fn checked(&self, f: &Field) -> bool {
        match self {
            Source::Posted(form) => form.get(&f.input_name()) == Some("true"),
            Source::Args(args) => args.pointer(&f.pointer) == Some(&Value::Bool(true)),
        }
    }
}

/// A refusal shown at a field.
pub(crate) struct Error<'a> {
    /// The field's pointer ([`owner`]).
    pub at: &'a str,
    pub message: &'a str,
}

/// The fields of `root`, ids prefixed with `prefix`, values from `source`, `error` beside its
/// field.
pub(crate) fn render(root: &Field, prefix: &str, source: &Source, error: Option<&Error>) -> Markup {
    render_field(root, prefix, source, error)
}

fn render_field(f: &Field, id: &str, source: &Source, error: Option<&Error>) -> Markup {
    let here = error.filter(|e| e.at == f.pointer);
    let hint = format!("{id}-hint");
    let err = format!("{id}-err");
    let described: Vec<&str> = [
        f.description.as_ref().map(|_| hint.as_str()),
        here.map(|_| err.as_str()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let described = (!described.is_empty()).then(|| described.join(" "));
    let invalid = here.map(|_| "true");
    let notes = html! {
        @if let Some(d) = &f.description { p.hint id=(hint) { (d) } }
        @if let Some(e) = here { p.error.field-error id=(err) role="alert" { (e.message) } }
    };
    let label = html! {
        (f.label())
        @if f.required { span.req { " (required)" } }
    };
    let name = f.input_name();
    match &f.kind {
        Kind::Object(children) => {
            let inner = html! {
                @for (n, c) in children.iter().enumerate() {
                    (render_field(c, &format!("{id}-{n}"), source, error))
                }
            };
            if f.pointer.is_empty() {
                html! { div.fields data-pointer="" { (notes) (inner) } }
            } else {
                html! {
                    fieldset.field.obj data-pointer=(f.pointer) aria-describedby=[described] {
                        legend { (label) }
                        (notes)
                        (inner)
                    }
                }
            }
        }
        Kind::Bool => html! {
            div.field.check data-pointer=(f.pointer) {
                input type="checkbox" id=(id) name=(name) value="true" checked[source.checked(f)]
                    aria-invalid=[invalid] aria-describedby=[described];
                label for=(id) { (label) }
                (notes)
            }
        },
        Kind::Text { long } => {
            let value = source.text(f);
            let long = *long || value.contains('\n') || value.chars().count() > 80;
            html! {
                div.field data-pointer=(f.pointer) {
                    label for=(id) { (label) }
                    @if long {
                        textarea id=(id) name=(name) rows="3" aria-invalid=[invalid] aria-describedby=[described] { (value) }
                    } @else {
                        input type="text" id=(id) name=(name) value=(value) aria-invalid=[invalid] aria-describedby=[described];
                    }
                    (notes)
                }
            }
        }
        Kind::Number { integer } => html! {
            div.field data-pointer=(f.pointer) {
                label for=(id) { (label) }
                input type="number" id=(id) name=(name) value=(source.text(f))
                    step=(if *integer { "1" } else { "any" })
                    inputmode=(if *integer { "numeric" } else { "decimal" })
                    aria-invalid=[invalid] aria-describedby=[described];
                (notes)
            }
        },
        Kind::Enum(options) => {
            let chosen = source.text(f);
            html! {
                div.field data-pointer=(f.pointer) {
                    label for=(id) { (label) }
                    select id=(id) name=(name) aria-invalid=[invalid] aria-describedby=[described] {
                        @if !f.required { option value="" selected[chosen.is_empty()] { "—" } }
                        @for o in options {
                            @let value = o.to_string();
                            option value=(value) selected[value == chosen] {
                                (o.as_str().map_or_else(|| o.to_string(), str::to_owned))
                            }
                        }
                    }
                    (notes)
                }
            }
        }
        Kind::List(_) => {
            let value = source.text(f);
            let rows = (value.lines().count() + 1).clamp(2, 12);
            html! {
                div.field data-pointer=(f.pointer) {
                    label for=(id) { (label) span.how { " — one per line" } }
                    textarea id=(id) name=(name) rows=(rows) aria-invalid=[invalid] aria-describedby=[described] { (value) }
                    (notes)
                }
            }
        }
        Kind::Json => {
            let value = source.text(f);
            let rows = (value.lines().count() + 1).clamp(3, 16);
            html! {
                div.field data-pointer=(f.pointer) {
                    label for=(id) { (label) span.how { " — JSON" } }
                    textarea.json id=(id) name=(name) rows=(rows) spellcheck="false"
                        aria-invalid=[invalid] aria-describedby=[described] { (value) }
                    (notes)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The kinds of `plan`'s top-level fields, by name.
    fn kinds(schema: &Value, proposed: &Value) -> Vec<(String, &'static str)> {
        let Kind::Object(children) = plan(Some(schema), proposed).kind else {
            return vec![("".into(), "json")];
        };
        children
            .iter()
            .map(|c| {
                let k = match &c.kind {
                    Kind::Object(_) => "object",
                    Kind::Text { .. } => "text",
                    Kind::Number { integer: true } => "integer",
                    Kind::Number { integer: false } => "number",
                    Kind::Bool => "bool",
                    Kind::Enum(_) => "enum",
                    Kind::List(_) => "list",
                    Kind::Json => "json",
                };
                (c.name.clone(), k)
            })
            .collect()
    }

    /// Which field each kind of schema gets, and where the generator falls back to JSON.
    #[test]
    fn each_schema_gets_its_field_or_json() {
        let cases = [
            (json!({"type": "string"}), json!("x"), "text"),
            (json!({"type": "string"}), json!(3), "json"),
            (json!({"type": "integer"}), json!(3), "integer"),
            (json!({"type": "number"}), json!(2.5), "number"),
            (json!({"type": "boolean"}), json!(true), "bool"),
            (json!({"enum": ["a", "b"]}), json!("a"), "enum"),
            (json!({"enum": ["a", "b"]}), json!("c"), "json"),
            (json!({"enum": [{"x": 1}]}), json!({"x": 1}), "json"),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                json!(["a"]),
                "list",
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                json!(["a\nb"]),
                "json",
            ),
            (
                json!({"type": "array", "items": {"type": "object"}}),
                json!([]),
                "json",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}}),
                json!({"a": "x"}),
                "object",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}}),
                json!({"b": 1}),
                "json",
            ),
            (json!({"type": "object"}), json!({"b": 1}), "json"),
            (json!({"oneOf": [{"type": "string"}]}), json!("x"), "json"),
            (json!({"$ref": "#/x"}), json!("x"), "json"),
            (json!({"type": ["string", "null"]}), json!("x"), "json"),
        ];
        for (schema, value, want) in cases {
            let args = json!({"type": "object", "properties": {"f": schema}});
            let got = kinds(&args, &json!({"f": value}));
            assert_eq!(got, vec![("f".to_owned(), want)], "{schema} with {value}");
        }
    }

    fn form(fields: &[(&str, &str)]) -> Form {
        Form(
            fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    /// What the posted fields read back as: typed values, optional fields left empty omitted,
    /// what is not a number kept as typed (so the schema's refusal names it), bad JSON refused
    /// at its field.
    #[test]
    fn a_posted_form_reads_back_as_arguments() {
        let schema = json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": "object", "required": ["n"], "properties": {
                "n": {"type": "integer"}, "s": {"type": "string"}}},
            "on": {"type": "boolean"},
            "off": {"type": "boolean"},
            "e": {"enum": ["x", 2]},
            "l": {"type": "array", "items": {"type": "number"}},
            "j": {"anyOf": [{"type": "object"}]},
            "opt": {"type": "string"}
        }});
        let proposed = json!({"a": {"n": 1}, "off": true, "j": {"k": 1}});
        let root = plan(Some(&schema), &proposed);
        let posted = form(&[
            ("arg:/a/n", "12"),
            ("arg:/a/s", ""),
            ("arg:/on", "true"),
            ("arg:/e", "2"),
            ("arg:/l", "1\n\n2.5\nlots\n"),
            ("arg:/j", "{\"k\": 2}"),
            ("arg:/opt", ""),
        ]);
        assert_eq!(
            read(&root, &posted),
            Ok(json!({"a": {"n": 12}, "on": true, "off": false, "e": 2,
                "l": [1.0, 2.5, "lots"], "j": {"k": 2}}))
        );
        let bad = form(&[("arg:/a/n", "1"), ("arg:/j", "{")]);
        let refused = read(&root, &bad).expect_err("bad JSON");
        assert_eq!(refused.pointer, "/j");
        // A refusal is shown at the deepest field that holds it.
        for (pointer, at) in [
            ("/a/n", "/a/n"),
            ("/a", "/a"),
            ("/l/2", "/l"),
            ("/", ""),
            ("/zz", ""),
        ] {
            assert_eq!(owner(&root, pointer), at, "{pointer}");
        }
    }
}
