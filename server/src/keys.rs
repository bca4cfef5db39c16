//! Server secrets: the vault master key ring and the proxy-token signing key. Each comes from
//! its environment variable or from a key file in the data directory, which the embedded default
//! creates on first run with mode 0600 (directory 0700). The master key file (and
//! `WB_MASTER_KEY`) hold versioned keys, `<version>:<base64>` per line (or comma-separated); a
//! bare base64 key is version 1. `rotate` adds a version. Failures are [`KeyError`]s.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

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

/// Why the server keys cannot be loaded, created or rotated. Messages name the file or variable
/// and what went wrong, never key bytes.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// An existing key file cannot be read.
    #[error("cannot read key file {}: {source}", path.display())]
    ReadKeyFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A new key file cannot be created.
    #[error("cannot create key file {}: {source}", path.display())]
    CreateKeyFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A new key file was created but its key cannot be written.
    #[error("cannot write key file {}: {source}", path.display())]
    WriteKeyFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The data directory is missing and cannot be created (mode 0700).
    #[error("cannot create data directory {}: {source}", path.display())]
    CreateDataDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The operating system has no randomness for a new key. (`getrandom::Error` is not marked
    /// as the source: it implements `std::error::Error` only with getrandom's `std` feature.)
    #[error("no randomness for a new key: {0}")]
    NoRandomness(getrandom::Error),
    /// A jwt key (variable or file, named by `origin`) is not base64.
    #[error("{origin} is not valid base64; expected 32 random bytes in base64")]
    NotBase64 { origin: String },
    /// A jwt key (variable or file, named by `origin`) does not decode to 32 bytes.
    #[error("{origin} must decode to exactly {} bytes", KEY_BYTES)]
    WrongLength { origin: String },
    /// The master key ring text does not parse: a `workbench_core::vault` `KeyRingError`, which
    /// names its origin (file path or `WB_MASTER_KEY`).
    #[error(transparent)]
    KeyRing(#[from] workbench_core::vault::KeyRingError),
    /// Rotation was asked for while the master key comes from `WB_MASTER_KEY`.
    #[error("the master key comes from WB_MASTER_KEY; add a new version there (e.g. 1:<old>,2:<new>, 32 random bytes in base64), restart, then run rotate-master-key again to re-encrypt")]
    RotateFromEnv,
    /// Rotation cannot read the master key file.
    #[error("cannot read {}: {source}", path.display())]
    RotateRead {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Rotation cannot create or write the temporary file with the new ring.
    #[error("cannot write {}: {source}", path.display())]
    RotateWrite {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Rotation cannot move the new ring over the master key file.
    #[error("cannot replace {}: {source}", path.display())]
    RotateReplace {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Keys {
    /// Loads both keys, creating missing key files.
    pub fn load_or_create(data_dir: &Path) -> Result<Keys, KeyError> {
        let master = match std::env::var("WB_MASTER_KEY")
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            Some(v) => parse_keyring(&v, "WB_MASTER_KEY")?,
            None => {
                ensure_private_dir(data_dir)?;
                let path = data_dir.join(MASTER_KEY_FILE);
                if !path.exists() {
                    create_key_file(&path)?;
                }
                let text = fs::read_to_string(&path).map_err(|source| KeyError::ReadKeyFile {
                    path: path.clone(),
                    source,
                })?;
                parse_keyring(&text, &path.display().to_string())?
            }
        };
        Ok(Keys {
            master,
            jwt: load_one(data_dir, "WB_JWT_KEY", "jwt.key")?,
        })
    }
}

/// Adds a new master key version to the key file (written atomically, mode 0600) and returns
/// the new ring. Refused when the keys come from `WB_MASTER_KEY`: the operator adds the version
/// there (`1:<old>,2:<new>`) and restarts.
pub fn add_master_key_version(data_dir: &Path) -> Result<KeyRing, KeyError> {
    if std::env::var("WB_MASTER_KEY")
        .ok()
        .is_some_and(|v| !v.trim().is_empty())
    {
        return Err(KeyError::RotateFromEnv);
    }
    let path = data_dir.join(MASTER_KEY_FILE);
    let text = fs::read_to_string(&path).map_err(|source| KeyError::RotateRead {
        path: path.clone(),
        source,
    })?;
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
    let mut f = options.open(&tmp).map_err(|source| KeyError::RotateWrite {
        path: tmp.clone(),
        source,
    })?;
    f.write_all(format_keyring(&ring).as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|source| KeyError::RotateWrite {
            path: tmp.clone(),
            source,
        })?;
    fs::rename(&tmp, &path).map_err(|source| KeyError::RotateReplace { path, source })?;
    Ok(ring)
}

fn decode(text: &str, origin: &str) -> Result<SecretKey, KeyError> {
    // The decoder's own error is dropped on purpose: it quotes the offending key byte.
    let raw = STANDARD
        .decode(text.trim())
        .map_err(|_| KeyError::NotBase64 {
            origin: origin.to_owned(),
        })?;
    let bytes: [u8; KEY_BYTES] = raw.try_into().map_err(|_| KeyError::WrongLength {
        origin: origin.to_owned(),
    })?;
    Ok(SecretKey(bytes))
}

fn load_one(data_dir: &Path, env: &str, file: &str) -> Result<SecretKey, KeyError> {
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
        Err(source) => Err(KeyError::ReadKeyFile { path, source }),
    }
}

fn ensure_private_dir(dir: &Path) -> Result<(), KeyError> {
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
        .map_err(|source| KeyError::CreateDataDir {
            path: dir.to_path_buf(),
            source,
        })
}

fn create_key_file(path: &Path) -> Result<SecretKey, KeyError> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::getrandom(&mut bytes).map_err(KeyError::NoRandomness)?;
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
                .map_err(|source| KeyError::WriteKeyFile {
                    path: path.to_path_buf(),
                    source,
                })?;
            tracing::info!(path = %path.display(), "created key file");
            Ok(SecretKey(bytes))
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = fs::read_to_string(path).map_err(|source| KeyError::ReadKeyFile {
                path: path.to_path_buf(),
                source,
            })?;
            decode(&text, &path.display().to_string())
        }
        Err(source) => Err(KeyError::CreateKeyFile {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_are_created_private_and_reused() {
        let dir = std::env::temp_dir().join(format!(
            "wb-keys-{}",
            workbench_core::crypto::random_base62(8)
        ));
        let a = Keys::load_or_create(&dir).unwrap();
        let b = Keys::load_or_create(&dir).unwrap();
        assert_eq!(a.jwt.bytes(), b.jwt.bytes());
        assert_eq!(a.master.current_version(), Some(1));
        let sealed = a.master.seal("p", "n", b"value!").unwrap();
        assert_eq!(
            &*b.master.open("p", "n", &sealed).unwrap(),
            b"value!",
            "the same master key is reused"
        );
        let rotated = add_master_key_version(&dir).unwrap();
        assert_eq!(rotated.current_version(), Some(2));
        let c = Keys::load_or_create(&dir).unwrap();
        assert_eq!(c.master.current_version(), Some(2));
        assert_eq!(
            &*c.master.open("p", "n", &sealed).unwrap(),
            b"value!",
            "old versions stay readable"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.join("master.key"))
                .unwrap()
                .permissions()
                .mode();
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
        assert!(matches!(err, KeyError::NotBase64 { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "WB_MASTER_KEY is not valid base64; expected 32 random bytes in base64"
        );
        let short = STANDARD.encode([1u8; 16]);
        let err = decode(&short, "WB_JWT_KEY").unwrap_err();
        assert!(matches!(err, KeyError::WrongLength { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "WB_JWT_KEY must decode to exactly 32 bytes"
        );
        assert!(!format!("{err:?}").contains(&short));
        let err = Keys::load_or_create(Path::new("/dev/null/wb")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot create data directory /dev/null/wb: "),
            "{err}"
        );
        assert!(
            std::error::Error::source(&err).is_some(),
            "the io::Error is the source"
        );
    }
}
