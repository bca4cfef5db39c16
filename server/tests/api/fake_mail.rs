//! Real mail plumbing on loopback for email.send: an SMTP server that speaks enough ESMTP for
//! a real client (EHLO, AUTH PLAIN/LOGIN, MAIL, RCPT, DATA with dot-unstuffing, RSET, NOOP,
//! QUIT) and records every message, and a UDP DNS responder that answers TXT queries from a
//! table (NXDOMAIN for names it does not hold, SERVFAIL for names it is told to fail).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UdpSocket};

/// One message as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    /// The message as sent, headers and body, dot-unstuffed.
    pub data: String,
    /// Who authenticated on the connection, if anyone.
    pub auth_user: Option<String>,
}

#[derive(Default)]
struct SinkState {
    messages: Vec<Received>,
    /// Recipients answered 550 at RCPT.
    reject: HashSet<String>,
    /// Required credentials (user, password): without them MAIL is refused with 530.
    auth: Option<(String, String)>,
    connections: usize,
}

#[derive(Clone)]
pub struct SmtpSink {
    pub addr: SocketAddr,
    state: Arc<Mutex<SinkState>>,
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        Self::start_with(None).await
    }

    /// A server that insists on these credentials.
    pub async fn start_with(auth: Option<(&str, &str)>) -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(SinkState {
            auth: auth.map(|(u, p)| (u.to_owned(), p.to_owned())),
            ..Default::default()
        }));
        let s = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                s.lock().unwrap().connections += 1;
                tokio::spawn(session(stream, s.clone()));
            }
        });
        SmtpSink { addr, state }
    }

    /// `smtp://127.0.0.1:PORT` (plain; loopback).
    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    pub fn messages(&self) -> Vec<Received> {
        self.state.lock().unwrap().messages.clone()
    }

    pub fn reject(&self, rcpt: &str) {
        self.state.lock().unwrap().reject.insert(rcpt.to_owned());
    }

    pub fn connections(&self) -> usize {
        self.state.lock().unwrap().connections
    }
}

fn angle(arg: &str) -> String {
    let a = arg.split_once(':').map(|(_, r)| r).unwrap_or(arg).trim();
    let a = a.split_whitespace().next().unwrap_or("");
    a.trim_start_matches('<').trim_end_matches('>').to_owned()
}

