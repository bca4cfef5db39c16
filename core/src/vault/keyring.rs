//! The master key ring: versioned 32-byte keys; new secrets are sealed with the newest version,
//! older versions stay to open what was sealed before a rotation. Sealing is
//! XChaCha20-Poly1305 with a fresh random 24-byte nonce per write and associated data that binds
//! the key version, the project and the secret's name, so a ciphertext copied into another row
//! does not open.

use std::collections::BTreeMap;
use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use zeroize::{Zeroize, Zeroizing};

use crate::crypto::random_bytes;
use crate::{Error, Result};

/// 32 key bytes, wiped on drop, never printed.
#[derive(Clone)]
pub struct MasterKey(Zeroizing<[u8; 32]>);

impl MasterKey {
    pub fn new(bytes: [u8; 32]) -> MasterKey {
        MasterKey(Zeroizing::new(bytes))
    }

    pub fn generate() -> MasterKey {
        let mut b = random_bytes::<32>();
        let k = MasterKey::new(b);
        b.zeroize();
        k
    }

    pub fn to_base64(&self) -> Zeroizing<String> {
        Zeroizing::new(STANDARD.encode(*self.0))
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(***)")
    }
}

#[derive(Clone, Debug, Default)]
pub struct KeyRing {
    keys: BTreeMap<u32, MasterKey>,
}

/// A sealed value as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub ciphertext: String,
    pub nonce: String,
    pub key_version: i64,
}

impl KeyRing {
    pub fn new() -> KeyRing {
        KeyRing::default()
    }

    pub fn insert(&mut self, version: u32, key: MasterKey) {
        self.keys.insert(version, key);
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The newest version, which seals new values.
    pub fn current_version(&self) -> Option<u32> {
        self.keys.keys().next_back().copied()
    }

    pub fn versions(&self) -> impl Iterator<Item = (&u32, &MasterKey)> {
        self.keys.iter()
    }

    fn aad(version: u32, project_id: &str, name: &str) -> Vec<u8> {
        format!("workbench-secret\x1fv{version}\x1f{project_id}\x1f{name}").into_bytes()
    }

    fn cipher(&self, version: u32) -> Result<XChaCha20Poly1305> {
        let key = self.keys.get(&version).ok_or_else(|| {
            Error::internal(format!("master key version {version} is not loaded; restore it to the key file or WB_MASTER_KEY"))
        })?;
        Ok(XChaCha20Poly1305::new(Key::from_slice(&*key.0)))
    }

    /// Seals `plaintext` for the secret `name` of `project_id` under the newest key.
    pub fn seal(&self, project_id: &str, name: &str, plaintext: &[u8]) -> Result<Sealed> {
        let version = self
            .current_version()
            .ok_or_else(|| Error::internal("no master key configured"))?;
        let nonce = random_bytes::<24>();
        let ciphertext = self
            .cipher(version)?
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: &Self::aad(version, project_id, name),
                },
            )
            .map_err(|_| Error::internal("encryption failed"))?;
        Ok(Sealed {
            ciphertext: STANDARD.encode(ciphertext),
            nonce: STANDARD.encode(nonce),
            key_version: version as i64,
        })
    }

    /// Opens a sealed value; fails when it was sealed for another project or name, under a key
    /// that is not loaded, or was tampered with.
    pub fn open(
        &self,
        project_id: &str,
        name: &str,
        sealed: &Sealed,
    ) -> Result<Zeroizing<Vec<u8>>> {
        let version =
            u32::try_from(sealed.key_version).map_err(|_| Error::internal("bad key version"))?;
        let nonce = STANDARD
            .decode(&sealed.nonce)
            .map_err(|_| Error::internal("bad nonce encoding"))?;
        let ciphertext = STANDARD
            .decode(&sealed.ciphertext)
            .map_err(|_| Error::internal("bad ciphertext encoding"))?;
        if nonce.len() != 24 {
            return Err(Error::internal("bad nonce length"));
        }
        let plain = self
            .cipher(version)?
            .decrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &ciphertext,
                    aad: &Self::aad(version, project_id, name),
                },
            )
            .map_err(|_| {
                Error::internal(format!(
                    "secret {name} does not decrypt (wrong key, project or name)"
                ))
            })?;
        Ok(Zeroizing::new(plain))
    }
}

/// Why key material (a key file or `WB_MASTER_KEY`) does not parse into a [`KeyRing`]. Each
/// variant names the origin and what is wrong with it; none carries key bytes.
#[derive(Debug, thiserror::Error)]
pub enum KeyRingError {
    /// The text before `:` is not a version number.
    #[error("{origin}: bad key version in {version:?}")]
    BadVersion { origin: String, version: String },
    /// The key of a version is not base64 (the decoder's error is dropped: it quotes key bytes).
    #[error("{origin}: key version {version} is not valid base64")]
    NotBase64 { origin: String, version: u32 },
    /// The key of a version does not decode to 32 bytes.
    #[error("{origin}: key version {version} must be 32 bytes")]
    WrongLength { origin: String, version: u32 },
    /// The same version appears more than once.
    #[error("{origin}: key version {version} appears twice")]
    DuplicateVersion { origin: String, version: u32 },
    /// No key at all (empty, or only comments).
    #[error("{origin}: no key")]
    NoKey { origin: String },
}

