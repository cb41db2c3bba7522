/**
 * A stand-in for an MCP harness (Claude Code, Gemini CLI and OpenCode are Node programs too): it
 * records its argv, environment and cwd, starts the MCP server its configuration names (Claude
 * Code's `--mcp-config`, OpenCode's inline config, Gemini CLI's settings) the way they do
 * (a default environment plus the server's own `env`), asks it `initialize` and `tools/list`
 * over stdio, makes the tool calls listed in `<record>.calls.json` if there is one, and writes
 * all of it as JSON to the path in its last argument.
 */
export const STAND_IN = `#!/usr/bin/node
const fs = require("fs");
const { spawn } = require("child_process");
const argv = process.argv.slice(2);
const recordPath = argv[argv.length - 1];
const rec = { argv, env: Object.keys(process.env).sort(), cwd: process.cwd() };
const save = () => fs.writeFileSync(recordPath, JSON.stringify(rec));
// Where each harness reads its MCP servers: Claude Code's --mcp-config, OpenCode's inline
// configuration, Gemini CLI's user settings.
let srv;
if (argv.includes("--mcp-config")) {
  srv = JSON.parse(argv[argv.indexOf("--mcp-config") + 1]).mcpServers.cotal;
  rec.source = "--mcp-config";
} else if (process.env.OPENCODE_CONFIG_CONTENT) {
  const c = JSON.parse(process.env.OPENCODE_CONFIG_CONTENT).mcp.cotal;
  srv = { type: c.type, command: c.command[0], args: c.command.slice(1), env: c.environment };
  rec.source = "OPENCODE_CONFIG_CONTENT";
} else {
  const settings = process.env.HOME + "/.gemini/settings.json";
  const cfg = JSON.parse(fs.readFileSync(settings, "utf8"));
  srv = cfg.mcpServers.cotal;
  rec.source = settings;
  rec.folderTrust = cfg.security && cfg.security.folderTrust;
}
rec.server = srv;
// As Claude Code starts a stdio server: a default environment, then the server's own env.
const env = { PATH: process.env.PATH, HOME: process.env.HOME, TERM: process.env.TERM, ...srv.env };
const child = spawn(srv.command, srv.args, { env, stdio: ["pipe", "pipe", "pipe"] });
let out = "", err = "";
child.stderr.on("data", (d) => (err += d));
const send = (m) => child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\\n");
child.stdout.on("data", (d) => {
  out += d;
  for (let nl; (nl = out.indexOf("\\n")) >= 0;) {
    const msg = JSON.parse(out.slice(0, nl));
    out = out.slice(nl + 1);
    if (msg.id === 1) {
      rec.serverName = msg.result.serverInfo.name;
      send({ method: "notifications/initialized" });
      send({ id: 2, method: "tools/list" });
    } else if (msg.id === 2) {
      rec.tools = msg.result.tools.map((t) => t.name);
      rec.schemas = Object.fromEntries(msg.result.tools.map((t) => [t.name, t.inputSchema]));
      next();
    } else if (msg.id >= 100) {
      rec.calls.push({ name: calls[msg.id - 100].name, result: msg.result, error: msg.error });
      next();
    }
  }
});
// Tool calls to make after tools/list, one after another, if the test left a list of them.
let calls = [];
try { calls = JSON.parse(fs.readFileSync(recordPath + ".calls.json", "utf8")); } catch {}
rec.calls = [];
function next() {
  const i = rec.calls.length;
  if (i >= calls.length) return save();
  send({ id: 100 + i, method: "tools/call", params: { name: calls[i].name, arguments: calls[i].arguments || {} } });
}
send({
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "stand-in", version: "1" } },
});
setTimeout(() => { rec.error = "no answer: " + err.slice(-3000); save(); }, 150000);
setInterval(() => {}, 1000); // a harness stays up
`;
