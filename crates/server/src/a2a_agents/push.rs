//! Push notification configs for duet's A2A tasks: stored per task, checked on the way in (an
//! http(s) URL whose host is public, unless the server allows private targets), and the target
//! check the sender repeats before every delivery (a name may resolve elsewhere by then).

use std::net::{IpAddr, SocketAddr};

use duet_a2a::{
    A2aError, AuthenticationInfo, Context, Handled, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, TaskPushNotificationConfig,
    TaskPushNotificationConfigRef,
};
use duet_server_store::PushConfig;

use super::agent::DuetAgent;
use super::tasks::TaskRef;
use crate::auth::Caller;
use crate::service;

/// Where a push may go: the URL as the HTTP client reads it, and — unless private targets are
/// allowed — the addresses its host resolved to, every one of them public. The sender
/// connects to exactly those addresses (no second lookup to rebind), and redirects are not
/// followed.
#[derive(Debug)]
pub(crate) struct Target {
    pub url: reqwest::Url,
    /// `(host, addresses)` to pin the connection to; `None` for an IP literal or when private
    /// targets are allowed (nothing to pin).
    pub pinned: Option<(String, Vec<SocketAddr>)>,
}

/// Whether `url` may be sent to: `Err` says why not. The URL is parsed as the HTTP client will
/// parse it (a `\` or `@` trick reads the same to both). With `allow_private`, only the scheme
/// and a host are checked.
pub(crate) async fn target_allowed(url: &str, allow_private: bool) -> Result<Target, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("scheme `{}`: use http or https", parsed.scheme()));
    }
    let host = parsed.host().ok_or("no host")?;
    let port = parsed.port_or_known_default().ok_or("no port")?;
    if allow_private {
        return Ok(Target {
            url: parsed,
            pinned: None,
        });
    }
    let (name, addresses): (Option<String>, Vec<SocketAddr>) = match host {
        url::Host::Ipv4(ip) => (None, vec![SocketAddr::new(IpAddr::V4(ip), port)]),
        url::Host::Ipv6(ip) => (None, vec![SocketAddr::new(IpAddr::V6(ip), port)]),
        url::Host::Domain(d) => {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((d, port))
                .await
                .map_err(|e| format!("cannot resolve `{d}`: {e}"))?
                .collect();
            (Some(d.to_owned()), found)
        }
    };
    let shown = name.clone().unwrap_or_else(|| host.to_string());
    match addresses.iter().find(|a| !public(&a.ip())) {
        Some(a) => Err(format!(
            "`{shown}` is {}, a private, loopback or link-local address (the server allows those only with --allow-private-push)",
            a.ip()
        )),
        None if addresses.is_empty() => Err(format!("`{shown}` resolves to nothing")),
        None => Ok(Target {
            pinned: name.map(|n| (n, addresses)),
            url: parsed,
        }),
    }
}

