/**
 * The supervisor's end of an agent's control socket (`lib/manager/sandbox/control_channel.ts`):
 * what an agent dials in and closes is closed on the supervisor's side too. Red team 38
 * (`tests/security/redteam38_control_leak_test.ts`) connected and closed in a loop and left one
 * open descriptor per connection in the supervisor, until it ran out and died.
 */
import assert from "node:assert/strict";
import { ControlChannel } from "../../lib/manager/sandbox/control_channel.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

// The supervisor's sockets at `path` (the listener and each connection it accepted: they carry
// the listener's path in /proc/net/unix). Not this process's descriptor count: test files run
// at once share the process, and open and close their own meanwhile.
const socketsAt = (path: string) =>
  Deno.readTextFileSync("/proc/net/unix").split("\n").filter((l) => l.endsWith(` ${path}`))
    .length;

Deno.test("control channel - connections an agent opens and closes leave no descriptor open in the supervisor", async () => {
  const dir = await tempDir("cotal-control-");
  const path = `${dir}/control.sock`;
  const channel = await ControlChannel.listen(path);
  try {
    // The runner's own line, held open throughout.
    const runner = await Deno.connect({ transport: "unix", path });
    await new Promise((r) => setTimeout(r, 200));
    const before = socketsAt(path);
    for (let i = 0; i < 16; i++) {
      const c = await Deno.connect({ transport: "unix", path });
      // Long enough for the supervisor to accept it and see its end.
      await new Promise((r) => setTimeout(r, 150));
      c.close();
      await new Promise((r) => setTimeout(r, 150));
    }
    await new Promise((r) => setTimeout(r, 500));
    const after = socketsAt(path);
    assert.ok(before >= 2, `the listener and the runner's line: ${before}`);
    assert.equal(after - before, 0, `${after - before} sockets left open by 16 connections`);
    // The runner's line still carries a stop.
    channel.requestStop();
    const buf = new Uint8Array(64);
    let text = "";
    while (!text.includes("stop")) {
      const n = await runner.read(buf);
      if (n === null) break;
      text += new TextDecoder().decode(buf.subarray(0, n));
    }
    assert.match(text, /stop/);
    runner.close();
  } finally {
    await channel.close();
    await removeTempDir(dir);
  }
});
