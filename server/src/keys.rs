//! Server secrets: the vault master key and the proxy-token signing key. Each comes from its
//! environment variable (base64 of 32 bytes) or from a key file in the data directory, which the
//! embedded default creates on first run with mode 0600 (directory 0700).

use std::fs;
use std::io::Write;
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

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
    pub master: SecretKey,
    pub jwt: SecretKey,
}

impl Keys {
    /// Loads both keys, creating missing key files.
    pub fn load_or_create(data_dir: &Path) -> Result<Keys, String> {
        Ok(Keys {
            master: load_one(data_dir, "WB_MASTER_KEY", "master.key")?,
            jwt: load_one(data_dir, "WB_JWT_KEY", "jwt.key")?,
        })
    }
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
        assert_eq!(a.master.bytes(), b.master.bytes());
        assert_ne!(a.master.bytes(), a.jwt.bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.join("master.key")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let dmode = fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(dmode & 0o777, 0o700);
        }
        assert!(!format!("{a:?}").contains(&STANDARD.encode(a.master.bytes())));
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
