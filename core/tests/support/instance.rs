//! A workbench on a fresh SQLite file in a temporary directory, with one admin signed up: what
//! core's integration tests start from (included with `#[path]`).

use workbench_core::auth::{Principal, Role};
use workbench_core::{Workbench, WorkbenchOptions};

/// A fresh instance (its directory named after `label`) and its admin's principal.
pub async fn with_admin(label: &str) -> (Workbench, Principal) {
    let dir = std::env::temp_dir().join(format!(
        "wb-{label}-{}-{}",
        std::process::id(),
        workbench_core::crypto::random_base62(6)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let wb = Workbench::open(
        &format!("sqlite://{}", dir.join("wb.db").display()),
        WorkbenchOptions::default(),
    )
    .await
    .unwrap();
    let (user, _) = wb
        .accounts()
        .create_user(
            "ada@example.com",
            "correct horse battery staple",
            Some("default"),
            Role::Admin,
        )
        .await
        .unwrap();
    let who = wb
        .accounts()
        .principal_for_user(&user.id)
        .await
        .unwrap()
        .unwrap();
    (wb, who)
}
