import assert from "node:assert/strict";
import { connect } from "nats";
import { startBrokerProcess } from "../../lib/broker/mod.ts";
import { isCotalError } from "../../lib/errors.ts";
import {
  freePort,
  natsServerPath,
  plainConfig,
  readWithin,
  removeTempDir,
  startTestBroker,
  tempDir,
  waitFor,
} from "../_harness/broker.ts";

function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // A zombie has exited; only its parent has not reaped it yet.
    return !/^\d+ \(.*\) Z /.test(stat);
  } catch {
    return false;
  }
}

Deno.test("broker - starts, answers a client with JetStream, and stops", async () => {
  const broker = await startTestBroker();
  const nc = await connect({ servers: broker.url });
  const jsm = await nc.jetstreamManager();
  const info = await jsm.getAccountInfo();
  assert.equal(typeof info.limits, "object");
  await nc.close();
  const pid = broker.process.pid;
  await broker.stop();
  assert.equal(alive(pid), false);
  await assert.rejects(Deno.stat(broker.configPath));
});

Deno.test("broker - an invalid config fails with the broker's own log lines in the error", async () => {
  const dir = await tempDir();
  try {
    const configPath = `${dir}/bad.conf`;
    await Deno.writeTextFile(
      configPath,
      `listen: "127.0.0.1:${freePort()}"\nnot_a_real_option: {{\n`,
    );
    await assert.rejects(
      startBrokerProcess({ binary: await natsServerPath(), configPath, readyTimeoutMs: 5_000 }),
      (e) =>
        isCotalError(e, "broker_exited") && /nats-server: Parse error on line \d/.test(e.message),
    );
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("broker - reload applies a new config in place and reports a refused one", async () => {
  await using broker = await startTestBroker();
  const pid = broker.process.pid;
  const base = plainConfig({ port: broker.port, storeDir: broker.storeDir });
  await broker.reload(base + "max_payload: 65536\n");
  const nc = await connect({ servers: broker.url });
  assert.equal(nc.info?.max_payload, 65536);
  await nc.close();
  await assert.rejects(
    broker.reload(base + 'jetstream { store_dir: "/elsewhere" }\n'),
    (e) => isCotalError(e, "broker_reload_failed") && /not supported/.test(e.message),
  );
  assert.equal(broker.process.pid, pid);
});

Deno.test("broker - no orphan: killing the parent takes its broker with it", async () => {
  const dir = await tempDir();
  try {
    const port = freePort();
    const configPath = `${dir}/nats.conf`;
    await Deno.writeTextFile(configPath, plainConfig({ port, storeDir: `${dir}/js` }));
    const script = `${dir}/parent.ts`;
    const mod = new URL("../../lib/broker/mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      script,
      `import { startBrokerProcess } from ${JSON.stringify(mod)};
const p = await startBrokerProcess({ binary: ${
        JSON.stringify(await natsServerPath())
      }, configPath: ${JSON.stringify(configPath)} });
console.log(p.pid);
await new Promise(() => {});
`,
    );
    for (const signal of ["SIGKILL", "SIGTERM"] as const) {
      const parent = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", script],
        stdout: "piped",
        stderr: "null",
      }).spawn();
      const reader = parent.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!text.includes("\n")) {
        const { value, done } = await readWithin(reader, 30_000, "the broker's pid");
        if (done) break;
        text += value;
      }
      const brokerPid = Number(text.trim());
      assert.ok(brokerPid > 0 && alive(brokerPid), "the broker runs under the parent");
      parent.kill(signal);
      await parent.status;
      await reader.cancel();
      await waitFor(() => !alive(brokerPid), {
        what: `broker ${brokerPid} to die after ${signal}`,
      });
    }
  } finally {
    await removeTempDir(dir);
  }
});
