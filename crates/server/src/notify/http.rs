//! The HTTP client notifications go out with (A2A push, webhooks, Slack): one timeout, no
//! redirects followed (a `3xx` is a failed attempt, and a redirect could lead a checked request
//! to an address that was never checked), and, for a target someone other than the operator
//! named, a client pinned to the addresses `duet_net` checked (a second lookup could answer
//! otherwise: DNS rebinding).

use std::time::Duration;

use duet_net::Target;

/// How long a target has to answer.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

/// The client a sender builds once and sends through.
pub(crate) fn client() -> reqwest::Result<reqwest::Client> {
    builder().build()
}

/// The client to send to `target` with: `http` itself when nothing was resolved (an IP literal,
/// or private targets allowed), else a client of its own that connects to the checked
/// addresses only.
pub(crate) fn pinned(http: &reqwest::Client, target: &Target) -> Result<reqwest::Client, String> {
    match &target.pin {
        None => Ok(http.clone()),
        Some(pin) => builder()
            .resolve_to_addrs(&pin.host, &pin.addrs)
            .build()
            .map_err(|e| e.to_string()),
    }
}

fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use duet_net::{Pin, Target};

    /// A pinned client connects to the checked address whatever the name resolves to: the name
    /// here resolves nowhere, and the request still reaches the loopback listener.
    #[tokio::test]
    async fn a_pinned_client_connects_to_the_checked_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let app = axum::Router::new().route("/", axum::routing::post(|| async { "took it" }));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let target = Target {
            url: format!("http://hooks.invalid:{}/", addr.port())
                .parse()
                .expect("a URL"),
            pin: Some(Pin {
                host: "hooks.invalid".to_owned(),
                addrs: vec![addr],
            }),
        };
        let http = super::client().expect("a client");
        let pinned = super::pinned(&http, &target).expect("a pinned client");
        let answer = pinned
            .post(target.url.clone())
            .send()
            .await
            .expect("sent to the pinned address");
        assert_eq!(answer.text().await.expect("a body"), "took it");
    }
}
