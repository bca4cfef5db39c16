// The company's identity provider for the single sign-on test: a real OpenID Connect provider
// (oidc-provider, authorization code + PKCE S256, its development login page, which takes any
// login name and any password). A person's account id is the login name; their email is
// <id>@example.test (verified) and their groups come from a table the test changes through a
// control endpoint on the same port:
//   POST /control/groups/<id>   body: JSON array of group names -> 204
//   GET  /control/groups/<id>   -> the person's groups
//   POST /control/rotate-keys   -> 200 {"kid": "<new kid>"}: the provider rotates its signing key
// Claims are read when a token is issued, so a change counts at the person's next sign-in, even
// when the provider's own session lets them through without the login page.
// The signing key is an RSA key made at start (kid k1). A rotation replaces the provider with a
// new one of the same configuration and issuer whose only key is a new one (k2, k3, ...): tokens
// are signed with it from then on and the old key is no longer published. The port, the control
// routes and the group table stay; the provider's sessions and grants may be lost (a person then
// logs in again).
// Usage: node idp.mjs PORT WORKBENCH_BASE_URL
import { generateKeyPairSync } from "node:crypto";
import http from "node:http";
import Provider from "oidc-provider";

const [port, workbench] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
export const CLIENT_ID = "wb-sso";
export const CLIENT_SECRET = "wb-sso-secret-0123456789abcdef";
const SCOPE = "openid email profile groups";

const groups = new Map([
  ["alice", ["eng"]],
  ["mallory", ["contractors"]],
]);

let keysMade = 0;

/** A new private RSA signing key as a JWK, with the next kid (k1, k2, ...). */
function newSigningKey() {
  keysMade += 1;
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { ...privateKey.export({ format: "jwk" }), kid: `k${keysMade}`, use: "sig" };
}

/** A provider of this configuration whose only signing key is `key`. */
function providerWith(key) {
  const provider = new Provider(issuer, {
    jwks: { keys: [key] },
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        redirect_uris: [`${workbench}/sso/acme/callback`],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    scopes: SCOPE.split(" "),
    claims: {
      acr: null,
      auth_time: null,
      iss: null,
      sid: null,
      openid: ["sub"],
      email: ["email", "email_verified"],
      groups: ["groups"],
    },
    // The ID token from the token endpoint carries the scopes' claims (email, groups), not only
    // sub: a relying party need not call userinfo (which answers them too).
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    // A first-party application: no consent page, the grant covers every scope it may ask for.
    async loadExistingGrant(ctx) {
      const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) {
        const found = await ctx.oidc.provider.Grant.find(grantId);
        if (found) return found;
      }
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.account.accountId });
      grant.addOIDCScope(SCOPE);
      await grant.save();
      return grant;
    },
    async findAccount(_ctx, id) {
      return {
        accountId: id,
        async claims() {
          return { sub: id, email: `${id}@example.test`, email_verified: true, groups: groups.get(id) ?? [] };
        },
      };
    },
    // The provider's session outlives a workbench sign-out (a second sign-in may skip the login
    // page); everything else is short, as a test needs.
    ttl: {
      Session: 60 * 60,
      Interaction: 10 * 60,
      Grant: 60 * 60,
      AuthorizationCode: 60,
      AccessToken: 5 * 60,
      IdToken: 5 * 60,
    },
  });
  provider.proxy = false;
  provider.on("server_error", (_ctx, err) => console.error("idp server_error", err));
  return provider;
}

/** The provider that answers now: requests go to its callback, looked up per request. */
function start(key) {
  return { kid: key.kid, callback: providerWith(key).callback() };
}
let current = start(newSigningKey());

function rotateKeys(req, res) {
  if (req.method !== "POST") {
    res.writeHead(405).end();
    return;
  }
  req.resume();
  req.on("end", () => {
    const old = current.kid;
    current = start(newSigningKey());
    console.error(`idp: signing key rotated from ${old} to ${current.kid}`);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ kid: current.kid }));
  });
}

function control(req, res) {
  if (req.url.split("?")[0] === "/control/rotate-keys") {
    rotateKeys(req, res);
    return;
  }
  const id = decodeURIComponent(req.url.slice("/control/groups/".length).split("?")[0]);
  if (!req.url.startsWith("/control/groups/") || !id) {
    res.writeHead(404).end();
    return;
  }
  if (req.method === "GET") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(groups.get(id) ?? []));
    return;
  }
  if (req.method !== "POST") {
    res.writeHead(405).end();
    return;
  }
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    let list;
    try {
      list = JSON.parse(body);
    } catch {
      list = null;
    }
    if (!Array.isArray(list) || !list.every((g) => typeof g === "string")) {
      res.writeHead(400, { "content-type": "text/plain" }).end("expected a JSON array of group names");
      return;
    }
    groups.set(id, list);
    console.error(`idp: ${id} is now in [${list.join(", ")}]`);
    res.writeHead(204).end();
  });
}

http
  .createServer((req, res) => {
    if (req.url === "/health") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    } else if (req.url?.startsWith("/control/")) {
      control(req, res);
    } else {
      current.callback(req, res);
    }
  })
  .listen(Number(port), "127.0.0.1", () => console.error(`identity provider at ${issuer}`));
