//! The agent card (`/.well-known/agent-card.json`): who the agent is, where its interfaces are,
//! what it can do and how to authenticate.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::types::Metadata;

/// The protocol version every interface of this server speaks.
pub const PROTOCOL_VERSION: &str = "1.0";
/// `protocolBinding` of the JSON-RPC 2.0 interface.
pub const JSONRPC: &str = "JSONRPC";
/// `protocolBinding` of the HTTP+JSON (REST) interface.
pub const HTTP_JSON: &str = "HTTP+JSON";

/// An agent card. Leave `supported_interfaces` empty and the server fills in both bindings with
/// URLs derived from the request (or the configured public URL); a relative `url` is resolved
/// the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    #[serde(default)]
    #[serde(alias = "supported_interfaces")]
    pub supported_interfaces: Vec<AgentInterface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "documentation_url")]
    pub documentation_url: Option<String>,
    #[serde(default)]
    pub capabilities: AgentCapabilities,
    /// Name → `SecurityScheme` (a oneof such as `{"httpAuthSecurityScheme": {…}}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[serde(alias = "security_schemes")]
    pub security_schemes: BTreeMap<String, Value>,
    /// `SecurityRequirement`s (`{"schemes": {name: {"list": [scopes]}}}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "security_requirements")]
    pub security_requirements: Vec<Value>,
    #[serde(alias = "default_input_modes")]
    pub default_input_modes: Vec<String>,
    #[serde(alias = "default_output_modes")]
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "icon_url")]
    pub icon_url: Option<String>,
}

impl AgentCard {
    /// A card with text in and out and no skills yet.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            supported_interfaces: Vec::new(),
            provider: None,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            documentation_url: None,
            capabilities: AgentCapabilities::default(),
            security_schemes: BTreeMap::new(),
            security_requirements: Vec::new(),
            default_input_modes: vec!["text/plain".into()],
            default_output_modes: vec!["text/plain".into()],
            skills: Vec::new(),
            signatures: Vec::new(),
            icon_url: None,
        }
    }

    /// Declares `Authorization: Bearer …` as the way in (scheme name `bearer`).
    pub fn with_bearer_auth(mut self) -> Self {
        self.security_schemes.insert(
            "bearer".into(),
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer",
                "description": "an API key, as `Authorization: Bearer <key>`"}}),
        );
        self.security_requirements
            .push(json!({"schemes": {"bearer": {"list": []}}}));
        self
    }

    /// The card as served from `base` (the URL the agent is mounted at, no trailing `/`), a
    /// relative interface URL taken from `root` (the server's public URL, or the request's
    /// origin).
    pub(crate) fn resolved(&self, base: &str, root: &str) -> Self {
        let mut card = self.clone();
        if card.supported_interfaces.is_empty() {
            card.supported_interfaces = vec![
                AgentInterface::new(base.to_owned(), JSONRPC),
                AgentInterface::new(format!("{base}/rest"), HTTP_JSON),
            ];
        }
        for i in &mut card.supported_interfaces {
            if i.url.starts_with('/') {
                i.url = format!("{}{}", root.trim_end_matches('/'), i.url);
            }
        }
        card
    }

    /// The declared extensions the client must name in `A2A-Extensions`.
    pub(crate) fn required_extensions(&self) -> impl Iterator<Item = &str> {
        self.capabilities
            .extensions
            .iter()
            .filter(|e| e.required)
            .map(|e| e.uri.as_str())
    }
}

/// One way to reach the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    #[serde(alias = "protocol_binding")]
    pub protocol_binding: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(alias = "protocol_version")]
    pub protocol_version: String,
}

impl AgentInterface {
    /// An interface at `url` speaking A2A 1.0 over `binding`.
    pub fn new(url: String, binding: &str) -> Self {
        Self {
            url,
            protocol_binding: binding.to_owned(),
            tenant: None,
            protocol_version: PROTOCOL_VERSION.to_owned(),
        }
    }
}

/// Who runs the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProvider {
    pub url: String,
    pub organization: String,
}

/// What the agent can do beyond the core operations. Triage refuses the operations a missing
/// capability names, before the handler runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    #[serde(default)]
    pub streaming: bool,
    #[serde(default)]
    #[serde(alias = "push_notifications")]
    pub push_notifications: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
    #[serde(default)]
    #[serde(alias = "extended_agent_card")]
    pub extended_agent_card: bool,
}

/// An extension of the protocol the agent supports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExtension {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Metadata>,
}

/// Something the agent is good at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "input_modes")]
    pub input_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "output_modes")]
    pub output_modes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_are_derived_from_where_the_agent_is_mounted() {
        let card = AgentCard::new("echo", "says it back")
            .resolved("http://h:8080/a2a/echo", "http://h:8080");
        let urls: Vec<_> = card
            .supported_interfaces
            .iter()
            .map(|i| (i.url.as_str(), i.protocol_binding.as_str()))
            .collect();
        assert_eq!(
            urls,
            [
                ("http://h:8080/a2a/echo", JSONRPC),
                ("http://h:8080/a2a/echo/rest", HTTP_JSON)
            ]
        );
        let mut relative = AgentCard::new("x", "y");
        relative.supported_interfaces = vec![AgentInterface::new("/rpc".into(), JSONRPC)];
        let r = relative.resolved("https://example.com/base/x", "https://example.com/base");
        assert_eq!(
            r.supported_interfaces[0].url,
            "https://example.com/base/rpc"
        );
    }
}
