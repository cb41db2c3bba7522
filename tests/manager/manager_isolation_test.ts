/**
 * Isolation choices the manager enforces per spawn, and reports in `status`: without a usable
 * bwrap, untrusted agents are refused unless the operator chose `deno-only`, and `deno-only`
 * still refuses an untrusted agent that declares an external program.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { tempDir } from "../_harness/broker.ts";
import { startManagerMesh } from "./_manager_mesh.ts";

const MODULE = "export async function run(ctx) { await ctx.endpoint(); " +
  "await new Promise((r) => ctx.signal.addEventListener('abort', r)); }\n";

Deno.test("manager - without bwrap, untrusted agents are refused unless deno-only is chosen", async () => {
  await using mesh = await startManagerMesh("iso");
  const src = `${await tempDir("cotal-iso-")}/idle.js`;
  await Deno.writeTextFile(src, MODULE);
  // No usable bwrap: a path that is not there (injected, never through the process env).
  const bwrap = `${mesh.root}/no-such-bwrap`;
  {
    // bwrap mode, no bwrap: the manager starts, says so, and refuses untrusted agents.
    const m1 = await mesh.manager({ bwrap });
    const ctl = await mesh.control();
    const st = await ctl.request<{ isolation: string }>("status");
    // Status names the refusal and why: the probe of the default sandbox failed.
    assert.match(st.isolation, /^none: untrusted agents are refused \(sandbox_unavailable: /);
    assert.match(st.isolation, /no-such-bwrap/);
    await assert.rejects(
      ctl.request("spawn", { agent: "module", module: src, name: "untrusted" }),
      (e) => isCotalError(e, "sandbox_unavailable") && /without the OS sandbox/.test(e.message),
    );
    // A trusted agent may run on Deno permissions alone, and its row says so.
    const trusted = await ctl.request<AgentRow>("spawn", {
      agent: "module",
      module: src,
      name: "trusted",
      trusted: true,
    }, { timeoutMs: 40_000 });
    assert.match(trusted.isolation, /^deno-only: trusted agent, /);
    // ps says what it runs under: its own uid is the supervisor's, no namespace of its own.
    assert.equal(trusted.sandbox?.mode, "deno-only");
    assert.deepEqual(trusted.sandbox?.namespaces, []);
    await m1.stop();

    // deno-only chosen by the operator. Its runner keeps the supervisor's uid: as root, only
    // agents the operator trusts with root run (red team 26); as another user, untrusted
    // modules run and untrusted programs do not.
    await mesh.manager({ isolation: "deno-only", bwrap });
    const st2 = await ctl.request<{ isolation: string }>("status");
    const root = Deno.uid() === 0;
    if (root) {
      assert.match(
        st2.isolation,
        /^none: untrusted agents are refused \(sandbox_root_needs_trust: /,
      );
      await assert.rejects(
        ctl.request("spawn", { agent: "module", module: src, name: "m" }),
        (e) => isCotalError(e, "sandbox_root_needs_trust") && /as root/.test(e.message),
      );
    } else {
      assert.equal(
        st2.isolation,
        "deno-only (operator opt-in): Deno permissions are the only layer",
      );
    }
    const mod = await ctl.request<AgentRow>("spawn", {
      agent: "module",
      module: src,
      name: "m",
      ...(root ? { trusted: true } : {}),
    }, { timeoutMs: 40_000 });
    assert.equal(mod.status, "running");
    await assert.rejects(
      ctl.request("spawn", { name: "t", command: "/bin/cat" }),
      (e) =>
        isCotalError(e, root ? "sandbox_root_needs_trust" : "sandbox_program_needs_bwrap") &&
        (root || /\/bin\/cat/.test(e.message)),
    );
    // Nothing was provisioned for the refused spawns.
    assert.deepEqual(
      (await ctl.request<{ agents: AgentRow[] }>("ps")).agents.map((a) => a.name),
      ["m"],
    );
  }
});
