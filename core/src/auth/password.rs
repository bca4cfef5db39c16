//! Password hashing with argon2id at OWASP's recommended parameters (19 MiB, t=2, p=1).
//! Hashing runs on the blocking pool so a sign-in never stalls the async workers, at most one
//! hash per core at a time: unauthenticated requests cannot pile up 19 MiB hashes. A request
//! that waits longer than `HASH_WAIT` for its turn is refused as throttled (429).

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

use crate::{Error, Result};

pub const MIN_PASSWORD_CHARS: usize = 10;
/// Bounds the work an attacker can make one hash cost.
pub const MAX_PASSWORD_BYTES: usize = 1024;

fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).expect("static argon2 parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

pub fn validate_password(password: &str) -> Result<()> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(Error::invalid(format!(
            "password too short; use at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(Error::invalid(format!(
            "password too long; use at most {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

/// How long a request waits for a hashing slot before it is refused.
pub const HASH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// One argon2 computation at a time per core.
async fn hashing_slot() -> Result<tokio::sync::SemaphorePermit<'static>> {
    static SLOTS: std::sync::LazyLock<tokio::sync::Semaphore> = std::sync::LazyLock::new(|| {
        tokio::sync::Semaphore::new(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
        )
    });
    match tokio::time::timeout(HASH_WAIT, SLOTS.acquire()).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(Error::Throttled {
            retry_after_secs: 1,
        }),
    }
}

pub async fn hash_password(password: &str) -> Result<String> {
    validate_password(password)?;
    let password = password.to_owned();
    let _slot = hashing_slot().await?;
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        argon2()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| Error::internal(format!("password hashing failed: {e}")))
    })
    .await
    .map_err(|e| Error::internal(format!("password hashing task failed: {e}")))?
}

/// Constant-time verification (argon2 compares digests in constant time). A malformed stored
/// hash verifies as false; no free hashing slot in time is `Throttled`.
pub async fn verify_password(password: &str, stored_hash: &str) -> Result<bool> {
    if password.len() > MAX_PASSWORD_BYTES {
        return Ok(false);
    }
    let password = password.to_owned();
    let stored_hash = stored_hash.to_owned();
    let _slot = hashing_slot().await?;
    Ok(
        tokio::task::spawn_blocking(move || match PasswordHash::new(&stored_hash) {
            Ok(parsed) => argon2()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok(),
            Err(_) => false,
        })
        .await
        .unwrap_or(false),
    )
}

/// A real hash of a random password, verified against when the email is unknown so that an
/// unknown email costs the same time as a wrong password.
pub(crate) async fn dummy_hash() -> &'static str {
    static DUMMY: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    DUMMY
        .get_or_init(|| async {
            hash_password(&crate::crypto::random_base62(24))
                .await
                .unwrap_or_default()
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_are_argon2id_and_verify() {
        let h = hash_password("correct horse battery").await.unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify_password("correct horse battery", &h).await.unwrap());
        assert!(!verify_password("correct horse battery!", &h).await.unwrap());
        assert!(!verify_password("x", "not a hash").await.unwrap());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn no_more_hashes_run_at_once_than_there_are_cores() {
        let h = hash_password("correct horse battery").await.unwrap();
        let running = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tasks: Vec<_> = (0..12)
            .map(|_| {
                let (h, running, peak) = (h.clone(), running.clone(), peak.clone());
                tokio::spawn(async move {
                    let _slot = hashing_slot().await.unwrap();
                    let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    peak.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                    let ok = tokio::task::spawn_blocking(move || PasswordHash::new(&h).is_ok())
                        .await
                        .unwrap();
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    ok
                })
            })
            .collect();
        for t in tasks {
            assert!(t.await.unwrap());
        }
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        assert!(
            peak.load(std::sync::atomic::Ordering::SeqCst) <= cores,
            "at most {cores} at once"
        );
    }

    #[test]
    fn short_and_huge_passwords_are_refused() {
        assert!(validate_password("short").is_err());
        assert!(validate_password(&"x".repeat(2000)).is_err());
        assert!(validate_password("long enough pass").is_ok());
    }
}
