//! The one rule for secrets in text (a provider's API key, the env values an http tool's or an
//! MCP server's templates use): a value is redacted whole, wherever it appears, and only when it
//! is long enough to be a credential — replacing a one-letter "key" would garble every word
//! holding that letter and hide nothing. A value that short is suspicious in itself:
//! `duet validate` warns of a provider key that short (`provider_key_short`).

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this (in bytes) are never redacted: too short to be a credential.
pub const MIN_SECRET_LEN: usize = 8;

/// Whether `value` is long enough to be redacted as a secret.
pub fn redactable(value: &str) -> bool {
    value.len() >= MIN_SECRET_LEN
}

/// `text` with every occurrence of each redactable value of `secrets` replaced by
/// [`REDACTED`], the longest first (a secret that contains another is replaced whole).
pub fn redact<'a>(text: &str, secrets: impl IntoIterator<Item = &'a str>) -> String {
    let mut values: Vec<&str> = secrets.into_iter().filter(|v| redactable(v)).collect();
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    values.dedup();
    let mut out = text.to_owned();
    for v in values {
        if out.contains(v) {
            out = out.replace(v, REDACTED);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_values_of_a_credentials_length_and_nothing_shorter() {
        let cases: &[(&str, &[&str], &str)] = &[
            // A one-letter "key" leaves every `k` of the text alone.
            ("bad key k at keel", &["k"], "bad key k at keel"),
            ("short 1234567", &["1234567"], "short 1234567"),
            ("bad key sk-secret!", &["sk-secret"], "bad key [redacted]!"),
            // Longest first: the longer secret goes whole.
            (
                "a sk-secret-long b sk-secret",
                &["sk-secret", "sk-secret-long"],
                "a [redacted] b [redacted]",
            ),
        ];
        for (text, secrets, want) in cases {
            assert_eq!(&redact(text, secrets.iter().copied()), want, "{text}");
        }
    }
}
