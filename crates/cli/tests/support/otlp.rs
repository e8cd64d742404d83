//! Loopback OTLP receivers (HTTP and gRPC) for tests of `duet serve`'s trace export, the spans it got
//! decoded, and a plain blocking HTTP client to drive the server with headers of one's own.

#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::sync::mpsc::Receiver;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// An OTLP/HTTP receiver on loopback: its address, and every request it gets as (head, body).
pub fn receiver() -> (String, Receiver<(String, Vec<u8>)>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some((head, body)) = read_request(&mut stream) else {
                continue;
            };
            // Handed on before the answer: once the exporter has its answer, the body is here.
            if tx.send((head, body)).is_err() {
                return;
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n");
        }
    });
    (addr, rx)
}

/// An OTLP/gRPC receiver on loopback, on a tokio runtime of its own: its address, and every
/// export it gets as ("grpc", the request re-encoded), as [`receiver`] gives them.
pub fn grpc_receiver() -> (String, Receiver<(String, Vec<u8>)>) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
        TraceService, TraceServiceServer,
    };

    struct Collect(std::sync::mpsc::Sender<(String, Vec<u8>)>);

    #[tonic::async_trait]
    impl TraceService for Collect {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            let _ = self
                .0
                .send(("grpc".to_owned(), request.into_inner().encode_to_vec()));
            Ok(tonic::Response::new(ExportTraceServiceResponse {
                partial_success: None,
            }))
        }
    }

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr").to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let served = tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(Collect(tx)))
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await;
            if let Err(e) = served {
                eprintln!("the gRPC receiver stopped: {e}");
            }
        });
    });
    (addr, rx)
}

/// One request: its head, then as many body bytes as Content-Length says.
fn read_request(stream: &mut std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let (head, mut body, length) = loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..at]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            break (head, data[at + 4..].to_vec(), length);
        }
    };
    while body.len() < length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    Some((head, body))
}

/// A span as exported, ids in hex.
#[derive(Clone, Debug)]
pub struct Span {
    pub name: String,
    pub trace: String,
    pub id: String,
    pub parent: String,
    /// (trace, span) of each link.
    pub links: Vec<(String, String)>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every span in the export requests `bodies` (OTLP protobuf).
pub fn spans(bodies: &[Vec<u8>]) -> Vec<Span> {
    let mut out = Vec::new();
    for body in bodies {
        let request = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP request");
        for resource in request.resource_spans {
            for scope in resource.scope_spans {
                for s in scope.spans {
                    out.push(Span {
                        name: s.name,
                        trace: hex(&s.trace_id),
                        id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        links: s
                            .links
                            .iter()
                            .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                            .collect(),
                    });
                }
            }
        }
    }
    out
}

/// `method path` on `addr` with `headers` and a JSON `body`; the response's status and body.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A `duet serve` process of the repository's project on `db`, listening on a free port.
pub struct Served {
    pub child: std::process::Child,
    /// `host:port`.
    pub base: String,
    /// Its stderr after the listening line.
    pub lines: std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
    /// Its stderr up to the listening line.
    pub before: Vec<String>,
}

/// Starts `duet serve --no-auth` on `db` with `args` and `env` besides.
pub fn serve(db: &str, args: &[&str], env: &[(&str, &str)]) -> Served {
    serve_project(&super::support::repo(), db, args, env)
}

/// [`serve`], serving the project at `project`.
pub fn serve_project(
    project: &std::path::Path,
    db: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Served {
    use std::io::BufRead;
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_duet"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--no-auth"])
        .args(args)
        .arg("--project")
        .arg(project)
        .args(["--db", db])
        .env_remove("DUET_DATABASE_URL")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("duet serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let mut before = Vec::new();
    let base = loop {
        let line = lines
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("duet serve stopped before listening: {before:?}"));
        if let Some(base) = line.strip_prefix("duet serve: listening on http://") {
            break base.to_owned();
        }
        before.push(line);
    };
    Served {
        child,
        base,
        lines,
        before,
    }
}

impl Served {
    /// Stops it with SIGTERM (a graceful stop, which flushes batched spans); what it said after
    /// listening, once it has exited successfully.
    pub fn stop(mut self) -> Vec<String> {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let after: Vec<String> = self.lines.map_while(Result::ok).collect();
        let exit = self.child.wait().expect("exits");
        assert!(
            exit.success(),
            "a graceful stop exits 0: {exit:?} {after:?}"
        );
        after
    }
}
