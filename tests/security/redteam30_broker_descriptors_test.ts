/**
 * Red team 30, A1: an agent on the host's network held 20,000 unauthenticated connections to the
 * broker, its whole open-file limit. JetStream could not open its files ("Critical write error:
 * open …/index.db: too many open files"), the watchdog read that as a full disk and restarted
 * the broker, and the agent, calling bind() on the port in a loop, took the port in the gap:
 * every space of the root was down, and each `up` brought the agent back to do it again.
 *
 * Two defences, each tested here: the broker holds at most half its descriptors as connections
 * (`max_connections`, from BROKER_MAX_CONNECTIONS and the limit it inherits), so JetStream keeps
 * the rest; and a write that failed for want of descriptors is no storage fault, so the
 * watchdog never restarts the broker for it (the port is never let go).
 */
import assert from "node:assert/strict";
import {
  lastStorageFault,
  outOfDescriptors,
  STORAGE_FAULT_RE,
} from "../../lib/mesh/storage_fault.ts";
import { brokerConnectionCap } from "../../lib/mesh/space_setup.ts";
import {
  BROKER_MAX_CONNECTIONS,
  createBrokerAuth,
  createSpaceAccountAuth,
  createSpaceAuth,
  mintCreds,
  newIdentity,
  serverConfig,
} from "../../lib/trust/mod.ts";
import { chatSubject } from "../../lib/wire/mod.ts";
import { setupSpaceStreamsOn } from "../../lib/wire/streams.ts";
import {
  readWithin,
  removeTempDir,
  startTestBroker,
  tempDir,
  uniqueSpace,
} from "../_harness/broker.ts";
import { connectCreds } from "../trust/_helpers.ts";

