// Preloaded into @modelcontextprotocol/server-everything so that it listens on 127.0.0.1 only:
// it calls listen(PORT) without a host, which would bind every interface, and tests here may
// use loopback alone.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || typeof args[0] === "string") {
    const port = Number(args[0]);
    if (args.length === 1 || typeof args[1] === "function") {
      return listen.call(this, port, "127.0.0.1", ...args.slice(1));
    }
  } else if (args[0] && typeof args[0] === "object" && !args[0].host && !args[0].path) {
    return listen.call(this, { ...args[0], host: "127.0.0.1" }, ...args.slice(1));
  }
  return listen.apply(this, args);
};
