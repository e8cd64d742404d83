//! Provider definitions (`agents/providers/`): a project's own endpoint speaking one of the wire
//! formats duet has (an OpenAI-compatible server, an Anthropic gateway), which models name in
//! their `provider`. The key is never in the file: `apiKeyEnv` names the variable holding it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::decode::Ctx;
use crate::issue::{Code, Issue};
use crate::node::Node;

/// The wire format a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderType {
    /// OpenAI Chat Completions (`POST {baseUrl}/chat/completions`): OpenAI and the servers
    /// compatible with it (vLLM, Ollama, llama.cpp, LM Studio, LiteLLM, OpenRouter).
    Openai,
    /// The Anthropic Messages API (`POST {baseUrl}/v1/messages`).
    Anthropic,
}

impl ProviderType {
    /// The name as written (`openai`, `anthropic`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderType::Openai => "openai",
            ProviderType::Anthropic => "anthropic",
        }
    }
}

/// A provider: where a wire format is served, and how to authenticate there.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderDef {
    /// `name`: how models refer to it; required, unique, snake_case. A project's `openai` or
    /// `anthropic` replaces the built-in one; `scripted` cannot be redefined.
    pub name: String,
    /// `type`: the wire format, `openai` or `anthropic`; required.
    #[serde(rename = "type")]
    pub provider_type: ProviderType,
    /// `baseUrl`: the API's root (`http://localhost:11434/v1` for Ollama;
    /// `https://api.anthropic.com` for Anthropic, without `/v1`); absent, the type's default.
    pub base_url: Option<String>,
    /// `apiKeyEnv`: the name of the environment variable holding the key (never the key);
    /// absent, requests carry no key (local servers).
    pub api_key_env: Option<String>,
    /// `timeoutMs`: the most one model call may take, in milliseconds; absent, 10 minutes.
    pub timeout_ms: Option<u32>,
    /// `headers`: extra request headers (`anthropic-beta`, `HTTP-Referer`); default none.
    /// Credentials go in `apiKeyEnv`, never here.
    pub headers: BTreeMap<String, String>,
    /// `maxAttempts`: how many times a call is tried on a transient failure, the first
    /// included; absent, 3.
    pub max_attempts: Option<u32>,
}

/// The built-in providers that call an API: name, type, key variable, base URL variable and
/// default base URL.
const BUILTINS: &[(&str, ProviderType, &str, &str, &str)] = &[
    (
        "openai",
        ProviderType::Openai,
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "https://api.openai.com/v1",
    ),
    (
        "anthropic",
        ProviderType::Anthropic,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
    ),
];

impl ProviderDef {
    /// The built-in provider `name` (`openai`, `anthropic`) as a definition: its type and key
    /// variable, its base URL left to [`ProviderDef::base_url_env`] and
    /// [`ProviderType::default_base_url`].
    pub fn builtin(name: &str) -> Option<ProviderDef> {
        BUILTINS
            .iter()
            .find(|b| b.0 == name)
            .map(|&(name, provider_type, key, _, _)| ProviderDef {
                name: name.to_owned(),
                provider_type,
                base_url: None,
                api_key_env: Some(key.to_owned()),
                timeout_ms: None,
                headers: BTreeMap::new(),
                max_attempts: None,
            })
    }

    /// For a built-in provider, the variable that may override its base URL
    /// (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`); `None` for a defined one.
    pub fn base_url_env(name: &str) -> Option<&'static str> {
        BUILTINS.iter().find(|b| b.0 == name).map(|b| b.3)
    }
}

impl ProviderType {
    /// Where the type's own service is: `https://api.openai.com/v1`, `https://api.anthropic.com`.
    pub fn default_base_url(self) -> &'static str {
        BUILTINS.iter().find(|b| b.1 == self).map_or("", |b| b.4)
    }
}

const FIELDS: &[&str] = &[
    "name",
    "type",
    "baseUrl",
    "apiKeyEnv",
    "timeoutMs",
    "headers",
    "maxAttempts",
];

/// Headers that carry credentials, which a definition file must not hold.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "proxy-authorization",
];

