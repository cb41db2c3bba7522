/**
 * No process dies of a refused or reset connection: 100 of each through Cotal's connect, in a
 * child process with no error handler, and the child lives to report them all.
 */
import assert from "node:assert/strict";
import { startTestBroker, uniqueSpace } from "../_harness/broker.ts";
import { createSpaceAuth, mintCreds, newIdentity, serverConfig } from "../../lib/trust/mod.ts";

/** A listener that greets like a broker, then closes with the client's CONNECT unread (a RST). */
function resetter(): { port: number; close(): void } {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  (async () => {
    for await (const c of l) {
      (async () => {
        await c.write(
          new TextEncoder().encode(
            'INFO {"server_id":"x","version":"2.10.0","max_payload":1048576}\r\n',
          ),
        );
        await new Promise((r) => setTimeout(r, 20));
        c.close();
      })().catch(() => {});
    }
  })().catch(() => {});
  return { port: (l.addr as Deno.NetAddr).port, close: () => l.close() };
}

Deno.test("nats - 100 refused and 100 reset connects: the process lives through all of them", async () => {
  const auth = await createSpaceAuth(uniqueSpace("guard"));
  const stranger = await createSpaceAuth(uniqueSpace("stranger"));
  await using b = await startTestBroker({
    config: (c) => serverConfig(auth, [auth], { storeDir: c.storeDir, port: c.port }),
  });
  const r = resetter();
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
        new URL("./_refused_connects.ts", import.meta.url).pathname,
        b.url,
        await mintCreds(stranger, newIdentity(), "probe"),
        String(r.port),
        "100",
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    const err = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, `the child died: ${err}`);
    assert.match(text, /refused=100 reset=100 dropped=\d+/);
    assert.doesNotMatch(err, /Uncaught/);
  } finally {
    r.close();
  }
});
