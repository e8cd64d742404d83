//! A provider's configuration: where it is, its key, its timeouts, headers and retries, from its
//! definition (built in or `agents/providers/`) and the environment.
//!
//! The rules: the base URL is the definition's `baseUrl`, else (for `openai` and `anthropic`)
//! `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`, else the type's service. The key is read from the
//! variable `apiKeyEnv` names; a definition without one sends no key. A missing key fails a call
//! before any request unless the built-in's base URL came from its variable (a local server
//! that needs no key). The key is held only here and in the HTTP client's headers (marked
//! sensitive); it is never printed, and any error text that would hold it is redacted.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use duet_spec::{ProviderDef, ProviderType};

use crate::retry::RetryPolicy;

/// How long one model call may take by default, streaming included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// How long connecting may take by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An API key. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// Everything a provider needs to call its API.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    /// The provider's name, as models name it (for messages).
    pub name: String,
    /// The wire format.
    pub provider_type: ProviderType,
    /// The API's root, without a trailing `/`.
    pub base_url: String,
    /// The key, if one was found.
    pub api_key: Option<ApiKey>,
    /// The variable the key is read from, and whether a call fails without it.
    pub key_env: Option<(String, bool)>,
    /// The most one call may take, streaming included.
    pub timeout: Duration,
    /// The most connecting may take.
    pub connect_timeout: Duration,
    /// Extra headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// How transient failures are retried.
    pub retry: RetryPolicy,
}

impl ProviderConfig {
    /// The configuration `def` describes, with variables read through `env` (`None` or empty
    /// for an unset one).
    pub fn from_def(def: &ProviderDef, env: &dyn Fn(&str) -> Option<String>) -> ProviderConfig {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let from_env = match (&def.base_url, ProviderDef::base_url_env(&def.name)) {
            (None, Some(name)) => var(name),
            _ => None,
        };
        let local = from_env.is_some();
        let base_url = def
            .base_url
            .clone()
            .or(from_env)
            .unwrap_or_else(|| def.provider_type.default_base_url().to_owned());
        let api_key = def.api_key_env.as_deref().and_then(var).map(ApiKey);
        let key_env = def.api_key_env.clone().map(|k| (k, !local));
        let timeout = def
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, |ms| Duration::from_millis(u64::from(ms)));
        let mut retry = RetryPolicy::default();
        if let Some(n) = def.max_attempts {
            retry.max_attempts = n.max(1);
        }
        ProviderConfig {
            name: def.name.clone(),
            provider_type: def.provider_type,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            key_env,
            timeout,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT.min(timeout),
            headers: def.headers.clone(),
            retry,
        }
    }

    /// A configuration for a server at `base_url`, with `key`, defaults for the rest (tests and
    /// embedders).
    pub fn new(
        name: &str,
        provider_type: ProviderType,
        base_url: &str,
        key: Option<ApiKey>,
    ) -> ProviderConfig {
        ProviderConfig {
            name: name.to_owned(),
            provider_type,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: key,
            key_env: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            headers: BTreeMap::new(),
            retry: RetryPolicy::default(),
        }
    }

    /// `path` under the base URL.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Why a call cannot be made: a key it needs is missing.
    pub(crate) fn missing_key(&self) -> Option<String> {
        match (&self.api_key, &self.key_env) {
            (None, Some((var, true))) => Some(format!(
                "provider `{}` needs an API key: set `{var}` where duet runs",
                self.name
            )),
            _ => None,
        }
    }

    /// `text` with the key, should it appear, replaced by `[redacted]` (whole, and only a key
    /// of a credential's length: `duet_spec::secret`).
    pub(crate) fn redact(&self, text: &str) -> String {
        duet_spec::secret::redact(text, self.api_key.as_ref().map(|k| k.0.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn builtin(name: &str) -> ProviderDef {
        ProviderDef::builtin(name).expect("built in")
    }

    #[test]
    fn builtins_read_their_variables() {
        let c = ProviderConfig::from_def(
            &builtin("openai"),
            &env(&[("OPENAI_API_KEY", "sk-1"), ("ANTHROPIC_API_KEY", "k-2")]),
        );
        assert_eq!(c.base_url, "https://api.openai.com/v1");
        assert_eq!(c.api_key, Some(ApiKey::new("sk-1")));
        assert_eq!(c.missing_key(), None);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.retry.max_attempts, 3);
        let a = ProviderConfig::from_def(
            &builtin("anthropic"),
            &env(&[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")]),
        );
        assert_eq!(a.base_url, "http://127.0.0.1:9");
        assert_eq!(a.api_key, None);
        // A base URL from the variable is a local server: no key needed.
        assert_eq!(a.missing_key(), None);
    }

    #[test]
    fn a_missing_key_for_the_service_fails_before_any_request() {
        let c = ProviderConfig::from_def(&builtin("openai"), &env(&[("OPENAI_API_KEY", " ")]));
        let why = c.missing_key().expect("a key is needed");
        assert!(why.contains("OPENAI_API_KEY"), "{why}");
    }

    #[test]
    fn a_defined_provider_uses_its_own_fields() {
        let def = ProviderDef {
            name: "router".into(),
            provider_type: ProviderType::Openai,
            base_url: Some("https://openrouter.ai/api/v1/".into()),
            api_key_env: Some("ROUTER_KEY".into()),
            timeout_ms: Some(5_000),
            headers: [("X-Title".to_owned(), "duet".to_owned())].into(),
            max_attempts: Some(5),
        };
        let c = ProviderConfig::from_def(
            &def,
            &env(&[
                ("ROUTER_KEY", "or-key"),
                ("OPENAI_BASE_URL", "http://ignored"),
            ]),
        );
        assert_eq!(c.base_url, "https://openrouter.ai/api/v1");
        assert_eq!(
            c.url("/chat/completions"),
            "https://openrouter.ai/api/v1/chat/completions"
        );
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert_eq!(c.connect_timeout, Duration::from_secs(5));
        assert_eq!(c.retry.max_attempts, 5);
        assert_eq!(c.headers["X-Title"], "duet");
        let unset = ProviderConfig::from_def(&def, &env(&[]));
        assert!(
            unset
                .missing_key()
                .is_some_and(|m| m.contains("ROUTER_KEY"))
        );
        let local = ProviderDef {
            api_key_env: None,
            ..def
        };
        assert_eq!(
            ProviderConfig::from_def(&local, &env(&[])).missing_key(),
            None
        );
    }

    #[test]
    fn the_key_never_shows() {
        let c =
            ProviderConfig::from_def(&builtin("openai"), &env(&[("OPENAI_API_KEY", "sk-secret")]));
        assert!(!format!("{c:?}").contains("sk-secret"));
        assert_eq!(c.redact("bad key sk-secret!"), "bad key [redacted]!");
    }
}