/// Whether `name` can be an environment variable's name (`[A-Za-z_][A-Za-z0-9_]*`).
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` is a valid HTTP header name (an RFC 9110 token).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node) -> (Option<String>, Option<ProviderDef>) {
    decode_named(ctx, root, None)
}

/// A model's own provider (`provider: { type, baseUrl, ... }`), named `name`.
pub(crate) fn decode_inline(ctx: &mut Ctx<'_>, node: &Node, name: &str) -> Option<ProviderDef> {
    decode_named(ctx, node, Some(name)).1
}

fn decode_named(
    ctx: &mut Ctx<'_>,
    root: &Node,
    inline: Option<&str>,
) -> (Option<String>, Option<ProviderDef>) {
    let Some(mut o) = ctx.object(root, if inline.is_some() { "provider" } else { "" }) else {
        return (None, None);
    };
    let (name, name_span) = match inline {
        Some(own) => (Some(own.to_owned()), o.span),
        None => {
            let name = o.required_name(ctx, "name");
            (name, o.take("name").map_or(o.span, |n| n.span))
        }
    };
    let type_node = o.take("type");
    let provider_type = o.required_name(ctx, "type");
    let provider_type = match (provider_type.as_deref(), type_node) {
        (Some("openai"), _) => Some(ProviderType::Openai),
        (Some("anthropic"), _) => Some(ProviderType::Anthropic),
        (Some(other), Some(n)) => {
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    format!("`type` is `openai` or `anthropic`, not `{other}`"),
                )
                .at(ctx.file, &o.path("type"), Some(n.span))
                .hint("OpenAI-compatible servers (vLLM, Ollama, llama.cpp, LiteLLM) are `openai`"),
            );
            None
        }
        _ => None,
    };
    let url_node = o.take("baseUrl");
    let base_url = url_node.and_then(|n| ctx.name(n, &o.path("baseUrl")));
    if let (Some(url), Some(n)) = (&base_url, url_node)
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        ctx.push(
            Issue::new(
                Code::InvalidValue,
                "`baseUrl` must be an `http://` or `https://` URL",
            )
            .at(ctx.file, &o.path("baseUrl"), Some(n.span))
            .hint("for example `http://localhost:11434/v1`"),
        );
    }
    let key_node = o.take("apiKeyEnv");
    let api_key_env = key_node.and_then(|n| ctx.name(n, &o.path("apiKeyEnv")));
    let api_key_env = match (api_key_env, key_node) {
        (Some(env), Some(n)) if !is_env_name(&env) => {
            // The value may be a key pasted by mistake: it is never repeated.
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    "`apiKeyEnv` is not the name of an environment variable",
                )
                .at(ctx.file, &o.path("apiKeyEnv"), Some(n.span))
                .hint("`apiKeyEnv` names the variable holding the key (`OPENROUTER_API_KEY`), never the key itself"),
            );
            None
        }
        (env, _) => env,
    };
    // A model's own provider that names neither a key nor a server (`openai({ timeout })`)
    // takes the key its type's built-in provider takes, as the factory would.
    let api_key_env = match (inline, &api_key_env, &base_url, provider_type) {
        (Some(_), None, None, Some(t)) => {
            ProviderDef::builtin(t.as_str()).and_then(|b| b.api_key_env)
        }
        _ => api_key_env,
    };
    let timeout_ms = o.count(ctx, "timeoutMs");
    let max_attempts = o.count(ctx, "maxAttempts");
    let headers_node = o.take("headers");
    let headers = headers_node
        .map(|n| ctx.string_map(n, &o.path("headers")))
        .unwrap_or_default();
    for (header, value) in &headers {
        let path = o.path(&format!("headers.{header}"));
        let span = headers_node
            .and_then(|n| n.get(header))
            .map_or(o.span, |n| n.span);
        if CREDENTIAL_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    format!(
                        "`{header}` carries a credential, which a definition file must not hold"
                    ),
                )
                .at(ctx.file, &path, Some(span))
                .hint("put the key in an environment variable and name it in `apiKeyEnv`"),
            );
        } else if !is_header_name(header) || value.contains(['\r', '\n']) {
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    format!(
                        "`{header}` is not a valid HTTP header (name, or a value with a line break)"
                    ),
                )
                .at(ctx.file, &path, Some(span)),
            );
        }
    }
    o.finish(
        ctx,
        if inline.is_some() {
            &FIELDS[1..]
        } else {
            FIELDS
        },
    );
    if let Some(n) = &name
        && inline.is_none()
    {
        crate::agent::check_name(ctx, n, "name", name_span);
        if n == "scripted" {
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    "`scripted` is built into duet and cannot be redefined",
                )
                .at(ctx.file, "name", Some(name_span))
                .hint("choose another name"),
            );
        }
    }
    let def = match (name.clone(), provider_type) {
        (Some(name), Some(provider_type)) => Some(ProviderDef {
            name,
            provider_type,
            base_url,
            api_key_env,
            timeout_ms,
            headers,
            max_attempts,
        }),
        _ => None,
    };
    (name, def)
}

impl crate::Project {
    /// The provider `name` resolves to: the project's definition, else the built-in one
    /// (`openai`, `anthropic`); `None` for `scripted` (no API) and unknown names.
    pub fn provider(&self, name: &str) -> Option<ProviderDef> {
        match self.providers.get(name) {
            Some(d) => Some(d.def.clone()),
            None => ProviderDef::builtin(name),
        }
    }

    /// A `provider_key_unset` warning at each model whose provider reads its key from a
    /// variable for which `is_set` is false. Loading never reads the environment; `duet
    /// validate` calls this with the process's.
    pub fn check_provider_keys(&self, value: impl Fn(&str) -> Option<String>) -> Vec<Issue> {
        let mut out = Vec::new();
        for d in self.models.values() {
            let Some(provider) = self.provider(&d.def.provider) else {
                continue;
            };
            let Some(var) = provider.api_key_env.as_deref() else {
                continue;
            };
            match value(var).filter(|v| !v.is_empty()) {
                Some(key) if crate::secret::redactable(&key) => continue,
                Some(key) => {
                    out.push(
                        Issue::new(
                            Code::ProviderKeyShort,
                            format!(
                                "model `{}` uses provider `{}`, whose key in `{var}` is {} character{} long: no real API key is that short",
                                d.def.name,
                                provider.name,
                                key.chars().count(),
                                if key.chars().count() == 1 { "" } else { "s" }
                            ),
                        )
                        .at(&d.source.file, "provider", Some(d.source.span("provider")))
                        .hint(format!(
                            "check `{var}` (a placeholder left in?); a value under {} characters is not redacted from error messages",
                            crate::secret::MIN_SECRET_LEN
                        )),
                    );
                    continue;
                }
                None => {}
            }
            let hint = match ProviderDef::base_url_env(&provider.name) {
                Some(url) if !self.providers.contains_key(&provider.name) => format!(
                    "set `{var}` where duet runs; a local server behind `{url}` may need no key (then define a provider without `apiKeyEnv`)"
                ),
                _ => format!("set `{var}` where duet runs"),
            };
            out.push(
                Issue::new(
                    Code::ProviderKeyUnset,
                    format!(
                        "model `{}` uses provider `{}`, whose key variable `{var}` is not set",
                        d.def.name, provider.name
                    ),
                )
                .at(&d.source.file, "provider", Some(d.source.span("provider")))
                .hint(hint),
            );
        }
        out
    }
}
