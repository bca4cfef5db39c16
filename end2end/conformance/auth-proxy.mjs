// A loopback reverse proxy that adds `Authorization: Bearer <key>` to every request, because the
// MCP conformance suite cannot send headers of its own. Everything else (Host, Origin, bodies,
// streamed responses) passes through unchanged, so host and origin checks still see the
// suite's own values. Usage: node auth-proxy.mjs LISTEN_PORT TARGET_PORT API_KEY
import http from "node:http";

const [listenPort, targetPort, key] = process.argv.slice(2);
http
  .createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${key}` };
    const upstream = http.request(
      { host: "127.0.0.1", port: Number(targetPort), method: req.method, path: req.url, headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on("error", (e) => {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end(`proxy error: ${e.message}`);
    });
    req.pipe(upstream);
  })
  .listen(Number(listenPort), "127.0.0.1", () => console.error(`auth proxy on ${listenPort} -> ${targetPort}`));
