/**
 * `ensureComponent` (lib/mesh/stack.ts), the step `up` and `space add` start every daemon
 * with: a component that dies before it is ready is started again, a bounded number of times
 * (fault pass 13 killed delivery the moment `up` started it, and the up undid the whole stack);
 * one that runs but never reports ready fails at once; one that never stays up fails after
 * `START_ATTEMPTS` starts, saying so. Real processes, each with its lock and log.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { isSameProcess } from "../../lib/mesh/pidfile.ts";
import { ensureMeshDirs, meshPaths } from "../../lib/mesh/layout.ts";
import {
  type ComponentSpec,
  ensureComponent,
  START_ATTEMPTS,
  stopComponent,
} from "../../lib/mesh/stack.ts";
import { tempDir } from "../_harness/broker.ts";

async function withRoot(fn: (root: string) => Promise<void>): Promise<void> {
  const root = await tempDir("cotal-ensure-");
  try {
    await ensureMeshDirs(meshPaths(root));
    await fn(root);
  } finally {
    await stopComponent(root, "probe").catch(() => {});
    await Deno.remove(root, { recursive: true });
  }
}

// Counts its starts in a file, then exits at once for the first `dies` of them, else sleeps.
function spec(root: string, dies: number, ready?: ComponentSpec["ready"]): ComponentSpec {
  const count = `${root}/starts`;
  return {
    id: "probe",
    name: "cotal-probe",
    command: "/bin/sh",
    args: [
      "-c",
      `echo start >> ${count}; n=$(wc -l < ${count}); echo "start $n"; ` +
      `if [ "$n" -le ${dies} ]; then exit 1; fi; exec sleep 60`,
    ],
    ready: ready ?? (async (rec) => {
      await new Promise((r) => setTimeout(r, 300));
      if (!isSameProcess(rec)) throw new Error("cotal-probe exited during start-up");
    }),
  };
}

const starts = async (root: string) =>
  (await Deno.readTextFile(`${root}/starts`)).trim().split("\n").length;

Deno.test("ensure component - one that dies once while it starts is started again and runs", async () => {
  await withRoot(async (root) => {
    const r = await ensureComponent(root, spec(root, 1), true);
    assert.equal(r.started, true);
    assert.ok(isSameProcess(r.record));
    assert.equal(await starts(root), 2);
  });
});

Deno.test("ensure component - one that never stays up fails after its starts, saying how many", async () => {
  await withRoot(async (root) => {
    await assert.rejects(
      ensureComponent(root, spec(root, 99), true),
      (e) =>
        isCotalError(e, "component_not_ready") &&
        e.message.includes(`${START_ATTEMPTS} starts`) && /exited during start-up/.test(e.message),
    );
    assert.equal(await starts(root), START_ATTEMPTS);
  });
});

Deno.test("ensure component - one that runs but is never ready fails at the first start", async () => {
  await withRoot(async (root) => {
    await assert.rejects(
      // Not ready once it has run (its start counted): a check that failed before the shell
      // wrote its line left the count unread under CI's load.
      ensureComponent(
        root,
        spec(root, 0, async () => {
          const deadline = Date.now() + 10_000;
          while (Date.now() < deadline && await starts(root).catch(() => 0) < 1) {
            await new Promise((r) => setTimeout(r, 20));
          }
          throw new Error("no ready line");
        }),
        true,
      ),
      (e) => isCotalError(e, "component_not_ready") && /no ready line/.test(e.message),
    );
    assert.equal(await starts(root), 1, "a component that ran is not started again");
  });
});

Deno.test("ensure component - two starts of one component at once: one starts it, the other adopts it (a space add and the watchdog)", async () => {
  await withRoot(async (root) => {
    const [a, b] = await Promise.all([
      ensureComponent(root, spec(root, 0), true),
      ensureComponent(root, spec(root, 0), true),
    ]);
    assert.deepEqual([a.started, b.started].sort(), [false, true]);
    assert.equal(a.record.pid, b.record.pid);
    assert.ok(isSameProcess(a.record));
  });
});
