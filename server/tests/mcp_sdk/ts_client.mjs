// Drives a workbench MCP endpoint with the official MCP TypeScript SDK (installed by the test
// setup into end2end/node_modules). The client declares elicitation and sampling: it accepts
// an elicitation with {name: "Grace"} and answers sampling with a fixed message.
//
// Usage: node ts_client.mjs URL API_KEY SCRIPT_JSON
// SCRIPT_JSON is a list of steps: ["tools/call", name, args], ["prompts/get", name, args],
// ["resources/read", uri]. Prints one JSON report: the server's name, the listed tools (and
// prompts, resources and templates when offered), what the server asked, and each step's result.
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const sdk = path.join(here, "../../../end2end/node_modules/@modelcontextprotocol/sdk/dist/esm");
const { Client } = await import(path.join(sdk, "client/index.js"));
const { StreamableHTTPClientTransport } = await import(path.join(sdk, "client/streamableHttp.js"));
const { ElicitRequestSchema, CreateMessageRequestSchema } = await import(path.join(sdk, "types.js"));

const [url, key, scriptJson] = process.argv.slice(2);
const script = JSON.parse(scriptJson);
const report = { asked: [], steps: [] };

const client = new Client(
  { name: "workbench-ts-sdk-test", version: "1.0.0" },
  { capabilities: { elicitation: {}, sampling: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  report.asked.push({ method: request.method, params: request.params });
  return { action: "accept", content: { name: "Grace" } };
});
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  report.asked.push({ method: request.method, params: request.params });
  return { role: "assistant", content: { type: "text", text: "Sampled by TypeScript." }, model: "ts-model", stopReason: "endTurn" };
});

await client.connect(
  new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }),
);
report.server = client.getServerVersion()?.name;
report.tools = (await client.listTools()).tools.map((t) => t.name);
const caps = client.getServerCapabilities() ?? {};
if (caps.prompts) report.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
if (caps.resources) {
  report.resources = (await client.listResources()).resources.map((r) => r.uri);
  report.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
}
for (const [kind, a, b] of script) {
  try {
    if (kind === "tools/call") report.steps.push(await client.callTool({ name: a, arguments: b ?? {} }));
    else if (kind === "prompts/get") report.steps.push(await client.getPrompt({ name: a, arguments: b ?? {} }));
    else if (kind === "resources/read") report.steps.push(await client.readResource({ uri: a }));
  } catch (e) {
    report.steps.push({ error: String(e?.message ?? e) });
  }
}
await client.close();
console.log(JSON.stringify(report));
