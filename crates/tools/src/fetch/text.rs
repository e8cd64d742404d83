//! How `fetch`'s messages show a URL and a size.

use std::fmt;

use url::Url;

/// A URL as messages show it: without its query (which often holds a key), fragment or
/// credentials; `?…` says there was a query.
pub(crate) struct Shown<'a>(pub(crate) &'a Url);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut url = self.0.clone();
        let query = url.query().is_some();
        url.set_query(None);
        url.set_fragment(None);
        // Neither fails on an http(s) URL; another is shown without its query only.
        let _ = url.set_password(None);
        let _ = url.set_username("");
        if query {
            write!(f, "{url}?…")
        } else {
            write!(f, "{url}")
        }
    }
}

/// `5 MiB`, `64 KiB`, `1000 bytes`.
pub(crate) fn size(bytes: u64) -> String {
    match bytes {
        0 => "0 bytes".to_owned(),
        b if b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_what_may_be_secret() {
        let show = |u: &str| Shown(&Url::parse(u).expect("a URL")).to_string();
        assert_eq!(
            show("https://u:p@a.example/x?key=1#f"),
            "https://a.example/x?…"
        );
        assert_eq!(show("http://127.0.0.1:8080/x#f"), "http://127.0.0.1:8080/x");
        assert_eq!(size(5 << 20), "5 MiB");
        assert_eq!(size(2048), "2 KiB");
        assert_eq!(size(1000), "1000 bytes");
    }
}
