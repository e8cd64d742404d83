//! URLs checked as destinations: schemes, parser tricks, IP literals in every spelling the URL
//! parser accepts, `localhost` (resolved from the hosts file), a name with one private address
//! among public ones, and what `allow_private` lets through. Nothing is sent anywhere; the
//! only name looked up is `localhost`.

use std::net::SocketAddr;

use duet_net::{TargetError, check, judge, same_origin, target_allowed};

#[tokio::test]
async fn private_and_malformed_targets_are_refused() {
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.1.2.3/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9000/",
        "http://[fe80::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[64:ff9b:1::a00:1]/",
        "http://[::7f00:1]/",
        "http://[::ffff:0:7f00:1]/",
        "http://[2002:7f00:1::1]/",
        "http://[fec0::1]/",
        "http://[2001::1]/",
        "http://192.0.0.1/",
        "http://240.0.0.1/",
        "http://0.0.0.0/",
        // Spellings the URL parser reads as 127.0.0.1.
        "http://2130706433/",
        "http://0x7f.1/",
        "http://127.1/",
        "http://%31%32%37.0.0.1/",
        "ftp://example.com/",
        "http:///nohost",
        "http://169.254.169.254\\@example.com/",
        "http://127.0.0.1#@example.com/",
        "not a url",
    ] {
        assert!(target_allowed(url, false).await.is_err(), "{url}");
    }
}

#[tokio::test]
async fn a_refusal_says_which_block() {
    let err = target_allowed("http://[64:ff9b::a9fe:a9fe]/", false)
        .await
        .expect_err("refused");
    let TargetError::Refused { refusal, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(refusal.block.rfc, "RFC 3927", "{err}");
    assert!(err.to_string().contains("169.254.169.254"), "{err}");
    let local = target_allowed("http://localhost:1/", false)
        .await
        .expect_err("refused");
    assert!(local.to_string().contains("Loopback"), "{local}");
}

#[tokio::test]
async fn public_literals_pass_and_names_are_pinned() {
    let t = target_allowed("https://93.184.216.34/hook", false)
        .await
        .expect("public");
    assert_eq!(t.pin, None, "a literal has nothing to pin");
    let t = target_allowed("https://[2606:4700:4700::1111]:8443/x", false)
        .await
        .expect("public");
    assert_eq!(t.url.port(), Some(8443));
    // With private targets allowed, only the scheme and a host are checked: nothing resolved.
    let t = target_allowed("http://localhost:8080/hook", true)
        .await
        .expect("allowed");
    assert_eq!(t.pin, None);
    assert!(target_allowed("ftp://127.0.0.1/", true).await.is_err());
    let parsed = url::Url::parse("http://[::1]:9/").expect("a URL");
    assert!(check(parsed, false).await.is_err());
}

#[test]
fn one_private_address_among_public_ones_refuses_the_name() {
    let public: SocketAddr = "93.184.216.34:443".parse().expect("an address");
    let private: SocketAddr = "10.0.0.7:443".parse().expect("an address");
    assert!(judge("mixed.example", &[public]).is_ok());
    let err = judge("mixed.example", &[public, private]).expect_err("refused");
    assert!(err.to_string().contains("10.0.0.7"), "{err}");
    assert!(matches!(
        judge("empty.example", &[]),
        Err(TargetError::Nothing(_))
    ));
}

#[test]
fn origins_compare_scheme_host_and_port() {
    let u = |s: &str| url::Url::parse(s).expect("a URL");
    assert!(same_origin(
        &u("http://a.example/x"),
        &u("http://A.example:80/y?q")
    ));
    assert!(!same_origin(
        &u("http://a.example/"),
        &u("https://a.example/")
    ));
    assert!(!same_origin(
        &u("http://a.example/"),
        &u("http://a.example:81/")
    ));
    assert!(!same_origin(
        &u("http://a.example/"),
        &u("http://b.example/")
    ));
}

#[test]
fn redirects_stay_within_the_origin_and_are_few() {
    let u = |s: &str| url::Url::parse(s).expect("a URL");
    let home = u("https://a.example/start");
    assert!(duet_net::redirect_allowed(
        std::slice::from_ref(&home),
        &u("https://a.example/next")
    ));
    assert!(!duet_net::redirect_allowed(
        std::slice::from_ref(&home),
        &u("https://b.example/next")
    ));
    assert!(!duet_net::redirect_allowed(
        std::slice::from_ref(&home),
        &u("http://a.example/next")
    ));
    assert!(!duet_net::redirect_allowed(&[], &u("https://a.example/")));
    let long = vec![home; duet_net::MAX_REDIRECTS + 1];
    assert!(!duet_net::redirect_allowed(
        &long,
        &u("https://a.example/next")
    ));
}
