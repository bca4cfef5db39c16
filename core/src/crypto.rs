//! Small cryptographic helpers shared by every module: OS randomness, SHA-256 digests and
//! constant-time comparison. Anything secret is compared with `ct_eq`, never `==`.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Fills a fresh array from the operating system's CSPRNG.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::getrandom(&mut buf).expect("the operating system random source failed");
    buf
}

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `len` characters of [0-9A-Za-z], uniformly distributed (rejection sampling).
pub fn random_base62(len: usize) -> String {
    let mut out = String::with_capacity(len);
    while out.len() < len {
        for b in random_bytes::<64>() {
            // 248 = 4 * 62: values above it would bias the distribution.
            if b < 248 {
                out.push(BASE62[(b % 62) as usize] as char);
                if out.len() == len {
                    break;
                }
            }
        }
    }
    out
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Constant-time equality for secrets of any length (the length itself is not secret).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base62_strings_have_the_requested_length_and_alphabet() {
        let s = random_base62(40);
        assert_eq!(s.len(), 40);
        assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(s, random_base62(40));
    }

    #[test]
    fn ct_eq_compares_contents() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"abcd"));
    }
}
