// A member with its own cred (cotal mint) connects straight to the broker with a long
// connection name that ends in a storage-fault phrase, then provokes permission-violation log
// lines (each one names the connection). Usage: deno run -A log_tail_flood.ts <url> <creds> <n> [nameLen]
import { connect, credsAuthenticator } from "nats";
const [url, credsFile, nStr, lenStr] = Deno.args;
const n = Number(nStr ?? "200");
const len = Number(lenStr ?? "30000");
const name = "A".repeat(len) + " no space left on device";
const nc = await connect({
  servers: url,
  authenticator: credsAuthenticator(new TextEncoder().encode(await Deno.readTextFile(credsFile))),
  name,
  maxReconnectAttempts: 0,
});
(async () => {
  for await (const _ of nc.status()) { /* errors are expected */ }
})();
for (let i = 0; i < n; i++) {
  nc.publish(`forbidden.subject.${i}`, "x");
  if (i % 50 === 49) await nc.flush().catch(() => {});
}
await nc.flush().catch(() => {});
await new Promise((r) => setTimeout(r, 500));
await nc.close().catch(() => {});
console.log("done");
