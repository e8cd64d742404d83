//! Secrets out of every text a tool returns or logs: the env values a definition's templates
//! filled in (`{{env.NAME}}`) are replaced by `[redacted]`, as written and as they appear
//! percent-encoded, form-encoded or JSON-escaped.

pub use duet_spec::secret::{MIN_SECRET_LEN, REDACTED};

/// The secrets of one call (or one server's settings).
#[derive(Clone, Debug, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// Adds `value` and its encoded forms (how short ones are redacted, or not at all, is
    /// `duet_spec::secret`'s rule: whole words under [`MIN_SECRET_LEN`], nothing under
    /// `MIN_WORD_SECRET_LEN`).
    pub fn add(&mut self, value: &str) {
        if value.is_empty() {
            return;
        }
        let json = serde_json::to_string(value).unwrap_or_default();
        let json = json
            .strip_prefix('"')
            .and_then(|j| j.strip_suffix('"'))
            .unwrap_or(value);
        let form: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
        for v in [
            value.to_owned(),
            percent_encode(value),
            form,
            json.to_owned(),
        ] {
            if !self.values.contains(&v) {
                self.values.push(v);
            }
        }
        // Longest first, so a secret that contains another is replaced whole.
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// Adds the value of every `{{env.NAME}}` placeholder of `template`.
    pub fn add_env_of(&mut self, template: &str, env: &(dyn Fn(&str) -> Option<String> + Sync)) {
        for p in duet_spec::placeholders(template) {
            if let Some(value) = p.strip_prefix("env.").and_then(|name| env(name.trim())) {
                self.add(&value);
            }
        }
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        duet_spec::secret::redact(text, self.values.iter().map(String::as_str))
    }
}

/// `value` percent-encoded as a URL component: everything but `A-Z a-z 0-9 - . _ ~`.
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_every_form() {
        let mut s = Secrets::default();
        s.add("s3cr\"et/1");
        s.add("no");
        s.add("4321");
        let text = "a s3cr\"et/1 b s3cr%22et%2F1 c s3cr\\\"et/1 d no e 4321 f 54321";
        assert_eq!(
            s.redact(text),
            "a [redacted] b [redacted] c [redacted] d no e [redacted] f 54321"
        );
        assert_eq!(percent_encode("a b/ü"), "a%20b%2F%C3%BC");
        let mut form = Secrets::default();
        form.add("pass word+1");
        assert_eq!(form.redact("p=pass+word%2B1&q=2"), "p=[redacted]&q=2");
    }
}
