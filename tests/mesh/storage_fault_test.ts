/**
 * A full disk under a detached stack. nats-server keeps failing JetStream writes after a full
 * disk even once space is back, and a broker (re)started on a full disk sizes its JetStream
 * from the little that was free and never looks again. The watchdog reads the broker's log,
 * restarts it on such a line with its backoff, and writes resume by themselves once space is
 * freed; what was acknowledged before is still there. The disk is a tmpfs shrunk under the
 * running broker (mount needs root).
 */
import assert from "node:assert/strict";
import { AckPolicy, credsAuthenticator } from "nats";
import { connectWhenUp } from "../../lib/nats/connect.ts";
import { lastStorageFault, StorageFaultReader } from "../../lib/mesh/storage_fault.ts";
import { readPidFile } from "../../lib/mesh/pidfile.ts";
import { componentFiles } from "../../lib/mesh/stack.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;
const home = await tempDir("cotal-home-");

async function cotal(args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    stdout: "piped",
    stderr: "piped",
    env: { COTAL_HOME: home },
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

async function sh(cmd: string, ...args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return new TextDecoder().decode(out.stdout);
}

async function usedKib(dir: string): Promise<number> {
  const line = (await sh("df", "-k", dir)).trim().split("\n").at(-1)!;
  return Number(line.split(/\s+/)[2]);
}

Deno.test("mesh - StorageFaultReader reports the current broker's fault until cleared; a restart line forgets it", async () => {
  const dir = await tempDir("cotal-faultlog-");
  try {
    const log = `${dir}/nats-server.log`;
    await Deno.writeTextFile(
      log,
      "[1] [INF] Starting nats-server\n[1] [ERR] no space left on device\n",
    );
    assert.match((await lastStorageFault(log))!, /no space left/);
    const r = new StorageFaultReader(log);
    assert.match((await r.poll())!, /no space left/);
    r.clear();
    assert.equal(await r.poll(), undefined);
    await Deno.writeTextFile(
      log,
      "[2] [ERR] JetStream file resource limits exceeded for server\n",
      {
        append: true,
      },
    );
    assert.match((await r.poll())!, /resource limits exceeded/);
    await Deno.writeTextFile(log, "[3] [INF] Starting nats-server\n", { append: true });
    assert.equal(await r.poll(), undefined);
    assert.equal(await lastStorageFault(log), undefined);
  } finally {
    await removeTempDir(dir);
  }
});

const isRoot = Deno.uid() === 0;

Deno.test({
  name:
    `mesh - after a full disk is freed, writes resume without anyone restarting the broker, nothing acknowledged lost${
      isRoot ? "" : " (skipped: shrinking a tmpfs needs root)"
    }`,
  ignore: !isRoot,
  async fn() {
    const dir = await tempDir("cotal-fulldisk-");
    // Large enough for the space's JetStream reservation; tmpfs takes memory only as it fills.
    await sh("mount", "-t", "tmpfs", "-o", "size=7g", "tmpfs", dir);
    const root = `${dir}/root`;
    const port = freePort();
    try {
      const up = await cotal(["up", "--detach", "--root", root, "--port", `${port}`]);
      assert.equal(up.code, 0, up.stderr);
      const mint = await cotal(["mint", "--root", root, "--profile", "operator", "--ttl", "600"]);
      assert.equal(mint.code, 0, mint.stderr);
      const creds = mint.stdout;
      const jwt = /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(creds)![1];
      const sub = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
      // A first dial can meet the broker between up's health check and a watchdog restart (a
      // refused connect once failed this test on 2.10): dial until it answers, for 30 s at most.
      const nc = await connectWhenUp({
        servers: `nats://127.0.0.1:${port}`,
        authenticator: credsAuthenticator(new TextEncoder().encode(creds)),
        inboxPrefix: `_INBOX_${sub}`,
        reconnectTimeWait: 250,
        maxReconnectAttempts: -1,
      }, { signal: AbortSignal.timeout(30_000) });
      const js = nc.jetstream();
      const acked = new Set<number>();
      const post = async (i: number, size: number) => {
        const body = JSON.stringify({
          id: `m${i}`,
          from: { id: "local.operator" },
          parts: [{ kind: "text", text: "x".repeat(size) }],
        });
        const ack = await js.publish("cotal.default.chat.local.operator.general", body, {
          timeout: 1500,
        });
        acked.add(ack.seq);
      };
      try {
        for (let i = 0; i < 5; i++) await post(i, 60_000);
        const brokerPid = (await readPidFile(componentFiles(root, "nats-server").pidFile))!.pid;
        // The disk fills: shrink it to what is used plus 1 MiB, and write until refused.
        await sh("mount", "-o", `remount,size=${(await usedKib(dir)) + 1024}k`, dir);
        let refused = 0;
        for (let i = 5; i < 200 && refused < 3; i++) await post(i, 60_000).catch(() => refused++);
        assert.equal(refused, 3, "the full disk never refused a write");
        // Space comes back; nobody touches the stack.
        await sh("mount", "-o", "remount,size=7g", dir);
        const deadline = Date.now() + 90_000;
        let resumed = false;
        while (!resumed && Date.now() < deadline) {
          resumed = await post(1000, 100).then(() => true, () => false);
          if (!resumed) await new Promise((r) => setTimeout(r, 500));
        }
        assert.ok(resumed, "writes did not resume within 90 s of the disk being freed");
        // nats-server 2.15 latches the write error (writes resume only after a restart, which
        // is the watchdog's); 2.10 recovers by itself. Whichever it was, writes resumed, and a
        // broker that was restarted was restarted by the watchdog, for the storage fault.
        const after = (await readPidFile(componentFiles(root, "nats-server").pidFile))!.pid;
        if (after !== brokerPid) {
          const wlog = await Deno.readTextFile(componentFiles(root, "watchdog").logFile);
          assert.match(wlog, /the broker cannot write .*; restarting it to resume/);
        }
        // Every acknowledged post is still stored (read back as an observer).
        const obs = await cotal(["mint", "--root", root, "--profile", "observer"]);
        // The broker may be in a watchdog restart for the fault just healed: dial until it
        // answers, for 30 s at most.
        const sub = JSON.parse(
          atob(
            /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(obs.stdout)![1].split(".")[1]
              .replace(/-/g, "+").replace(/_/g, "/"),
          ),
        ).sub;
        const oc = await connectWhenUp({
          servers: `nats://127.0.0.1:${port}`,
          authenticator: credsAuthenticator(new TextEncoder().encode(obs.stdout)),
          inboxPrefix: `_INBOX_${sub}`,
        }, { signal: AbortSignal.timeout(30_000) });
        try {
          const stored = new Set<number>();
          // Through the one consumer an observer may make, named for it.
          await (await oc.jetstreamManager()).consumers.add("CHAT_default", {
            name: `hist_${sub}`,
            filter_subject: "cotal.default.chat.>",
            ack_policy: AckPolicy.None,
          });
          const c = await oc.jetstream().consumers.get("CHAT_default", `hist_${sub}`);
          for (let n = 0; n < 50; n++) {
            const m = await c.next({ expires: 1000 });
            if (!m) break;
            stored.add(m.seq);
          }
          for (const seq of acked) assert.ok(stored.has(seq), `acknowledged seq ${seq} is gone`);
        } finally {
          await oc.close();
        }
      } finally {
        await nc.close();
      }
    } finally {
      await cotal(["down", "--root", root]);
      await sh("umount", "-l", dir).catch(() => "");
      await removeTempDir(dir);
    }
  },
});
