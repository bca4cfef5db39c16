// Mail plumbing for the email e2e test, on loopback: an SMTP server that records every message
// (EHLO, MAIL, RCPT, DATA, RSET, NOOP, QUIT), a UDP DNS server answering TXT queries from a
// table, and an HTTP control port to publish records and read what arrived.
//   node mail/fakes.mjs <smtp port> <dns port> <control port>
import * as net from "node:net";
import * as dgram from "node:dgram";
import * as http from "node:http";

const [smtpPort, dnsPort, controlPort] = process.argv.slice(2).map(Number);
const messages = [];
const txt = new Map();

net
  .createServer((sock) => {
    let buf = "";
    let inData = false;
    let cur = { from: "", to: [], data: "" };
    const reply = (s) => sock.write(s + "\r\n");
    reply("220 sink.e2e ESMTP");
    sock.on("data", (chunk) => {
      buf += chunk.toString("utf8");
      let i;
      while ((i = buf.indexOf("\r\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (inData) {
          if (line === ".") {
            inData = false;
            messages.push(cur);
            cur = { from: "", to: [], data: "" };
            reply("250 2.0.0 queued");
          } else {
            cur.data += (line.startsWith("..") ? line.slice(1) : line) + "\r\n";
          }
          continue;
        }
        const up = line.toUpperCase();
        const addr = () => (line.split(":").slice(1).join(":").trim().split(/\s/)[0] || "").replace(/^<|>$/g, "");
        if (up.startsWith("EHLO") || up.startsWith("HELO")) reply("250-sink.e2e\r\n250-8BITMIME\r\n250 SMTPUTF8");
        else if (up.startsWith("MAIL FROM")) { cur = { from: addr(), to: [], data: "" }; reply("250 2.1.0 ok"); }
        else if (up.startsWith("RCPT TO")) { cur.to.push(addr()); reply("250 2.1.5 ok"); }
        else if (up === "DATA") { inData = true; reply("354 go ahead"); }
        else if (up === "RSET" || up === "NOOP") reply("250 2.0.0 ok");
        else if (up === "QUIT") { reply("221 bye"); sock.end(); }
        else reply("502 5.5.2 not recognized");
      }
    });
    sock.on("error", () => {});
  })
  .listen(smtpPort, "127.0.0.1");

const dns = dgram.createSocket("udp4");
dns.on("message", (q, peer) => {
  if (q.length < 12) return;
  const labels = [];
  let i = 12;
  while (q[i] !== 0 && i < q.length) {
    labels.push(q.subarray(i + 1, i + 1 + q[i]).toString("latin1").toLowerCase());
    i += q[i] + 1;
  }
  const qtype = q.readUInt16BE(i + 1);
  const end = i + 5;
  const values = txt.get(labels.join("."));
  const answers = qtype === 16 && values ? values : [];
  const header = Buffer.alloc(12);
  q.copy(header, 0, 0, 2);
  header[2] = 0x84 | (q[2] & 1);
  header[3] = 0x80 | (values ? 0 : 3);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answers.length, 6);
  const parts = [header, q.subarray(12, end)];
  for (const v of answers) {
    const s = Buffer.from(v, "utf8");
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0);
    rr.writeUInt16BE(16, 2);
    rr.writeUInt16BE(1, 4);
    rr.writeUInt32BE(60, 6);
    rr.writeUInt16BE(s.length + 1, 10);
    parts.push(rr, Buffer.from([s.length]), s);
  }
  dns.send(Buffer.concat(parts), peer.port, peer.address);
});
dns.bind(dnsPort, "127.0.0.1");

http
  .createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/txt") {
        const { name, value } = JSON.parse(body);
        const key = name.toLowerCase().replace(/\.$/, "");
        txt.set(key, [...(txt.get(key) ?? []), value]);
        res.writeHead(204).end();
      } else if (req.url === "/messages") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(messages));
      } else if (req.url === "/health") {
        res.writeHead(200).end("ok");
      } else {
        res.writeHead(404).end();
      }
    });
  })
  .listen(controlPort, "127.0.0.1");
