// A real OAuth 2 authorization server (oidc-provider, authorization code + PKCE S256, its
// development login and consent pages) and a small GitHub-like API that accepts only access
// tokens the provider says are active (token introspection). Used by the browser test of the
// connect flow. Usage: node provider.mjs PROVIDER_PORT API_PORT WORKBENCH_BASE_URL
import http from "node:http";
import Provider from "oidc-provider";

const [providerPort, apiPort, workbench] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${providerPort}`;
export const CLIENT_ID = "wb-e2e-client";
export const CLIENT_SECRET = "wb-e2e-client-secret-0123456789";

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      redirect_uris: [`${workbench}/oauth/callback`],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  scopes: ["openid", "offline_access", "repo", "read:user"],
  features: { devInteractions: { enabled: true }, introspection: { enabled: true } },
  pkce: { required: () => true },
  issueRefreshToken: () => true,
  async findAccount(_ctx, id) {
    return { accountId: id, async claims() { return { sub: id }; } };
  },
});
provider.proxy = false;
provider.listen(Number(providerPort), "127.0.0.1", () => console.error(`oidc-provider at ${issuer}`));

// A Linear-like API key the GraphQL endpoint accepts.
const LINEAR_KEY = "lin_api_e2e_key_0123456789";

// The API: GET /user answers for an active token (checked by introspection), 401 otherwise;
// POST /graphql answers Linear's viewer query for LINEAR_KEY.
http
  .createServer(async (req, res) => {
    if (req.method === "POST" && req.url === "/graphql") {
      res.setHeader("content-type", "application/json");
      if (req.headers.authorization !== LINEAR_KEY) {
        res.statusCode = 400;
        res.end(JSON.stringify({ errors: [{ message: "Authentication required, not authenticated" }] }));
        return;
      }
      res.end(JSON.stringify({ data: { viewer: { id: "u-e2e", name: "Lin E2E", email: "lin@example.test" } } }));
      return;
    }
    const auth = req.headers.authorization ?? "";
    const token = auth.startsWith("Bearer ") ? auth.slice(7) : "";
    const basic = Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString("base64");
    const r = await fetch(`${issuer}/token/introspection`, {
      method: "POST",
      headers: { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token }),
    });
    const info = await r.json();
    res.setHeader("content-type", "application/json");
    if (!info.active) {
      res.statusCode = 401;
      res.end(JSON.stringify({ message: "Bad credentials" }));
      return;
    }
    if (req.url?.startsWith("/user")) {
      res.end(JSON.stringify({ login: info.sub, id: 1, name: `User ${info.sub}`, email: null, html_url: `https://example.test/${info.sub}`, scope: info.scope }));
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ message: "Not Found" }));
    }
  })
  .listen(Number(apiPort), "127.0.0.1", () => console.error(`fake API at http://127.0.0.1:${apiPort}`));
