//! How long the portal's Tools page takes to answer, whole page read, as a signed-in admin sees
//! it: the first page of the shipped catalog, a later page, and a search. Release build, SQLite.
//! `cargo bench -p workbench-server --bench portal_tools`.

use std::time::{Duration, Instant};

mod common;

const WARMUP: usize = 5;
const RUNS: usize = 60;

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let b = common::start("portal-tools", |_| {}).await;
    let base = format!("http://{}", b.addr);
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("origin", base.parse().unwrap());
    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let res = browser
        .post(format!("{base}/api/sign_in"))
        .form(&[("email", common::EMAIL), ("password", common::PASSWORD)])
        .send()
        .await
        .unwrap();
    assert!(
        res.status().is_success() || res.status().is_redirection(),
        "sign-in: {}",
        res.status()
    );
    println!("Tools page of a fresh instance (the shipped catalog), {RUNS} loads each:");
    for (label, path) in [
        ("first page", "/tools"),
        ("page 4", "/tools?page=4"),
        ("search \"create issue\"", "/tools?q=create+issue"),
    ] {
        let mut ms = Vec::with_capacity(RUNS);
        let mut bytes = 0;
        for i in 0..WARMUP + RUNS {
            let t = Instant::now();
            let res = browser
                .get(format!("{base}{path}"))
                .header("accept", "text/html")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{path}");
            let body = res.text().await.unwrap();
            assert!(body.contains("data-testid=\"tools-pages\"") || path.contains("q="));
            if i >= WARMUP {
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            bytes = body.len();
        }
        ms.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{label:<24} p50 {:>7.2} ms   p99 {:>7.2} ms   {:>7} bytes",
            pct(&ms, 0.5),
            pct(&ms, 0.99),
            bytes
        );
    }
    let _ = std::fs::remove_dir_all(b.dir);
}
