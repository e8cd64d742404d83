//! Push notification configs for duet's A2A tasks: stored per task, checked on the way in (an
//! http(s) URL whose host is public, unless the server allows private targets), and the target
//! check the sender repeats before every delivery (a name may resolve elsewhere by then).

use duet_a2a::{
    A2aError, AuthenticationInfo, Context, Handled, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, TaskPushNotificationConfig,
    TaskPushNotificationConfigRef,
};
use duet_net::{Target, TargetError};
use duet_server_store::PushConfig;

use super::agent::DuetAgent;
use super::tasks::TaskRef;
use crate::auth::Caller;
use crate::service;

/// Whether `url` may be pushed to: an http(s) URL whose host is public — every address it
/// resolves to, by `duet_net`'s classification — unless the server allows private targets.
/// The sender connects to exactly the addresses checked (no second lookup to rebind), and
/// redirects are not followed. `Err` says why in words a client can act on.
pub(crate) async fn target_allowed(url: &str, allow_private: bool) -> Result<Target, String> {
    duet_net::target_allowed(url, allow_private)
        .await
        .map_err(|e| match e {
            TargetError::Refused { .. } => {
                format!("{e} (the server allows private targets only with --allow-private-push)")
            }
            other => other.to_string(),
        })
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
            ended_at: None,
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
        crate::input::key("id", &req.id).map_err(crate::input::Fault::into_a2a)?;
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
        crate::input::key("id", &req.id).map_err(crate::input::Fault::into_a2a)?;
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
    if let Some(id) = &req.id {
        crate::input::key("id", id).map_err(crate::input::Fault::into_a2a)?;
    }
    if req.url.chars().any(char::is_control) {
        return Err(A2aError::invalid_params(
            "the push config's `url` holds a control character",
            vec![("url".into(), "holds a control character".into())],
        ));
    }
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
            // IPv6 forms of a private IPv4 address, and blocks the old hand list missed.
            "http://[64:ff9b::7f00:1]/",
            "http://[64:ff9b:1::a00:1]/",
            "http://[::7f00:1]/",
            "http://[::ffff:0:7f00:1]/",
            "http://[2002:7f00:1::1]/",
            "http://[2001::1]/",
            "http://[fec0::1]/",
            "http://192.0.0.1/",
            "http://240.0.0.1/",
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
