/**
 * Fault pass 12: the whole stack's root (broker store, secrets, roster, pid files, logs) on a
 * tmpfs that fills up. With messages acknowledged to an offline member before, the disk fills;
 * sends, a spawn, and kill -9 of the broker and the supervisor happen while it is full (the
 * watchdog cannot restart them: exit 74); the disk is freed and nobody touches the stack.
 * Expected: healthy again within a bounded time, the running agent back, a spawn works, and every
 * message acknowledged (before or during) reaches the member.
 */
import assert from "node:assert/strict";
import { tempDir } from "../_harness/broker.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import {
  collect,
  cotalRun,
  kill9,
  mcpOn,
  pidsOf,
  provisionCli,
  rangePort,
  sendBurst,
  type Stack,
  waitHealthy,
} from "./_fp12.ts";

async function sh(...cmd: string[]): Promise<string> {
  const o = await new Deno.Command(cmd[0], { args: cmd.slice(1), stdout: "piped", stderr: "piped" })
    .output();
  if (o.code !== 0) throw new Error(`${cmd.join(" ")}: ${new TextDecoder().decode(o.stderr)}`);
  return new TextDecoder().decode(o.stdout);
}

async function usedKib(dir: string): Promise<number> {
  const out = await sh("df", "-k", "--output=used", dir);
  return Number(out.trim().split("\n")[1]);
}

const isRoot = Deno.uid() === 0;

Deno.test({
  name:
    "fault pass 12 - a full disk under the whole root, then freed: the stack heals and nothing acknowledged is lost (run only with COTAL_SLOW_TESTS=1 and as root: a minute of a full stack on a 7 GiB tmpfs, kept out of the suite for its time)",
  ignore: !isRoot || !Deno.env.get("COTAL_SLOW_TESTS"),
  async fn() {
    const base = await tempDir("cotal-fp12-disk-");
    await sh("mount", "-t", "tmpfs", "-o", "size=7g", "tmpfs", base);
    const root = `${base}/root`;
    const port = rangePort();
    const stack: Stack = {
      base,
      root,
      port,
      url: `nats://127.0.0.1:${port}`,
      leftovers: () => processesMentioning(root),
      [Symbol.asyncDispose]: async () => {},
    };
    try {
      const up = await cotalRun(root, ["up", "--detach", "--port", String(port)], 180_000);
      assert.equal(up.code, 0, up.text);
      const bob = await provisionCli(stack, "bob");
      const first = await mcpOn(stack, bob, `/tmp/fp12/tmp/inbox-${port}`);
      await first.call("channels", {});
      await first.close();
      const sp = await cotalRun(root, [
        "spawn",
        "--role",
        "up",
        "--name",
        "up1",
        "--",
        "/usr/bin/tr",
        "a-z",
        "A-Z",
      ]);
      assert.equal(sp.code, 0, sp.text);
      const before = [
        ...(await sendBurst(root, ["--to", "local.bob"], "pre-dm", 10)).acked,
        ...(await sendBurst(root, ["--channel", "general"], "pre-post", 10)).acked,
      ];
      assert.equal(before.length, 20, "all sends before the disk filled were acknowledged");
      // The disk fills.
      await sh("mount", "-o", `remount,size=${(await usedKib(base)) + 64}k`, base);
      await sh("sh", "-c", `dd if=/dev/zero of=${base}/fill bs=4k 2>/dev/null; true`);
      const during = [
        ...(await sendBurst(root, ["--to", "local.bob"], "full-dm", 3)).acked,
        ...(await sendBurst(root, ["--channel", "general"], "full-post", 3)).acked,
      ];
      const spawnFull = await cotalRun(root, [
        "spawn",
        "--role",
        "up",
        "--name",
        "up2",
        "--",
        "/usr/bin/tr",
        "a-z",
        "A-Z",
      ], 120_000);
      assert.ok(!spawnFull.timedOut, "a spawn on a full disk ends (any answer)");
      kill9([...pidsOf(root, "nats-server"), ...pidsOf(root, "cmd/supervise.ts")]);
      await new Promise((r) => setTimeout(r, 20_000));
      // Space comes back; nobody touches the stack.
      await Deno.remove(`${base}/fill`);
      await sh("mount", "-o", "remount,size=7g", base);
      await waitHealthy(root, 120_000);
      const ps = await cotalRun(root, ["ps"], 60_000);
      assert.match(ps.text, /up1\s+task-runner\s+up\s+running/, ps.text);
      const sp2 = await cotalRun(root, [
        "spawn",
        "--role",
        "up",
        "--name",
        "up3",
        "--",
        "/usr/bin/tr",
        "a-z",
        "A-Z",
      ]);
      assert.equal(sp2.code, 0, `a spawn after the disk was freed: ${sp2.text}`);
      const agent = await mcpOn(stack, bob, `/tmp/fp12/tmp/inbox-${port}`);
      try {
        const want = [...before, ...during];
        const { got, missing } = await collect(agent, want, 120_000);
        assert.deepEqual(
          missing,
          [],
          `${want.length} acknowledged (${during.length} while full); bob got ${
            JSON.stringify(got)
          }`,
        );
      } finally {
        await agent.close();
      }
      const down = await cotalRun(root, ["down"], 120_000);
      assert.equal(down.code, 0, down.text);
      assert.deepEqual(processesMentioning(root), [], "down leaves nothing running");
    } finally {
      await Deno.remove(`${base}/fill`).catch(() => {});
      await sh("mount", "-o", "remount,size=7g", base).catch(() => {});
      await cotalRun(root, ["down"], 120_000).catch(() => {});
      kill9(processesMentioning(root));
      await new Promise((r) => setTimeout(r, 500));
      await sh("umount", "-l", base).catch(() => {});
      await Deno.remove(`/tmp/fp12/tmp/inbox-${port}`, { recursive: true }).catch(() => {});
    }
  },
});