async fn session(stream: tokio::net::TcpStream, state: Arc<Mutex<SinkState>>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let _ = write.write_all(b"220 sink.test ESMTP ready\r\n").await;
    let mut authed: Option<String> = None;
    let mut from: Option<String> = None;
    let mut rcpts: Vec<String> = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let cmd = line.trim_end().to_owned();
        let upper = cmd.to_ascii_uppercase();
        let required = state.lock().unwrap().auth.clone();
        let reply: String = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            "250-sink.test\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 AUTH PLAIN LOGIN\r\n".into()
        } else if let Some(rest) = upper.strip_prefix("AUTH PLAIN") {
            let b64 = cmd[cmd.len() - rest.len()..].trim().to_owned();
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap_or_default();
            let parts: Vec<String> = decoded
                .split(|b| *b == 0)
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            let (user, pass) = (
                parts.get(1).cloned().unwrap_or_default(),
                parts.get(2).cloned().unwrap_or_default(),
            );
            if required
                .as_ref()
                .is_none_or(|(u, p)| *u == user && *p == pass)
            {
                authed = Some(user);
                "235 2.7.0 authenticated\r\n".into()
            } else {
                "535 5.7.8 authentication credentials invalid\r\n".into()
            }
        } else if upper.starts_with("AUTH LOGIN") {
            let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
            let _ = write
                .write_all(format!("334 {}\r\n", b64("Username:")).as_bytes())
                .await;
            let mut u = String::new();
            let _ = lines.read_line(&mut u).await;
            let _ = write
                .write_all(format!("334 {}\r\n", b64("Password:")).as_bytes())
                .await;
            let mut p = String::new();
            let _ = lines.read_line(&mut p).await;
            let dec = |s: &str| {
                String::from_utf8_lossy(
                    &base64::engine::general_purpose::STANDARD
                        .decode(s.trim())
                        .unwrap_or_default(),
                )
                .into_owned()
            };
            let (user, pass) = (dec(&u), dec(&p));
            if required
                .as_ref()
                .is_none_or(|(ru, rp)| *ru == user && *rp == pass)
            {
                authed = Some(user);
                "235 2.7.0 authenticated\r\n".into()
            } else {
                "535 5.7.8 authentication credentials invalid\r\n".into()
            }
        } else if upper.starts_with("MAIL FROM") {
            if required.is_some() && authed.is_none() {
                "530 5.7.0 authentication required\r\n".into()
            } else {
                from = Some(angle(&cmd));
                rcpts.clear();
                "250 2.1.0 ok\r\n".into()
            }
        } else if upper.starts_with("RCPT TO") {
            let to = angle(&cmd);
            if state.lock().unwrap().reject.contains(&to) {
                format!("550 5.1.1 <{to}>: recipient address rejected\r\n")
            } else {
                rcpts.push(to);
                "250 2.1.5 ok\r\n".into()
            }
        } else if upper == "DATA" {
            let _ = write
                .write_all(b"354 end data with <CR><LF>.<CR><LF>\r\n")
                .await;
            let mut data = String::new();
            loop {
                let mut l = String::new();
                if lines.read_line(&mut l).await.unwrap_or(0) == 0 {
                    return;
                }
                if l == ".\r\n" {
                    break;
                }
                data.push_str(
                    l.strip_prefix('.')
                        .filter(|_| l.starts_with(".."))
                        .unwrap_or(&l),
                );
            }
            state.lock().unwrap().messages.push(Received {
                mail_from: from.take().unwrap_or_default(),
                rcpt_to: std::mem::take(&mut rcpts),
                data,
                auth_user: authed.clone(),
            });
            "250 2.0.0 queued\r\n".into()
        } else if upper == "RSET" {
            from = None;
            rcpts.clear();
            "250 2.0.0 ok\r\n".into()
        } else if upper == "NOOP" {
            "250 2.0.0 ok\r\n".into()
        } else if upper == "QUIT" {
            let _ = write.write_all(b"221 2.0.0 bye\r\n").await;
            return;
        } else {
            "502 5.5.2 command not recognized\r\n".into()
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[derive(Default)]
struct DnsState {
    txt: HashMap<String, Vec<String>>,
    fail: HashSet<String>,
    queries: Vec<String>,
}

/// A DNS server on loopback UDP that knows only the TXT records it is given.
#[derive(Clone)]
pub struct DnsResponder {
    pub addr: SocketAddr,
    state: Arc<Mutex<DnsState>>,
}

impl DnsResponder {
    pub async fn start() -> DnsResponder {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let state = Arc::new(Mutex::new(DnsState::default()));
        let s = state.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
                if let Some(reply) = answer(&buf[..n], &s) {
                    let _ = socket.send_to(&reply, peer).await;
                }
            }
        });
        DnsResponder { addr, state }
    }

    /// Publishes a TXT record (names compare case-insensitively, without the final dot).
    pub fn publish(&self, name: &str, value: &str) {
        self.state
            .lock()
            .unwrap()
            .txt
            .entry(name.to_ascii_lowercase())
            .or_default()
            .push(value.to_owned());
    }

    /// Answers SERVFAIL for `name` from now on.
    pub fn fail(&self, name: &str) {
        self.state
            .lock()
            .unwrap()
            .fail
            .insert(name.to_ascii_lowercase());
    }

    pub fn queries(&self) -> Vec<String> {
        self.state.lock().unwrap().queries.clone()
    }
}

/// The reply to one query: the question echoed, then TXT answers, NXDOMAIN or SERVFAIL.
fn answer(query: &[u8], state: &Mutex<DnsState>) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    let mut labels = Vec::new();
    let mut i = 12;
    loop {
        let len = *query.get(i)? as usize;
        i += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(i..i + len)?).to_ascii_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*query.get(i)?, *query.get(i + 1)?]);
    let question_end = i + 4;
    let name = labels.join(".");
    let (values, fail) = {
        let mut st = state.lock().unwrap();
        st.queries.push(name.clone());
        (st.txt.get(&name).cloned(), st.fail.contains(&name))
    };
    let mut out = Vec::new();
    out.extend_from_slice(&query[0..2]);
    let rd = query[2] & 0x01;
    let rcode: u8 = if fail {
        2
    } else if values.is_none() {
        3
    } else {
        0
    };
    let answers: Vec<String> = if qtype == 16 && rcode == 0 {
        values.unwrap_or_default()
    } else {
        Vec::new()
    };
    out.push(0x84 | rd); // QR, AA, RD as asked
    out.push(0x80 | rcode); // RA, rcode
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(answers.len() as u16).to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(query.get(12..question_end)?);
    for value in answers {
        let mut rdata = Vec::new();
        for chunk in value.as_bytes().chunks(255) {
            rdata.push(chunk.len() as u8);
            rdata.extend_from_slice(chunk);
        }
        out.extend_from_slice(&[0xc0, 0x0c]); // the question's name
        out.extend_from_slice(&16u16.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&60u32.to_be_bytes());
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(&rdata);
    }
    Some(out)
}