Deno.test("red team 30 - a write that failed for want of descriptors is no storage fault: the broker is not restarted for it", async () => {
  const emfile =
    "[1] 2026/12/05 18:00:00.000000 [ERR] JetStream: Critical write error: open /srv/js/jetstream/A/streams/KV_x/msgs/index.db: too many open files";
  assert.equal(STORAGE_FAULT_RE.test(emfile), false);
  // A real disk fault is still one.
  assert.ok(
    STORAGE_FAULT_RE.test(
      "[1] 2026/12/05 18:00:00.000000 [ERR] JetStream: Critical write error: write /srv/js/x: no space left on device",
    ),
  );
  const dir = await tempDir("cotal-emfile-");
  try {
    const log = `${dir}/nats-server.log`;
    await Deno.writeTextFile(log, `[1] [INF] Starting nats-server\n${emfile}\n`);
    assert.equal(await lastStorageFault(log), undefined);
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("red team 30 - the broker's config caps its connections at half the descriptors it may open", async () => {
  const broker = await createBrokerAuth("caps");
  const a = await createSpaceAccountAuth(broker, "alpha");
  assert.match(
    serverConfig(broker, [a], { storeDir: "/srv/js" }),
    new RegExp(`^max_connections: ${BROKER_MAX_CONNECTIONS}$`, "m"),
  );
  assert.throws(
    () => serverConfig(broker, [a], { storeDir: "/srv/js", maxConnections: 1e6 }),
    (e) => (e as { code?: string }).code === "invalid_max_connections",
  );
  // The cap the stack renders follows the limit the broker inherits: under a 1,000-descriptor
  // limit, 500 connections.
  const probe = `import { brokerConnectionCap } from "${
    new URL("../../lib/mesh/space_setup.ts", import.meta.url).href
  }"; console.log(await brokerConnectionCap());`;
  const out = await new Deno.Command("prlimit", {
    args: [
      "--nofile=1000:1000",
      Deno.execPath(),
      "eval",
      `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
      probe,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  assert.equal(new TextDecoder().decode(out.stdout).trim(), "500");
  assert.ok((await brokerConnectionCap()) <= BROKER_MAX_CONNECTIONS);
});

Deno.test("red team 30 - past its connection cap the broker turns connections away, and a member already connected still stores", async () => {
  const auth = await createSpaceAuth(uniqueSpace("rt30cap"));
  await using broker = await startTestBroker({
    config: ({ port, storeDir }) =>
      serverConfig(auth, [auth], { port, storeDir, maxConnections: 8 }),
  });
  const prov = await connectCreds(broker.url, await mintCreds(auth, newIdentity(), "provisioner"));
  await setupSpaceStreamsOn(prov, auth.space);
  await prov.close();
  const op = await connectCreds(
    broker.url,
    await mintCreds(auth, newIdentity(), "operator", {
      principal: { owner: "local", actor: "op" },
    }),
  );
  const held: Deno.TcpConn[] = [];
  try {
    // What the agent did, on a smaller scale: connections that never say CONNECT.
    for (let i = 0; i < 12; i++) {
      held.push(await Deno.connect({ hostname: "127.0.0.1", port: broker.port }));
      await new Promise((r) => setTimeout(r, 20));
    }
    const answers = await Promise.all(held.map(async (c) => {
      const reader = c.readable.getReader();
      let said = "";
      while (!/maximum connections exceeded|Authentication Timeout/.test(said)) {
        const r = await readWithin(reader, 10_000, "the broker's word to a held connection")
          .catch(() => ({ done: true, value: undefined }));
        if (r.done || !r.value) break;
        said += new TextDecoder().decode(r.value);
      }
      reader.releaseLock();
      return said;
    }));
    const refused = answers.filter((a) => /maximum connections exceeded/.test(a)).length;
    // One connection (the operator's) was there first: at most 7 of these 12 are let in.
    assert.ok(refused >= 5, `${refused} of 12 refused`);
    const ack = await op.jetstream().publish(
      chatSubject(auth.space, { owner: "local", actor: "op" }, "general"),
      "still stored",
    );
    assert.ok(ack.seq >= 1);
  } finally {
    for (const c of held) {
      try {
        c.close();
      } catch {
        // Closed by the broker.
      }
    }
    await op.close();
  }
});

Deno.test("red team 31 - a broker out of descriptors is not taken for a hung one: the watchdog leaves it (and its port) alone", async () => {
  const dir = await tempDir("cotal-nodesc-");
  try {
    const log = `${dir}/nats-server.log`;
    const at = (t: number) => {
      const d = new Date(t);
      const p = (n: number, w = 2) => String(n).padStart(w, "0");
      return `${d.getFullYear()}/${p(d.getMonth() + 1)}/${p(d.getDate())} ${p(d.getHours())}:${
        p(d.getMinutes())
      }:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}000`;
    };
    const now = Date.now();
    const accept = (t: number) =>
      `[1] ${
        at(t)
      } [ERR] Temporary Client Accept Error(accept tcp 127.0.0.1:4222: accept4: too many open files), sleeping 10ms`;
    await Deno.writeTextFile(log, `[1] ${at(now - 90_000)} [INF] Starting nats-server\n`);
    assert.equal(await outOfDescriptors(log, now), false);
    await Deno.writeTextFile(log, accept(now - 5_000) + "\n", { append: true });
    assert.equal(await outOfDescriptors(log, now), true);
    // Long past, or before the broker's last start: no longer.
    assert.equal(await outOfDescriptors(log, now + 120_000), false);
    await Deno.writeTextFile(log, `[2] ${at(now)} [INF] Starting nats-server\n`, { append: true });
    assert.equal(await outOfDescriptors(log, now), false);
    // A connection's own words are not the server's.
    await Deno.writeTextFile(
      log,
      `[2] ${at(now)} [ERR] 127.0.0.1:5555 - cid:9 - "too many open files"\n`,
      { append: true },
    );
    assert.equal(await outOfDescriptors(log, now), false);
  } finally {
    await removeTempDir(dir);
  }
});
