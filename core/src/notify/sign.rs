//! Webhook signatures: HMAC-SHA256 of the exact body bytes under the project's signing secret,
//! hex-encoded as `sha256=<hex>` (the form GitHub's `X-Hub-Signature-256` made familiar).
//! Receivers recompute it over the raw body and compare in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "workbench-signature";

/// `sha256=<hex of HMAC-SHA256(secret, body)>`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_the_rfc_4231_test_vector() {
        // RFC 4231, test case 2.
        let sig = signature(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            sig,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