/// Whether `ip` is on the public internet (not private, loopback, link-local, unspecified,
/// multicast, or documentation/benchmark space).
fn public(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19)))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return public(&IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

impl DuetAgent {
    /// Stores a config for task `task_id` (its id generated when the client gave none).
    pub(crate) async fn put_push(
        &self,
        caller: &Caller,
        task_id: &str,
        req: TaskPushNotificationConfig,
    ) -> Handled<TaskPushNotificationConfig> {
        let (_, r) = self.find(caller, task_id).await?;
        self.check_push(&req).await?;
        self.store_push(caller, r, req).await
    }

    /// Refuses a config whose URL may not be used, or whose token or authentication no header
    /// can carry (it would fail every send).
    pub(crate) async fn check_push(
        &self,
        req: &TaskPushNotificationConfig,
    ) -> Result<(), A2aError> {
        sendable(req)?;
        match target_allowed(&req.url, self.state.options().allow_private_push).await {
            Ok(_) => Ok(()),
            Err(why) => Err(A2aError::invalid_params(
                format!("the push URL cannot be used: {why}"),
                vec![("url".into(), why)],
            )),
        }
    }

    /// Stores a checked config for task `r`.
    pub(crate) async fn store_push(
        &self,
        caller: &Caller,
        r: TaskRef,
        req: TaskPushNotificationConfig,
    ) -> Handled<TaskPushNotificationConfig> {
        let id = req
            .id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let (scheme, credentials) = match &req.authentication {
            Some(a) => (Some(a.scheme.clone()), a.credentials.clone()),
            None => (None, None),
        };
        let config = PushConfig {
            thread: r.thread,
            session: r.session,
            id,
            url: req.url.clone(),
            token: req.token.clone(),
            auth_scheme: scheme,
            auth_credentials: credentials,
            principal: if caller.admin {
                None
            } else {
                caller.canonical.clone()
            },
            watermark: 0,
            last_state: None,
            created_at: self.state.runtime().now_ms(),
        };
        service::push::put(&self.state, &config)
            .await
            .map_err(A2aError::internal)?;
        self.state.push_config_added();
        Ok(view(&config, r))
    }

    async fn push_task(&self, cx: &Context, task_id: &str) -> Result<TaskRef, A2aError> {
        let caller = Self::caller(cx)?;
        Ok(self.find(&caller, task_id).await?.1)
    }

    pub(crate) async fn get_push(
        &self,
        req: TaskPushNotificationConfigRef,
        cx: &Context,
    ) -> Handled<TaskPushNotificationConfig> {
        let r = self.push_task(cx, &req.task_id).await?;
        match service::push::get(&self.state, r.thread, r.session, &req.id)
            .await
            .map_err(A2aError::internal)?
        {
            Some(c) => Ok(view(&c, r)),
            None => Err(A2aError::task_not_found(&req.task_id)
                .with("pushNotificationConfigId", req.id.as_str())),
        }
    }

    pub(crate) async fn list_push(
        &self,
        req: ListTaskPushNotificationConfigsRequest,
        cx: &Context,
    ) -> Handled<ListTaskPushNotificationConfigsResponse> {
        let r = self.push_task(cx, &req.task_id).await?;
        let all = service::push::of_task(&self.state, r.thread, r.session)
            .await
            .map_err(A2aError::internal)?;
        let start = match req.page_token.as_deref() {
            Some(tok) => all
                .iter()
                .position(|c| c.id == tok)
                .map(|i| i + 1)
                .ok_or_else(|| {
                    A2aError::invalid_params(
                        "pageToken is not one this server gave",
                        vec![("pageToken".into(), "unknown".into())],
                    )
                })?,
            None => 0,
        };
        let page: Vec<&PushConfig> = all.iter().skip(start).take(cx.page_size).collect();
        let next = if start + page.len() < all.len() {
            page.last().map(|c| c.id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: page.into_iter().map(|c| view(c, r)).collect(),
            next_page_token: next,
        })
    }

    pub(crate) async fn delete_push(
        &self,
        req: TaskPushNotificationConfigRef,
        cx: &Context,
    ) -> Handled<()> {
        let r = self.push_task(cx, &req.task_id).await?;
        // Idempotent: deleting a config that is not there is not an error.
        service::push::delete(&self.state, r.thread, r.session, &req.id)
            .await
            .map_err(A2aError::internal)?;
        Ok(())
    }
}

/// Refuses a config's token, scheme or credentials that cannot be sent as they are: a header
/// value holds no control character (a CR/LF would end the header), and the scheme is one word.
fn sendable(req: &TaskPushNotificationConfig) -> Result<(), A2aError> {
    let auth = req.authentication.as_ref();
    let fields = [
        ("token", req.token.as_deref()),
        ("authentication.scheme", auth.map(|a| a.scheme.as_str())),
        (
            "authentication.credentials",
            auth.and_then(|a| a.credentials.as_deref()),
        ),
    ];
    for (field, value) in fields {
        let Some(value) = value else { continue };
        let why = if value.chars().any(char::is_control) {
            Some("holds a control character")
        } else if field == "authentication.scheme" && (value.is_empty() || value.contains(' ')) {
            Some("is not one word")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(A2aError::invalid_params(
                format!("the push config's `{field}` {why}: no notification could carry it"),
                vec![(field.into(), why.into())],
            ));
        }
    }
    Ok(())
}

/// A stored config as the client sees it.
fn view(c: &PushConfig, r: TaskRef) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        tenant: None,
        id: Some(c.id.clone()),
        task_id: r.id(),
        url: c.url.clone(),
        token: c.token.clone(),
        authentication: c.auth_scheme.clone().map(|scheme| AuthenticationInfo {
            scheme,
            credentials: c.auth_credentials.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn private_targets_are_refused_unless_allowed() {
        for url in [
            "http://127.0.0.1:8080/hook",
            "http://localhost/hook",
            "http://10.1.2.3/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]:9000/",
            "http://[fe80::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
            "ftp://example.com/",
            "http:///nohost",
            "http://169.254.169.254\\@example.com/",
            "http://127.0.0.1#@example.com/",
        ] {
            assert!(target_allowed(url, false).await.is_err(), "{url}");
        }
        assert!(
            target_allowed("http://127.0.0.1:8080/hook", true)
                .await
                .is_ok()
        );
        assert!(
            target_allowed("https://93.184.216.34/hook", false)
                .await
                .is_ok()
        );
        assert!(target_allowed("ftp://127.0.0.1/", true).await.is_err());
    }
}
