import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  AGENT_LIMIT_BOUNDS,
  DEFAULT_AGENT_LIMITS,
  limitChain,
  niceFor,
  parseLimits,
  parseLimitsFlag,
  resolveLimits,
} from "../../lib/manager/sandbox/limits.ts";

Deno.test("limits - defaults and bounds are frozen; nothing a request sends widens them", () => {
  assert.ok(Object.isFrozen(DEFAULT_AGENT_LIMITS) && Object.isFrozen(AGENT_LIMIT_BOUNDS));
  assert.ok(Object.isFrozen(AGENT_LIMIT_BOUNDS.memory));
  assert.throws(() => {
    (DEFAULT_AGENT_LIMITS as { processes: number }).processes = 1e6;
  });
  assert.throws(() => {
    (AGENT_LIMIT_BOUNDS.processes as unknown as number[])[1] = 1e6;
  });
  for (
    const raw of [
      { processes: 4097 },
      { memory: "65G" },
      { processes: 1e12 },
      { memory: -1 },
      { tmp: "0" },
      { cpuShare: 101 },
      { processes: 1.5 },
      { processes: "64K" },
      { memory: "2T" },
      { fileSize: "lots" },
    ]
  ) {
    assert.throws(
      () => parseLimits(raw),
      (e) => isCotalError(e, "limits_invalid"),
      JSON.stringify(raw),
    );
  }
  assert.throws(
    () => parseLimits({ nproc: 10 }),
    (e) => isCotalError(e, "limits_invalid") && /Unknown limit "nproc"/.test(e.message),
  );
  assert.throws(
    () => parseLimits({ memory: "100G" }),
    (e) => isCotalError(e, "limits_invalid") && /from 1G to 64G/.test(e.message),
  );
});

Deno.test("limits - sizes take K/M/G; the space's layer, then the spawn's, over the defaults", () => {
  assert.deepEqual(parseLimits({ memory: "2G", tmp: "512M", processes: 512 }), {
    memory: 2 * 1024 ** 3,
    tmp: 512 * 1024 ** 2,
    processes: 512,
  });
  assert.deepEqual(
    parseLimitsFlag("memory=2G, processes=512"),
    parseLimits({ memory: "2G", processes: "512" }),
  );
  assert.throws(() => parseLimitsFlag("memory"), (e) => isCotalError(e, "limits_invalid"));
  const l = resolveLimits({ memory: 2 * 1024 ** 3, processes: 100 }, { processes: 50 });
  assert.equal(l.memory, 2 * 1024 ** 3);
  assert.equal(l.processes, 50);
  assert.equal(l.tmp, DEFAULT_AGENT_LIMITS.tmp);
  assert.ok(Object.isFrozen(l));
  // A layer is validated again when resolved: a hand-built object cannot slip past the bounds.
  assert.throws(() => resolveLimits({ processes: 1e9 }), (e) => isCotalError(e, "limits_invalid"));
});

Deno.test("limits - the exec chain sets the rlimits, the OOM score and the nice level", () => {
  const chain = limitChain(DEFAULT_AGENT_LIMITS, { perProcessMemory: true });
  assert.deepEqual(chain, [
    "/usr/bin/prlimit",
    "--nproc=256",
    "--nofile=4096",
    "--fsize=268435456",
    "--core=0",
    "--data=1073741824",
    "--",
    "/usr/bin/choom",
    "-n",
    "1000",
    "--",
    "/usr/bin/nice",
    "-n",
    "3",
  ]);
  // With a memory cgroup the whole agent is bounded there instead of per process.
  assert.ok(
    !limitChain(DEFAULT_AGENT_LIMITS, { perProcessMemory: false }).some((a) =>
      a.startsWith("--data")
    ),
  );
  assert.equal(niceFor(100), 0);
  assert.equal(niceFor(50), 3);
  assert.equal(niceFor(10), 10);
  assert.equal(niceFor(1), 19);
});