/// Parses key material: one key per line or comma-separated entry, `<version>:<base64>`; a bare
/// base64 key is version 1 (the format of the key file the first run creates).
pub fn parse_keyring(text: &str, origin: &str) -> std::result::Result<KeyRing, KeyRingError> {
    let mut ring = KeyRing::new();
    for entry in text
        .split(['\n', ','])
        .map(str::trim)
        .filter(|e| !e.is_empty() && !e.starts_with('#'))
    {
        let (version, b64) = match entry.split_once(':') {
            Some((v, k)) => (
                v.trim()
                    .trim_start_matches('v')
                    .parse::<u32>()
                    .map_err(|_| KeyRingError::BadVersion {
                        origin: origin.to_owned(),
                        version: v.to_owned(),
                    })?,
                k.trim(),
            ),
            None => (1, entry),
        };
        let raw = Zeroizing::new(STANDARD.decode(b64).map_err(|_| KeyRingError::NotBase64 {
            origin: origin.to_owned(),
            version,
        })?);
        let bytes: [u8; 32] = raw
            .as_slice()
            .try_into()
            .map_err(|_| KeyRingError::WrongLength {
                origin: origin.to_owned(),
                version,
            })?;
        if ring.keys.insert(version, MasterKey::new(bytes)).is_some() {
            return Err(KeyRingError::DuplicateVersion {
                origin: origin.to_owned(),
                version,
            });
        }
    }
    if ring.is_empty() {
        return Err(KeyRingError::NoKey {
            origin: origin.to_owned(),
        });
    }
    Ok(ring)
}

/// The key file text for a ring (one `<version>:<base64>` per line).
pub fn format_keyring(ring: &KeyRing) -> Zeroizing<String> {
    let mut out = Zeroizing::new(String::new());
    for (v, k) in ring.versions() {
        out.push_str(&format!("{v}:{}\n", k.to_base64().as_str()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> KeyRing {
        let mut r = KeyRing::new();
        r.insert(1, MasterKey::generate());
        r
    }

    #[test]
    fn sealed_values_open_only_for_their_project_and_name() {
        let r = ring();
        let s = r.seal("prj_a", "TOKEN", b"hunter22").unwrap();
        assert_eq!(&*r.open("prj_a", "TOKEN", &s).unwrap(), b"hunter22");
        assert!(
            r.open("prj_b", "TOKEN", &s).is_err(),
            "copied to another project"
        );
        assert!(
            r.open("prj_a", "OTHER", &s).is_err(),
            "copied to another name"
        );
        let again = r.seal("prj_a", "TOKEN", b"hunter22").unwrap();
        assert_ne!(s.nonce, again.nonce, "fresh nonce per write");
        assert_ne!(s.ciphertext, again.ciphertext);
        let mut tampered = s.clone();
        tampered.key_version = 2;
        assert!(r.open("prj_a", "TOKEN", &tampered).is_err());
    }

    #[test]
    fn rotation_keeps_old_versions_readable_and_seals_with_the_newest() {
        let mut r = ring();
        let old = r.seal("p", "N", b"secret-1").unwrap();
        r.insert(2, MasterKey::generate());
        let new = r.seal("p", "N", b"secret-2").unwrap();
        assert_eq!(new.key_version, 2);
        assert_eq!(&*r.open("p", "N", &old).unwrap(), b"secret-1");
    }

    #[test]
    fn key_files_parse_in_both_formats() {
        let k = MasterKey::generate();
        let bare = parse_keyring(&k.to_base64(), "file").unwrap();
        assert_eq!(bare.current_version(), Some(1));
        let mut r = ring();
        r.insert(7, MasterKey::generate());
        let text = format_keyring(&r);
        let back = parse_keyring(&text, "file").unwrap();
        assert_eq!(back.current_version(), Some(7));
        assert_eq!(
            parse_keyring("1:abc", "file").unwrap_err().to_string(),
            "file: key version 1 is not valid base64"
        );
        assert_eq!(
            parse_keyring("", "file").unwrap_err().to_string(),
            "file: no key"
        );
        assert!(!format!("{:?}", r).contains(k.to_base64().as_str()));
    }

    #[test]
    fn keyring_errors_name_the_origin_and_the_problem_but_no_key_bytes() {
        let k = MasterKey::generate();
        let b64 = k.to_base64();
        let dup = format!("1:{}\n1:{}", b64.as_str(), b64.as_str());
        let short = format!("2:{}", STANDARD.encode([7u8; 16]));
        for (text, want) in [
            ("x1:abc", "WB_MASTER_KEY: bad key version in \"x1\""),
            (
                short.as_str(),
                "WB_MASTER_KEY: key version 2 must be 32 bytes",
            ),
            (dup.as_str(), "WB_MASTER_KEY: key version 1 appears twice"),
            ("# only a comment", "WB_MASTER_KEY: no key"),
        ] {
            let err = parse_keyring(text, "WB_MASTER_KEY").unwrap_err();
            assert_eq!(err.to_string(), want);
            assert!(!format!("{err:?}").contains(b64.as_str()));
        }
    }
}
