//! Starting a stdio server so that nothing it starts can outlive workbench: the process
//! workbench spawns is a *guard* (a fork of workbench that never execs), which forks the server
//! into a process group of its own, confined (clean environment, no inherited descriptors,
//! resource limits, parent-death signal). The guard watches a *lifeline* pipe whose write end
//! only workbench holds: when it closes (workbench stops the server, or workbench dies however
//! it dies, SIGKILL included) the guard stops the server's group gracefully (a grace period for
//! its stdin EOF, SIGTERM, then SIGKILL). When the server exits, the guard kills whatever is
//! left of its group and every descendant that was re-parented to it (it is a child
//! subreaper), reaps them, and exits with the server's status.
//!
//! Everything between fork and exec runs in a copy of a multi-threaded process, so it only
//! makes async-signal-safe system calls: no allocation, no locks, no Rust std I/O.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::landlock::Rules;
use super::Limits;

/// How long the server has after its stdin closed before SIGTERM, and after SIGTERM before
/// SIGKILL.
pub const STDIN_GRACE_MS: i64 = 1_000;
pub const TERM_GRACE_MS: i64 = 2_000;

/// A pipe whose ends are close-on-exec: (read, write).
pub fn lifeline() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Installs the guard into `cmd`: after `fork`, the child becomes the guard and its own child
/// (the server) goes on to `exec` the command with `limits`. `lifeline` is the read end.
/// `rules`, when given, confine the server's filesystem (Landlock).
pub fn install(
    cmd: &mut tokio::process::Command,
    lifeline: &OwnedFd,
    limits: &Limits,
    rules: Option<Rules>,
) {
    let fd = lifeline.as_raw_fd();
    let limits = *limits;
    // SAFETY: the closure only makes async-signal-safe system calls (see the module comment).
    unsafe {
        cmd.pre_exec(move || split(fd, &limits, rules.as_ref()));
    }
}

/// Runs in the forked child: forks the server (returning Ok in it, so std execs the command)
/// and turns the rest into the guard, which never returns.
fn split(lifeline: RawFd, limits: &Limits, rules: Option<&Rules>) -> io::Result<()> {
    // SAFETY: plain system calls on values owned by this (single-threaded) child.
    unsafe {
        let guard = libc::getpid();
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        // No parent-death signal for the guard: it would fire when the *thread* that spawned
        // it ends. The lifeline is the process's: it closes only when workbench is gone.
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => server(guard, limits, rules),
            pid => guard_loop(pid, lifeline),
        }
    }
}

/// The server's side, before std execs the command.
unsafe fn server(guard: libc::pid_t, limits: &Limits, rules: Option<&Rules>) -> io::Result<()> {
    // A group of its own: the guard signals the server and its descendants as one.
    libc::setpgid(0, 0);
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    if libc::getppid() != guard {
        libc::_exit(125); // the guard is already gone
    }
    close_from(3);
    let set = |resource, value: u64| {
        if value > 0 {
            let l = libc::rlimit {
                rlim_cur: value as libc::rlim_t,
                rlim_max: value as libc::rlim_t,
            };
            libc::setrlimit(resource, &l);
        }
    };
    set(
        libc::RLIMIT_AS,
        limits.address_space_mb.saturating_mul(1024 * 1024),
    );
    set(libc::RLIMIT_NPROC, limits.processes);
    set(libc::RLIMIT_NOFILE, limits.open_files);
    set(libc::RLIMIT_CPU, limits.cpu_seconds);
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::setrlimit(libc::RLIMIT_CORE, &none);
    // No new privileges through setuid binaries the server might run.
    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if let Some(rules) = rules {
        if rules.apply().is_err() {
            // Fail closed: the server does not run unconfined. Its stderr is workbench's pipe.
            let msg = b"workbench: cannot apply the Landlock filesystem rules; not starting\n";
            libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len());
            libc::_exit(126);
        }
    }
    Ok(())
}

/// Closes every descriptor from `first` up.
unsafe fn close_from(first: libc::c_uint) {
    if libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0) != 0 {
        for fd in first as libc::c_int..65_536 {
            libc::close(fd);
        }
    }
}

fn now_ms() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1000 + t.tv_nsec / 1_000_000
}

