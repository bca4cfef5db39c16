//! Filesystem confinement of a stdio server with Landlock (Linux 5.13+, no root needed): the
//! process may read and execute only the system directories, its program and the installation
//! it belongs to, and what its registration declares readable, and write only its working directory and what it declares
//! writable. Where the kernel has Landlock ABI 6, it can neither signal processes outside its
//! sandbox (workbench, other servers) nor reach abstract unix sockets outside it. The rules are
//! prepared in workbench (paths as C strings) and applied in the
//! forked child just before `exec`, with async-signal-safe system calls only.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
/// Every right of ABI 1 (execute through make-symlink).
const ABI1_ALL: u64 = (1 << 13) - 1;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
/// The rights that apply to a file (not a directory): the kernel refuses others on a file.
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE;

const READ: u64 = EXECUTE | READ_FILE | READ_DIR;

/// System directories every server may read and execute from (those that exist).
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
    "/sys", "/run",
];

/// The Landlock ABI version the kernel offers, if any (asked once).
pub fn abi() -> Option<u32> {
    static ABI: OnceLock<Option<u32>> = OnceLock::new();
    *ABI.get_or_init(|| {
        // SAFETY: LANDLOCK_CREATE_RULESET_VERSION (1) with no attributes only returns a number.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32,
            )
        };
        (v > 0).then_some(v as u32)
    })
}

/// The rules of one server, ready to apply after `fork`.
#[derive(Debug, Clone)]
pub struct Rules {
    handled: u64,
    scoped: u64,
    paths: Vec<(CString, u64)>,
}

/// The installation a program in a `bin` directory belongs to (`<prefix>/bin/<program>`:
/// its libraries and data are under `<prefix>`, as for a virtual environment, a pyenv or
/// nvm install, /usr/local), unless that is the root or a home directory.
fn installation(program: &Path) -> Option<&Path> {
    let bin = program.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let prefix = bin.parent()?;
    let home = prefix == Path::new("/root")
        || prefix.parent() == Some(Path::new("/home"))
        || prefix.parent().is_none();
    (!home).then_some(prefix)
}

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    /// ABI 6: what the process may not reach outside its own sandbox.
    scoped: u64,
}

/// ABI 6 scopes: abstract unix sockets and signals of processes outside the sandbox.
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

impl Rules {
    /// The rules for a server running `program` in `work_dir`, with the paths it declares;
    /// None when the kernel has no Landlock.
    pub fn new(
        program: &Path,
        work_dir: &Path,
        read: &[String],
        write: &[String],
    ) -> Option<Rules> {
        let abi = abi()?;
        let mut handled = ABI1_ALL;
        if abi >= 2 {
            handled |= REFER;
        }
        if abi >= 3 {
            handled |= TRUNCATE;
        }
        let mut paths: Vec<(PathBuf, u64)> = SYSTEM_READ
            .iter()
            .map(|p| (PathBuf::from(p), READ))
            .collect();
        // Devices: /dev/null, /dev/urandom, a terminal: read and write, nothing made there.
        paths.push(("/dev".into(), READ_FILE | WRITE_FILE | READ_DIR | TRUNCATE));
        let real = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_owned());
        for p in [program, real.as_path()] {
            if let Some(prefix) = installation(p) {
                paths.push((prefix.to_owned(), READ));
            }
        }
        paths.push((real, EXECUTE | READ_FILE));
        paths.extend(read.iter().map(|p| (PathBuf::from(p), READ)));
        paths.push((work_dir.to_owned(), handled));
        paths.extend(write.iter().map(|p| (PathBuf::from(p), handled)));
        let paths = paths
            .into_iter()
            .filter_map(|(p, access)| {
                let c = CString::new(p.as_os_str().as_bytes()).ok()?;
                Some((c, access & handled))
            })
            .collect();
        let scoped = if abi >= 6 {
            SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        } else {
            0
        };
        Some(Rules {
            handled,
            scoped,
            paths,
        })
    }

    /// Restricts the calling process (after `fork`, before `exec`). The caller has set
    /// no-new-privileges. Paths that do not exist are skipped. Async-signal-safe.
    ///
    /// # Safety
    /// Only system calls; call it in the child between `fork` and `exec`.
    pub unsafe fn apply(&self) -> std::io::Result<()> {
        let attr = RulesetAttr {
            handled_access_fs: self.handled,
            handled_access_net: 0,
            scoped: self.scoped,
        };
        // Older kernels take only the first field (and refuse a larger struct's nonzero rest).
        let size = if self.scoped != 0 {
            std::mem::size_of::<RulesetAttr>()
        } else {
            std::mem::size_of::<u64>()
        };
        let ruleset = libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size,
            0u32,
        );
        if ruleset < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let ruleset = ruleset as libc::c_int;
        for (path, access) in &self.paths {
            let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            if fd < 0 {
                continue;
            }
            let mut st: libc::stat = std::mem::zeroed();
            let mut allowed = *access;
            if libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) != libc::S_IFDIR {
                allowed &= FILE_RIGHTS;
            }
            let rule = PathBeneathAttr {
                allowed_access: allowed,
                parent_fd: fd,
            };
            let added = libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset,
                1u32, // LANDLOCK_RULE_PATH_BENEATH
                &rule as *const PathBeneathAttr,
                0u32,
            );
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if added != 0 {
                libc::close(ruleset);
                return Err(err);
            }
        }
        let done = libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32);
        let err = std::io::Error::last_os_error();
        libc::close(ruleset);
        if done != 0 {
            return Err(err);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_in_a_bin_directory_brings_its_installation_but_never_a_home() {
        let p = |s: &str| installation(Path::new(s)).map(|p| p.display().to_string());
        assert_eq!(
            p("/work/app/.venv/bin/python").as_deref(),
            Some("/work/app/.venv")
        );
        assert_eq!(
            p("/root/.pyenv/versions/3.11.7/bin/python3.11").as_deref(),
            Some("/root/.pyenv/versions/3.11.7")
        );
        assert_eq!(p("/home/ada/bin/tool"), None);
        assert_eq!(p("/root/bin/tool"), None);
        assert_eq!(p("/bin/sh"), None);
        assert_eq!(p("/opt/tool/tool"), None);
    }
}
