//! The one signature every outbound delivery carries (D25):
//! `Workbench-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`.
//! The timestamp is inside the signed material, so a receiver that refuses a `t` more than
//! `TOLERANCE_SECS` from its clock refuses replays too. Webhook deliveries also carry, for a
//! transition period, the old `sha256=<hex HMAC-SHA256(secret, raw body)>` value under
//! `Workbench-Signature-Legacy` (see `docs/deliveries.md`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "workbench-signature";
/// The header carrying the old, untimed webhook signature during the transition.
pub const LEGACY_SIGNATURE_HEADER: &str = "workbench-signature-legacy";
/// The last day `LEGACY_SIGNATURE_HEADER` is sent; it goes in the first release after it.
pub const LEGACY_SIGNATURE_UNTIL: &str = "2027-03-31";
/// How far from its own clock a receiver should accept `t`, in seconds.
pub const TOLERANCE_SECS: i64 = 300;

fn mac(secret: &[u8]) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length")
}

/// `t=<t>,v1=<hex of HMAC-SHA256(secret, "<t>.<body>")>`.
pub fn signature(secret: &[u8], t: i64, body: &[u8]) -> String {
    let mut m = mac(secret);
    m.update(t.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    format!("t={t},v1={}", hex::encode(m.finalize().into_bytes()))
}

/// `sha256=<hex of HMAC-SHA256(secret, body)>`: the webhook's old signature, sent under
/// `LEGACY_SIGNATURE_HEADER` until `LEGACY_SIGNATURE_UNTIL`.
pub fn legacy_signature(secret: &[u8], body: &[u8]) -> String {
    let mut m = mac(secret);
    m.update(body);
    format!("sha256={}", hex::encode(m.finalize().into_bytes()))
}

/// Why a signature is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not `t=<digits>,v1=<hex>`.
    Malformed,
    /// `t` is more than `TOLERANCE_SECS` from `now`.
    Stale,
    /// No `v1` matches.
    Mismatch,
}

/// What a receiver does: parse `t` and every `v1`, refuse a `t` outside the tolerance, and
/// compare HMAC-SHA256(secret, "<t>.<body>") with each `v1` in constant time.
pub fn verify(secret: &[u8], header: &str, body: &[u8], now_secs: i64) -> Result<(), Refused> {
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1.push(hex::decode(v).map_err(|_| Refused::Malformed)?),
            _ => {}
        }
    }
    let t = t.ok_or(Refused::Malformed)?;
    if v1.is_empty() {
        return Err(Refused::Malformed);
    }
    if (now_secs - t).abs() > TOLERANCE_SECS {
        return Err(Refused::Stale);
    }
    for candidate in v1 {
        let mut m = mac(secret);
        m.update(t.to_string().as_bytes());
        m.update(b".");
        m.update(body);
        if m.verify_slice(&candidate).is_ok() {
            return Ok(());
        }
    }
    Err(Refused::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_covers_the_timestamp_and_the_body() {
        // HMAC-SHA256("key", "1700000000.{}") computed independently (Python hmac).
        assert_eq!(
            signature(b"key", 1_700_000_000, b"{}"),
            "t=1700000000,v1=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
        );
    }

    #[test]
    fn the_legacy_signature_matches_the_rfc_4231_test_vector() {
        // RFC 4231, test case 2.
        assert_eq!(
            legacy_signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn verify_accepts_a_fresh_signature_and_refuses_stale_altered_or_malformed_ones() {
        let sig = signature(b"key", 1_700_000_000, b"{}");
        assert_eq!(verify(b"key", &sig, b"{}", 1_700_000_000 + 299), Ok(()));
        assert_eq!(verify(b"key", &sig, b"{}", 1_700_000_000 - 300), Ok(()));
        assert_eq!(
            verify(b"key", &sig, b"{}", 1_700_000_000 + 301),
            Err(Refused::Stale)
        );
        assert_eq!(
            verify(b"key", &sig, b"{ }", 1_700_000_000),
            Err(Refused::Mismatch)
        );
        assert_eq!(
            verify(b"other", &sig, b"{}", 1_700_000_000),
            Err(Refused::Mismatch)
        );
        // A replay under a fresh timestamp needs the secret: the old v1 does not match.
        let moved = sig.replace("t=1700000000", "t=1700000900");
        assert_eq!(
            verify(b"key", &moved, b"{}", 1_700_000_900),
            Err(Refused::Mismatch)
        );
        assert_eq!(
            verify(b"key", "sha256=00", b"{}", 0),
            Err(Refused::Malformed)
        );
    }
}