/// The guard: never returns. It sleeps in `poll` on the lifeline and a signalfd (SIGCHLD and
/// the stop signals), so it answers a closed lifeline or the server's exit at once, and wakes
/// otherwise only for the stop's grace deadlines.
unsafe fn guard_loop(server: libc::pid_t, lifeline: RawFd) -> ! {
    // Keep only the lifeline (as fd 3); stdio to /dev/null so the server's pipes end with it.
    if lifeline != 3 {
        libc::dup2(lifeline, 3);
    }
    close_from(4);
    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
    if null >= 0 {
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        if null > 2 {
            libc::close(null);
        }
    }
    // Workbench signals nothing to the guard; SIGTERM (a parent death before the lifeline
    // was watched, or an operator) means stop like a closed lifeline.
    let mut mask: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut mask);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD] {
        libc::sigaddset(&mut mask, sig);
    }
    libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
    let signals = libc::signalfd(-1, &mask, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
    let mut stopping_since: Option<i64> = None;
    let mut termed = false;
    let mut killed = false;
    loop {
        // Reap first: a child that ended before SIGCHLD was blocked sent no signal to wait for.
        let mut status = 0;
        loop {
            let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
            if pid <= 0 {
                break;
            }
            if pid == server {
                end(server, status);
            }
        }
        if signals < 0 {
            // No signalfd: fall back to what is pending.
            let mut pending: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut pending);
            if stopping_since.is_none()
                && [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
                    .iter()
                    .any(|s| libc::sigismember(&pending, *s) == 1)
            {
                stopping_since = Some(now_ms());
            }
        }
        let timeout = match stopping_since {
            None if signals < 0 => 100,
            None => -1,
            Some(since) => {
                let waited = now_ms() - since;
                if !termed && waited >= STDIN_GRACE_MS {
                    libc::kill(-server, libc::SIGTERM);
                    termed = true;
                }
                if !killed && waited >= STDIN_GRACE_MS + TERM_GRACE_MS {
                    libc::kill(-server, libc::SIGKILL);
                    killed = true;
                }
                let next = if !termed {
                    STDIN_GRACE_MS
                } else if !killed {
                    STDIN_GRACE_MS + TERM_GRACE_MS
                } else {
                    // Killed: the exit is a SIGCHLD away; poll now and then regardless.
                    waited + 100
                };
                (next - waited).clamp(1, 1_000) as libc::c_int
            }
        };
        let mut fds = [
            libc::pollfd {
                fd: if stopping_since.is_none() { 3 } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: signals,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        if libc::poll(fds.as_mut_ptr(), 2, timeout) <= 0 {
            continue;
        }
        if fds[0].revents != 0 {
            stopping_since = Some(now_ms());
        }
        if fds[1].revents != 0 {
            let mut info: libc::signalfd_siginfo = std::mem::zeroed();
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            while libc::read(signals, &mut info as *mut _ as *mut libc::c_void, size)
                == size as isize
            {
                if info.ssi_signo != libc::SIGCHLD as u32 && stopping_since.is_none() {
                    stopping_since = Some(now_ms());
                }
            }
        }
    }
}

/// The server exited with `status`: kill what is left of its group and every process
/// re-parented to the guard, reap them, and exit as the server did.
unsafe fn end(server: libc::pid_t, status: libc::c_int) -> ! {
    libc::kill(-server, libc::SIGKILL);
    for _ in 0..1000 {
        let mut found = false;
        each_child(|pid| {
            found = true;
            libc::kill(-pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGKILL);
        });
        let mut s = 0;
        while libc::waitpid(-1, &mut s, libc::WNOHANG) > 0 {}
        if !found {
            break;
        }
        libc::poll(std::ptr::null_mut(), 0, 10);
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    };
    libc::_exit(code)
}

/// Calls `f` with every child of this process, read from `/proc/self/task/<pid>/children`
/// into a stack buffer.
unsafe fn each_child(mut f: impl FnMut(libc::pid_t)) {
    let mut path = [0u8; 64];
    let prefix = b"/proc/self/task/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut at = prefix.len();
    let mut digits = [0u8; 12];
    let mut n = libc::getpid();
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in (0..len).rev() {
        path[at] = digits[i];
        at += 1;
    }
    let suffix = b"/children\0";
    path[at..at + suffix.len()].copy_from_slice(suffix);
    let fd = libc::open(path.as_ptr() as *const libc::c_char, libc::O_RDONLY);
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    let read = libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len());
    libc::close(fd);
    if read <= 0 {
        return;
    }
    let mut pid: libc::pid_t = 0;
    let mut in_number = false;
    for &b in &buf[..read as usize] {
        if b.is_ascii_digit() {
            pid = pid * 10 + (b - b'0') as libc::pid_t;
            in_number = true;
        } else if in_number {
            f(pid);
            pid = 0;
            in_number = false;
        }
    }
    if in_number {
        f(pid);
    }
}
