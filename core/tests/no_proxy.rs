//! Outbound clients ignore `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` in the environment: a
//! proxy set there would see every request (and its injected credential). Its own test binary,
//! because it sets process-wide environment variables.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A listener that counts connections and answers every one with a small 200.
fn counting_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (format!("http://{addr}"), count)
}

#[tokio::test]
async fn proxy_variables_in_the_environment_are_ignored() {
    let (proxy, proxied) = counting_server();
    let (target, direct) = counting_server();
    for var in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        std::env::set_var(var, &proxy);
    }
    let allowance = workbench_core::egress::PrivateAllowance(vec!["127.0.0.1".parse().unwrap()]);
    let guarded = workbench_core::egress::GuardedClient::new(allowance);
    let plugins = workbench_core::integrations::api_client();
    let url = format!("{target}/x");
    for client in [guarded.reqwest(), plugins] {
        let res = client.get(&url).send().await.unwrap();
        assert_eq!(res.status(), 200);
    }
    assert_eq!(
        direct.load(Ordering::SeqCst),
        2,
        "both requests went straight to the target"
    );
    assert_eq!(
        proxied.load(Ordering::SeqCst),
        0,
        "the proxy from the environment saw nothing"
    );
}
