/**
 * Red team 19a, attempt A2 (goal 3: deny service), by a stranger on the host that is no agent.
 *
 * A deno-only (or `--net host`) agent's relay listens on a free port of 127.0.0.1, which any
 * process on the host can find (`/proc/net/tcp` lists every listening socket with its owner's
 * uid, world-readable) and dial. The relay takes at most 8 connections per agent and holds an
 * unproven one up to 3 s (or the broker's authentication timeout); past 8 it closes new ones at
 * once. A stranger that keeps a dozen silent connections open on every such port, re-dialling
 * each the moment it is closed, holds all 8 slots nearly all the time: the agent's runner, whose
 * NATS client dials its relay at start and on every reconnect, is shut out.
 *
 * Measured: (a) a new spawn while the stranger squats (the runner must get one connection
 * through to appear in presence); (b) two agents already running when the broker restarts (their
 * runners must reconnect through their relays) — how many are back within 25 s.
 *
 * The test asserts the defence HOLDS: the spawn succeeds and both agents are back.
 */
import { PRESENT_AGENT } from "./_present_agent.ts";
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { tempDir } from "../_harness/broker.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/** Socket inodes this process holds (the supervisor runs in the test's process). */
function ownSocketInodes(): Set<string> {
  const out = new Set<string>();
  for (const e of Deno.readDirSync(`/proc/${Deno.pid}/fd`)) {
    try {
      const t = Deno.readLinkSync(`/proc/${Deno.pid}/fd/${e.name}`);
      const m = /^socket:\[(\d+)\]$/.exec(t);
      if (m) out.add(m[1]);
    } catch {
      // Closed meanwhile.
    }
  }
  return out;
}

/**
 * Loopback ports in LISTEN whose socket this process holds. A real stranger picks them by the
 * uid column of /proc/net/tcp (the supervisor's); here everything runs as one uid, so the
 * socket's owner process stands in for it.
 */
function supervisorLoopbackPorts(exclude: Set<number>): number[] {
  const inodes = ownSocketInodes();
  const ports: number[] = [];
  for (const line of Deno.readTextFileSync("/proc/net/tcp").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== "0A") continue;
    const [ip, port] = f[1].split(":");
    const p = parseInt(port, 16);
    if (ip === "0100007F" && inodes.has(f[9]) && !exclude.has(p)) ports.push(p);
  }
  return ports;
}

/** The stranger: a dozen silent holders per relay port it finds, re-dialling as soon as closed. */
function squat(exclude: Set<number>, perPort = 12) {
  let stop = false;
  const ports = new Set<number>();
  const conns = new Set<Deno.Conn>();
  let dials = 0;
  const holder = async (port: number) => {
    while (!stop) {
      try {
        const c = await Deno.connect({ hostname: "127.0.0.1", port });
        dials++;
        conns.add(c);
        const buf = new Uint8Array(4096);
        while (!stop && (await c.read(buf).catch(() => null)) !== null) { /* silent */ }
        conns.delete(c);
        try {
          c.close();
        } catch { /* closed */ }
      } catch {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };
  const scan = setInterval(() => {
    for (const p of supervisorLoopbackPorts(exclude)) {
      if (ports.has(p)) continue;
      ports.add(p);
      for (let i = 0; i < perPort; i++) holder(p);
    }
  }, 25);
  return {
    get ports() {
      return [...ports];
    },
    get dials() {
      return dials;
    },
    stop() {
      stop = true;
      clearInterval(scan);
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    },
  };
}

for (const mode of ["deno-only", "net host"] as const) {
  Deno.test(`redteam19a A2 - a stranger squatting every ${mode} relay port does not keep agents off the mesh`, async () => {
    await using mesh = await startManagerMesh(mode === "net host" ? "rt19sqh" : "rt19sqd");
    await mesh.manager(mode === "deno-only" ? { isolation: "deno-only" } : {});
    // Under a root supervisor deno-only runs only agents the operator trusts with root.
    const net = mode === "net host" ? { net: "host" } : { trusted: true };
    const ctl = await mesh.control();
    const dir = await tempDir("cotal-rt19a-squat-");
    await Deno.writeTextFile(`${dir}/agent.js`, PRESENT_AGENT);
    for (const name of ["early1", "early2"]) {
      await ctl.request<AgentRow>("spawn", {
        agent: "module",
        module: `${dir}/agent.js`,
        name,
        workdir: await agentWorkdir("cotal-rt19a-squat-w-"),
        ...net,
      }, { timeoutMs: 40_000 });
    }
    // Not the broker's own port nor anything that was listening before the agents.
    const exclude = new Set<number>([mesh.broker.port]);
    const stranger = squat(exclude);
    let spawnErr: string | undefined;
    let spawnMs = 0;
    let failed = 0;
    let back = 0;
    let recoveredMs: number | undefined;
    try {
      await new Promise((r) => setTimeout(r, 1_000));
      // (a) New spawns while the stranger squats.
      for (let i = 0; i < 3; i++) {
        const t0 = Date.now();
        try {
          await ctl.request<AgentRow>("spawn", {
            agent: "module",
            module: `${dir}/agent.js`,
            name: `late${i}`,
            workdir: await agentWorkdir("cotal-rt19a-squat-w-"),
            ...net,
          }, { timeoutMs: 25_000 });
        } catch (err) {
          failed++;
          spawnErr = String((err as Error).message ?? err).slice(0, 200);
        }
        spawnMs = Date.now() - t0;
      }
      // (b) The broker restarts: the running agents' runners must reconnect through their relays.
      await mesh.restartBroker();
      const t1 = Date.now();
      // Rows written before the restart go stale within the presence TTL (6 s): count after it.
      await new Promise((r) => setTimeout(r, 8_000));
      const cli = await mesh.client("probe");
      while (Date.now() - t1 < 25_000) {
        const names = cli.ep.getRoster().map((p) => p.card.name);
        back = ["early1", "early2"].filter((n) => names.includes(n)).length;
        if (back === 2) break;
        await new Promise((r) => setTimeout(r, 500));
      }
    } finally {
      stranger.stop();
    }
    console.log(
      `[${mode}] stranger squatted ports ${
        stranger.ports.join(",")
      } with ${stranger.dials} dials; ` +
        `late spawns failed: ${failed}/3 (last after ${spawnMs} ms: ${spawnErr}); ` +
        `early agents back within 25 s of a broker restart: ${back}/2`,
    );
    if (back < 2) {
      // How long after the stranger stops they come back.
      const t2 = Date.now();
      const cli = await mesh.client("probe2");
      while (Date.now() - t2 < 20_000) {
        const names = cli.ep.getRoster().map((p) => p.card.name);
        const n = ["early1", "early2"].filter((x) => names.includes(x)).length;
        if (n === 2) {
          recoveredMs = Date.now() - t2;
          break;
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      console.log(`after the stranger stopped: back in ${recoveredMs ?? "> 20000"} ms`);
    }
    assert.equal(
      failed,
      0,
      `${failed} of 3 new spawns failed while a stranger squatted: ${spawnErr}`,
    );
    assert.equal(back, 2, `${2 - back} of 2 running agents stayed off the mesh after a reconnect`);
  });
}
