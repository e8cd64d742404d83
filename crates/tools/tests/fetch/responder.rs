//! A tiny HTTP/1.1 server on 127.0.0.1 for `fetch`'s tests: one request per connection, each
//! recorded (method, path, headers, body) before it is answered as the test's route says,
//! and a count of the connections accepted (so a test can show that a refused request never
//! connected).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A request as the server read it.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub(crate) method: String,
    /// The request target: path and query.
    pub(crate) path: String,
    /// Names lower case, in the order sent.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Received {
    /// Every value of header `name`.
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The first value of header `name`.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.all(name).first().copied()
    }
}

/// How the server answers.
pub(crate) enum Reply {
    /// With `Content-Length`.
    Send {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Without a length: the body ends when the connection closes (so the client cannot know
    /// its size before reading it).
    Stream(Vec<u8>),
    /// Never: the connection stays open and silent.
    Never,
}

impl Reply {
    /// 200 with `body` as text.
    pub(crate) fn ok(body: &str) -> Reply {
        Reply::Send {
            status: 200,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    /// `status` pointing at `to`.
    pub(crate) fn redirect(status: u16, to: &str) -> Reply {
        Reply::Send {
            status,
            headers: vec![("Location".into(), to.into())],
            body: Vec::new(),
        }
    }
}

type Route = dyn Fn(&Received) -> Reply + Send + Sync;

/// The running server.
pub(crate) struct Responder {
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    pub(crate) port: u16,
    received: mpsc::UnboundedReceiver<Received>,
    accepted: Arc<AtomicUsize>,
}

impl Responder {
    /// Listens on a free port of 127.0.0.1 and answers every request with `route`.
    pub(crate) async fn start(
        route: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> Responder {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let (tx, received) = mpsc::unbounded_channel();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let route: Arc<Route> = Arc::new(route);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, route.clone(), tx.clone()));
            }
        });
        Responder {
            base: format!("http://{addr}"),
            port: addr.port(),
            received,
            accepted,
        }
    }

    /// The next request the server read (waits for it).
    pub(crate) async fn next(&mut self) -> Received {
        self.received.recv().await.expect("the server is running")
    }

    /// How many connections it has accepted so far.
    pub(crate) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

async fn serve(mut stream: TcpStream, route: Arc<Route>, tx: mpsc::UnboundedSender<Received>) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let reply = route(&request);
    let _ = tx.send(request);
    let head = |status: u16, headers: &[(String, String)], length: Option<usize>| {
        let mut head = format!("HTTP/1.1 {status} Whatever\r\nConnection: close\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(n) = length {
            head.push_str(&format!("Content-Length: {n}\r\n"));
        }
        head.push_str("\r\n");
        head.into_bytes()
    };
    let bytes = match reply {
        Reply::Send {
            status,
            headers,
            body,
        } => [head(status, &headers, Some(body.len())), body].concat(),
        Reply::Stream(body) => [head(200, &[], None), body].concat(),
        Reply::Never => {
            // Hold the connection open, saying nothing, until the test ends.
            std::future::pending::<()>().await;
            return;
        }
    };
    let _ = stream.write_all(&bytes).await;
    let _ = stream.shutdown().await;
}

/// One request from `stream`: the head up to its blank line, then `Content-Length` bytes.
async fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}
