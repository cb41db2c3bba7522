import assert from "node:assert/strict";
import { down, up } from "../../lib/mesh/up.ts";
import { sendText, tail, type TailLine } from "../../lib/mesh/ops.ts";
import { componentFiles } from "../../lib/mesh/stack.ts";
import { readPidFile } from "../../lib/mesh/pidfile.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";

Deno.test("mesh - tail goes on across a broker restart the watchdog heals, saying so (newcomer pass 9)", async () => {
  const root = await tempDir("cotal-tail-");
  const ac = new AbortController();
  try {
    await up({
      root,
      space: "t",
      host: "127.0.0.1",
      port: freePort(),
      detach: true,
      say: () => {},
      untilStopped: Promise.resolve(),
    });
    const lines: TailLine[] = [];
    const gaps: string[] = [];
    let ready = false;
    const tailing = tail(root, "t", (l) => lines.push(l), {
      signal: ac.signal,
      ready: () => ready = true,
      gap: (what) => gaps.push(what),
    });
    await waitFor(() => ready, { what: "tail to subscribe" });
    const first = await sendText(root, "t", { channel: "general" }, "before the restart");
    await waitFor(() => lines.some((l) => l.id === first.id), { what: "the first post" });

    const broker = await readPidFile(componentFiles(root, "nats-server").pidFile);
    Deno.kill(broker!.pid, "SIGKILL");
    // The watchdog brings the broker back; tail dials again and says so.
    await waitFor(() => gaps.includes("back"), { timeoutMs: 60_000, what: "tail to come back" });
    assert.equal(gaps[0], "lost");
    const second = await sendText(root, "t", { channel: "general" }, "after the restart");
    await waitFor(() => lines.some((l) => l.id === second.id), {
      timeoutMs: 20_000,
      what: "the post after the restart",
    });

    // A broker gone longer than the client's own reconnect: the connection closes, and tail
    // dials again (the watchdogs held meanwhile, so nothing restarts the broker at once).
    const watchdogs = await Promise.all(
      ["watchdog", "watchdog-peer"].map((id) => readPidFile(componentFiles(root, id).pidFile)),
    );
    for (const w of watchdogs) Deno.kill(w!.pid, "SIGSTOP");
    try {
      const again = await readPidFile(componentFiles(root, "nats-server").pidFile);
      Deno.kill(again!.pid, "SIGKILL");
      await new Promise((r) => setTimeout(r, 5_000));
    } finally {
      for (const w of watchdogs) Deno.kill(w!.pid, "SIGCONT");
    }
    await waitFor(() => gaps.filter((g) => g === "back").length >= 2, {
      timeoutMs: 60_000,
      what: "tail to dial again",
    });
    const third = await sendText(root, "t", { channel: "general" }, "after the outage");
    await waitFor(() => lines.some((l) => l.id === third.id), {
      timeoutMs: 20_000,
      what: "the post after the outage",
    });
    ac.abort();
    assert.equal(await tailing, 3);
  } finally {
    ac.abort();
    await down(root).catch(() => {});
    await removeTempDir(root);
  }
});
