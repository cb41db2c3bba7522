// Victim: every few seconds, start its cotal-mcp and post once; log how long the post took.
const W = Deno.args[0];
const mcp = Deno.env.get("COTAL_MCP")!;
const enc = new TextEncoder();
const msgs = [
  {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "v", version: "0" },
    },
  },
  { jsonrpc: "2.0", method: "notifications/initialized" },
  {
    jsonrpc: "2.0",
    id: 2,
    method: "tools/call",
    params: { name: "post", arguments: { channel: "general", text: "victim ping" } },
  },
];
for (let i = 0;; i++) {
  const t0 = performance.now();
  const p = new Deno.Command(mcp, { stdin: "piped", stdout: "piped", stderr: "null" }).spawn();
  const w = p.stdin.getWriter();
  await w.write(enc.encode(msgs.map((m) => JSON.stringify(m)).join("\n") + "\n"));
  let result = "timeout";
  const dec = new TextDecoder();
  let buf = "";
  const reader = p.stdout.getReader();
  const deadline = setTimeout(() => {
    try {
      p.kill("SIGKILL");
    } catch { /* gone */ }
  }, 45_000);
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value);
      const line = buf.split("\n").find((l) => l.includes('"id":2'));
      if (line) {
        result = line.includes('"isError":true') ? "error:" + line.slice(0, 200) : "ok";
        break;
      }
    }
  } catch { /* killed */ }
  clearTimeout(deadline);
  const ms = Math.round(performance.now() - t0);
  await Deno.writeTextFile(`${W}/lat`, `${i} ${Date.now()} ${ms} ${result}\n`, { append: true });
  try {
    p.kill("SIGKILL");
  } catch { /* gone */ }
  await p.status;
  await new Promise((r) => setTimeout(r, 2000));
}
