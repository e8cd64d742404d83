//! The one rule for secrets in text (a provider's API key, the env values an http tool's or an
//! MCP server's templates use): a value long enough to be a credential is redacted wherever it
//! appears; a shorter one only where it stands as a whole word, so that a four-digit PIN is
//! hidden while a one-letter "key" does not garble every word holding that letter. A value that
//! short is suspicious in itself: `duet validate` warns of a provider key under
//! [`MIN_SECRET_LEN`] (`provider_key_short`).

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Values at least this long (in bytes) are redacted wherever they appear, inside words too.
pub const MIN_SECRET_LEN: usize = 8;

/// Values at least this long, and shorter than [`MIN_SECRET_LEN`], are redacted where they
/// stand as a whole word (no letter or digit on either side); shorter ones are never redacted
/// (`1`, `eu`, `yes` are settings, not credentials, and hiding them would garble text).
pub const MIN_WORD_SECRET_LEN: usize = 4;

/// Whether `value` is long enough to be a credential (redacted even inside a word).
pub fn redactable(value: &str) -> bool {
    value.len() >= MIN_SECRET_LEN
}

/// `text` with each value of `secrets` replaced by [`REDACTED`] as this module's rule says, the
/// longest first (a secret that contains another is replaced whole).
pub fn redact<'a>(text: &str, secrets: impl IntoIterator<Item = &'a str>) -> String {
    let mut values: Vec<&str> = secrets
        .into_iter()
        .filter(|v| v.len() >= MIN_WORD_SECRET_LEN)
        .collect();
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    values.dedup();
    let mut out = text.to_owned();
    for v in values {
        if !out.contains(v) {
            continue;
        }
        out = if redactable(v) {
            out.replace(v, REDACTED)
        } else {
            replace_words(&out, v)
        };
    }
    out
}

/// `text` with each occurrence of `word` that has no letter or digit beside it replaced.
fn replace_words(text: &str, word: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in text.match_indices(word) {
        if at < last {
            continue;
        }
        let end = at + word.len();
        let before = text[..at].chars().next_back();
        let after = text[end..].chars().next();
        if before.is_some_and(char::is_alphanumeric) || after.is_some_and(char::is_alphanumeric) {
            continue;
        }
        out.push_str(&text[last..at]);
        out.push_str(REDACTED);
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_anywhere_short_values_as_words_tiny_ones_never() {
        let cases: &[(&str, &[&str], &str)] = &[
            // A one-letter "key" leaves every `k` of the text alone.
            ("bad key k at keel", &["k"], "bad key k at keel"),
            // A PIN is hidden where it stands alone, not inside a longer number or word.
            (
                "pin 1234, id 912345, x1234 1234",
                &["1234"],
                "pin [redacted], id 912345, x1234 [redacted]",
            ),
            ("Bearer sk-1234567", &["sk-1234567"], "Bearer [redacted]"),
            ("short=1234567;", &["1234567"], "short=[redacted];"),
            ("bad key sk-secret!", &["sk-secret"], "bad key [redacted]!"),
            ("inside xsk-secretx", &["sk-secret"], "inside x[redacted]x"),
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
