//! Server secrets: the vault master key ring and the proxy-token signing key. Each comes from
//! its environment variable or from a key file in the data directory, which the embedded default
//! creates on first run with mode 0600 (directory 0700). The master key file (and
//! `WB_MASTER_KEY`) hold versioned keys, `<version>:<base64>` per line (or comma-separated); a
//! bare base64 key is version 1. `rotate` adds a version.

use std::fs;
use std::io::Write;
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use workbench_core::vault::{format_keyring, parse_keyring, KeyRing, MasterKey};

pub const KEY_BYTES: usize = 32;

/// 32 secret bytes that never print.
#[derive(Clone)]
pub struct SecretKey([u8; KEY_BYTES]);

impl SecretKey {
    pub fn bytes(&self) -> &[u8; KEY_BYTES] {
        &self.0
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(***)")
    }
}

#[derive(Clone, Debug)]
pub struct Keys {
    pub master: KeyRing,
    pub jwt: SecretKey,
}

pub const MASTER_KEY_FILE: &str = "master.key";

impl Keys {
    /// Loads both keys, creating missing key files.
    pub fn load_or_create(data_dir: &Path) -> Result<Keys, String> {
        let master = match std::env::var("WB_MASTER_KEY").ok().filter(|v| !v.trim().is_empty()) {
            Some(v) => parse_keyring(&v, "WB_MASTER_KEY")?,
            None => {
                ensure_private_dir(data_dir)?;
                let path = data_dir.join(MASTER_KEY_FILE);
                if !path.exists() {
                    create_key_file(&path)?;
                }
                let text = fs::read_to_string(&path).map_err(|e| format!("cannot read key file {}: {e}", path.display()))?;
                parse_keyring(&text, &path.display().to_string())?
            }
        };
        Ok(Keys { master, jwt: load_one(data_dir, "WB_JWT_KEY", "jwt.key")? })
    }
}

/// Adds a new master key version to the key file (written atomically, mode 0600) and returns
/// the new ring. Refused when the keys come from `WB_MASTER_KEY`: the operator adds the version
/// there (`1:<old>,2:<new>`) and restarts.
pub fn add_master_key_version(data_dir: &Path) -> Result<KeyRing, String> {
    if std::env::var("WB_MASTER_KEY").ok().is_some_and(|v| !v.trim().is_empty()) {
        return Err("the master key comes from WB_MASTER_KEY; add a new version there (e.g. 1:<old>,2:<new>, 32 random bytes in base64), restart, then run rotate-master-key again to re-encrypt".into());
    }
    let path = data_dir.join(MASTER_KEY_FILE);
    let text = fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut ring = parse_keyring(&text, &path.display().to_string())?;
    let next = ring.current_version().unwrap_or(0) + 1;
    ring.insert(next, MasterKey::generate());
    let tmp = data_dir.join(format!(".{MASTER_KEY_FILE}.{}", std::process::id()));
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(&tmp).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    f.write_all(format_keyring(&ring).as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    fs::rename(&tmp, &path).map_err(|e| format!("cannot replace {}: {e}", path.display()))?;
    Ok(ring)
}

fn decode(text: &str, origin: &str) -> Result<SecretKey, String> {
    let raw = STANDARD
        .decode(text.trim())
        .map_err(|_| format!("{origin} is not valid base64; expected 32 random bytes in base64"))?;
    let bytes: [u8; KEY_BYTES] = raw
        .try_into()
        .map_err(|_| format!("{origin} must decode to exactly {KEY_BYTES} bytes"))?;
    Ok(SecretKey(bytes))
}

fn load_one(data_dir: &Path, env: &str, file: &str) -> Result<SecretKey, String> {
    if let Ok(v) = std::env::var(env) {
        if !v.trim().is_empty() {
            return decode(&v, env);
        }
    }
    ensure_private_dir(data_dir)?;
    let path = data_dir.join(file);
    match fs::read_to_string(&path) {
        Ok(text) => decode(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key_file(&path),
        Err(e) => Err(format!("cannot read key file {}: {e}", path.display())),
    }
}

fn ensure_private_dir(dir: &Path) -> Result<(), String> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))
}

fn create_key_file(path: &Path) -> Result<SecretKey, String> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::getrandom(&mut bytes).map_err(|e| format!("no randomness for a new key: {e}"))?;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(mut f) => {
            f.write_all(STANDARD.encode(bytes).as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(|e| format!("cannot write key file {}: {e}", path.display()))?;
            tracing::info!(path = %path.display(), "created key file");
            Ok(SecretKey(bytes))
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = fs::read_to_string(path)
                .map_err(|e| format!("cannot read key file {}: {e}", path.display()))?;
            decode(&text, &path.display().to_string())
        }
        Err(e) => Err(format!("cannot create key file {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_are_created_private_and_reused() {
        let dir = std::env::temp_dir().join(format!("wb-keys-{}", workbench_core::crypto::random_base62(8)));
        let a = Keys::load_or_create(&dir).unwrap();
        let b = Keys::load_or_create(&dir).unwrap();
        assert_eq!(a.jwt.bytes(), b.jwt.bytes());
        assert_eq!(a.master.current_version(), Some(1));
        let sealed = a.master.seal("p", "n", b"value!").unwrap();
        assert_eq!(&*b.master.open("p", "n", &sealed).unwrap(), b"value!", "the same master key is reused");
        let rotated = add_master_key_version(&dir).unwrap();
        assert_eq!(rotated.current_version(), Some(2));
        let c = Keys::load_or_create(&dir).unwrap();
        assert_eq!(c.master.current_version(), Some(2));
        assert_eq!(&*c.master.open("p", "n", &sealed).unwrap(), b"value!", "old versions stay readable");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.join("master.key")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let dmode = fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(dmode & 0o777, 0o700);
        }
        assert!(!format!("{a:?}").contains(&STANDARD.encode(a.jwt.bytes())));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn malformed_keys_are_refused_with_a_clear_message() {
        let err = decode("not base64!!", "WB_MASTER_KEY").unwrap_err();
        assert!(err.contains("WB_MASTER_KEY"), "{err}");
        let err = decode(&STANDARD.encode([1u8; 16]), "WB_JWT_KEY").unwrap_err();
        assert!(err.contains("32 bytes"), "{err}");
    }
}
