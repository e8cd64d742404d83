//! Push notification configs for duet's A2A tasks: stored per task, checked on the way in (an
//! http(s) URL whose host is public, unless the server allows private targets), and the target
//! check the sender repeats before every delivery (a name may resolve elsewhere by then).

use std::net::IpAddr;

use duet_runtime::PushConfig;

use super::agent::DuetAgent;
use super::tasks::TaskRef;
use crate::a2a::{
    A2aError, AuthenticationInfo, Context, Handled, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, TaskPushNotificationConfig,
    TaskPushNotificationConfigRef,
};
use crate::auth::Caller;

/// Whether `url` may be sent to: `Err` says why not. With `allow_private`, only the scheme and
/// a host are checked.
pub(crate) async fn target_allowed(url: &str, allow_private: bool) -> Result<(), String> {
    let (scheme, rest) = url.split_once("://").ok_or("not an absolute URL")?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return Err(format!("scheme `{scheme}`: use http or https"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6.split_once(']').ok_or("an unclosed `[` in the host")?;
            (h, after.strip_prefix(':'))
        }
        None => match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    let port: u16 = match port {
        Some(p) => p.parse().map_err(|_| format!("port `{p}`"))?,
        None if scheme.eq_ignore_ascii_case("https") => 443,
        None => 80,
    };
    if allow_private {
        return Ok(());
    }
    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
            .map(|a| a.ip())
            .collect(),
    };
    match addresses.iter().find(|ip| !public(ip)) {
        Some(ip) => Err(format!(
            "`{host}` is {ip}, a private, loopback or link-local address (the server allows those only with --allow-private-push)"
        )),
        None if addresses.is_empty() => Err(format!("`{host}` resolves to nothing")),
        None => Ok(()),
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
        let (t, r) = self.find(caller, task_id).await?;
        if let Err(why) = target_allowed(&req.url, self.state.options().allow_private_push).await {
            return Err(A2aError::invalid_params(
                format!("the push URL cannot be used: {why}"),
                vec![("url".into(), why)],
            ));
        }
        let id = req
            .id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let (scheme, credentials) = match &req.authentication {
            Some(a) => (Some(a.scheme.clone()), a.credentials.clone()),
            None => (None, None),
        };
        let config = PushConfig {
            thread: t.id,
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
        let store = self.state.runtime().store();
        store
            .put_push_config(&config)
            .await
            .map_err(A2aError::internal)?;
        self.state.push_wake();
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
        let store = self.state.runtime().store();
        match store
            .push_config(r.thread, r.session, &req.id)
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
        let store = self.state.runtime().store();
        let all = store
            .push_configs(r.thread, r.session)
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
        let store = self.state.runtime().store();
        // Idempotent: deleting a config that is not there is not an error.
        store
            .delete_push_config(r.thread, r.session, &req.id)
            .await
            .map_err(A2aError::internal)?;
        Ok(())
    }
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
